//! The `prometheus` plugin: where `/metrics` listens, and that a server block's requests are
//! counted. The metrics themselves (the registry, CoreDNS's core families, the per-block
//! recorders) are in [`crate::telemetry`]; each plugin's own families are in its folder,
//! registered once per process through [`crate::telemetry::DnsMetrics::families`]. See this
//! folder's README for the names and labels.

pub mod setup;

pub use setup::PrometheusConfig;
