//! Arbitrary bytes as an upstream's reply, through the forward plugin's reply matcher and its
//! conversion to the forwarded answer. The body is `cluster_dns::plugin::forward::fuzz::forward_reply`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::plugin::forward::fuzz::forward_reply(data));
