//! `cluster_dns_shutdown_phase{phase}`: where SIGTERM's drain is, one series per phase from a
//! fixed set, 1 for the current one and 0 for the others. CoreDNS has no such family (its
//! lameduck is a fixed sleep), so it lives under `cluster_dns_`.

use prometheus::{IntGaugeVec, Opts, Registry};

use super::Families;

/// The phases of a shutdown, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownPhase {
    /// No SIGTERM yet.
    Serving,
    /// SIGTERM came; `/ready` fails; the server's own endpoint is still ready in a Service, so
    /// clients are still sent here: answering on.
    EndpointListed,
    /// The endpoint is gone: answering on for the propagation margin, while kube-proxy on each
    /// node follows.
    PropagationMargin,
    /// Whether the endpoint is gone cannot be told (no `POD_IP`, no API watch, the watch is
    /// failing): answering on for the lameduck duration, as CoreDNS does.
    Lameduck,
    /// The listeners are stopping: TCP answers what it has read, then closes.
    Stopping,
}

impl ShutdownPhase {
    /// Every phase, in order.
    pub const ALL: [Self; 5] = [
        Self::Serving,
        Self::EndpointListed,
        Self::PropagationMargin,
        Self::Lameduck,
        Self::Stopping,
    ];

    /// Its label value.
    pub fn label(self) -> &'static str {
        match self {
            Self::Serving => "serving",
            Self::EndpointListed => "endpoint_listed",
            Self::PropagationMargin => "propagation_margin",
            Self::Lameduck => "lameduck",
            Self::Stopping => "stopping",
        }
    }
}

/// The family, registered once per process.
#[derive(Debug, Clone)]
pub struct ShutdownMetrics {
    phase: IntGaugeVec,
}

impl Families for ShutdownMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let phase = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_shutdown_phase",
                "The phase of SIGTERM's drain: 1 for the current one (serving, endpoint_listed, propagation_margin, lameduck, stopping).",
            ),
            &["phase"],
        )?;
        super::register_all(registry, vec![Box::new(phase.clone())])?;
        let m = Self { phase };
        m.set(ShutdownPhase::Serving);
        Ok(m)
    }
}

impl ShutdownMetrics {
    /// Makes `now` the current phase.
    pub fn set(&self, now: ShutdownPhase) {
        for p in ShutdownPhase::ALL {
            self.phase
                .with_label_values(&[p.label()])
                .set(i64::from(p == now));
        }
    }
}
