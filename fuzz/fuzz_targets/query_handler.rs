//! The whole query path on arbitrary bytes, against the conformance fixture's cluster: the
//! server must never panic, and every reply must parse, echo the ID, set QR and fit the UDP
//! limit it promised. The body is `cluster_dns::fuzzing::query_handler`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::fuzzing::query_handler(data));
