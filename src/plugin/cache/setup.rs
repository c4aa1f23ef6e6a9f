//! The `cache` directive's Corefile syntax, parsed into a [`CacheConfig`] with CoreDNS's options
//! and defaults:
//!
//! ```text
//! cache [TTL] [ZONES...] {
//!     success CAPACITY [TTL] [MINTTL]
//!     denial CAPACITY [TTL] [MINTTL]
//!     prefetch AMOUNT [[DURATION] [PERCENTAGE%]]
//!     serve_stale [DURATION] [immediate [RESPONSE_TTL [FAILURE_RECHECK]] | verify [VERIFY_TIMEOUT [RESPONSE_TTL [FAILURE_RECHECK]]]]
//!     serve_stale_policy prefer_positive
//!     servfail DURATION
//!     disable success|denial [ZONES...]
//!     keepttl
//! }
//! ```
//!
//! And how a configured `cache` directive becomes its plugin: its [`Configured`] impl, what it
//! checks against its block and offers it. What it parses into is `config.rs`'s, which the
//! handler reads too, so the handler never imports this file (the layer test finds import loops).

use std::sync::Arc;
use std::time::Duration;

use super::config::{CacheConfig, Prefetch, Section, ServeStale};
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token, normalize_zone_or_cidr, parse_duration};

/// Default capacity of each of the success and denial caches (CoreDNS: 9984).
pub const DEFAULT_CAPACITY: usize = 9984;
/// Default TTL cap of positive answers (CoreDNS: 3600 s).
pub const DEFAULT_SUCCESS_TTL: Duration = Duration::from_secs(3600);
/// Default TTL cap of negative answers (CoreDNS: 1800 s).
pub const DEFAULT_DENIAL_TTL: Duration = Duration::from_secs(1800);
/// Default minimum TTL of forwarded answers (CoreDNS: 5 s).
pub const DEFAULT_MIN_TTL: Duration = Duration::from_secs(5);
/// Default and maximum time a SERVFAIL is cached.
pub const DEFAULT_SERVFAIL: Duration = Duration::from_secs(5);
/// The longest `servfail` accepted (CoreDNS: 5 minutes).
pub const MAX_SERVFAIL: Duration = Duration::from_secs(300);

/// The client response timer of `serve_stale verify` without VERIFY_TIMEOUT (RFC 8767 section
/// 5 suggests 1.8 s).
pub const STALE_VERIFY_TIMEOUT: Duration = Duration::from_millis(1800);
/// The TTL of stale records without RESPONSE_TTL (RFC 8767 recommends 30 s).
pub const STALE_RESPONSE_TTL: u32 = 30;
/// The longest FAILURE_RECHECK (RFC 8767: should not exceed 5 minutes; CoreDNS's bound).
const MAX_FAILURE_RECHECK: Duration = Duration::from_secs(300);

impl ServeStale {
    /// `serve_stale [DURATION] [immediate [RESPONSE_TTL [FAILURE_RECHECK]] | verify
    /// [VERIFY_TIMEOUT [RESPONSE_TTL [FAILURE_RECHECK]]]]`, CoreDNS 1.14.7's grammar (a mode
    /// may also come first). What is not written keeps this server's RFC 8767 defaults.
    fn parse(d: &Directive, opt: &Directive) -> Result<Self, CorefileError> {
        let mut s = ServeStale {
            duration: Duration::from_secs(3600),
            verify: true,
            verify_timeout: Some(STALE_VERIFY_TIMEOUT),
            response_ttl: STALE_RESPONSE_TTL,
            failure_recheck: Duration::ZERO,
        };
        let mut args = opt.args.iter().peekable();
        let is_mode = |t: &Token| matches!(t.text.to_ascii_lowercase().as_str(), "immediate" | "verify");
        if let Some(t) = args.next_if(|t| !is_mode(t)) {
            s.duration = parse_duration(&t.text).ok_or_else(|| {
                d.error_at(
                    t,
                    format!("serve_stale: '{}' is not a duration or immediate|verify", t.text),
                )
            })?;
        }
        let Some(mode) = args.next() else {
            return Ok(s);
        };
        s.verify = match mode.text.to_ascii_lowercase().as_str() {
            "verify" => true,
            "immediate" => false,
            other => {
                return Err(d.error_at(
                    mode,
                    format!("serve_stale: '{other}' is not a refresh mode (immediate or verify)"),
                ));
            }
        };
        if s.verify
            && let Some(t) = args.next()
        {
            let timeout = parse_duration(&t.text).ok_or_else(|| {
                d.error_at(
                    t,
                    format!(
                        "serve_stale: verify timeout '{}' is not a duration (0 waits for the upstream)",
                        t.text
                    ),
                )
            })?;
            s.verify_timeout = (!timeout.is_zero()).then_some(timeout);
        }
        if let Some(t) = args.next() {
            s.response_ttl = parse_duration(&t.text)
                .filter(|v| v.subsec_nanos() == 0)
                .and_then(|v| u32::try_from(v.as_secs()).ok())
                .ok_or_else(|| {
                    d.error_at(
                        t,
                        format!(
                            "serve_stale: response TTL '{}' is not a whole number of seconds (e.g. 30s)",
                            t.text
                        ),
                    )
                })?;
        }
        if let Some(t) = args.next() {
            s.failure_recheck = parse_duration(&t.text)
                .filter(|v| *v <= MAX_FAILURE_RECHECK)
                .ok_or_else(|| {
                    d.error_at(
                        t,
                        format!(
                            "serve_stale: failure recheck '{}' is not a duration of at most 5m",
                            t.text
                        ),
                    )
                })?;
        }
        if let Some(t) = args.next() {
            return Err(d.error_at(t, format!("serve_stale: unexpected '{}'", t.text)));
        }
        Ok(s)
    }
}

