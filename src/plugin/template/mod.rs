//! The `template` plugin: answers questions whose name matches a regular expression with
//! records rendered from templates (wildcard ingress names, NODATA for AAAA on IPv4-only
//! clusters). See this folder's README.

pub mod config;
pub mod handler;
pub mod metrics;
pub mod setup;
pub mod text;

pub use config::TemplateConfig;
pub use handler::TemplatePlugin;
pub use metrics::TemplateMetrics;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<TemplateMetrics>().map(|_| ())
}
