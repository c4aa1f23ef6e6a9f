//! The `autopath` plugin: walks a client's resolv.conf search path on the server, so that a
//! pod's lookup of a name outside its namespace costs one round trip instead of one per search
//! domain. See this folder's README for its syntax, answers and metric.

pub mod config;
pub mod handler;
pub mod metrics;
pub mod setup;

pub use config::{AutoPathConfig, SearchSource};
pub use handler::AutoPath;
pub use metrics::AutoPathMetrics;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<AutoPathMetrics>().map(|_| ())
}
