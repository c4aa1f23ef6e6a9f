//! `coredns_local_localhost_requests_total`: the questions for a name under `.localhost.` or a
//! legacy `localhost.<domain>` that `local` answered (CoreDNS's name and type; no labels, as in
//! CoreDNS).

use prometheus::{IntCounter, Registry};

/// The local family. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LocalMetrics {
    /// The counter.
    pub localhost: IntCounter,
}

impl crate::telemetry::Families for LocalMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let localhost = IntCounter::new(
            "coredns_local_localhost_requests_total",
            "Counter of special localhost subdomain requests.",
        )?;
        crate::telemetry::register_all(registry, vec![Box::new(localhost.clone())])?;
        Ok(Self { localhost })
    }
}
