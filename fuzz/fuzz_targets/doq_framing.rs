//! One DNS-over-QUIC stream's bytes through the server's framing and query checks (RFC 9250
//! §4.2, §4.3.3). The body is `cluster_dns::server::quic::fuzz::doq_framing`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::server::quic::fuzz::doq_framing(data));
