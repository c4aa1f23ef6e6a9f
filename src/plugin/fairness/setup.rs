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
//!
//! And how a configured `fairness` directive becomes its plugin and what it offers its block
//! (its [`Configured`] impl): the table is made when the block's resources are acquired, offered
//! to `forward` as the block's [`FairShare`], and bound at build to the kubernetes plugin's pod
//! index ([`PodNamespaces`], when the block has `pods verified`) and to the block's counters.
//! What it parses into is `config.rs`'s, which the handler reads too.

use std::sync::Arc;

use super::config::FairnessConfig;
use super::handler::{Fairness, Share, Shared};
use super::metrics::{Decisions, FairnessMetrics};
use super::table::Rate;
use crate::chain::{AcquireCtx, AcquireFuture, BuildCtx, Built, Capabilities, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token};
use crate::plugin::kit::{FairShare, PodNamespaces};

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

impl Configured for FairnessConfig {
    fn acquire<'a>(&'a self, ctx: AcquireCtx<'a>) -> AcquireFuture<'a> {
        Box::pin(async move {
            let families = ctx.metrics.and_then(|m| m.families::<FairnessMetrics>().ok());
            let shared = Arc::new(Shared::new(
                self.clone(),
                families.as_ref().map(|f| f.clients.clone()),
                families.as_ref().map(|f| f.overflow.clone()),
            ));
            let mut offered = Capabilities::default();
            offered.offer(Arc::new(FairShare(Arc::new(Share::new(shared.clone())))));
            offered.offer(shared);
            Ok(offered)
        })
    }

    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let Some(shared) = ctx.capabilities.get::<Shared>() else {
            return Built::Nothing;
        };
        let directory = ctx.capabilities.get::<PodNamespaces>().map(|p| p.0.clone());
        let decisions = ctx
            .metrics
            .and_then(|m| m.families::<FairnessMetrics>().ok())
            .map(|f| Decisions::for_server(&f, ctx.server));
        shared.bind(directory, decisions);
        Built::Plugin(Arc::new(Fairness::new(shared)))
    }

    /// Without `pods verified` nothing knows clients' namespaces: every client is grouped by
    /// its address prefix, which the server starts with and says.
    fn warnings(&self, block: &[(&'static str, Arc<dyn Configured>)]) -> Vec<CorefileError> {
        let knows = block
            .iter()
            .any(|(_, c)| c.offers(std::any::TypeId::of::<PodNamespaces>()));
        let Some(at) = &self.at else {
            return Vec::new();
        };
        if knows {
            return Vec::new();
        }
        vec![CorefileError::Invalid {
            loc: at.clone(),
            message: "fairness: no plugin of this block knows clients' namespaces (the kubernetes plugin does with `pods verified`): every client is grouped by its address prefix".to_owned(),
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::{DEFAULT_GROUP, DEFAULT_INFLIGHT, DEFAULT_QUESTIONS};
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
