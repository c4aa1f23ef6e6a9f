//! `coredns_autopath_success_total{server}`: questions autopath answered with a later search
//! domain's answer (CoreDNS's name, type and label).

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};

/// The autopath family. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AutoPathMetrics {
    success: IntCounterVec,
}

impl crate::telemetry::Families for AutoPathMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let success = IntCounterVec::new(
            Opts::new(
                "coredns_autopath_success_total",
                "Counter of requests that did autopath.",
            ),
            &["server"],
        )?;
        crate::telemetry::register_all(registry, vec![Box::new(success.clone())])?;
        Ok(Self { success })
    }
}

impl AutoPathMetrics {
    /// The counter of the server block labelled `server` (resolved once, at build).
    pub fn for_server(&self, server: &str) -> IntCounter {
        self.success.with_label_values(&[server])
    }
}
