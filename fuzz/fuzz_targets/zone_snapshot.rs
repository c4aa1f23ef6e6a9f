//! A snapshot file of a secondary zone, read, checked and written back. The body
//! is `cluster_dns::plugin::secondary::fuzz::zone_snapshot`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::plugin::secondary::fuzz::zone_snapshot(data));
