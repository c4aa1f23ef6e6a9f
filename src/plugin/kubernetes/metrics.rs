//! `cluster_dns_topology_answers_total{reason}`: headless answers to a client pod that its
//! place decided (`topology`), by how: `node` (only the endpoints on its node), `zone` (only
//! those in its zone), `fallback` (none was near it: every endpoint);
//! `cluster_dns_kubernetes_transfers_total{version}`: transfers (AXFR and IXFR) of the
//! cluster zone, by whether they `built` the zone anew or gave out the `kept` version (the
//! last built, its serial unmoved since).

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};

use super::answer::pick::Reason;

/// The topology family. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TopologyMetrics {
    answers: IntCounterVec,
}

impl crate::telemetry::Families for TopologyMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let answers = IntCounterVec::new(
            Opts::new(
                "cluster_dns_topology_answers_total",
                "Headless answers to client pods narrowed by trafficDistribution, by reason (node, zone, fallback).",
            ),
            &["reason"],
        )?;
        crate::telemetry::register_all(registry, vec![Box::new(answers.clone())])?;
        // Every reason is exported from the start, at 0.
        for r in [Reason::Node, Reason::Zone, Reason::Fallback] {
            answers.with_label_values(&[r.label()]);
        }
        Ok(Self { answers })
    }
}

/// The counters, resolved once at build.
#[derive(Debug, Clone)]
pub struct TopologyCounters {
    node: IntCounter,
    zone: IntCounter,
    fallback: IntCounter,
}

impl TopologyCounters {
    /// The counters of `metrics`.
    pub fn of(metrics: &TopologyMetrics) -> Self {
        let c = |r: Reason| metrics.answers.with_label_values(&[r.label()]);
        Self {
            node: c(Reason::Node),
            zone: c(Reason::Zone),
            fallback: c(Reason::Fallback),
        }
    }

    /// Counts one answer.
    pub fn count(&self, reason: Reason) {
        match reason {
            Reason::Node => self.node.inc(),
            Reason::Zone => self.zone.inc(),
            Reason::Fallback => self.fallback.inc(),
        }
    }
}

/// The transfer family. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TransferMetrics {
    transfers: IntCounterVec,
}

impl crate::telemetry::Families for TransferMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let transfers = IntCounterVec::new(
            Opts::new(
                "cluster_dns_kubernetes_transfers_total",
                "Transfers (AXFR, IXFR) of the cluster zone, by whether they built the zone anew or gave out the kept version.",
            ),
            &["version"],
        )?;
        crate::telemetry::register_all(registry, vec![Box::new(transfers.clone())])?;
        Ok(Self { transfers })
    }
}

/// The transfer counters, resolved once at build: `built`, `kept`.
#[derive(Debug, Clone)]
pub struct TransferCounters {
    /// A transfer built the zone.
    pub built: IntCounter,
    /// A transfer gave out the kept version.
    pub kept: IntCounter,
}

impl TransferCounters {
    /// The counters of `metrics`.
    pub fn of(metrics: &TransferMetrics) -> Self {
        Self {
            built: metrics.transfers.with_label_values(&["built"]),
            kept: metrics.transfers.with_label_values(&["kept"]),
        }
    }
}
