//! The `rrl` families, labels from fixed sets only (never the client's address, unlike the
//! external CoreDNS plugin's `client_ip`):
//! - `cluster_dns_rrl_responses_total{server, category, action}`: limited responses, `category`
//!   one of responses, nodata, nxdomains, referrals, errors, requests; `action` one of slipped
//!   (sent truncated), dropped (not sent), reported (sent in full: `report-only`);
//! - `cluster_dns_rrl_table_entries{server}`: accounts in the table (at most `max-table-size`);
//! - `cluster_dns_rrl_table_evictions_total{server}`: accounts evicted to keep that bound.

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use super::category::Category;

/// What happened to a limited response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Sent truncated and empty (TC=1).
    Slipped,
    /// Not sent.
    Dropped,
    /// Sent in full (`report-only`).
    Reported,
}

impl Action {
    /// Every action, in counter-slot order.
    pub const ALL: [Self; 3] = [Self::Slipped, Self::Dropped, Self::Reported];

    /// Its `action` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Slipped => "slipped",
            Self::Dropped => "dropped",
            Self::Reported => "reported",
        }
    }
}

/// The rrl families. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RrlMetrics {
    responses: IntCounterVec,
    entries: IntGaugeVec,
    evictions: IntCounterVec,
}

impl crate::telemetry::Families for RrlMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let responses = IntCounterVec::new(
            Opts::new(
                "cluster_dns_rrl_responses_total",
                "Responses over their rrl allowance, by category and what was done with them.",
            ),
            &["server", "category", "action"],
        )?;
        let entries = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_rrl_table_entries",
                "Accounts in the rrl table (at most max-table-size).",
            ),
            &["server"],
        )?;
        let evictions = IntCounterVec::new(
            Opts::new(
                "cluster_dns_rrl_table_evictions_total",
                "Least recently used rrl accounts evicted to keep the table within max-table-size.",
            ),
            &["server"],
        )?;
        crate::telemetry::register_all(
            registry,
            vec![
                Box::new(responses.clone()),
                Box::new(entries.clone()),
                Box::new(evictions.clone()),
            ],
        )?;
        Ok(Self {
            responses,
            entries,
            evictions,
        })
    }
}

/// The series of one server block, resolved once at build.
#[derive(Debug, Clone)]
pub struct BlockCounters {
    /// `[category slot][action slot]`.
    pub responses: Vec<[IntCounter; 3]>,
    /// The table's size.
    pub entries: IntGauge,
    /// Evictions.
    pub evictions: IntCounter,
}

impl RrlMetrics {
    /// The series of the block labelled `server`.
    pub fn block(&self, server: &str) -> BlockCounters {
        BlockCounters {
            responses: Category::ALL
                .iter()
                .map(|c| {
                    Action::ALL.map(|a| self.responses.with_label_values(&[server, c.label(), a.label()]))
                })
                .collect(),
            entries: self.entries.with_label_values(&[server]),
            evictions: self.evictions.with_label_values(&[server]),
        }
    }
}
