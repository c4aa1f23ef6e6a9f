//! The `cache` plugin: positive and negative caching of what the rest of the chain answers, with
//! TTLs counted down on the way out, capacity-bounded stores, SERVFAIL held a few seconds at
//! most, prefetch of popular entries and RFC 8767 serve-stale. See this folder's README.
//!
//! Cluster answers are cached too (as in CoreDNS with a bare `cache 30`), but never longer than
//! their own smallest TTL, so a change in the zone is visible once the TTL the client was given
//! has run out.
//!
//! The files: `handler` holds the query path ([`Cache`]), `store` the capacity-bounded stores
//! and what may be cached for how long, `setup` the Corefile options and how the plugin is made, `config` what they hold, `metrics`
//! the families.

pub mod config;
pub mod handler;
pub mod metrics;
pub mod setup;
pub mod store;

pub use config::CacheConfig;
pub use handler::Cache;
pub use metrics::CacheMetrics;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<CacheMetrics>().map(|_| ())
}
