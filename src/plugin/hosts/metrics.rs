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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::hosts::{Hosts, HostsConfig};
    use crate::telemetry::{Families, render_registry};

    fn value(registry: &Registry, name: &str) -> f64 {
        let text = render_registry(registry);
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn entries_and_reload_time_follow_the_file() {
        let dir = std::env::temp_dir().join(format!("hosts-metrics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hosts");
        std::fs::write(&path, "10.0.0.1 a.example.org\n10.0.0.2 b.example.org\n").unwrap();
        let config = HostsConfig {
            path: path.clone(),
            zones: vec![".".to_owned()],
            inline: Vec::new(),
            ttl: 3600,
            no_reverse: false,
            reload: std::time::Duration::ZERO,
            fallthrough: None,
            fallthrough_unsupported: false,
        };
        let registry = Registry::new();
        let m = HostsMetrics::register(&registry).unwrap();
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let hosts = Hosts::new(&config).with_metrics(m);
        assert_eq!(value(&registry, "coredns_hosts_entries"), 2.0);
        let first = value(&registry, "coredns_hosts_reload_timestamp_seconds");
        assert!(first >= start.floor() - 1.0, "{first} < {start}");

        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(
            &path,
            "10.0.0.1 a.example.org\n10.0.0.2 b.example.org\n10.0.0.3 c.example.org d.example.org\n",
        )
        .unwrap();
        assert!(hosts.reload_now());
        assert_eq!(value(&registry, "coredns_hosts_entries"), 4.0);
        let second = value(&registry, "coredns_hosts_reload_timestamp_seconds");
        assert!(second > first, "{second} <= {first}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
