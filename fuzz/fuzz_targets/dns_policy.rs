//! `DNSPolicy` objects applied to a policy store, and the views of pods after each: a
//! malformed one never widens what anyone sees. The body is `cluster_dns::fuzzing::dns_policy`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::fuzzing::dns_policy(data));
