//! The start-up probe: each upstream of the chain's upstream plugin gets a `HINFO` query for a
//! name only this process knows, a few times until it replies. The plugin marks the upstream
//! looping if the name comes back in (see [`super::LoopDetect::probe_seen`]).

use hickory_proto::rr::Name;

use super::LoopDetect;
use crate::chain::Chain;

/// Tries per upstream before giving up on getting any reply (CoreDNS probes for 30 s).
const PROBE_TRIES: usize = 3;

/// A fresh random probe name under `zone`: `<random>.<random>.<zone>`.
pub fn probe_name(zone: &Name) -> Option<Name> {
    let a: u64 = rand::random();
    let b: u64 = rand::random();
    let mut n = Name::from_labels([a.to_string().as_bytes(), b.to_string().as_bytes()]).ok()?;
    n.set_fqdn(false);
    n.append_domain(zone).ok()
}

/// Probes every upstream of `chain`'s upstream plugin for the `loop` plugin `l`. Returns when
/// each upstream replied once or used up its tries.
pub async fn run_probes(l: LoopDetect, chain: Chain) {
    let Some(upstreams) = chain.upstreams() else {
        return;
    };
    for index in 0..upstreams.count() {
        for _ in 0..PROBE_TRIES {
            let Some(name) = probe_name(l.zone()) else { return };
            if !upstreams.handles(&name) {
                break;
            }
            l.register(&name, index);
            if upstreams.probe(index, name).await {
                break;
            }
        }
    }
}
