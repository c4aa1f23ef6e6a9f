//! `coredns_dnstap_dropped_total`: the dnstap messages dropped, because the output's queue was
//! full, no reader was connected, or a write to the reader failed. CoreDNS counts the same
//! drops but only logs them (every 10 s); the counter has no labels.

use prometheus::{IntCounter, Registry};

/// The dnstap family. Cheap to clone.
#[derive(Debug, Clone)]
pub struct DnstapMetrics {
    /// The counter.
    pub dropped: IntCounter,
}

impl crate::telemetry::Families for DnstapMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let dropped = IntCounter::new(
            "coredns_dnstap_dropped_total",
            "Counter of dnstap messages dropped (queue full, no reader, or a failed write).",
        )?;
        crate::telemetry::register_all(registry, vec![Box::new(dropped.clone())])?;
        Ok(Self { dropped })
    }
}
