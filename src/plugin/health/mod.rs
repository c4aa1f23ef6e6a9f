//! The `health` plugin: `GET /health` answers 200 `OK` while the process runs (never tied to
//! the API server, so a control-plane outage cannot restart every replica), and
//! `lameduck DURATION` keeps DNS answering at most that long after SIGTERM (`propagation_margin
//! DURATION`: that long after the server's own endpoint left every Service, see
//! `app/drain.rs`). As CoreDNS's, it probes its
//! own `/health` once a second and exports how long that took
//! (`coredns_health_request_duration_seconds`) and how often it failed
//! (`coredns_health_request_failures_total`). See this folder's README.

pub mod handler;
pub mod metrics;
pub mod setup;

pub use metrics::HealthMetrics;
pub use setup::HealthConfig;

/// Registers this plugin's metric families (see the registry): CoreDNS shows them from start.
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<HealthMetrics>().map(|_| ())
}
