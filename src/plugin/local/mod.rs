//! The `local` plugin: answers the localhost names and the loopback reverse zones itself, as
//! CoreDNS's *local* does, so they never reach an upstream: `localhost.` and names under
//! `.localhost.` (and by default `localhost.<domain>`) have loopback addresses,
//! `1.0.0.127.in-addr.arpa.` points at `localhost.`, the rest of `0.`, `127.` and
//! `255.in-addr.arpa.` is empty. See this folder's README.

pub mod handler;
pub mod metrics;
pub mod setup;

pub use handler::Local;
pub use metrics::LocalMetrics;
pub use setup::LocalConfig;

/// Registers this plugin's metric family (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<LocalMetrics>().map(|_| ())
}
