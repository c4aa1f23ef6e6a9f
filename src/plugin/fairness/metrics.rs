//! The fairness families, every label from a fixed set (never a client address or a
//! namespace):
//!
//! - `cluster_dns_fairness_decisions_total{server, stage, decision, reason}`: `stage` is
//!   `question` (every question) or `upstream` (a question `forward` would send on);
//!   `decision` is `admitted`, `refused` (REFUSED sent), `slipped` (a truncated reply sent) or
//!   `dropped` (nothing sent); `reason` is `none` for admitted questions, else the budget that
//!   was spent: `address`, `prefix` or `namespace`, with `_inflight` for the upstream
//!   exchanges in flight rather than the rate.
//! - `cluster_dns_fairness_clients`: client keys the tables hold now (all blocks).
//! - `cluster_dns_fairness_overflow_total`: questions counted against a group's shared
//!   overflow budget because the table was full.

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

use super::table::{Denied, Group};

/// What happened to a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// It went on.
    Admitted,
    /// REFUSED.
    Refused,
    /// A truncated reply.
    Slipped,
    /// No reply.
    Dropped,
}

const DECISIONS: [&str; 4] = ["admitted", "refused", "slipped", "dropped"];
const REASONS: [&str; 7] = [
    "none",
    "address",
    "prefix",
    "namespace",
    "address_inflight",
    "prefix_inflight",
    "namespace_inflight",
];

fn reason_index(denied: Option<Denied>) -> usize {
    match denied {
        None => 0,
        Some(d) => {
            let g = match d.group {
                Group::Address => 1,
                Group::Prefix => 2,
                Group::Namespace => 3,
            };
            if d.inflight { g + 3 } else { g }
        }
    }
}

/// The fairness families. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FairnessMetrics {
    decisions: IntCounterVec,
    /// Client keys held.
    pub clients: IntGauge,
    /// Questions counted against an overflow budget.
    pub overflow: IntCounter,
}

impl crate::telemetry::Families for FairnessMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let decisions = IntCounterVec::new(
            Opts::new(
                "cluster_dns_fairness_decisions_total",
                "Questions weighed against their client's share, by stage, decision and the budget spent.",
            ),
            &["server", "stage", "decision", "reason"],
        )?;
        let clients = IntGauge::new(
            "cluster_dns_fairness_clients",
            "Client keys (addresses, prefixes, namespaces) the fairness tables hold.",
        )?;
        let overflow = IntCounter::new(
            "cluster_dns_fairness_overflow_total",
            "Questions counted against a shared overflow budget because the fairness table was full.",
        )?;
        crate::telemetry::register_all(
            registry,
            vec![
                Box::new(decisions.clone()),
                Box::new(clients.clone()),
                Box::new(overflow.clone()),
            ],
        )?;
        Ok(Self {
            decisions,
            clients,
            overflow,
        })
    }
}

/// One block's decision counters, resolved once at build: `[stage][decision][reason]`.
#[derive(Debug, Clone)]
pub struct Decisions(Vec<IntCounter>);

impl Decisions {
    /// The counters of the block labelled `server`.
    pub fn for_server(m: &FairnessMetrics, server: &str) -> Self {
        let mut all = Vec::with_capacity(2 * DECISIONS.len() * REASONS.len());
        for stage in ["question", "upstream"] {
            for decision in DECISIONS {
                for reason in REASONS {
                    all.push(m.decisions.with_label_values(&[server, stage, decision, reason]));
                }
            }
        }
        Self(all)
    }

    /// Counts one decision.
    pub fn count(&self, upstream: bool, decision: Decision, denied: Option<Denied>) {
        let d = decision as usize;
        let at = (usize::from(upstream) * DECISIONS.len() + d) * REASONS.len() + reason_index(denied);
        if let Some(c) = self.0.get(at) {
            c.inc();
        }
    }
}
