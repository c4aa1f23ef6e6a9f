//! The `rrl` plugin: Response Rate Limiting for UDP answers, as BIND, Knot and NSD define it,
//! with the Corefile syntax of CoreDNS's external `rrl` plugin (`setup`, parsed into `config`).
//! See this folder's README.

mod category;
pub mod config;
pub mod handler;
pub mod metrics;
pub mod setup;
mod table;

pub use category::Category;
pub use config::RrlConfig;
pub use handler::Rrl;
pub use metrics::RrlMetrics;
pub use table::{Table, Verdict};

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<RrlMetrics>().map(|_| ())
}