fn secs(d: &Directive, t: &Token, what: &str) -> Result<Duration, CorefileError> {
    t.text
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| d.error_at(t, format!("{what}: '{}' is not a number of seconds", t.text)))
}

fn capacity(d: &Directive, t: &Token) -> Result<usize, CorefileError> {
    match t.text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(d.error_at(t, format!("capacity: '{}' is not a positive number", t.text))),
    }
}

fn zones(d: &Directive, toks: &[Token]) -> Result<Vec<String>, CorefileError> {
    toks.iter()
        .map(|t| normalize_zone_or_cidr(&t.text).map_err(|m| d.error_at(t, m)))
        .collect()
}

/// Parses a `cache` directive in a block serving `block_zones`.
pub fn parse(d: &Directive, block_zones: &[String]) -> Result<CacheConfig, CorefileError> {
    let mut args: &[Token] = &d.args;
    let mut success = Section {
        capacity: DEFAULT_CAPACITY,
        max_ttl: DEFAULT_SUCCESS_TTL,
        min_ttl: DEFAULT_MIN_TTL,
    };
    let mut denial = Section {
        max_ttl: DEFAULT_DENIAL_TTL,
        ..success
    };
    if let Some((first, rest)) = args.split_first()
        && first.text.chars().all(|c| c.is_ascii_digit())
    {
        let ttl = secs(d, first, "TTL")?;
        if ttl.is_zero() {
            return Err(d.error_at(first, "TTL must be at least 1 second"));
        }
        success.max_ttl = ttl;
        denial.max_ttl = ttl;
        args = rest;
    }
    let mut c = CacheConfig {
        zones: if args.is_empty() {
            block_zones.to_vec()
        } else {
            zones(d, args)?
        },
        success,
        denial,
        servfail: DEFAULT_SERVFAIL,
        prefetch: None,
        serve_stale: None,
        prefer_positive: false,
        keepttl: false,
        disable_success: Vec::new(),
        disable_denial: Vec::new(),
    };
    let mut policy = None;
    for opt in &d.block {
        let a = &opt.args;
        match opt.name.text.as_str() {
            which @ ("success" | "denial") => {
                let (Some(cap), true) = (a.first(), a.len() <= 3) else {
                    return Err(d.error_at(&opt.name, format!("{which} takes CAPACITY [TTL] [MINTTL]")));
                };
                let s = if which == "success" {
                    &mut c.success
                } else {
                    &mut c.denial
                };
                s.capacity = capacity(d, cap)?;
                if let Some(t) = a.get(1) {
                    s.max_ttl = secs(d, t, "TTL")?;
                }
                if let Some(t) = a.get(2) {
                    s.min_ttl = secs(d, t, "MINTTL")?;
                }
                if s.min_ttl > s.max_ttl {
                    return Err(d.error_at(&opt.name, format!("{which}: MINTTL is above TTL")));
                }
            }
            "prefetch" => {
                let Some(amount) = a.first() else {
                    return Err(d.error_at(&opt.name, "prefetch takes AMOUNT [[DURATION] [PERCENTAGE%]]"));
                };
                let mut p = Prefetch {
                    amount: amount.text.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        d.error_at(
                            amount,
                            format!("prefetch: '{}' is not a positive number", amount.text),
                        )
                    })?,
                    duration: Duration::from_secs(60),
                    percentage: 10,
                };
                for t in a.iter().skip(1) {
                    if let Some(pct) = t.text.strip_suffix('%') {
                        p.percentage =
                            pct.parse()
                                .ok()
                                .filter(|n| (0..=100).contains(n))
                                .ok_or_else(|| {
                                    d.error_at(t, format!("prefetch: '{}' is not a percentage", t.text))
                                })?;
                    } else {
                        p.duration = parse_duration(&t.text).filter(|x| !x.is_zero()).ok_or_else(|| {
                            d.error_at(t, format!("prefetch: '{}' is not a duration", t.text))
                        })?;
                    }
                }
                c.prefetch = Some(p);
            }
            "serve_stale" => c.serve_stale = Some(ServeStale::parse(d, opt)?),
            "servfail" => {
                let [t] = a.as_slice() else {
                    return Err(d.error_at(&opt.name, "servfail takes one DURATION"));
                };
                c.servfail = parse_duration(&t.text)
                    .filter(|x| *x <= MAX_SERVFAIL)
                    .ok_or_else(|| {
                        d.error_at(
                            t,
                            format!("servfail: '{}' is not a duration of at most 5m", t.text),
                        )
                    })?;
            }
            "disable" => {
                let Some((which, rest)) = a.split_first() else {
                    return Err(d.error_at(&opt.name, "disable takes success|denial [ZONES...]"));
                };
                let list = if rest.is_empty() {
                    c.zones.clone()
                } else {
                    zones(d, rest)?
                };
                match which.text.as_str() {
                    "success" => c.disable_success.extend(list),
                    "denial" => c.disable_denial.extend(list),
                    other => {
                        return Err(d.error_at(which, format!("disable: '{other}' is not success or denial")));
                    }
                }
            }
            "keepttl" => {
                d.option_no_args(opt)?;
                c.keepttl = true;
            }
            "serve_stale_policy" => {
                if policy.is_some() {
                    return Err(d.error_at(&opt.name, "serve_stale_policy can only be given once"));
                }
                let [t] = a.as_slice() else {
                    return Err(d.error_at(&opt.name, "serve_stale_policy takes one policy: prefer_positive"));
                };
                if !t.text.eq_ignore_ascii_case("prefer_positive") {
                    return Err(d.error_at(
                        t,
                        format!(
                            "serve_stale_policy: '{}' is not a policy (prefer_positive)",
                            t.text
                        ),
                    ));
                }
                policy = Some(opt);
                c.prefer_positive = true;
            }
            other => return Err(d.error_at(&opt.name, format!("unknown property '{other}'"))),
        }
    }
    if let Some(opt) = policy
        && c.serve_stale.is_none()
    {
        return Err(d.error_at(
            &opt.name,
            "serve_stale_policy requires serve_stale in the same cache block",
        ));
    }
    Ok(c)
}

