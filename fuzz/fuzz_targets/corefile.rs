//! The Corefile parser and configuration checks on arbitrary text: errors, never panics. The
//! body is `cluster_dns::fuzzing::corefile`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::fuzzing::corefile(data));
