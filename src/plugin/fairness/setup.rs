//! The `fairness` directive's Corefile syntax, parsed into a [`FairnessConfig`]:
//!
//! ```text
//! fairness {
//!     questions RATE [BURST]
//!     upstream RATE [BURST]
//!     inflight COUNT
//!     group FACTOR
//!     prefix IPV4-LENGTH [IPV6-LENGTH]
//!     slip N
//!     refuse
//!     max_clients COUNT
//! }
//! ```
//!
//! RATE is per second and per client address; a namespace (a pod client's, with the
//! kubernetes plugin's `pods verified`) or the address prefix of a client no pod index knows
//! may spend FACTOR times as much.

use std::sync::Arc;

use super::table::{Limits, Rate};
use crate::chain::{Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token};

/// Questions per second a client address may ask, by default.
pub const DEFAULT_QUESTIONS: f64 = 1000.0;
/// Questions per second a client address may send upstream, by default (a pod resolving 200
/// new outside names a second is well inside it).
pub const DEFAULT_UPSTREAM: f64 = 500.0;
/// Upstream exchanges a client address may hold in flight, by default.
pub const DEFAULT_INFLIGHT: u32 = 50;
/// How many times a client's budget a namespace or an address prefix has, by default.
pub const DEFAULT_GROUP: u32 = 5;
/// The prefix lengths that group clients no pod index knows, by default.
pub const DEFAULT_PREFIX: (u8, u8) = (24, 56);
/// Every Nth refused UDP question gets a truncated reply, by default.
pub const DEFAULT_SLIP: u32 = 2;
/// The most client keys the table holds, by default (about 5 MiB).
pub const DEFAULT_MAX_CLIENTS: usize = 65_536;

/// `fairness`, as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct FairnessConfig {
    /// A client address's limits.
    pub address: Limits,
    /// The factor of a namespace's and a prefix's limits to an address's.
    pub group: u32,
    /// The prefix lengths of unknown clients (IPv4, IPv6).
    pub prefix: (u8, u8),
    /// Every Nth refused UDP question is answered truncated, the rest not at all (0: none is
    /// answered).
    pub slip: u32,
    /// Refused UDP questions get REFUSED instead (no slip, no silence).
    pub refuse: bool,
    /// The most client keys tracked.
    pub max_clients: usize,
    /// Where the directive is written (for its warnings).
    pub at: Option<crate::corefile::Location>,
}

impl Default for FairnessConfig {
    fn default() -> Self {
        Self {
            address: Limits {
                questions: Rate {
                    per_second: DEFAULT_QUESTIONS,
                    burst: 2.0 * DEFAULT_QUESTIONS,
                },
                upstream: Rate {
                    per_second: DEFAULT_UPSTREAM,
                    burst: 2.0 * DEFAULT_UPSTREAM,
                },
                inflight: DEFAULT_INFLIGHT,
            },
            group: DEFAULT_GROUP,
            prefix: DEFAULT_PREFIX,
            slip: DEFAULT_SLIP,
            refuse: false,
            max_clients: DEFAULT_MAX_CLIENTS,
            at: None,
        }
    }
}

impl FairnessConfig {
    /// The limits of a namespace or a prefix: the address's times `group`.
    pub fn grouped(&self) -> Limits {
        let f = f64::from(self.group);
        let scale = |r: Rate| Rate {
            per_second: r.per_second * f,
            burst: r.burst * f,
        };
        Limits {
            questions: scale(self.address.questions),
            upstream: scale(self.address.upstream),
            inflight: self.address.inflight.saturating_mul(self.group),
        }
    }
}

fn number<T: std::str::FromStr>(t: &Token, what: &str, ok: impl Fn(&T) -> bool) -> Result<T, CorefileError> {
    t.text
        .parse::<T>()
        .ok()
        .filter(|v| ok(v))
        .ok_or_else(|| t.error(format!("fairness: {what}: '{}' is not valid", t.text)))
}

fn rate(d: &Directive, line: &Directive) -> Result<Rate, CorefileError> {
    let what = line.name.text.as_str();
    let (r, b) = match line.args.as_slice() {
        [r] => (r, None),
        [r, b] => (r, Some(b)),
        _ => return Err(d.error_at(&line.name, format!("{what} takes RATE [BURST]"))),
    };
    let per_second: f64 = number(
        r,
        &format!("{what} RATE (a positive number per second)"),
        |v: &f64| v.is_finite() && *v > 0.0,
    )?;
    let burst = match b {
        Some(b) => number(
            b,
            &format!("{what} BURST (a whole number, at least 1)"),
            |v: &u32| *v >= 1,
        )?
        .into(),
        None => (2.0 * per_second).max(1.0),
    };
    Ok(Rate { per_second, burst })
}

