//! The `shed` family, `coredns_shed_dropped_total{server, reason}` (CoreDNS 1.14's name and
//! labels): UDP queries a listener's socket dropped because it already had as many answers
//! waiting as it sheds at (`query`), and answers that could not be written (`response`). The
//! UDP transport counts them; labels are the listen address and the reason, never a client.

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};

/// The family, registered once per process.
#[derive(Debug, Clone)]
pub struct ShedMetrics {
    dropped: IntCounterVec,
}

impl ShedMetrics {
    /// Registers the family in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let dropped = IntCounterVec::new(
            Opts::new(
                "coredns_shed_dropped_total",
                "Queries and responses dropped by shed, by reason (query, response).",
            ),
            &["server", "reason"],
        )?;
        crate::telemetry::register_all(registry, vec![Box::new(dropped.clone())])?;
        Ok(Self { dropped })
    }

    /// The series of one listener (`server` as the core families write it); both exist from
    /// the start, at 0.
    pub fn listener(&self, server: &str) -> ListenerShed {
        ListenerShed {
            query: self.dropped.with_label_values(&[server, "query"]),
            response: self.dropped.with_label_values(&[server, "response"]),
        }
    }
}

/// The shed series of one listener, resolved once.
#[derive(Debug, Clone)]
pub struct ListenerShed {
    /// Queries dropped before an answer was started.
    pub query: IntCounter,
    /// Answers that did not reach the wire.
    pub response: IntCounter,
}
