//! The `forward` directive's Corefile syntax, parsed into a [`ForwardConfig`] with CoreDNS's
//! options and defaults. The options are read first (`resolver` is needed for the upstreams),
//! then the upstream list ([`super::targets`]: addresses, resolv.conf-style files whose
//! `nameserver` lines name them, hostnames resolved now).
//!
//! And how a configured `forward` block becomes its plugin (its [`Configured`] impl: the
//! handler's `Forward`s, chained by `chained.rs`). What it parses into is `config.rs`'s, which the
//! handler reads too, so the handler never imports this file (the layer test finds import loops
//! of any length).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use tokio_rustls::rustls::pki_types::ServerName;

use super::config::{ForwardConfig, Policy};
use super::doh::DohMethod;
pub use super::targets::MAX_UPSTREAMS;
#[cfg(test)]
use super::targets::parse_resolv_conf;
use super::targets::{Transport, dedup, parse_addr_or, read_to};
use super::tls::{TlsSettings, client_config};
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{
    CorefileError, Directive, Token, normalize_zone, normalize_zone_or_cidr, parse_duration,
};
use crate::plugin::kit::previous;
use crate::telemetry::rcode_label;

/// Default per-attempt read timeout (CoreDNS: 2 s).
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Default health-check interval while an upstream is down (CoreDNS: 0.5 s).
pub const DEFAULT_HEALTH_CHECK: Duration = Duration::from_millis(500);
/// Default consecutive failures before an upstream is marked down (CoreDNS: 2).
pub const DEFAULT_MAX_FAILS: u32 = 2;
/// Default connection expiry: how long an idle DNS-over-TLS connection is kept for reuse, and
/// how long a UDP socket is reused from its opening.
pub const DEFAULT_EXPIRE: Duration = Duration::from_secs(10);
/// Questions in flight past which more get REFUSED at once when `max_concurrent` is not
/// written (CoreDNS: no limit). Each holds a task and a socket for up to 4.5 s, so without a
/// bound a flood of names the upstream never answers grows memory without end.
pub const DEFAULT_MAX_CONCURRENT: usize = 10_000;

/// The rcode named `t` (CoreDNS's names, any case: `NXDOMAIN`, `SERVFAIL`, `REFUSED`, ...).
fn rcode_arg(d: &Directive, opt: &Directive, t: &Token) -> Result<ResponseCode, CorefileError> {
    let wanted = t.text.to_ascii_uppercase();
    (0..=23u16)
        .map(<ResponseCode as From<u16>>::from)
        .find(|r| rcode_label(*r) == wanted)
        .ok_or_else(|| d.error_at(t, format!("{}: '{}' is not a valid rcode", opt.name.text, t.text)))
}

/// An upstream address: `IP`, `IP:PORT`, `[IPv6]:PORT`, `[IPv6]`; port 53 by default.
pub fn parse_addr(s: &str) -> Option<SocketAddr> {
    parse_addr_or(s, 53)
}

/// FROM: a zone, or a CIDR standing for its reverse zone. A prefix that is not on a label
/// boundary (`10.0.0.0/12`) expands to several reverse zones in CoreDNS, which uses only the
/// first (`0.10.in-addr.arpa.`, with a warning); so does this.
fn from_zone(text: &str) -> Result<String, String> {
    let Some((addr, bits)) = text.split_once('/') else {
        return normalize_zone(text);
    };
    let (Ok(ip), Ok(b)) = (addr.parse::<IpAddr>(), bits.parse::<u32>()) else {
        return normalize_zone_or_cidr(text);
    };
    // The first zone is the network's own address (host bits cleared), to the next boundary.
    let (network, step) = match ip {
        IpAddr::V4(a) if b > 0 && b < 32 && b % 8 != 0 => (
            IpAddr::V4(std::net::Ipv4Addr::from(u32::from(a) & (u32::MAX << (32 - b)))),
            8,
        ),
        IpAddr::V6(a) if b > 0 && b < 128 && b % 4 != 0 => (
            IpAddr::V6(std::net::Ipv6Addr::from(u128::from(a) & (u128::MAX << (128 - b)))),
            4,
        ),
        _ => return normalize_zone_or_cidr(text),
    };
    let zone = normalize_zone_or_cidr(&format!("{network}/{}", b.div_ceil(step) * step))?;
    tracing::warn!(from = text, zone = %zone, "forward: a CIDR that expands to several reverse zones: only the first is used (as in CoreDNS)");
    Ok(zone)
}