/// The `cache` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d, ctx.zones)?))
}

impl Configured for CacheConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let cache = super::Cache::new(self);
        let families = ctx.metrics.and_then(|m| m.families::<super::CacheMetrics>().ok());
        let cache = match families {
            Some(f) => cache.with_metrics(f, ctx.server),
            None => cache,
        };
        Built::Plugin(Arc::new(cache))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::Path;

    fn parse_text(text: &str) -> Result<CacheConfig, CorefileError> {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{text}\n}}\n"), Path::new("Corefile")).unwrap();
        parse(&cf.blocks[0].directives[0], &[".".to_owned()])
    }

    #[test]
    fn kubeadm_and_defaults() {
        let c = parse_text("cache 30 {\n disable success cluster.local\n disable denial cluster.local\n}")
            .unwrap();
        assert_eq!(c.zones, ["."]);
        assert_eq!(c.success.max_ttl, Duration::from_secs(30));
        assert_eq!(c.denial.max_ttl, Duration::from_secs(30));
        assert_eq!((c.success.capacity, c.denial.capacity), (9984, 9984));
        assert_eq!(c.disable_success, ["cluster.local."]);
        assert_eq!(c.disable_denial, ["cluster.local."]);
        let c = parse_text("cache").unwrap();
        assert_eq!(c.success.max_ttl, Duration::from_secs(3600));
        assert_eq!(c.denial.max_ttl, Duration::from_secs(1800));
        assert_eq!(c.servfail, Duration::from_secs(5));
    }

    #[test]
    fn options() {
        let c = parse_text(
            "cache 60 example.org {\n success 100 20 2\n denial 50\n prefetch 3 10s 20%\n serve_stale 10m immediate\n servfail 1s\n}",
        )
        .unwrap();
        assert_eq!(c.zones, ["example.org."]);
        assert_eq!(
            c.success,
            Section {
                capacity: 100,
                max_ttl: Duration::from_secs(20),
                min_ttl: Duration::from_secs(2)
            }
        );
        assert_eq!(c.denial.capacity, 50);
        assert_eq!(
            c.prefetch,
            Some(Prefetch {
                amount: 3,
                duration: Duration::from_secs(10),
                percentage: 20
            })
        );
        assert_eq!(
            c.serve_stale,
            Some(ServeStale {
                duration: Duration::from_secs(600),
                verify: false,
                verify_timeout: Some(STALE_VERIFY_TIMEOUT),
                response_ttl: STALE_RESPONSE_TTL,
                failure_recheck: Duration::ZERO,
            })
        );
        assert_eq!(c.servfail, Duration::from_secs(1));
        for (text, want) in [
            ("cache {\n success 0\n}", "positive number"),
            (
                "cache {\n bogus\n}",
                "Corefile:3: cache: unknown property 'bogus'",
            ),
            ("cache {\n prefetch\n}", "AMOUNT"),
            ("cache {\n servfail 1h\n}", "at most 5m"),
            ("cache {\n disable both\n}", "success or denial"),
            ("cache 0", "at least 1 second"),
            (
                "cache {\n serve_stale_policy prefer_positive\n}",
                "Corefile:3: cache: serve_stale_policy requires serve_stale",
            ),
            (
                "cache {\n serve_stale\n serve_stale_policy newest\n}",
                "Corefile:4: cache: serve_stale_policy: 'newest' is not a policy",
            ),
            (
                "cache {\n serve_stale\n serve_stale_policy prefer_positive\n serve_stale_policy prefer_positive\n}",
                "only be given once",
            ),
        ] {
            let e = parse_text(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    /// CoreDNS 1.14.7's positional grammar; the values after the mode are not durations of the
    /// window (before this parser, `serve_stale 1h verify 100ms 30s` kept entries 30 s).
    #[test]
    fn serve_stale_grammar() {
        let stale = |text: &str| {
            parse_text(&format!("cache {{\n serve_stale {text}\n}}"))
                .map(|c| c.serve_stale.unwrap())
                .map_err(|e| e.to_string())
        };
        let s = |duration: u64, verify: bool, timeout: Option<u64>, ttl: u32, recheck: u64| ServeStale {
            duration: Duration::from_secs(duration),
            verify,
            verify_timeout: timeout.map(Duration::from_millis),
            response_ttl: ttl,
            failure_recheck: Duration::from_secs(recheck),
        };
        assert_eq!(stale(""), Ok(s(3600, true, Some(1800), 30, 0)));
        assert_eq!(stale("2h"), Ok(s(7200, true, Some(1800), 30, 0)));
        assert_eq!(stale("immediate"), Ok(s(3600, false, Some(1800), 30, 0)));
        assert_eq!(stale("1h verify 100ms 30s"), Ok(s(3600, true, Some(100), 30, 0)));
        assert_eq!(
            stale("1h verify 100ms 30s 30s"),
            Ok(s(3600, true, Some(100), 30, 30))
        );
        assert_eq!(stale("1h verify 0"), Ok(s(3600, true, None, 30, 0)));
        assert_eq!(stale("10m immediate 7s 1m"), Ok(s(600, false, Some(1800), 7, 60)));
        assert_eq!(stale("verify 2s"), Ok(s(3600, true, Some(2000), 30, 0)));
        for (text, want) in [
            ("1h sometimes", "not a refresh mode"),
            ("soon", "not a duration or immediate|verify"),
            ("1h verify fast", "verify timeout 'fast'"),
            ("1h immediate 1.5s", "whole number of seconds"),
            ("1h immediate 30s 6m", "at most 5m"),
            ("1h immediate 30s 1m extra", "unexpected 'extra'"),
        ] {
            let e = stale(text).unwrap_err();
            assert!(e.contains(want) && e.contains("Corefile:3"), "{text}: {e}");
        }
    }
}
