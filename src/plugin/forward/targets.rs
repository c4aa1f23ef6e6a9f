//! The `forward` directive's TO arguments, each read into one or more [`To`]s: an address
//! (`IP`, `IP:PORT`, `[IPv6]:PORT`), a resolv.conf-style file, or a hostname resolved once at
//! start (with `resolver IP[:PORT]...` when given, else the system resolver: /etc/hosts and
//! /etc/resolv.conf), each with its transport (`dns://` or none, `tls://`, `https://`), a
//! per-upstream TLS server name (`tls://IP%NAME[:PORT]`) and, for DNS over HTTPS, the URL path.
//! Addresses met twice are kept once, the first time (as CoreDNS does).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RData, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};

use super::tls::DOT_PORT;

/// Most upstreams one `forward` takes (CoreDNS's limit, and resolv.conf's practical one).
pub const MAX_UPSTREAMS: usize = 15;
/// The default port of plain DNS.
pub const DNS_PORT: u16 = 53;
/// The default DNS-over-HTTPS port.
pub const DOH_PORT: u16 = 443;
/// The DNS-over-HTTPS path when the URL gives none (RFC 8484's example, CoreDNS's only one).
pub const DOH_PATH: &str = "/dns-query";
/// How long a `resolver` has to answer each of the A and AAAA questions (CoreDNS: 2 s).
pub const RESOLVER_TIMEOUT: Duration = Duration::from_secs(2);
/// Most datagrams read while waiting for one resolver reply (a bound on the loop).
const MAX_DATAGRAMS: usize = 32;

/// How an upstream is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Plain DNS, UDP or TCP (`dns://` or no scheme).
    Dns,
    /// DNS over TLS (`tls://`, RFC 7858).
    Tls,
    /// DNS over HTTPS (`https://`, RFC 8484), HTTP/2.
    Https,
}

impl Transport {
    /// Its scheme as written in a TO.
    pub fn scheme(self) -> &'static str {
        match self {
            Transport::Dns => "dns",
            Transport::Tls => "tls",
            Transport::Https => "https",
        }
    }
}

/// One upstream as the Corefile named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct To {
    /// Its address.
    pub addr: SocketAddr,
    /// How it is reached.
    pub transport: Transport,
    /// `tls://IP%NAME`: the name its certificate must carry (clashes with `tls_servername`).
    pub server_name: Option<String>,
    /// The hostname it was resolved from, if written as one: the name its certificate must
    /// carry when neither `%NAME` nor `tls_servername` says otherwise.
    pub hostname: Option<String>,
    /// DNS over HTTPS: the URL's path (and query), [`DOH_PATH`] when it gives none.
    pub path: String,
}

impl std::fmt::Display for To {
    /// `IP:PORT`, as the `to` label shows it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.addr.fmt(f)
    }
}

/// An address: `IP`, `IP:PORT`, `[IPv6]:PORT`, `[IPv6]`; `port` when the text names none.
pub fn parse_addr_or(s: &str, port: u16) -> Option<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Some(a);
    }
    let ip = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')).unwrap_or(s);
    ip.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, port))
}

/// `text` without its `%NAME` part, and that name: `IP%NAME:PORT` is `IP:PORT` and `NAME`,
/// `[IPv6%NAME]:PORT` and `[IPv6]%NAME:PORT` are `[IPv6]:PORT` and `NAME` (CoreDNS's forms).
fn split_server_name(text: &str) -> (String, Option<String>) {
    let Some((host, rest)) = text.rsplit_once('%') else {
        return (text.to_owned(), None);
    };
    let mut host = host.to_owned();
    if host.starts_with('[') && !host.ends_with(']') {
        host.push(']');
    }
    let (name, port) = match rest.rsplit_once(':') {
        Some((n, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (n, Some(p)),
        _ => (rest, None),
    };
    let name = name.trim_end_matches(']');
    if let Some(p) = port {
        host = format!("{host}:{p}");
    }
    (host, Some(name.to_owned()))
}

/// The scheme of `text` and the rest; an error names a scheme `forward` does not take.
fn scheme_of(text: &str) -> Result<(Transport, &str), String> {
    if let Some(rest) = text.strip_prefix("tls://") {
        return Ok((Transport::Tls, rest));
    }
    if let Some(rest) = text.strip_prefix("https://") {
        return Ok((Transport::Https, rest));
    }
    if let Some(rest) = text.strip_prefix("dns://") {
        return Ok((Transport::Dns, rest));
    }
    if let Some((scheme, _)) = text.split_once("://") {
        return Err(format!(
            "'{scheme}' is not supported as a destination protocol in forward (dns://, tls:// and https:// are): {text}"
        ));
    }
    Ok((Transport::Dns, text))
}

/// A hostname and port from `hostport` (`NAME`, `NAME:PORT`), `None` when it is not a valid
/// DNS name (or is an address).
fn hostname_of(hostport: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok()?),
        None => (hostport, default_port),
    };
    let host = host.trim_end_matches('.');
    let valid = !host.is_empty()
        && host.parse::<IpAddr>().is_err()
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        && host.bytes().any(|b| b.is_ascii_alphabetic())
        && Name::from_ascii(host).is_ok();
    valid.then(|| (host.to_ascii_lowercase(), port))
}

