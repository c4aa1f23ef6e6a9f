//! A request's EDNS options through one of a few `rewrite edns0` rules, then into the query
//! `forward` sends. The body is `cluster_dns::plugin::rewrite::fuzz::rewrite_edns0`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::plugin::rewrite::fuzz::rewrite_edns0(data));
