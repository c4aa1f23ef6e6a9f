//! Kubernetes objects and watch events (JSON) through the watch path's conversion into the
//! cluster zone, then every name they make asked over UDP and TCP. The body is
//! `cluster_dns::fuzzing::k8s_objects`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cluster_dns::fuzzing::k8s_objects(data));
