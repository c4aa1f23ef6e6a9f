//! The `noaaaa` plugin: AAAA questions that no authoritative plugin answered are answered
//! NODATA locally instead of upstream, for IPv4-only clusters (where AAAA is about half of all
//! questions and most upstream failures). See this folder's README.

pub mod handler;
pub mod metrics;
pub mod setup;

pub use handler::{Mode, Noaaaa};
pub use metrics::NoaaaaMetrics;
pub use setup::NoaaaaConfig;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<NoaaaaMetrics>().map(|_| ())
}