/// One TO argument read into its upstreams; `dir` is the Corefile's folder (for files),
/// `resolvers` the `resolver` option's addresses. The error is the message, without the line.
pub fn read_to(text: &str, dir: &Path, resolvers: &[SocketAddr]) -> Result<Vec<To>, String> {
    let (transport, rest) = scheme_of(text)?;
    let (rest, path) = match transport {
        Transport::Https => match rest.find(['/', '?']) {
            Some(i) => {
                let (a, p) = rest.split_at(i);
                let p = if p.starts_with('?') {
                    format!("{DOH_PATH}{p}")
                } else {
                    p.to_owned()
                };
                (a, p)
            }
            None => (rest, DOH_PATH.to_owned()),
        },
        _ => (rest, String::new()),
    };
    let (hostport, server_name) = split_server_name(rest);
    if let Some(name) = &server_name
        && tokio_rustls::rustls::pki_types::ServerName::try_from(name.as_str()).is_err()
    {
        return Err(format!(
            "'{text}': the server name after '%' ('{name}') is not a DNS name"
        ));
    }
    let port = match transport {
        Transport::Dns => DNS_PORT,
        Transport::Tls => DOT_PORT,
        Transport::Https => DOH_PORT,
    };
    let one = |addr: SocketAddr, hostname: Option<String>| To {
        addr,
        transport,
        server_name: server_name.clone(),
        hostname,
        path: path.clone(),
    };
    if let Some(addr) = parse_addr_or(&hostport, port) {
        return Ok(vec![one(addr, None)]);
    }
    if transport == Transport::Dns {
        let file = if Path::new(&hostport).is_absolute() {
            Path::new(&hostport).to_path_buf()
        } else {
            dir.join(&hostport)
        };
        if hostport.contains('/') || file.is_file() {
            let content =
                std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let found = parse_resolv_conf(&content);
            if found.is_empty() {
                return Err(format!("{} has no 'nameserver' line", file.display()));
            }
            return Ok(found.into_iter().map(|a| one(a, None)).collect());
        }
    }
    let Some((host, port)) = hostname_of(&hostport, port) else {
        return Err(format!(
            "'{text}' is neither an IP address (IP, IP:PORT, [IPv6]:PORT), an existing file nor a hostname"
        ));
    };
    let ips = resolve(&host, resolvers).map_err(|e| {
        let hint = if transport == Transport::Dns {
            " (it is not an IP address, nor a file in the Corefile's folder, so it was taken as a hostname)"
        } else {
            ""
        };
        format!("'{text}': cannot resolve {host}: {e}{hint}")
    })?;
    Ok(ips
        .into_iter()
        .map(|ip| one(SocketAddr::new(ip, port), Some(host.clone())))
        .collect())
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

/// Drops the upstreams whose address came earlier (the first one kept, as CoreDNS does).
pub fn dedup(to: Vec<To>) -> Vec<To> {
    let mut seen = std::collections::HashSet::new();
    to.into_iter().filter(|t| seen.insert(t.addr)).collect()
}

/// The addresses of `host`: from `resolvers` in turn (A, then AAAA) when given, else from the
/// system resolver.
pub fn resolve(host: &str, resolvers: &[SocketAddr]) -> Result<Vec<IpAddr>, String> {
    if resolvers.is_empty() {
        let found: Vec<IpAddr> = (host, 0)
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .map(|a| a.ip())
            .collect();
        let mut ips = Vec::new();
        for ip in found {
            if !ips.contains(&ip) {
                ips.push(ip);
            }
        }
        return if ips.is_empty() {
            Err("no addresses found".into())
        } else {
            Ok(ips)
        };
    }
    let name = Name::from_ascii(format!("{host}.")).map_err(|e| e.to_string())?;
    let mut last = String::from("no addresses found");
    for r in resolvers {
        let mut ips = Vec::new();
        for qtype in [RecordType::A, RecordType::AAAA] {
            match ask(*r, &name, qtype) {
                Ok(found) => ips.extend(found),
                Err(e) => last = format!("resolver {r}: {e}"),
            }
        }
        if !ips.is_empty() {
            return Ok(ips);
        }
    }
    Err(last)
}

/// One question to `resolver` over UDP, waiting at most [`RESOLVER_TIMEOUT`]; the addresses
/// of the answer section's A and AAAA records.
fn ask(resolver: SocketAddr, name: &Name, qtype: RecordType) -> Result<Vec<IpAddr>, String> {
    let local: SocketAddr = if resolver.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(local).map_err(|e| e.to_string())?;
    sock.connect(resolver).map_err(|e| e.to_string())?;
    let id: u16 = rand::random();
    let mut msg = Message::new(id, MessageType::Query, OpCode::Query);
    msg.metadata.recursion_desired = true;
    msg.add_query(Query::query(name.clone(), qtype));
    let bytes = msg.to_bytes().map_err(|e| e.to_string())?;
    sock.send(&bytes).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + RESOLVER_TIMEOUT;
    let mut buf = [0u8; 4096];
    for _ in 0..MAX_DATAGRAMS {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        sock.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break;
            }
            Err(e) => return Err(e.to_string()),
        };
        let Some(reply) = buf.get(..n).and_then(|b| Message::from_bytes(b).ok()) else {
            continue;
        };
        if reply.metadata.id != id || reply.metadata.message_type != MessageType::Response {
            continue;
        }
        return Ok(reply
            .answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::A(a) => Some(IpAddr::V4(a.0)),
                RData::AAAA(a) => Some(IpAddr::V6(a.0)),
                _ => None,
            })
            .collect());
    }
    Err("no reply in time".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<To>, String> {
        read_to(text, Path::new("/nonexistent-dir"), &[])
    }

    #[test]
    fn schemes_ports_names_and_paths() {
        let t = read("tls://9.9.9.9%dns.quad9.net").unwrap();
        assert_eq!(t[0].addr.to_string(), "9.9.9.9:853");
        assert_eq!(t[0].server_name.as_deref(), Some("dns.quad9.net"));
        let t = read("tls://9.9.9.9%dns.quad9.net:10853").unwrap();
        assert_eq!(t[0].addr.to_string(), "9.9.9.9:10853");
        assert_eq!(t[0].server_name.as_deref(), Some("dns.quad9.net"));
        let t = read("tls://[2620:fe::fe%dns.quad9.net]:10853").unwrap();
        assert_eq!(t[0].addr.to_string(), "[2620:fe::fe]:10853");
        assert_eq!(t[0].server_name.as_deref(), Some("dns.quad9.net"));
        let t = read("https://127.0.0.1:8443").unwrap();
        assert_eq!(
            (t[0].addr.to_string(), t[0].path.as_str()),
            ("127.0.0.1:8443".into(), DOH_PATH)
        );
        assert_eq!(t[0].transport, Transport::Https);
        let t = read("https://127.0.0.1/custom/path").unwrap();
        assert_eq!((t[0].addr.port(), t[0].path.as_str()), (443, "/custom/path"));
        let t = read("dns://10.0.0.1:5353").unwrap();
        assert_eq!(
            (t[0].addr.to_string(), t[0].transport),
            ("10.0.0.1:5353".into(), Transport::Dns)
        );
        let t = read("localhost:5300").unwrap();
        assert!(
            t.iter()
                .all(|t| t.addr.ip().is_loopback() && t.addr.port() == 5300),
            "{t:?}"
        );
        assert_eq!(t[0].hostname.as_deref(), Some("localhost"));
        for (bad, want) in [
            ("grpc://1.1.1.1", "'grpc' is not supported"),
            ("quic://1.1.1.1", "'quic' is not supported"),
            ("tls://1.1.1.1%", "is not a DNS name"),
            ("tls://1.1.1.1%bad..name:853", "('bad..name') is not a DNS name"),
            ("no_such..name", "neither an IP"),
            ("10.0.0.300", "neither an IP"),
        ] {
            let e = read(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn duplicates_are_kept_once() {
        let mut all = read("127.0.0.1").unwrap();
        all.extend(read("127.0.0.2").unwrap());
        all.extend(read("dns://127.0.0.1:53").unwrap());
        let kept: Vec<String> = dedup(all).iter().map(ToString::to_string).collect();
        assert_eq!(kept, ["127.0.0.1:53", "127.0.0.2:53"]);
    }
}
