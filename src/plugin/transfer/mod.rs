//! The `transfer` plugin: answers zone transfers (AXFR; IXFR as a whole transfer) of its zones
//! to the clients its `to` lines allow, with the records the authoritative plugin after it
//! gives ([`crate::plugin::kit::ZoneTransfer`]: `kubernetes`, `file`). The server sends the
//! answer over TCP in as many messages as it needs; over UDP a transfer is refused. It sends
//! NOTIFY to its `to` addresses (and, with `notify transferred`, to those that transferred)
//! when a plugin says a zone changed (`notify.rs`). See this
//! folder's README.

pub mod config;
pub mod handler;
pub mod metrics;
mod notify;
pub mod setup;

pub use config::TransferConfig;
pub use handler::Transfer;
pub use metrics::TransferMetrics;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<TransferMetrics>().map(|_| ())
}
