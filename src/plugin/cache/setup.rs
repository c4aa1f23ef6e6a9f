//! The `cache` directive's Corefile syntax, parsed into a [`CacheConfig`] with CoreDNS's options
//! and defaults:
//!
//! ```text
//! cache [TTL] [ZONES...] {
//!     success CAPACITY [TTL] [MINTTL]
//!     denial CAPACITY [TTL] [MINTTL]
//!     prefetch AMOUNT [[DURATION] [PERCENTAGE%]]
//!     serve_stale [DURATION] [immediate|verify]
//!     servfail DURATION
//!     disable success|denial [ZONES...]
//! }
//! ```

use std::time::Duration;

use crate::chain::{Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token, normalize_zone_or_cidr, parse_duration};
use std::sync::Arc;

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

/// Limits of the success or denial cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// Most entries.
    pub capacity: usize,
    /// TTL cap.
    pub max_ttl: Duration,
    /// TTL floor for forwarded answers (cluster answers never outlive their own TTL).
    pub min_ttl: Duration,
}

/// `prefetch`: refresh a popular entry before it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefetch {
    /// Hits within `duration` that make an entry popular.
    pub amount: u32,
    /// The window the hits are counted in (default 1 minute).
    pub duration: Duration,
    /// Refresh once the remaining TTL is at most this percentage of the original (default 10).
    pub percentage: u8,
}

/// `serve_stale`: answer expired entries when the upstream fails (RFC 8767).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeStale {
    /// How long past expiry an entry may be served (default 1 hour).
    pub duration: Duration,
    /// `verify` (the default here, RFC 8767's "try first"): ask upstream first, answer stale
    /// only if it fails within the client response timer. `immediate`: answer stale at once and
    /// refresh in the background (CoreDNS's default).
    pub verify: bool,
}

/// The `cache` plugin's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheConfig {
    /// The zones cached (normalized): the arguments, else the server block's zones.
    pub zones: Vec<String>,
    /// Positive answers.
    pub success: Section,
    /// Negative answers (NXDOMAIN, NODATA).
    pub denial: Section,
    /// How long a SERVFAIL is cached (0: not at all).
    pub servfail: Duration,
    /// `prefetch`.
    pub prefetch: Option<Prefetch>,
    /// `serve_stale`.
    pub serve_stale: Option<ServeStale>,
    /// `disable success ZONES`.
    pub disable_success: Vec<String>,
    /// `disable denial ZONES`.
    pub disable_denial: Vec<String>,
    /// `keepttl`: hits carry the stored TTLs instead of counting down (CoreDNS 1.9+; for
    /// clients behind a second cache, such as NodeLocal DNSCache).
    pub keepttl: bool,
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
        keepttl: false,
        disable_success: Vec::new(),
        disable_denial: Vec::new(),
    };
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
            "serve_stale" => {
                let mut s = ServeStale {
                    duration: Duration::from_secs(3600),
                    verify: true,
                };
                for t in a {
                    match t.text.as_str() {
                        "verify" => s.verify = true,
                        "immediate" => s.verify = false,
                        other => {
                            s.duration = parse_duration(other).ok_or_else(|| {
                                d.error_at(
                                    t,
                                    format!("serve_stale: '{other}' is not a duration or immediate|verify"),
                                )
                            })?;
                        }
                    }
                }
                c.serve_stale = Some(s);
            }
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
            other => return Err(d.error_at(&opt.name, format!("unknown property '{other}'"))),
        }
    }
    Ok(c)
}

/// The `cache` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d, ctx.zones)?))
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
                verify: false
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
        ] {
            let e = parse_text(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
