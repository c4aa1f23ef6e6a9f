//! node-cache's command line (kubernetes/dns `cmd/node-cache`), with its defaults and meaning:
//! Go `flag` syntax (`-name value`, `-name=value`, `--name`; booleans are `-name` or
//! `-name=false`), plus cluster-dns's own `-rules-backend`, `-instance-dir` and `-log-format`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::logging::LogFormat;

/// The flags only node-cache has: one of them on the command line selects node-cache mode.
pub const NODECACHE_FLAGS: &[&str] = &[
    "localip",
    "basecorefile",
    "corefile",
    "upstreamsvc",
    "kubednscm",
    "setupinterface",
    "setupiptables",
    "interfacename",
    "syncinterval",
    "initialdelay",
    "health-port",
    "metrics-listen-address",
    "skipteardown",
    "reloadwithsignal",
    "rules-backend",
    "instance-dir",
];

/// Where the NOTRACK/ACCEPT rules go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RulesBackend {
    /// nftables when kube-proxy runs in nftables mode or no iptables program exists, else
    /// iptables.
    Auto,
    /// `iptables`/`ip6tables` (legacy or nft backend: whichever the programs are).
    Iptables,
    /// A table of cluster-dns's own, `inet cluster-dns-nodelocal`.
    Nftables,
}

/// node-cache's settings.
#[derive(Debug, Clone)]
pub struct Params {
    /// `-localip`: the addresses to serve on (one family), as given.
    pub local_ips: Vec<IpAddr>,
    /// `-dns.port` (53).
    pub dns_port: u16,
    /// `-setupinterface` (true).
    pub setup_interface: bool,
    /// `-setupiptables` (true): the rules, whichever the backend.
    pub setup_rules: bool,
    /// `-interfacename` (`nodelocaldns`).
    pub interface: String,
    /// `-syncinterval` (60 s; a bare number is seconds, as node-cache reads it).
    pub sync_interval: Duration,
    /// `-initialdelay` (0): the wait before the rules go in, once DNS is served.
    pub initial_delay: Duration,
    /// `-metrics-listen-address` (`0.0.0.0:9353`); empty turns it off.
    pub metrics_listen: Option<SocketAddr>,
    /// `-basecorefile` (`/etc/coredns/Corefile.base`).
    pub base_corefile: PathBuf,
    /// `-corefile` or `-conf` (`/etc/Corefile`): where the rendered Corefile is written.
    pub corefile: PathBuf,
    /// `-kubednscm`: the kube-dns ConfigMap's folder (`/etc/kube-dns` when it exists).
    pub kubedns_cm: Option<PathBuf>,
    /// `-upstreamsvc` (`kube-dns`): the Service whose `<NAME>_SERVICE_HOST` is the cluster DNS.
    pub upstream_svc: String,
    /// `-health-port` (8080): the health listener's port, whose probes skip conntrack too.
    pub health_port: u16,
    /// `-skipteardown` (false).
    pub skip_teardown: bool,
    /// `-pidfile`: written once DNS is served.
    pub pidfile: Option<PathBuf>,
    /// `-rules-backend` (auto).
    pub rules_backend: RulesBackend,
    /// `-instance-dir` (`/run/cluster-dns-nodelocal`): the instances of this node register here.
    pub instance_dir: PathBuf,
    /// `-log-format`.
    pub log_format: LogFormat,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            local_ips: Vec::new(),
            dns_port: 53,
            setup_interface: true,
            setup_rules: true,
            interface: "nodelocaldns".to_owned(),
            sync_interval: Duration::from_secs(60),
            initial_delay: Duration::ZERO,
            metrics_listen: Some(SocketAddr::from(([0, 0, 0, 0], 9353))),
            base_corefile: PathBuf::from("/etc/coredns/Corefile.base"),
            corefile: PathBuf::from("/etc/Corefile"),
            kubedns_cm: None,
            upstream_svc: "kube-dns".to_owned(),
            health_port: 8080,
            skip_teardown: false,
            pidfile: None,
            rules_backend: RulesBackend::Auto,
            instance_dir: PathBuf::from("/run/cluster-dns-nodelocal"),
            log_format: LogFormat::default(),
        }
    }
}

/// True when `args` (without the program name) name a node-cache-only flag.
pub fn wanted(args: &[String]) -> bool {
    args.iter().any(|a| {
        let flag = a.split('=').next().unwrap_or("");
        flag.starts_with('-') && NODECACHE_FLAGS.contains(&flag.trim_start_matches('-'))
    })
}

/// A Go duration (`60s`, `1m30s`, `500ms`) or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let bad = || format!("'{s}' is not a duration (60, 60s, 1m, 500ms)");
    let mut total = Duration::ZERO;
    let mut rest = s;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(bad)?;
        let n: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += Duration::from_secs_f64(n * unit);
    }
    Ok(total)
}

fn parse_bool(flag: &str, v: &str) -> Result<bool, String> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{flag}: '{v}' is not a boolean")),
    }
}

