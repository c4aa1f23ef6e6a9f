//! The `errors` plugin: logs the failures the chain itself produced (no upstream answered, no
//! plugin could answer, too many queries in flight) as CoreDNS does, one line per failure, and
//! `consolidate` folds the failures that match a pattern into one line per period.
//!
//! ```text
//! errors {
//!     stacktrace
//!     consolidate DURATION REGEXP [warning|error|info|debug] [show_first]
//! }
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RecordType};
use regex::Regex;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::chain::{Exchange, Observer};
use crate::corefile::{Args, CorefileError, Directive, parse_duration};

/// The level a consolidated line is logged at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `warning`.
    Warning,
    /// `error` (the default).
    Error,
    /// `info`.
    Info,
    /// `debug`.
    Debug,
}

/// One `consolidate DURATION REGEXP [LEVEL] [show_first]` line.
#[derive(Debug, Clone)]
pub struct Consolidate {
    /// The period one summary line covers.
    pub period: Duration,
    /// The failures it folds.
    pub pattern: Regex,
    /// The summary's level.
    pub level: Level,
    /// `show_first`: the first failure of each period is logged at once (at `level`), and
    /// the summary is only written when more followed it.
    pub show_first: bool,
}

/// `errors { ... }`.
#[derive(Debug, Clone, Default)]
pub struct ErrorsConfig {
    /// `consolidate` lines, in file order: a failure goes to the first that matches.
    pub consolidate: Vec<Consolidate>,
}

/// Parses the `errors` directive.
pub fn parse(d: &Directive) -> Result<ErrorsConfig, CorefileError> {
    Args::new(d).expect_none()?;
    let mut config = ErrorsConfig::default();
    for opt in &d.block {
        match opt.name.text.as_str() {
            // Go stack traces have no equivalent; a panic is caught and counted either way.
            "stacktrace" => Args::new(opt).expect_none()?,
            "consolidate" => {
                let mut a = Args::new(opt);
                let period = a.expect("a duration such as 30s")?;
                let period = parse_duration(&period.text)
                    .filter(|p| !p.is_zero())
                    .ok_or_else(|| {
                        period.error(format!(
                            "consolidate: '{}' is not a duration such as 30s",
                            period.text
                        ))
                    })?;
                let re = a.expect("a regular expression")?;
                let pattern = Regex::new(&re.text).map_err(|e| {
                    re.error(format!(
                        "consolidate: '{}' is not a valid regular expression: {e}",
                        re.text
                    ))
                })?;
                let mut level = Level::Error;
                let mut show_first = false;
                let mut next = a.next();
                if let Some(t) = next.filter(|t| t.text != "show_first") {
                    level = match t.text.as_str() {
                        "warning" => Level::Warning,
                        "error" => Level::Error,
                        "info" => Level::Info,
                        "debug" => Level::Debug,
                        other => {
                            return Err(t.error(format!(
                                "consolidate: '{other}' is not a level (warning, error, info or debug) or show_first"
                            )));
                        }
                    };
                    next = a.next();
                }
                if let Some(t) = next {
                    if t.text != "show_first" {
                        return Err(t.error(format!(
                            "consolidate: unexpected '{}' (only show_first may follow the level)",
                            t.text
                        )));
                    }
                    show_first = true;
                }
                a.expect_none()?;
                config.consolidate.push(Consolidate {
                    period,
                    pattern,
                    level,
                    show_first,
                });
            }
            other => return Err(opt.error(format!("unknown property '{other}'"))),
        }
    }
    Ok(config)
}

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

/// The `errors` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d)?))
}

impl Configured for ErrorsConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Observer(Arc::new(ErrorLog::new(self)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::Path;

    fn cfg(body: &str) -> Result<ErrorsConfig, CorefileError> {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{body}\n}}\n"), Path::new("Corefile"))?;
        parse(&cf.blocks[0].directives[0])
    }

    #[test]
    fn syntax() {
        assert!(cfg(" errors").unwrap().consolidate.is_empty());
        let c = cfg(" errors {\n  stacktrace\n  consolidate 30s \"^2 .* no upstream\" warning\n  consolidate 5m .*\n }")
            .unwrap();
        assert_eq!(c.consolidate.len(), 2);
        assert_eq!(c.consolidate[0].level, Level::Warning);
        assert_eq!(c.consolidate[1].period, Duration::from_secs(300));
        assert!(!c.consolidate[0].show_first);
        let c = cfg(" errors {\n  consolidate 5m \".* i/o timeout$\" warning show_first\n  consolidate 30s x show_first\n }")
            .unwrap();
        assert!(c.consolidate[0].show_first && c.consolidate[0].level == Level::Warning);
        assert!(c.consolidate[1].show_first && c.consolidate[1].level == Level::Error);
        for (bad, want) in [
            (" errors extra", "Corefile:2"),
            (" errors {\n  consolidate soon .*\n }", "Corefile:3"),
            (
                " errors {\n  consolidate 30s (\n }",
                "not a valid regular expression",
            ),
            (" errors {\n  consolidate 30s .* loud\n }", "not a level"),
            (
                " errors {\n  consolidate 30s .* show_first warning\n }",
                "unexpected argument 'warning'",
            ),
            (
                " errors {\n  consolidate 30s .* error show_first x\n }",
                "Corefile:3",
            ),
            (" errors {\n  frob\n }", "unknown property"),
        ] {
            let e = cfg(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
        assert_eq!(humantime_secs(Duration::from_secs(300)), "5m0s");
    }

    #[test]
    fn consolidated_failures_are_counted_not_logged() {
        let log = ErrorLog::new(&cfg(" errors {\n  consolidate 30s \"no upstream\"\n }").unwrap());
        let name = Name::from_ascii("example.org.").unwrap();
        log.report(
            ResponseCode::ServFail,
            &name,
            RecordType::A,
            "no upstream answered",
        );
        log.report(
            ResponseCode::ServFail,
            &name,
            RecordType::A,
            "no upstream answered",
        );
        log.report(
            ResponseCode::Refused,
            &name,
            RecordType::A,
            "too many queries in flight",
        );
        assert_eq!(log.pending(), [2]);
    }
}
