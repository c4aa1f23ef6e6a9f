//! The `transfer` family: `cluster_dns_transfer_notify_learned`, the addresses that
//! transferred a zone and are told of its changes (`notify transferred`), across blocks.

use prometheus::{IntGauge, Registry};

/// The transfer family. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TransferMetrics {
    /// The learned addresses held.
    pub learned: IntGauge,
}

impl crate::telemetry::Families for TransferMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let learned = IntGauge::new(
            "cluster_dns_transfer_notify_learned",
            "Addresses that transferred a zone and are sent NOTIFY of its changes (notify transferred), at most 10,000 per block.",
        )?;
        crate::telemetry::register_all(registry, vec![Box::new(learned.clone())])?;
        Ok(Self { learned })
    }
}