/// `d` as the Corefile writes a duration (`10s`, `1500ms`).
fn humantime(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn duration_arg(d: &Directive, opt: &Directive) -> Result<Duration, CorefileError> {
    let a = d.option_arg(opt)?;
    parse_duration(&a.text).ok_or_else(|| {
        d.error_at(
            a,
            format!(
                "{}: '{}' is not a duration (e.g. 2s, 500ms)",
                opt.name.text, a.text
            ),
        )
    })
}

/// Parses `forward FROM TO... { ... }`; `dir` is the Corefile's directory.
pub fn parse(d: &Directive, dir: &Path) -> Result<ForwardConfig, CorefileError> {
    let mut args = d.args();
    let from_tok = args.expect("the zone to forward (FROM) and at least one upstream (TO)")?;
    let from = from_zone(&from_tok.text).map_err(|m| d.error_at(from_tok, m))?;
    let to_tokens: Vec<Token> = args.remaining().to_vec();
    if to_tokens.is_empty() {
        return Err(d.error("expected at least one upstream after the zone"));
    }
    let mut c = ForwardConfig {
        from,
        to: Vec::new(),
        resolver: Vec::new(),
        doh_method: DohMethod::Post,
        max_age: None,
        max_idle_conns: None,
        next_on_nodata: false,
        except: Vec::new(),
        force_tcp: false,
        prefer_udp: false,
        max_fails: DEFAULT_MAX_FAILS,
        health_check: DEFAULT_HEALTH_CHECK,
        health_check_domain: ".".to_owned(),
        health_check_rd: true,
        expire: DEFAULT_EXPIRE,
        max_concurrent: Some(DEFAULT_MAX_CONCURRENT),
        policy: Policy::Random,
        read_timeout: DEFAULT_READ_TIMEOUT,
        failfast_all_unhealthy: false,
        tls: None,
        failover: Vec::new(),
        next: Vec::new(),
        source_address: None,
        max_connect_attempts: None,
    };
    let mut tls_line: Option<Token> = None;
    let mut max_age_line: Option<Token> = None;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "except" => {
                if opt.args.is_empty() {
                    return Err(d.error_at(&opt.name, "except needs at least one zone"));
                }
                for a in &opt.args {
                    c.except
                        .push(normalize_zone(&a.text).map_err(|m| d.error_at(a, m))?);
                }
            }
            "force_tcp" => {
                d.option_no_args(opt)?;
                c.force_tcp = true;
            }
            "prefer_udp" => {
                d.option_no_args(opt)?;
                c.prefer_udp = true;
            }
            "failfast_all_unhealthy_upstreams" => {
                d.option_no_args(opt)?;
                c.failfast_all_unhealthy = true;
            }
            "max_fails" => {
                let a = d.option_arg(opt)?;
                c.max_fails = a
                    .text
                    .parse()
                    .map_err(|_| d.error_at(a, format!("max_fails: '{}' is not a number", a.text)))?;
            }
            "failover" => {
                if opt.args.is_empty() {
                    return Err(d.error_at(&opt.name, "failover needs at least one rcode"));
                }
                for a in &opt.args {
                    let code = rcode_arg(d, opt, a)?;
                    if code == ResponseCode::NoError {
                        return Err(d.error_at(a, "failover: NOERROR cannot be used"));
                    }
                    c.failover.push(code);
                }
            }
            "next" => {
                if opt.args.is_empty() {
                    return Err(d.error_at(&opt.name, "next needs at least one rcode"));
                }
                for a in &opt.args {
                    c.next.push(rcode_arg(d, opt, a)?);
                }
            }
            "source_address" => {
                let a = d.option_arg(opt)?;
                c.source_address = Some(a.text.parse().map_err(|_| {
                    d.error_at(a, format!("source_address: '{}' is not an IP address", a.text))
                })?);
            }
            "max_connect_attempts" => {
                let a = d.option_arg(opt)?;
                c.max_connect_attempts = Some(a.text.parse().map_err(|_| {
                    d.error_at(a, format!("max_connect_attempts: '{}' is not a number", a.text))
                })?);
            }
            "max_concurrent" => {
                let a = d.option_arg(opt)?;
                let n: usize = a.text.parse().map_err(|_| {
                    d.error_at(
                        a,
                        format!("max_concurrent: '{}' is not a number (0 or more)", a.text),
                    )
                })?;
                // 0: no limit, as in CoreDNS.
                c.max_concurrent = (n > 0).then_some(n);
            }
            "health_check" => {
                let Some(a) = opt.args.first() else {
                    return Err(d.error_at(&opt.name, "health_check needs a duration"));
                };
                c.health_check = parse_duration(&a.text)
                    .ok_or_else(|| d.error_at(a, format!("health_check: '{}' is not a duration", a.text)))?;
                // `no_rec` and `domain NAME` change the probe (`NAME IN NS`, RD set unless
                // `no_rec`); any reply counts as healthy.
                let mut rest = opt.args.iter().skip(1);
                while let Some(x) = rest.next() {
                    match x.text.as_str() {
                        "no_rec" => c.health_check_rd = false,
                        "domain" => {
                            let n = rest
                                .next()
                                .ok_or_else(|| d.error_at(x, "health_check: domain needs a name"))?;
                            c.health_check_domain = normalize_zone(&n.text).map_err(|m| {
                                d.error_at(n, format!("health_check: invalid domain name: {m}"))
                            })?;
                        }
                        other => {
                            return Err(d.error_at(x, format!("health_check: unknown argument '{other}'")));
                        }
                    }
                }
            }
            "expire" => c.expire = duration_arg(d, opt)?,
            "read_timeout" => {
                c.read_timeout = duration_arg(d, opt)?;
                if c.read_timeout.is_zero() {
                    return Err(d.error_at(&opt.name, "read_timeout must be above 0"));
                }
            }
            "policy" => {
                let a = d.option_arg(opt)?;
                c.policy = match a.text.as_str() {
                    "random" => Policy::Random,
                    "round_robin" => Policy::RoundRobin,
                    "sequential" => Policy::Sequential,
                    other => {
                        return Err(d.error_at(
                            a,
                            format!("policy: '{other}' is not one of random, round_robin, sequential"),
                        ));
                    }
                };
            }
            "tls" => {
                let read = |t: &Token| {
                    let path = if Path::new(&t.text).is_absolute() {
                        Path::new(&t.text).to_path_buf()
                    } else {
                        dir.join(&t.text)
                    };
                    std::fs::read(&path)
                        .map_err(|e| d.error_at(t, format!("tls: cannot read {}: {e}", path.display())))
                };
                let settings = c.tls.get_or_insert_with(TlsSettings::default);
                match opt.args.as_slice() {
                    [] => {}
                    [ca] => settings.ca = Some(read(ca)?),
                    [cert, key] => settings.client = Some((read(cert)?, read(key)?)),
                    [cert, key, ca] => {
                        settings.client = Some((read(cert)?, read(key)?));
                        settings.ca = Some(read(ca)?);
                    }
                    _ => return Err(d.error_at(&opt.name, "tls takes [CERT KEY] [CA]: at most three files")),
                }
                client_config(settings).map_err(|e| d.error_at(&opt.name, format!("tls: {e}")))?;
                tls_line = Some(opt.name.clone());
            }
            "tls_servername" => {
                let name = d.option_arg(opt)?;
                if ServerName::try_from(name.text.clone()).is_err() {
                    return Err(
                        d.error_at(name, format!("tls_servername: '{}' is not a DNS name", name.text))
                    );
                }
                c.tls.get_or_insert_with(TlsSettings::default).server_name = Some(name.text.clone());
                tls_line = Some(opt.name.clone());
            }
            "next_on_nodata" => {
                d.option_no_args(opt)?;
                c.next_on_nodata = true;
            }
            "max_idle_conns" => {
                let a = d.option_arg(opt)?;
                let n: usize = a.text.parse().map_err(|_| {
                    d.error_at(
                        a,
                        format!("max_idle_conns: '{}' is not a number (0 or more)", a.text),
                    )
                })?;
                // 0: CoreDNS's "unlimited"; here each transport's own bound.
                c.max_idle_conns = (n > 0).then_some(n);
            }
            "max_age" => {
                let age = duration_arg(d, opt)?;
                c.max_age = (!age.is_zero()).then_some(age);
                max_age_line = Some(opt.name.clone());
            }
            "doh_method" => {
                let a = d.option_arg(opt)?;
                c.doh_method = match a.text.as_str() {
                    "POST" => DohMethod::Post,
                    "GET" => DohMethod::Get,
                    other => {
                        return Err(
                            d.error_at(a, format!("doh_method must be either POST or GET, not '{other}'"))
                        );
                    }
                };
            }
            "resolver" => {
                if opt.args.is_empty() {
                    return Err(d.error_at(&opt.name, "resolver needs at least one IP[:PORT]"));
                }
                for a in &opt.args {
                    c.resolver.push(parse_addr(&a.text).ok_or_else(|| {
                        d.error_at(
                            a,
                            format!("resolver must be an IP address or IP:port: '{}'", a.text),
                        )
                    })?);
                }
            }
            other => return Err(d.error_at(&opt.name, format!("unknown property '{other}'"))),
        }
    }
    // `force_tcp` with `prefer_udp`: `force_tcp` wins (CoreDNS's README), as the handler does.
    let mut to = Vec::new();
    for t in &to_tokens {
        to.extend(read_to(&t.text, dir, &c.resolver).map_err(|m| d.error_at(t, m))?);
    }
    c.to = dedup(to);
    if c.to.len() > MAX_UPSTREAMS {
        return Err(d.error(format!("at most {MAX_UPSTREAMS} upstreams, got {}", c.to.len())));
    }
    if let Some(age) = c.max_age
        && age < c.expire
        && let Some(line) = &max_age_line
    {
        return Err(d.error_at(
            line,
            format!(
                "max_age ({}) must not be less than expire ({})",
                humantime(age),
                humantime(c.expire)
            ),
        ));
    }
    // Per-upstream server names (`tls://IP%NAME`) and `tls_servername` clash (as in CoreDNS).
    if let Some(global) = c.tls.as_ref().and_then(|t| t.server_name.as_deref())
        && let Some(t) =
            c.to.iter()
                .find(|t| t.transport != Transport::Dns && t.server_name.is_some())
    {
        return Err(d.error(format!(
            "both forward ('{global}') and upstream level ('{}') TLS server names are set for upstream '{}://{}'; remove tls_servername or the %NAME",
            t.server_name.as_deref().unwrap_or_default(),
            t.transport.scheme(),
            t.addr
        )));
    }
    if let Some(line) = tls_line
        && c.to.iter().all(|t| t.transport == Transport::Dns)
    {
        // CoreDNS takes the TLS options with plain upstreams and does nothing with them.
        let warning = d.error_at(
            &line,
            format!(
                "{} has no effect: every upstream is plain DNS (write tls:// or https:// upstreams to use it)",
                line.text
            ),
        );
        tracing::warn!("{warning}");
    }
    if c.to.iter().any(|t| t.transport != Transport::Dns) {
        c.tls.get_or_insert_with(TlsSettings::default);
    }
    Ok(c)
}

