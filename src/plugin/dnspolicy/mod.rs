//! The `dnspolicy` plugin: tenant DNS policy. Each client's pod is looked up in the cluster
//! zone, and the `DNSPolicy` objects covering it (`crate::cluster::policy`) decide what it
//! sees: names of hidden namespaces are answered as names that do not exist (by `kubernetes`
//! and `k8s_external`, through the view this plugin puts on the question), denied outside
//! names get the policy's rcode and never leave the server (here, and in `forward` for every
//! name asked on the client's behalf). See this folder's README.

pub mod config;
pub mod handler;
pub mod metrics;
pub mod setup;

pub use config::{DnsPolicyConfig, Unmapped};
pub use handler::DnsPolicy;
pub use metrics::PolicyMetrics;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<PolicyMetrics>().map(|_| ())
}
