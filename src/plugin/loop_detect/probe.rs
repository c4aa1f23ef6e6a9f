//! The start-up probe: each upstream of the chain's upstream plugin gets a `HINFO` query for a
//! name only this process knows, a few times until it replies. [`Probes`] remembers each name
//! sent and the upstream it went to, so that the plugin marks that upstream looping if the name
//! comes back in (see [`Probes::seen`]).

use std::sync::Arc;

use dashmap::DashMap;
use hickory_proto::rr::Name;

use crate::chain::Chain;
use crate::plugin::kit::Upstreams;

/// Tries per upstream before giving up on getting any reply (CoreDNS probes for 30 s).
const PROBE_TRIES: usize = 3;

/// The probe names sent, each with the index of the upstream it was sent to, and the zone they
/// are made in. Clones share the names.
#[derive(Debug, Clone)]
pub struct Probes {
    zone: Name,
    sent: Arc<DashMap<Name, usize>>,
}

impl Probes {
    /// No probe sent yet; names will be made under `zone`.
    pub fn new(zone: Name) -> Self {
        Self {
            zone,
            sent: Arc::new(DashMap::new()),
        }
    }

    /// The zone the probe names are made in.
    pub fn zone(&self) -> &Name {
        &self.zone
    }

    /// If `name` is one of our probes, the index of the upstream it was sent to.
    pub fn seen(&self, name: &Name) -> Option<usize> {
        if self.sent.is_empty() {
            return None;
        }
        self.sent.get(&name.to_lowercase()).map(|e| *e.value())
    }

    /// Registers a probe name for upstream `index`.
    pub fn register(&self, name: &Name, index: usize) {
        self.sent.insert(name.to_lowercase(), index);
    }
}

/// A fresh random probe name under `zone`: `<random>.<random>.<zone>`.
pub fn probe_name(zone: &Name) -> Option<Name> {
    let a: u64 = rand::random();
    let b: u64 = rand::random();
    let mut n = Name::from_labels([a.to_string().as_bytes(), b.to_string().as_bytes()]).ok()?;
    n.set_fqdn(false);
    n.append_domain(zone).ok()
}

/// Probes every upstream of `chain`'s upstream plugin, registering each name in `probes` before
/// it is sent. Returns when each upstream replied once or used up its tries.
pub async fn run_probes(probes: Probes, chain: Chain) {
    let Some((_, upstreams)) = chain.offered::<Arc<dyn Upstreams>>().next() else {
        return;
    };
    for index in 0..upstreams.count() {
        for _ in 0..PROBE_TRIES {
            let Some(name) = probe_name(probes.zone()) else {
                return;
            };
            if !upstreams.handles(&name) {
                break;
            }
            probes.register(&name, index);
            if upstreams.probe(index, name).await {
                break;
            }
        }
    }
}
