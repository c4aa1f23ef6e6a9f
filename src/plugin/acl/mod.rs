//! The `acl` plugin: allows, blocks (REFUSED), filters (empty NOERROR) or drops (no reply)
//! questions by the client's source address and the question type, in the zones it covers.
//! See this folder's README.

pub mod config;
pub mod handler;
pub mod metrics;
pub mod setup;

pub use config::{AclConfig, Action, Policy, Rule};
pub use handler::Acl;
pub use metrics::AclMetrics;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<AclMetrics>().map(|_| ())
}
