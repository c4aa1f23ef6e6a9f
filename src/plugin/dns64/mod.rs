//! The `dns64` plugin (RFC 6147): an AAAA question whose name has no AAAA records is answered
//! with AAAA records synthesized from its A records under a NAT64 prefix (RFC 6052), so
//! IPv6-only pods reach IPv4-only names through a NAT64 gateway. See this folder's README.

pub mod config;
pub mod handler;
pub mod metrics;
pub mod setup;

pub use config::Dns64Config;
pub use handler::Dns64;
pub use metrics::Dns64Metrics;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<Dns64Metrics>().map(|_| ())
}
