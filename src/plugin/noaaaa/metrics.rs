//! The `noaaaa` families: `cluster_dns_noaaaa_answers_total{server}`, AAAA questions answered
//! NODATA here instead of upstream, and `cluster_dns_noaaaa_active{server}`, 1 while it answers
//! them (always in `always` mode; in `auto` mode while no Service has an IPv6 address), 0 while
//! it lets them through.

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// The noaaaa families. Cheap to clone.
#[derive(Debug, Clone)]
pub struct NoaaaaMetrics {
    answers: IntCounterVec,
    active: IntGaugeVec,
}

impl crate::telemetry::Families for NoaaaaMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let answers = IntCounterVec::new(
            Opts::new(
                "cluster_dns_noaaaa_answers_total",
                "AAAA questions answered NODATA by noaaaa without asking upstream.",
            ),
            &["server"],
        )?;
        let active = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_noaaaa_active",
                "1 while noaaaa answers AAAA questions itself, 0 while it lets them through.",
            ),
            &["server"],
        )?;
        crate::telemetry::register_all(
            registry,
            vec![Box::new(answers.clone()), Box::new(active.clone())],
        )?;
        Ok(Self { answers, active })
    }
}

impl NoaaaaMetrics {
    /// The series of the block labelled `server`: its answers and its active gauge.
    pub fn block(&self, server: &str) -> (IntCounter, IntGauge) {
        (
            self.answers.with_label_values(&[server]),
            self.active.with_label_values(&[server]),
        )
    }
}
