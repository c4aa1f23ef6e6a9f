//! Zone files as the `file` plugin reads them, then looked up and transferred: errors, never
//! panics. The body is `cluster_dns::plugin::file::fuzz::zone_file`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::plugin::file::fuzz::zone_file(data));
