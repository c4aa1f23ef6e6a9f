//! The `forward` directive's Corefile syntax, parsed into a [`ForwardConfig`] with CoreDNS's
//! options and defaults, and the upstream list: addresses (`IP`, `IP:PORT`, `[IPv6]:PORT`,
//! `dns://IP[:PORT]`) or resolv.conf-style files whose `nameserver` lines name them.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use tokio_rustls::rustls::pki_types::ServerName;

use super::tls::{DOT_PORT, TlsSettings, client_config};
use crate::chain::{BuildCtx, Built, Configured, SetupCtx, previous};
use crate::corefile::{CorefileError, Directive, Token, normalize_zone, parse_duration};
use crate::telemetry::rcode_label;
use std::sync::Arc;

/// Most upstreams one `forward` takes (CoreDNS's limit, and resolv.conf's practical one).
pub const MAX_UPSTREAMS: usize = 15;
/// Default per-attempt read timeout (CoreDNS: 2 s).
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Default health-check interval while an upstream is down (CoreDNS: 0.5 s).
pub const DEFAULT_HEALTH_CHECK: Duration = Duration::from_millis(500);
/// Default consecutive failures before an upstream is marked down (CoreDNS: 2).
pub const DEFAULT_MAX_FAILS: u32 = 2;
/// Default connection expiry: how long an idle DNS-over-TLS connection is kept for reuse, and
/// how long a UDP socket is reused from its opening.
pub const DEFAULT_EXPIRE: Duration = Duration::from_secs(10);

/// How the next upstream is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// A random order per query (the default).
    #[default]
    Random,
    /// Rotate the starting upstream per query.
    RoundRobin,
    /// Always in the order written.
    Sequential,
}

/// The `forward` plugin's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardConfig {
    /// The zone forwarded (normalized); `.` for everything.
    pub from: String,
    /// The upstreams, in the order written (files expanded in place).
    pub to: Vec<SocketAddr>,
    /// `except ZONES...`: names in these zones are not forwarded.
    pub except: Vec<String>,
    /// `force_tcp`.
    pub force_tcp: bool,
    /// `prefer_udp`: UDP even when the client asked over TCP.
    pub prefer_udp: bool,
    /// `max_fails N` (0: never marked down).
    pub max_fails: u32,
    /// `health_check DURATION` (0: no checks, never marked down).
    pub health_check: Duration,
    /// `expire DURATION` (accepted, see [`DEFAULT_EXPIRE`]).
    pub expire: Duration,
    /// `max_concurrent N`: queries in flight above this get REFUSED.
    pub max_concurrent: Option<usize>,
    /// `policy`.
    pub policy: Policy,
    /// `read_timeout DURATION`: per-attempt timeout (default 2 s).
    pub read_timeout: Duration,
    /// `failfast_all_unhealthy_upstreams`: SERVFAIL at once when every upstream is down.
    pub failfast_all_unhealthy: bool,
    /// DNS over TLS (`tls://` upstreams): its settings; `None` for plain DNS.
    pub tls: Option<TlsSettings>,
    /// `failover RCODE...`: a reply with one of these rcodes sends the question to the next
    /// upstream (never NOERROR); when every upstream answered so, the last reply is returned.
    pub failover: Vec<ResponseCode>,
    /// `next RCODE...`: an upstream reply with one of these rcodes goes instead to the block's
    /// next `forward` (ignored when this is its last).
    pub next: Vec<ResponseCode>,
    /// `source_address IP`: the local address outgoing sockets (health probes too) are bound to.
    pub source_address: Option<IpAddr>,
    /// `max_connect_attempts N`: failed attempts after which the question gets SERVFAIL;
    /// `None` (not written) is twice the number of upstreams, `Some(0)` no cap.
    pub max_connect_attempts: Option<u32>,
}

/// The rcode named `t` (CoreDNS's names, any case: `NXDOMAIN`, `SERVFAIL`, `REFUSED`, ...).
fn rcode_arg(d: &Directive, opt: &Directive, t: &Token) -> Result<ResponseCode, CorefileError> {
    let wanted = t.text.to_ascii_uppercase();
    (0..=23u16)
        .map(<ResponseCode as From<u16>>::from)
        .find(|r| rcode_label(*r) == wanted)
        .ok_or_else(|| d.error_at(t, format!("{}: '{}' is not a valid rcode", opt.name.text, t.text)))
}

/// Parses one upstream token; files are read relative to `dir` when not absolute.
fn upstreams_of(d: &Directive, t: &Token, dir: &Path) -> Result<Vec<SocketAddr>, CorefileError> {
    let text = t.text.as_str();
    if text.starts_with("https://") || text.starts_with("grpc://") {
        return Err(d.error_at(
            t,
            format!("'{text}': only plain DNS and DNS over TLS (tls://) upstreams are supported"),
        ));
    }
    if let Some(bare) = text.strip_prefix("tls://") {
        let addr = parse_addr_or(bare, DOT_PORT)
            .ok_or_else(|| d.error_at(t, format!("'{text}': expected tls://IP or tls://IP:PORT")))?;
        return Ok(vec![addr]);
    }
    let bare = text.strip_prefix("dns://").unwrap_or(text);
    if let Some(addr) = parse_addr(bare) {
        return Ok(vec![addr]);
    }
    let path = if Path::new(bare).is_absolute() {
        Path::new(bare).to_path_buf()
    } else {
        dir.join(bare)
    };
    if text.starts_with("dns://") || !(bare.contains('/') || path.exists()) {
        return Err(d.error_at(
            t,
            format!("'{text}' is neither an IP address (IP, IP:PORT, [IPv6]:PORT) nor an existing file"),
        ));
    }
    let content = std::fs::read_to_string(&path)
        .map_err(|e| d.error_at(t, format!("cannot read {}: {e}", path.display())))?;
    let found = parse_resolv_conf(&content);
    if found.is_empty() {
        return Err(d.error_at(t, format!("{} has no 'nameserver' line", path.display())));
    }
    Ok(found)
}

