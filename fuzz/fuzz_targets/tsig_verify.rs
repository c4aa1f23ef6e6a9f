//! Requests checked by `tsig` against a fixed key set, and their responses signed. The body
//! is `cluster_dns::plugin::tsig::fuzz::tsig_verify`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::plugin::tsig::fuzz::tsig_verify(data));
