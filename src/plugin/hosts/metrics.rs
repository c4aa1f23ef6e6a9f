//! The hosts plugin's CoreDNS families, registered once per process (the gauges have no labels,
//! as in CoreDNS, so with several `hosts` blocks they show the table built last):
//!
//! * `coredns_hosts_entries`: the (name, address) entries of the table built last, file and
//!   inline together;
//! * `coredns_hosts_reload_timestamp_seconds`: when that table was built, in seconds since
//!   the Unix epoch.
//!
//! Set by [`Hosts::with_metrics`](super::Hosts::with_metrics) and on every re-read of the file.

use std::time::{SystemTime, UNIX_EPOCH};

use prometheus::{Gauge, Registry};

/// The hosts families (cheap to clone: the gauges are shared).
#[derive(Clone, Debug)]
pub struct HostsMetrics {
    entries: Gauge,
    reload: Gauge,
}

impl crate::telemetry::Families for HostsMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let m = Self {
            entries: Gauge::new(
                "coredns_hosts_entries",
                "The combined number of entries in hosts and Corefile.",
            )?,
            reload: Gauge::new(
                "coredns_hosts_reload_timestamp_seconds",
                "The timestamp of the last reload of hosts file.",
            )?,
        };
        crate::telemetry::register_all(
            registry,
            vec![Box::new(m.entries.clone()), Box::new(m.reload.clone())],
        )?;
        Ok(m)
    }
}

impl HostsMetrics {
    /// Records a table of `entries` entries built at `at`.
    pub fn record(&self, entries: usize, at: SystemTime) {
        // usize -> f64: exact for any table that fits in memory (below 2^53 entries).
        #[allow(clippy::cast_precision_loss)]
        self.entries.set(entries as f64);
        let secs = at.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        self.reload.set(secs);
    }
}