/// The `forward` directives of one block, in the order written (CoreDNS allows several; each
/// one's `next` hands its listed rcodes to the following one).
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardBlock {
    /// One configuration per directive.
    pub configs: Vec<ForwardConfig>,
}

/// The `forward` directive's setup: each use in a block is added after the earlier ones.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    let mut configs = previous::<ForwardBlock>(ctx)
        .map(|p| p.configs.clone())
        .unwrap_or_default();
    configs.push(parse(d, ctx.dir)?);
    Ok(Arc::new(ForwardBlock { configs }))
}

impl Configured for ForwardBlock {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let families = ctx
            .metrics
            .and_then(|m| m.families::<super::ForwardMetrics>().ok());
        let taps: Vec<Arc<dyn crate::plugin::kit::Tap>> = ctx
            .capabilities
            .all::<crate::plugin::kit::TapSink>()
            .into_iter()
            .map(|s| s.0.clone())
            .collect();
        let share = ctx
            .capabilities
            .get::<crate::plugin::kit::FairShare>()
            .map(|s| (*s).clone());
        let mut forwards: Vec<super::Forward> = self
            .configs
            .iter()
            .map(|c| {
                let forward = super::Forward::new(c)
                    .with_taps(taps.clone())
                    .with_share(share.clone());
                match &families {
                    Some(f) => forward.with_metrics(f.clone(), ctx.server),
                    None => forward,
                }
            })
            .collect();
        match forwards.len() {
            1 => Built::Plugin(Arc::new(forwards.remove(0))),
            _ => Built::Plugin(Arc::new(super::Forwards::new(forwards))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;

    fn parse_text(text: &str, dir: &Path) -> Result<ForwardConfig, CorefileError> {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{text}\n}}\n"), &dir.join("Corefile")).unwrap();
        parse(&cf.blocks[0].directives[0], dir)
    }

