//! The `hosts` directive's Corefile syntax, parsed into a [`HostsConfig`] with CoreDNS's options
//! and defaults:
//!
//! ```text
//! hosts [FILE [ZONES...]] {
//!     [INLINE]
//!     ttl SECONDS
//!     no_reverse
//!     reload DURATION
//!     fallthrough [ZONES...]
//!     fallthrough_unsupported
//! }
//! ```
//!
//! A block line whose first token is an IP address is an inline entry (`IP NAME...`); it is
//! parsed here, so a malformed one is a Corefile error with its line.
//!
//! And how a configured `hosts` directive becomes its plugin: its [`Configured`] impl, what it
//! checks against its block and offers it. What it parses into is `config.rs`'s, which the
//! handler reads too, so the handler never imports this file (the layer test finds import loops).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::config::{HostsConfig, InlineEntry, parse_host_name, parse_ip};
use crate::chain::{BuildCtx, Built, Configured, NamedFile, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token, normalize_zone_or_cidr, parse_duration};

/// The file read when the directive names none.
pub const DEFAULT_PATH: &str = "/etc/hosts";
/// TTL of the records served (CoreDNS: 3600 s).
pub const DEFAULT_TTL: u32 = 3600;
/// The longest TTL accepted (CoreDNS: 65535).
pub const MAX_TTL: u32 = 65535;
/// How often the file is checked for changes (CoreDNS: 5 s).
pub const DEFAULT_RELOAD: Duration = Duration::from_secs(5);

fn zones(d: &Directive, toks: &[Token]) -> Result<Vec<String>, CorefileError> {
    toks.iter()
        .map(|t| normalize_zone_or_cidr(&t.text).map_err(|m| d.error_at(t, m)))
        .collect()
}

/// Parses a `hosts` directive in a block serving `block_zones`; `dir` is the Corefile's
/// directory. The file itself is not read here (a missing file is not an error: the inline
/// entries are served until it appears).
pub fn parse(d: &Directive, block_zones: &[String], dir: &Path) -> Result<HostsConfig, CorefileError> {
    let mut args = d.args();
    let file = args.next();
    let path = match file {
        Some(t) if Path::new(&t.text).is_absolute() => PathBuf::from(&t.text),
        Some(t) => dir.join(&t.text),
        None => PathBuf::from(DEFAULT_PATH),
    };
    let rest = args.remaining();
    let mut c = HostsConfig {
        path,
        path_at: file.map(|t| t.loc.clone()),
        zones: if rest.is_empty() {
            block_zones.to_vec()
        } else {
            zones(d, rest)?
        },
        inline: Vec::new(),
        ttl: DEFAULT_TTL,
        no_reverse: false,
        reload: DEFAULT_RELOAD,
        fallthrough: None,
        fallthrough_unsupported: false,
    };
    for opt in &d.block {
        if opt.has_block {
            return Err(d.error_at(&opt.name, format!("'{}' takes no block", opt.name.text)));
        }
        if let Some(ip) = parse_ip(&opt.name.text) {
            if opt.args.is_empty() {
                return Err(d.error_at(
                    &opt.name,
                    format!("inline entry '{}' has no host name", opt.name.text),
                ));
            }
            let names = opt
                .args
                .iter()
                .map(|t| parse_host_name(&t.text).map_err(|m| d.error_at(t, format!("inline entry: {m}"))))
                .collect::<Result<Vec<_>, _>>()?;
            c.inline.push(InlineEntry {
                ip,
                names,
                at: opt.name.loc.to_string(),
            });
            continue;
        }
        match opt.name.text.as_str() {
            "ttl" => {
                let a = d.option_arg(opt)?;
                c.ttl = a
                    .text
                    .parse::<u32>()
                    .ok()
                    .filter(|t| (1..=MAX_TTL).contains(t))
                    .ok_or_else(|| {
                        d.error_at(
                            a,
                            format!("ttl: '{}' is not a number of seconds from 1 to {MAX_TTL}", a.text),
                        )
                    })?;
            }
            "no_reverse" => {
                d.option_no_args(opt)?;
                c.no_reverse = true;
            }
            "reload" => {
                let a = d.option_arg(opt)?;
                c.reload = parse_duration(&a.text).ok_or_else(|| {
                    d.error_at(
                        a,
                        format!(
                            "reload: '{}' is not a duration (e.g. 5s, 300ms, 0 to disable)",
                            a.text
                        ),
                    )
                })?;
            }
            "fallthrough" => {
                c.fallthrough = Some(zones(d, &opt.args)?);
            }
            "fallthrough_unsupported" => {
                d.option_no_args(opt)?;
                c.fallthrough_unsupported = true;
            }
            other => {
                return Err(d.error_at(
                    &opt.name,
                    format!("unknown property '{other}' (nor an inline 'IP NAME...' entry)"),
                ));
            }
        }
    }
    if c.fallthrough_unsupported && c.fallthrough.is_none() {
        return Err(d.error("fallthrough_unsupported needs fallthrough"));
    }
    Ok(c)
}

/// The `hosts` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d, ctx.zones, ctx.dir)?))
}

