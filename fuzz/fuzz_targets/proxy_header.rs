//! PROXY protocol headers (v1 text, v2 binary) as `proxyproto` reads them from TCP streams and
//! UDP datagrams: errors, never panics. The body is `cluster_dns::fuzzing::proxy_header`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::fuzzing::proxy_header(data));
