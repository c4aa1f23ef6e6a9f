//! The `health` plugin's metric families ([`HealthMetrics`]): how long its probe of its own
//! `/health` took and how often it failed, as CoreDNS's.

use crate::telemetry::Families;

/// The health plugin's metric families (registered once per process).
#[derive(Debug, Clone)]
pub struct HealthMetrics {
    pub(super) duration: prometheus::Histogram,
    pub(super) failures: prometheus::IntCounter,
}

impl Families for HealthMetrics {
    fn register(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let duration = prometheus::Histogram::with_opts(
            prometheus::HistogramOpts::new(
                "coredns_health_request_duration_seconds",
                "Histogram of the time (in seconds) each request took.",
            )
            .buckets(prometheus::exponential_buckets(0.00025, 10.0, 5)?),
        )?;
        let failures = prometheus::IntCounter::new(
            "coredns_health_request_failures_total",
            "The number of times the health check failed.",
        )?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(failures.clone()))?;
        Ok(Self { duration, failures })
    }
}