    #[test]
    fn addresses_and_defaults() {
        let c = parse_text(
            "forward . 1.1.1.1 127.0.0.1:5300 [::1]:54 dns://9.9.9.9 ::2",
            Path::new("/"),
        )
        .unwrap();
        let to: Vec<String> = c.to.iter().map(ToString::to_string).collect();
        assert_eq!(
            to,
            [
                "1.1.1.1:53",
                "127.0.0.1:5300",
                "[::1]:54",
                "9.9.9.9:53",
                "[::2]:53"
            ]
        );
        assert_eq!(c.from, ".");
        assert_eq!(
            (c.max_fails, c.policy, c.max_concurrent),
            (2, Policy::Random, Some(DEFAULT_MAX_CONCURRENT))
        );
        assert_eq!(c.read_timeout, Duration::from_secs(2));
    }

    #[test]
    fn resolv_conf_files() {
        let dir = std::env::temp_dir().join(format!("cluster-dns-fwd-setup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("resolv.conf"),
            "# comment\nsearch a.b\nnameserver 10.0.0.1\nnameserver fe80::1%eth0\noptions ndots:5\nnameserver bogus\n",
        )
        .unwrap();
        let c = parse_text("forward . resolv.conf {\n max_concurrent 1000\n}", &dir).unwrap();
        let to: Vec<String> = c.to.iter().map(ToString::to_string).collect();
        assert_eq!(to, ["10.0.0.1:53", "[fe80::1]:53"]);
        assert_eq!(c.max_concurrent, Some(1000));
        std::fs::write(dir.join("empty.conf"), "search x\n").unwrap();
        let e = parse_text("forward . empty.conf", &dir).unwrap_err().to_string();
        assert!(e.contains("no 'nameserver'"), "{e}");
        let many: String = (1..=20).map(|i| format!("nameserver 10.0.0.{i}\n")).collect();
        assert_eq!(parse_resolv_conf(&many).len(), 15);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn options_and_mistakes() {
        let c = parse_text(
            "forward example.org 127.0.0.1 {\n except a.example.org\n force_tcp\n max_fails 3\n health_check 1s no_rec\n expire 5s\n policy sequential\n read_timeout 500ms\n}",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.from, "example.org.");
        assert_eq!(c.except, ["a.example.org."]);
        assert!(c.force_tcp);
        assert_eq!((c.max_fails, c.policy), (3, Policy::Sequential));
        assert_eq!(c.read_timeout, Duration::from_millis(500));
        assert_eq!((c.failover.clone(), c.max_connect_attempts), (vec![], None));
        let c = parse_text(
            "forward . 1.1.1.1 {\n failover servfail REFUSED\n max_connect_attempts 0\n next nxdomain\n}",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.failover, [ResponseCode::ServFail, ResponseCode::Refused]);
        assert_eq!(c.max_connect_attempts, Some(0));
        assert_eq!(c.next, [ResponseCode::NXDomain]);
        let c = parse_text(
            "forward . 1.1.1.1 {\n source_address 127.0.0.2\n}",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.source_address, Some(IpAddr::from([127, 0, 0, 2])));
        // CoreDNS 1.14.7 takes these: tls options beside plain upstreams (unused there), plain
        // and tls:// upstreams mixed, force_tcp with prefer_udp (force_tcp wins), 0 as "no
        // limit".
        let c = parse_text(
            "forward . 1.1.1.1 tls://1.0.0.1%one.example:8853 https://9.9.9.9 {\n tls\n force_tcp\n prefer_udp\n max_concurrent 0\n max_idle_conns 0\n max_age 0s\n next_on_nodata\n}",
            Path::new("/"),
        )
        .unwrap();
        let kinds: Vec<_> = c.to.iter().map(|t| (t.addr.to_string(), t.transport)).collect();
        assert_eq!(
            kinds,
            [
                ("1.1.1.1:53".to_owned(), Transport::Dns),
                ("1.0.0.1:8853".to_owned(), Transport::Tls),
                ("9.9.9.9:443".to_owned(), Transport::Https)
            ]
        );
        assert_eq!(c.to[1].server_name.as_deref(), Some("one.example"));
        assert_eq!(
            (c.max_concurrent, c.max_idle_conns, c.max_age),
            (None, None, None)
        );
        assert!(c.next_on_nodata && c.force_tcp && c.prefer_udp);
        let c = parse_text(
            "forward . 1.1.1.1 {\n tls_servername dns.example\n max_idle_conns 3\n expire 2s\n max_age 1m\n}",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.max_idle_conns, Some(3));
        assert_eq!(c.max_age, Some(Duration::from_secs(60)));
        for (from, zone) in [
            ("10.0.0.0/8", "10.in-addr.arpa."),
            ("10.0.0.0/12", "0.10.in-addr.arpa."),
            ("fd00::/6", "c.f.ip6.arpa."),
            ("10.20.0.0/12", "16.10.in-addr.arpa."),
        ] {
            let c = parse_text(&format!("forward {from} 1.1.1.1"), Path::new("/")).unwrap();
            assert_eq!(c.from, zone, "{from}");
        }
        let c = parse_text(
            "forward . 1.1.1.1 {\n health_check 1s no_rec domain Example.ORG\n}",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(
            (c.health_check_domain.as_str(), c.health_check_rd),
            ("example.org.", false)
        );

        for (text, want) in [
            ("forward .", "at least one upstream"),
            ("forward . no..such", "neither an IP"),
            ("forward . 1.1.1.1 {\n policy fastest\n}", "Corefile:3"),
            ("forward . 1.1.1.1 {\n bogus\n}", "unknown property 'bogus'"),
            ("forward . 1.1.1.1 {\n max_concurrent -1\n}", "0 or more"),
            ("forward . 1.1.1.1 {\n max_idle_conns -1\n}", "0 or more"),
            (
                "forward . 1.1.1.1 {\n max_age 5s\n}",
                "max_age (5s) must not be less than expire (10s)",
            ),
            ("forward . 1.1.1.1 {\n next_on_nodata 1\n}", "Corefile:3"),
            (
                "forward . tls://1.1.1.1%one.example tls://1.0.0.1 {\n tls_servername two.example\n}",
                "both forward ('two.example') and upstream level ('one.example')",
            ),
            (
                "forward . https://1.1.1.1 {\n doh_method PUT\n}",
                "either POST or GET",
            ),
            ("forward . 1.1.1.1 {\n failover\n}", "Corefile:3"),
            ("forward . 1.1.1.1 {\n failover SERVFAIL BOGUS\n}", "Corefile:3"),
            ("forward . 1.1.1.1 {\n failover NOERROR\n}", "NOERROR cannot"),
            ("forward . 1.1.1.1 {\n next\n}", "Corefile:3"),
            ("forward . 1.1.1.1 {\n source_address 10.0.0.300\n}", "Corefile:3"),
            ("forward . 1.1.1.1 {\n source_address\n}", "exactly one"),
            (
                "forward . 1.1.1.1 {\n next NXDOMAIN NODOMAIN\n}",
                "'NODOMAIN' is not a valid rcode",
            ),
            ("forward . 1.1.1.1 {\n max_connect_attempts -1\n}", "Corefile:3"),
            ("forward . 1.1.1.1 {\n max_connect_attempts\n}", "exactly one"),
        ] {
            let e = parse_text(text, Path::new("/")).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
