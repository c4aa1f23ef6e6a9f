//! `coredns_dns64_requests_translated_total{server}`: AAAA questions answered with synthesized
//! records (CoreDNS's name, type and label).

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};

/// The dns64 family. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Dns64Metrics {
    translated: IntCounterVec,
}

impl crate::telemetry::Families for Dns64Metrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let translated = IntCounterVec::new(
            Opts::new(
                "coredns_dns64_requests_translated_total",
                "Counter of DNS requests translated by dns64.",
            ),
            &["server"],
        )?;
        crate::telemetry::register_all(registry, vec![Box::new(translated.clone())])?;
        Ok(Self { translated })
    }
}

impl Dns64Metrics {
    /// The counter of the server block labelled `server` (resolved once, at build).
    pub fn for_server(&self, server: &str) -> IntCounter {
        self.translated.with_label_values(&[server])
    }
}