impl Configured for HostsConfig {
    /// The hosts file the Corefile names, for `--check` to warn about: the server starts without
    /// it and reads it once it appears (as CoreDNS), so it is not needed.
    fn files(&self) -> Vec<NamedFile> {
        let Some(at) = &self.path_at else {
            return Vec::new();
        };
        vec![NamedFile {
            path: self.path.clone(),
            at: at.clone(),
            what: "hosts".to_owned(),
            needed: false,
        }]
    }

    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let hosts = super::Hosts::new(self);
        let hosts = match ctx.metrics.and_then(|m| m.families::<super::HostsMetrics>().ok()) {
            Some(m) => hosts.with_metrics(m),
            None => hosts,
        };
        Built::Plugin(Arc::new(hosts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use hickory_proto::rr::Name;
    use std::net::IpAddr;

    fn parse_text(text: &str) -> Result<HostsConfig, CorefileError> {
        let cf =
            Corefile::parse_str(&format!("example.org:53 {{\n{text}\n}}\n"), Path::new("Corefile")).unwrap();
        parse(
            &cf.blocks[0].directives[0],
            &["example.org.".to_owned()],
            Path::new("/etc/coredns"),
        )
    }

    #[test]
    fn defaults() {
        let c = parse_text("hosts").unwrap();
        assert_eq!(c.path, PathBuf::from("/etc/hosts"));
        assert_eq!(c.zones, ["example.org."]);
        assert_eq!(
            (c.ttl, c.no_reverse, c.reload),
            (3600, false, Duration::from_secs(5))
        );
        assert_eq!(c.fallthrough, None);
        assert!(c.inline.is_empty() && !c.fallthrough_unsupported);
    }

    #[test]
    fn file_zones_and_options() {
        let c = parse_text(
            "hosts example.hosts Example.NET 10.0.0.0/8 {\n 10.0.0.1 A.example.net b\n ::1%lo six.example.net.\n ttl 60\n no_reverse\n reload 1.5s\n fallthrough in-addr.arpa\n fallthrough_unsupported\n}",
        )
        .unwrap();
        assert_eq!(c.path, PathBuf::from("/etc/coredns/example.hosts"));
        assert_eq!(c.zones, ["example.net.", "10.in-addr.arpa."]);
        assert_eq!(c.ttl, 60);
        assert!(c.no_reverse && c.fallthrough_unsupported);
        assert_eq!(c.reload, Duration::from_millis(1500));
        assert_eq!(c.fallthrough, Some(vec!["in-addr.arpa.".to_owned()]));
        assert_eq!(c.inline.len(), 2);
        assert_eq!(c.inline[0].ip, "10.0.0.1".parse::<IpAddr>().unwrap());
        let names: Vec<String> = c.inline[0].names.iter().map(Name::to_ascii).collect();
        assert_eq!(names, ["a.example.net.", "b."]);
        assert_eq!(c.inline[0].at, "Corefile:3");
        assert_eq!(c.inline[1].ip, "::1".parse::<IpAddr>().unwrap());
        let c = parse_text("hosts /abs/hosts {\n fallthrough\n reload 0\n}").unwrap();
        assert_eq!(c.path, PathBuf::from("/abs/hosts"));
        assert_eq!(c.fallthrough, Some(vec![]));
        assert_eq!(c.reload, Duration::ZERO);
        let c = parse_text("hosts {\n ::ffff:10.1.2.3 mapped.example.org\n}").unwrap();
        assert_eq!(c.inline[0].ip, "10.1.2.3".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn mistakes_name_their_line() {
        for (text, want) in [
            (
                "hosts {\n ttl 0\n}",
                "Corefile:3: hosts: ttl: '0' is not a number of seconds",
            ),
            ("hosts {\n ttl 65536\n}", "from 1 to 65535"),
            (
                "hosts {\n ttl\n}",
                "Corefile:3: hosts: ttl takes exactly one argument",
            ),
            ("hosts {\n reload -1s\n}", "reload: '-1s' is not a duration"),
            ("hosts {\n reload 1s extra\n}", "exactly one argument"),
            ("hosts {\n no_reverse yes\n}", "no_reverse takes no argument"),
            (
                "hosts {\n bogus\n}",
                "Corefile:3: hosts: unknown property 'bogus'",
            ),
            (
                "hosts {\n 10.0.0.1\n}",
                "Corefile:3: hosts: inline entry '10.0.0.1' has no host name",
            ),
            (
                "hosts {\n\n 10.0.0.1 a..b\n}",
                "Corefile:4: hosts: inline entry: 'a..b' has an empty label",
            ),
            ("hosts {\n 10.0.0.1 a/b\n}", "not a valid host name"),
            ("hosts {\n fallthrough_unsupported\n}", "needs fallthrough"),
            ("hosts /etc/hosts a..b", "empty label"),
            ("hosts {\n fallthrough a..b\n}", "empty label"),
        ] {
            let e = parse_text(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn host_names() {
        assert_eq!(
            parse_host_name("WWW.Example.COM").unwrap().to_ascii(),
            "www.example.com."
        );
        assert_eq!(
            parse_host_name("*.example.com.").unwrap().to_ascii(),
            "*.example.com."
        );
        assert_eq!(parse_host_name("_srv.x-y").unwrap().to_ascii(), "_srv.x-y.");
        for bad in ["", ".", "a.*.b", "a b", "ü.de", "a..b", &"a".repeat(64)] {
            assert!(parse_host_name(bad).is_err(), "{bad}");
        }
        let long = vec!["a".repeat(63); 4].join(".");
        assert!(parse_host_name(&long).is_err());
        assert!(parse_host_name(&long[2..]).is_ok());
        assert_eq!(parse_ip("fe80::1%eth0"), "fe80::1".parse().ok());
        assert_eq!(parse_ip("localhost"), None);
    }
}
