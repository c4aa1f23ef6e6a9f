//! The `errors` observer ([`ErrorLog`]): after each answer, logs the failure the chain
//! produced, one line each as CoreDNS does, or counts it under its `consolidate` pattern and
//! logs one line per period.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RecordType};

use super::config::{Consolidate, ErrorsConfig, Level};
use crate::chain::{Exchange, Observer};

#[derive(Debug)]
struct Folded {
    rule: Consolidate,
    count: AtomicU64,
}

impl Observer for ErrorLog {
    fn name(&self) -> &'static str {
        "errors"
    }

    /// Logs the request if the chain failed on it (failures are never replayed).
    fn observe(&self, x: &Exchange<'_>) {
        if let (Some(reason), Some((name, qtype, _))) = (x.failure, x.query) {
            self.report(x.rcode, name, qtype, reason);
        }
    }

    fn start(&self) {
        ErrorLog::start(self);
    }
}

/// The error log of one server block.
#[derive(Debug, Clone)]
pub struct ErrorLog {
    folded: Arc<Vec<Folded>>,
}

impl ErrorLog {
    /// An error log; [`ErrorLog::start`] runs the summary timers.
    pub fn new(config: &ErrorsConfig) -> Self {
        Self {
            folded: Arc::new(
                config
                    .consolidate
                    .iter()
                    .map(|rule| Folded {
                        rule: rule.clone(),
                        count: AtomicU64::new(0),
                    })
                    .collect(),
            ),
        }
    }

    /// Spawns one timer per `consolidate` line; each ends when this log is dropped.
    pub fn start(&self) {
        for i in 0..self.folded.len() {
            let weak: Weak<Vec<Folded>> = Arc::downgrade(&self.folded);
            let Some(period) = self.folded.get(i).map(|f| f.rule.period) else {
                continue;
            };
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let Some(all) = weak.upgrade() else { return };
                    if let Some(f) = all.get(i) {
                        let n = f.count.swap(0, Ordering::Relaxed);
                        // With show_first a lone failure was logged whole already.
                        if n > 1 || (n == 1 && !f.rule.show_first) {
                            log_summary(f, n);
                        }
                    }
                }
            });
        }
    }

    /// Reports one failure: `rcode qname qtype: reason`, or a count toward a summary when it
    /// matches a `consolidate` pattern.
    pub fn report(&self, rcode: ResponseCode, name: &Name, qtype: RecordType, reason: &str) {
        let line = format!("{} {} {}: {}", u16::from(rcode), name, qtype, reason);
        if let Some(f) = self.folded.iter().find(|f| f.rule.pattern.is_match(&line)) {
            // The period's first (the counter was 0): shown at once with `show_first`.
            if f.count.fetch_add(1, Ordering::Relaxed) == 0 && f.rule.show_first {
                log_at(f.rule.level, &line);
            }
            return;
        }
        tracing::error!(target: "cluster_dns::plugin::errors", "{line}");
    }

    /// Failures counted toward each summary line and not yet logged (for tests).
    pub fn pending(&self) -> Vec<u64> {
        self.folded
            .iter()
            .map(|f| f.count.load(Ordering::Relaxed))
            .collect()
    }
}

fn log_summary(f: &Folded, n: u64) {
    let period = humantime_secs(f.rule.period);
    let msg = format!(
        "{n} errors like '{}' occurred in last {period}",
        f.rule.pattern.as_str()
    );
    log_at(f.rule.level, &msg);
}

fn log_at(level: Level, msg: &str) {
    match level {
        Level::Warning => tracing::warn!(target: "cluster_dns::plugin::errors", "{msg}"),
        Level::Error => tracing::error!(target: "cluster_dns::plugin::errors", "{msg}"),
        Level::Info => tracing::info!(target: "cluster_dns::plugin::errors", "{msg}"),
        Level::Debug => tracing::debug!(target: "cluster_dns::plugin::errors", "{msg}"),
    }
}

/// A period as Go prints it for whole units (`30s`, `5m0s`).
fn humantime_secs(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, m, sec) => format!("{h}h{m}m{sec}s"),
    }
}

#[cfg(test)]
mod tests;
