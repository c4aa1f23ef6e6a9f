//! The answer memo's own families: what each listen address's memo holds (bytes and entries)
//! against its bound, and how often it was emptied because an insert would have gone beyond
//! it. A client can make the memo hold responses (every distinct request it sends), so the
//! operator sees that resource as the TCP listener's are seen. CoreDNS has no memo: they live
//! under `cluster_dns_`; the only label is the listen address (`server`).

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// The memo families, registered once per process.
#[derive(Debug, Clone)]
pub struct MemoMetrics {
    bytes: IntGaugeVec,
    limit: IntGaugeVec,
    entries: IntGaugeVec,
    emptied: IntCounterVec,
}

impl MemoMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let gauge = |name: &str, help: &str| IntGaugeVec::new(Opts::new(name, help), &["server"]);
        let bytes = gauge(
            "cluster_dns_answer_memo_bytes",
            "Bytes the answer memo of the listener counts against its bound (requests, responses and a fixed cost per entry).",
        )?;
        let limit = gauge(
            "cluster_dns_answer_memo_limit_bytes",
            "The most bytes the answer memo of the listener holds before it is emptied.",
        )?;
        let entries = gauge(
            "cluster_dns_answer_memo_entries",
            "Responses the answer memo of the listener holds (current or stale).",
        )?;
        let emptied = IntCounterVec::new(
            Opts::new(
                "cluster_dns_answer_memo_emptied_total",
                "Times the answer memo of the listener was emptied because an insert would have gone beyond its bound.",
            ),
            &["server"],
        )?;
        crate::telemetry::register_all(
            registry,
            vec![
                Box::new(bytes.clone()),
                Box::new(limit.clone()),
                Box::new(entries.clone()),
                Box::new(emptied.clone()),
            ],
        )?;
        Ok(Self {
            bytes,
            limit,
            entries,
            emptied,
        })
    }

    /// The series of one listener (`server` as the core families write it, `dns://:53`).
    pub fn listener(&self, server: &str) -> ListenerMemoMetrics {
        ListenerMemoMetrics {
            bytes: self.bytes.with_label_values(&[server]),
            limit: self.limit.with_label_values(&[server]),
            entries: self.entries.with_label_values(&[server]),
            emptied: self.emptied.with_label_values(&[server]),
        }
    }
}

/// The memo series of one listener, resolved once.
#[derive(Debug, Clone)]
pub struct ListenerMemoMetrics {
    bytes: IntGauge,
    limit: IntGauge,
    entries: IntGauge,
    emptied: IntCounter,
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl ListenerMemoMetrics {
    /// Sets what the memo holds and its bound.
    pub fn set(&self, bytes: usize, entries: usize, limit: usize) {
        self.bytes.set(gauge_value(bytes));
        self.entries.set(gauge_value(entries));
        self.limit.set(gauge_value(limit));
    }

    /// The memo was emptied to stay within its bound.
    pub fn emptied(&self) {
        self.emptied.inc();
    }
}
