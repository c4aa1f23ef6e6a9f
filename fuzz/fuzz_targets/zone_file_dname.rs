//! Zone files with DNAMEs at and below the apex, names under them looked up. The body is
//! `cluster_dns::plugin::file::fuzz::zone_file_dname`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::plugin::file::fuzz::zone_file_dname(data));