/// Parses node-cache's command line (without the program name).
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Params, String> {
    let mut p = Params::default();
    let mut local_ips = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let name = flag.trim_start_matches('-');
        if !flag.starts_with('-') || name.is_empty() || flag.starts_with("---") {
            return Err(format!("unexpected argument '{arg}'"));
        }
        let mut value = || -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => args.next().ok_or_else(|| format!("{flag} needs a value")),
            }
        };
        let boolean = |inline: &Option<String>| match inline {
            Some(v) => parse_bool(&flag, v),
            None => Ok(true),
        };
        let port = |v: String| -> Result<u16, String> {
            v.parse()
                .map_err(|_| format!("{flag}: '{v}' is not a port (0-65535)"))
        };
        match name {
            "localip" => local_ips = Some(value()?),
            "dns.port" => p.dns_port = port(value()?)?,
            "health-port" => p.health_port = port(value()?)?,
            "setupinterface" => p.setup_interface = boolean(&inline)?,
            "setupiptables" => p.setup_rules = boolean(&inline)?,
            "skipteardown" => p.skip_teardown = boolean(&inline)?,
            "reloadwithsignal" => {
                // The rendered Corefile is always applied in-process; accepted for compatibility.
                boolean(&inline)?;
            }
            "interfacename" => {
                let v = value()?;
                if v.is_empty() || v.len() > 15 || v.contains(['/', ' ']) {
                    return Err(format!(
                        "{flag}: '{v}' is not an interface name (1-15 characters)"
                    ));
                }
                p.interface = v;
            }
            "syncinterval" => {
                p.sync_interval = parse_duration(&value()?).map_err(|e| format!("{flag}: {e}"))?;
                if p.sync_interval.is_zero() {
                    return Err(format!("{flag} must be more than 0"));
                }
            }
            "initialdelay" => {
                p.initial_delay = parse_duration(&value()?).map_err(|e| format!("{flag}: {e}"))?
            }
            "metrics-listen-address" => {
                let v = value()?;
                p.metrics_listen = if v.is_empty() {
                    None
                } else {
                    Some(crate::corefile::parse_http_addr(&v).map_err(|e| format!("{flag}: {e}"))?)
                };
            }
            "basecorefile" => p.base_corefile = PathBuf::from(value()?),
            "corefile" | "conf" => p.corefile = PathBuf::from(value()?),
            "kubednscm" => {
                let v = value()?;
                p.kubedns_cm = (!v.is_empty()).then(|| PathBuf::from(v));
            }
            "upstreamsvc" => p.upstream_svc = value()?,
            "pidfile" => {
                let v = value()?;
                p.pidfile = (!v.is_empty()).then(|| PathBuf::from(v));
            }
            "rules-backend" => {
                p.rules_backend = match value()?.as_str() {
                    "auto" => RulesBackend::Auto,
                    "iptables" => RulesBackend::Iptables,
                    "nftables" | "nft" => RulesBackend::Nftables,
                    v => return Err(format!("{flag}: '{v}' is not auto, iptables or nftables")),
                }
            }
            "instance-dir" => p.instance_dir = PathBuf::from(value()?),
            "log-format" => {
                p.log_format = value()?.parse().map_err(|e| format!("{flag}: {e}"))?;
            }
            _ => return Err(format!("unknown flag '{flag}' in node-cache mode")),
        }
    }
    let local_ips = local_ips.ok_or("-localip is required in node-cache mode")?;
    for s in local_ips.split(',') {
        let ip: IpAddr = s
            .trim()
            .parse()
            .map_err(|_| format!("invalid localip specified - '{s}'"))?;
        if let Some(first) = p.local_ips.first()
            && first.is_ipv6() != ip.is_ipv6()
        {
            return Err(format!(
                "unexpected IP family for localip '{ip}': every -localip address is of one family"
            ));
        }
        p.local_ips.push(ip);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Params, String> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn the_daemonset_command_line() {
        let p = parse_str(&[
            "-localip",
            "169.254.20.10,10.96.0.10",
            "-conf",
            "/etc/Corefile",
            "-upstreamsvc",
            "kube-dns-upstream",
        ])
        .unwrap();
        assert_eq!(p.local_ips.len(), 2);
        assert_eq!(p.corefile, PathBuf::from("/etc/Corefile"));
        assert_eq!(p.base_corefile, PathBuf::from("/etc/coredns/Corefile.base"));
        assert_eq!(p.upstream_svc, "kube-dns-upstream");
        assert_eq!(p.sync_interval, Duration::from_secs(60));
        assert!(p.setup_interface && p.setup_rules && !p.skip_teardown);
        assert_eq!(p.interface, "nodelocaldns");
        assert_eq!(p.health_port, 8080);
        assert!(wanted(&["-localip".into(), "x".into()]));
        assert!(wanted(&["--skipteardown=true".into()]));
        assert!(!wanted(&["-conf".into(), "x".into()]));
    }

    #[test]
    fn booleans_durations_and_errors() {
        let p = parse_str(&[
            "-localip=169.254.20.10",
            "-setupiptables=false",
            "-skipteardown",
            "-syncinterval",
            "2s",
            "-initialdelay=1",
            "-metrics-listen-address=",
            "-rules-backend",
            "nftables",
        ])
        .unwrap();
        assert!(!p.setup_rules && p.skip_teardown);
        assert_eq!(p.sync_interval, Duration::from_secs(2));
        assert_eq!(p.initial_delay, Duration::from_secs(1));
        assert!(p.metrics_listen.is_none());
        assert_eq!(p.rules_backend, RulesBackend::Nftables);
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_str(&[]).unwrap_err().contains("-localip is required"));
        assert!(
            parse_str(&["-localip", "1.2.3.4,::1"])
                .unwrap_err()
                .contains("family")
        );
        assert!(
            parse_str(&["-localip", "nope"])
                .unwrap_err()
                .contains("invalid localip")
        );
        assert!(
            parse_str(&["-localip", "1.2.3.4", "-setupiptables=maybe"])
                .unwrap_err()
                .contains("not a boolean")
        );
        assert!(
            parse_str(&["-localip", "1.2.3.4", "-frob"])
                .unwrap_err()
                .contains("unknown flag")
        );
        assert!(parse_str(&["-localip", "1.2.3.4", "-syncinterval", "0"]).is_err());
    }
}
