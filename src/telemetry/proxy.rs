//! The `proxyproto` family, cluster-dns's own (CoreDNS has none):
//! `cluster_dns_proxyproto_udp_sessions{server}`, the UDP sessions a listener remembers for
//! `udp_session_tracking` (at most its `max_sessions`). Labels are the listen address only.

use prometheus::{IntGauge, IntGaugeVec, Opts, Registry};

/// The family, registered once per process.
#[derive(Debug, Clone)]
pub struct ProxyMetrics {
    sessions: IntGaugeVec,
}

impl ProxyMetrics {
    /// Registers the family in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let sessions = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_proxyproto_udp_sessions",
                "UDP sessions remembered for proxyproto's udp_session_tracking (peer to client).",
            ),
            &["server"],
        )?;
        crate::telemetry::register_all(registry, vec![Box::new(sessions.clone())])?;
        Ok(Self { sessions })
    }

    /// The series of one listener.
    pub fn sessions(&self, server: &str) -> IntGauge {
        self.sessions.with_label_values(&[server])
    }
}
