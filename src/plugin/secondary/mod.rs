//! The `secondary` plugin: serves zones transferred from primaries (AXFR, then IXFR from the
//! serial held, RFC 5936 and RFC 1995), checked every SOA refresh interval and at once on a
//! primary's NOTIFY (RFC 1996); a transfer that fails leaves the copy held serving. See this
//! folder's README.
//!
//! Layout: `setup` parses the directive and builds the plugin, `handler` answers from the
//! copies and takes NOTIFY ([`Secondary`]), `zones` the state both share, `refresh` runs each zone's refresh task, `xfr`
//! is the transfer client, `apply` makes a transfer's records into the next copy, `snapshot` keeps a copy on
//! disk, `metrics`
//! the families, `fuzz` the bodies of the fuzz targets `secondary_transfer` and `zone_snapshot`.

mod apply;
pub mod fuzz;
pub mod handler;
pub mod metrics;
mod refresh;
pub mod setup;
pub mod snapshot;
mod xfr;
mod zones;

pub use handler::Secondary;
pub use metrics::SecondaryMetrics;
pub use setup::SecondaryConfig;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<SecondaryMetrics>().map(|_| ())
}
