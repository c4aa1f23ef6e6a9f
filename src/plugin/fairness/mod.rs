//! The `fairness` plugin: one client cannot take the server from the others. Each question
//! spends a token of its client address's budget and of its namespace's (pod clients, from the
//! kubernetes plugin's pod index) or its address prefix's (every other client); a question
//! that needs the upstream also spends an upstream token and holds an in-flight place while
//! `forward` asks. Over its share a client is answered at once (REFUSED, or over UDP a
//! truncated reply every `slip`th time and silence otherwise) and never delays the rest. See
//! this folder's README for the syntax, defaults and metrics.
//!
//! The files: `setup` the Corefile syntax and how the plugin is made and bound, `config` what
//! it parses into, `table` the buckets (bounded, sharded), `handler` the plugin and the block's
//! upstream share, `metrics` the families.

pub mod config;
pub mod handler;
pub mod metrics;
pub mod setup;
pub mod table;

pub use config::FairnessConfig;
pub use handler::Fairness;
pub use metrics::FairnessMetrics;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<FairnessMetrics>().map(|_| ())
}
