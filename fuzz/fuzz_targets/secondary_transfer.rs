//! What a primary sends back to the secondary's AXFR or IXFR, read and made into the next copy. The body
//! is `cluster_dns::plugin::secondary::fuzz::secondary_transfer`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::plugin::secondary::fuzz::secondary_transfer(data));