/// An upstream address: `IP`, `IP:PORT`, `[IPv6]:PORT`, `[IPv6]`; port 53 by default.
pub fn parse_addr(s: &str) -> Option<SocketAddr> {
    parse_addr_or(s, 53)
}

/// [`parse_addr`] with `port` when the text names none (853 for `tls://`).
fn parse_addr_or(s: &str, port: u16) -> Option<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Some(a);
    }
    let ip = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')).unwrap_or(s);
    ip.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, port))
}

/// The `nameserver` addresses of a resolv.conf (port 53, at most [`MAX_UPSTREAMS`]); every
/// other line is ignored. IPv6 zone suffixes (`%eth0`) are dropped.
pub fn parse_resolv_conf(content: &str) -> Vec<SocketAddr> {
    content
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == "nameserver").then_some(())?;
            let ip = words.next()?;
            let ip = ip.split('%').next().unwrap_or(ip);
            ip.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53))
        })
        .take(MAX_UPSTREAMS)
        .collect()
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
    let from = normalize_zone(&from_tok.text).map_err(|m| d.error_at(from_tok, m))?;
    let mut to = Vec::new();
    let mut schemes = (0, 0);
    for t in args.remaining() {
        if t.text.starts_with("tls://") {
            schemes.0 += 1;
        } else {
            schemes.1 += 1;
        }
        to.extend(upstreams_of(d, t, dir)?);
    }
    if schemes.0 > 0 && schemes.1 > 0 {
        return Err(d.error("upstreams must all be tls:// or all plain DNS, not both"));
    }
    if to.is_empty() {
        return Err(d.error("expected at least one upstream after the zone"));
    }
    if to.len() > MAX_UPSTREAMS {
        return Err(d.error(format!("at most {MAX_UPSTREAMS} upstreams, got {}", to.len())));
    }
    let mut c = ForwardConfig {
        from,
        to,
        except: Vec::new(),
        force_tcp: false,
        prefer_udp: false,
        max_fails: DEFAULT_MAX_FAILS,
        health_check: DEFAULT_HEALTH_CHECK,
        expire: DEFAULT_EXPIRE,
        max_concurrent: None,
        policy: Policy::Random,
        read_timeout: DEFAULT_READ_TIMEOUT,
        failfast_all_unhealthy: false,
        tls: (schemes.0 > 0).then(TlsSettings::default),
        failover: Vec::new(),
        next: Vec::new(),
        source_address: None,
        max_connect_attempts: None,
    };
    let mut tls_line: Option<Token> = None;
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
                        format!("max_concurrent: '{}' is not a positive number", a.text),
                    )
                })?;
                if n == 0 {
                    return Err(d.error_at(a, "max_concurrent must be at least 1"));
                }
                c.max_concurrent = Some(n);
            }
            "health_check" => {
                let Some(a) = opt.args.first() else {
                    return Err(d.error_at(&opt.name, "health_check needs a duration"));
                };
                c.health_check = parse_duration(&a.text)
                    .ok_or_else(|| d.error_at(a, format!("health_check: '{}' is not a duration", a.text)))?;
                // `no_rec` and `domain NAME` change the probe CoreDNS sends; any reply counts
                // as healthy here, so they are accepted and have no effect.
                let mut rest = opt.args.iter().skip(1);
                while let Some(x) = rest.next() {
                    match x.text.as_str() {
                        "no_rec" => {}
                        "domain" => {
                            rest.next()
                                .ok_or_else(|| d.error_at(x, "health_check: domain needs a name"))?;
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
            other => return Err(d.error_at(&opt.name, format!("unknown property '{other}'"))),
        }
    }
    if c.force_tcp && c.prefer_udp {
        return Err(d.error("force_tcp and prefer_udp cannot both be set"));
    }
    if let Some(line) = tls_line
        && schemes.0 == 0
    {
        return Err(d.error_at(
            &line,
            format!(
                "{}: the upstreams are plain DNS; write them as tls://ADDR",
                line.text
            ),
        ));
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
        let taps: Vec<Arc<dyn crate::chain::Tap>> = ctx
            .capabilities
            .all::<crate::chain::TapSink>()
            .into_iter()
            .map(|s| s.0.clone())
            .collect();
        let mut forwards: Vec<super::Forward> = self
            .configs
            .iter()
            .map(|c| {
                let forward = super::Forward::new(c).with_taps(taps.clone());
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
            (2, Policy::Random, None)
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
        for (text, want) in [
            ("forward .", "at least one upstream"),
            ("forward . nosuchthing", "neither an IP"),
            ("forward . 1.1.1.1 {\n policy fastest\n}", "Corefile:3"),
            ("forward . 1.1.1.1 {\n bogus\n}", "unknown property 'bogus'"),
            ("forward . 1.1.1.1 {\n max_concurrent 0\n}", "at least 1"),
            ("forward . https://1.1.1.1", "plain DNS and DNS over TLS"),
            ("forward . 1.1.1.1 {\n force_tcp\n prefer_udp\n}", "cannot both"),
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