/// Parses a `fairness` directive.
pub fn parse(d: &Directive) -> Result<FairnessConfig, CorefileError> {
    if let Some(a) = d.args.first() {
        return Err(d.error_at(a, "fairness takes no arguments (its options go in its block)"));
    }
    let mut c = FairnessConfig {
        at: Some(d.name.loc.clone()),
        ..FairnessConfig::default()
    };
    for line in &d.block {
        if line.has_block {
            return Err(d.error_at(&line.name, format!("{} takes no block", line.name.text)));
        }
        match line.name.text.as_str() {
            "questions" => c.address.questions = rate(d, line)?,
            "upstream" => c.address.upstream = rate(d, line)?,
            "inflight" => {
                c.address.inflight = number(
                    d.option_arg(line)?,
                    "inflight (a whole number, at least 1)",
                    |v: &u32| *v >= 1,
                )?;
            }
            "group" => {
                c.group = number(
                    d.option_arg(line)?,
                    "group (a whole number from 1 to 1000)",
                    |v: &u32| (1..=1000).contains(v),
                )?;
            }
            "prefix" => {
                let (v4, v6) = match line.args.as_slice() {
                    [a] => (a, None),
                    [a, b] => (a, Some(b)),
                    _ => {
                        return Err(d.error_at(&line.name, "prefix takes IPV4-LENGTH [IPV6-LENGTH]"));
                    }
                };
                c.prefix.0 = number(v4, "prefix IPV4-LENGTH (0 to 32)", |v: &u8| *v <= 32)?;
                if let Some(v6) = v6 {
                    c.prefix.1 = number(v6, "prefix IPV6-LENGTH (0 to 128)", |v: &u8| *v <= 128)?;
                }
            }
            "slip" => {
                c.slip = number(
                    d.option_arg(line)?,
                    "slip (a whole number from 0 to 10)",
                    |v: &u32| *v <= 10,
                )?;
            }
            "refuse" => {
                d.option_no_args(line)?;
                c.refuse = true;
            }
            "max_clients" => {
                c.max_clients = number(
                    d.option_arg(line)?,
                    "max_clients (a whole number from 64 to 16777216)",
                    |v: &usize| (64..=1 << 24).contains(v),
                )?;
            }
            other => return Err(d.error_at(&line.name, format!("unknown property '{other}'"))),
        }
    }
    if c.refuse && d.block.iter().any(|l| l.name.text == "slip") {
        return Err(d.error("'slip' and 'refuse' exclude each other"));
    }
    Ok(c)
}

/// The `fairness` directive's setup: once per server block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::Path;

    fn parse_text(text: &str) -> Result<FairnessConfig, CorefileError> {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{text}\n}}\n"), Path::new("Corefile")).unwrap();
        parse(&cf.blocks[0].directives[0])
    }

    #[test]
    fn bare_fairness_has_the_defaults() {
        let c = parse_text("fairness").unwrap();
        assert_eq!(c.at.as_ref().map(|l| l.line), Some(2));
        assert_eq!(FairnessConfig { at: None, ..c }, FairnessConfig::default());
        let g = FairnessConfig::default().grouped();
        assert_eq!(g.inflight, DEFAULT_INFLIGHT * DEFAULT_GROUP);
        assert_eq!(g.questions.per_second, DEFAULT_QUESTIONS * 5.0);
    }

    #[test]
    fn every_option_is_read() {
        let c = parse_text(
            "fairness {\n questions 50 60\n upstream 10\n inflight 4\n group 3\n prefix 32 64\n slip 0\n max_clients 1000\n}",
        )
        .unwrap();
        assert_eq!(
            c.address.questions,
            Rate {
                per_second: 50.0,
                burst: 60.0
            }
        );
        assert_eq!(
            c.address.upstream,
            Rate {
                per_second: 10.0,
                burst: 20.0
            }
        );
        assert_eq!(
            (c.address.inflight, c.group, c.prefix, c.slip, c.max_clients),
            (4, 3, (32, 64), 0, 1000)
        );
        assert!(parse_text("fairness {\n refuse\n}").unwrap().refuse);
    }

    #[test]
    fn bad_options_say_where_and_what() {
        for (text, want) in [
            ("fairness x", "Corefile:2: fairness: fairness takes no arguments"),
            (
                "fairness {\n questions\n}",
                "Corefile:3: fairness: questions takes RATE [BURST]",
            ),
            (
                "fairness {\n questions -1\n}",
                "Corefile:3: fairness: questions RATE",
            ),
            (
                "fairness {\n upstream 5 0\n}",
                "Corefile:3: fairness: upstream BURST",
            ),
            ("fairness {\n inflight 0\n}", "Corefile:3: fairness: inflight"),
            (
                "fairness {\n prefix 33\n}",
                "Corefile:3: fairness: prefix IPV4-LENGTH",
            ),
            ("fairness {\n slip 11\n}", "Corefile:3: fairness: slip"),
            (
                "fairness {\n max_clients 10\n}",
                "Corefile:3: fairness: max_clients",
            ),
            (
                "fairness {\n refuse\n slip 1\n}",
                "Corefile:2: fairness: 'slip' and 'refuse'",
            ),
            (
                "fairness {\n burst 3\n}",
                "Corefile:3: fairness: unknown property 'burst'",
            ),
        ] {
            let e = parse_text(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }
}
