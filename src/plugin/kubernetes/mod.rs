//! The `kubernetes` plugin: answers the cluster zone (`cluster.local` and the reverse zones)
//! from the Kubernetes objects. See `README.md` in this folder for its Corefile syntax.

pub mod answer;
pub mod config;
pub mod handler;
mod metadata;
pub mod metrics;
mod options;
mod selector;
pub mod setup;
mod transfer;

pub use handler::Kubernetes;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<crate::cluster::metrics::KubernetesMetrics>()?;
    metrics.families::<metrics::TransferMetrics>()?;
    metrics.families::<metrics::TopologyMetrics>().map(|_| ())
}
