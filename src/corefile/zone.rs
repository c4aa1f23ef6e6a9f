//! Server block keys and zone names: `[dns://|tls://|https://|quic://]ZONE[:PORT]`, the root (`.`,
//! `:53`), and CIDR reverse keys (`10.0.0.0/8`, `fd00::/8`), normalized to lower-case absolute names.

use std::net::IpAddr;

use super::syntax::{CorefileError, Token};

/// How a server block's questions arrive: its key's scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Scheme {
    /// `dns://` or no scheme: DNS over UDP and TCP.
    #[default]
    Dns,
    /// `tls://`: DNS over TLS (RFC 7858), TCP only.
    Tls,
    /// `https://`: DNS over HTTPS (RFC 8484), `POST` and `GET` on `/dns-query`.
    Https,
    /// `quic://`: DNS over QUIC (RFC 9250), UDP only.
    Quic,
    /// `https3://`: DNS over HTTP/3 (RFC 8484 over RFC 9114, CoreDNS 1.13.2+), UDP only.
    Https3,
}

impl Scheme {
    /// The scheme as written in a key and in the `server` metric label (`dns`, `tls`, `https`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dns => "dns",
            Self::Tls => "tls",
            Self::Https => "https",
            Self::Quic => "quic",
            Self::Https3 => "https3",
        }
    }

    /// The port of a key that names none: `dns_port` (53, or `-dns.port`) for plain DNS, 853
    /// for DNS over TLS and DNS over QUIC, 443 for DNS over HTTPS (as CoreDNS).
    pub fn default_port(self, dns_port: u16) -> u16 {
        match self {
            Self::Dns => dns_port,
            Self::Tls => 853,
            Self::Https | Self::Https3 => 443,
            Self::Quic => 853,
        }
    }

    /// True when listeners of `self` and `other` on one port would need the same socket:
    /// plain DNS takes UDP and TCP, DNS over TLS and HTTPS take TCP, DNS over QUIC takes UDP
    /// (so `tls://` and `quic://` share port 853, as in CoreDNS).
    pub fn shares_sockets_with(self, other: Self) -> bool {
        let udp = |s: Self| matches!(s, Self::Dns | Self::Quic | Self::Https3);
        let tcp = |s: Self| !matches!(s, Self::Quic | Self::Https3);
        (udp(self) && udp(other)) || (tcp(self) && tcp(other))
    }
}

/// A server block key, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneKey {
    /// How its questions arrive.
    pub scheme: Scheme,
    /// The zone: lower-case, absolute (trailing dot), `.` for the root.
    pub zone: String,
    /// The port, if the key names one.
    pub port: Option<u16>,
}

/// Parses a server block key: `.`, `.:53`, `:53` (the root), `cluster.local`,
/// `cluster.local.:1053`, `dns://.:53`, or a CIDR such as `10.0.0.0/8` or `fd00::/8[:PORT]`
/// that stands for its reverse zone.
///
/// A CIDR's prefix is rounded down to a whole octet (IPv4) or nibble (IPv6), giving one zone
/// (`10.96.0.0/12` serves `10.in-addr.arpa.`; CoreDNS would split it into sixteen `/16` zones).
pub fn parse_zone_key(t: &Token) -> Result<ZoneKey, CorefileError> {
    let key = t.text.trim();
    let bad = |why: String| t.error(format!("server block key '{}': {why}", t.text));
    if key.is_empty() {
        return Err(bad("empty key".into()));
    }
    let (scheme, rest) = match key.split_once("://") {
        Some((s, rest)) => (s.to_ascii_lowercase(), rest),
        None => ("dns".to_owned(), key),
    };
    let scheme = match scheme.as_str() {
        "dns" => Scheme::Dns,
        "tls" => Scheme::Tls,
        "https" => Scheme::Https,
        "quic" => Scheme::Quic,
        "https3" => Scheme::Https3,
        "grpc" | "grpcs" | "h3" => {
            return Err(bad(format!(
                "{scheme}:// servers are not supported by cluster-dns (dns://, tls://, https://, quic:// and https3:// are)"
            )));
        }
        "" => return Err(bad("missing scheme before '://'".into())),
        other => {
            return Err(bad(format!(
                "unknown scheme '{other}://' (dns://, tls://, https://, quic:// and https3:// are supported)"
            )));
        }
    };
    if rest.starts_with('[') {
        return Err(bad(
            "a key is a zone, not an address: to choose the listening address use the 'bind' directive"
                .into(),
        ));
    }
    let (host, port) = split_port(rest).map_err(bad)?;
    let zone = if host.contains('/') {
        cidr_zone(host).map_err(bad)?
    } else if host.is_empty() {
        ".".to_owned()
    } else if host.contains(':') || host.parse::<IpAddr>().is_ok() {
        return Err(bad(format!(
            "'{host}' is an address, not a zone: use a CIDR such as 10.0.0.0/8 or fd00::/8 for a reverse zone, or the 'bind' directive for a listening address"
        )));
    } else {
        normalize_zone(host).map_err(bad)?
    };
    Ok(ZoneKey { scheme, zone, port })
}

/// Splits `host[:port]`. In a CIDR the port can only follow the prefix length
/// (`fd00::/8:53`), so IPv6 colons are not taken for it.
fn split_port(s: &str) -> Result<(&str, Option<u16>), String> {
    let search_from = s.find('/').unwrap_or(0);
    let Some(colon) = s[search_from..].rfind(':').map(|i| i + search_from) else {
        return Ok((s, None));
    };
    let (host, port) = (&s[..colon], &s[colon + 1..]);
    if search_from == 0 && host.contains(':') {
        // An IPv6 address, not host:port.
        return Ok((s, None));
    }
    if port.is_empty() {
        return Err("missing port after ':'".into());
    }
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|_| port.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("invalid port '{port}' (expected a number from 0 to 65535)"))?;
    Ok((host, Some(port)))
}

/// The reverse zone of a CIDR, its prefix rounded down to an octet or nibble boundary.
fn cidr_zone(s: &str) -> Result<String, String> {
    let invalid = || format!("'{s}' is not a valid CIDR (expected e.g. 10.0.0.0/8 or fd00::/8)");
    let (addr, bits) = s.split_once('/').ok_or_else(invalid)?;
    if bits.is_empty() || !bits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    let bits: u32 = bits.parse().map_err(|_| invalid())?;
    let addr: IpAddr = addr.parse().map_err(|_| invalid())?;
    let (labels, suffix, step) = match addr {
        IpAddr::V4(a) => {
            if bits > 32 {
                return Err(format!("'{s}': an IPv4 prefix is at most 32 bits"));
            }
            let n = (bits / 8) as usize;
            let mut labels: Vec<String> = a.octets().iter().take(n).map(u8::to_string).collect();
            labels.reverse();
            (labels, "in-addr.arpa.", 8)
        }
        IpAddr::V6(a) => {
            if bits > 128 {
                return Err(format!("'{s}': an IPv6 prefix is at most 128 bits"));
            }
            let n = (bits / 4) as usize;
            let nibbles = a.octets().into_iter().flat_map(|b| [b >> 4, b & 0x0f]);
            let mut labels: Vec<String> = nibbles.take(n).map(|x| format!("{x:x}")).collect();
            labels.reverse();
            (labels, "ip6.arpa.", 4)
        }
    };
    let mut zone = labels.join(".");
    if !zone.is_empty() {
        zone.push('.');
    }
    zone.push_str(suffix);
    if !bits.is_multiple_of(step) {
        tracing::warn!(
            cidr = s,
            zone = %zone,
            "the prefix length is not a multiple of {step}: serving the wider reverse zone"
        );
    }
    Ok(zone)
}

/// Lower-cases a zone name, makes it absolute (adds the trailing dot) and checks it: labels of
/// 1 to 63 characters (letters, digits, `-`, `_`), at most 255 bytes in all; `.` is the root.
pub fn normalize_zone(s: &str) -> Result<String, String> {
    let trimmed = s.trim();
    if trimmed.is_empty() {
        return Err("empty zone name".into());
    }
    if trimmed == "." {
        return Ok(".".into());
    }
    let lower = trimmed.to_ascii_lowercase();
    let body = lower.strip_suffix('.').unwrap_or(&lower);
    for label in body.split('.') {
        if label.is_empty() {
            return Err(format!(
                "zone '{s}' has an empty label (a leading dot or two dots in a row)"
            ));
        }
        if label.len() > 63 {
            return Err(format!("zone '{s}' has a label longer than 63 characters"));
        }
        if let Some(c) = label
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        {
            return Err(if c.is_ascii() {
                format!("zone '{s}' contains '{c}', which is not allowed in a zone name")
            } else {
                format!("zone '{s}' is not ASCII: write it in its punycode (xn--) form")
            });
        }
    }
    // In wire form each label takes its length plus one byte, and the root one more.
    if body.len() + 2 > 255 {
        return Err(format!("zone '{s}' is longer than 255 bytes"));
    }
    Ok(format!("{body}."))
}

/// Like [`normalize_zone`], but a CIDR (`10.0.0.0/8`, `fd00::/8`) stands for its reverse zone,
/// as in CoreDNS's zone arguments (`kubernetes cluster.local 10.0.0.0/8`, `fallthrough`).
pub fn normalize_zone_or_cidr(s: &str) -> Result<String, String> {
    if s.contains('/') {
        cidr_zone(s.trim())
    } else {
        normalize_zone(s)
    }
}

/// True for reverse zones: `in-addr.arpa.`, `ip6.arpa.` and the zones under them. `zone` must be
/// normalized.
pub fn is_reverse_zone(zone: &str) -> bool {
    ["in-addr.arpa.", "ip6.arpa."]
        .iter()
        .any(|r| zone == *r || zone.strip_suffix(r).is_some_and(|head| head.ends_with('.')))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::super::Location;
    use super::*;

    fn key(s: &str) -> Result<ZoneKey, CorefileError> {
        parse_zone_key(&Token {
            text: s.into(),
            loc: Location::new(&Arc::new(PathBuf::from("Corefile")), 3),
        })
    }

    fn zone(s: &str) -> (String, Option<u16>) {
        let k = key(s).unwrap();
        assert_eq!(k.scheme, Scheme::Dns);
        (k.zone, k.port)
    }

    #[test]
    fn keys() {
        assert_eq!(zone("."), (".".into(), None));
        assert_eq!(zone(".:53"), (".".into(), Some(53)));
        assert_eq!(zone(":53"), (".".into(), Some(53)));
        assert_eq!(zone("cluster.local"), ("cluster.local.".into(), None));
        assert_eq!(zone("Cluster.Local.:1053"), ("cluster.local.".into(), Some(1053)));
        assert_eq!(zone("dns://.:53"), (".".into(), Some(53)));
        assert_eq!(zone("DNS://example.org"), ("example.org.".into(), None));
        assert_eq!(zone("example.org:0"), ("example.org.".into(), Some(0)));
        assert_eq!(zone("dns://"), (".".into(), None));
    }

    #[test]
    fn tls_and_https_keys() {
        let k = key("tls://.:5553").unwrap();
        assert_eq!(
            (k.scheme, k.zone.as_str(), k.port),
            (Scheme::Tls, ".", Some(5553))
        );
        let k = key("HTTPS://cluster.local").unwrap();
        assert_eq!(
            (k.scheme, k.zone.as_str(), k.port),
            (Scheme::Https, "cluster.local.", None)
        );
        assert_eq!(Scheme::Tls.default_port(53), 853);
        assert_eq!(Scheme::Https.default_port(53), 443);
        let k = key("quic://cluster.local:8853").unwrap();
        assert_eq!(
            (k.scheme, k.zone.as_str(), k.port),
            (Scheme::Quic, "cluster.local.", Some(8853))
        );
        assert_eq!(Scheme::Quic.default_port(53), 853);
        assert_eq!(Scheme::Quic.as_str(), "quic");
        // DNS over QUIC takes UDP only: it shares a port with TLS and HTTPS, not plain DNS.
        assert!(!Scheme::Quic.shares_sockets_with(Scheme::Tls));
        assert!(!Scheme::Https.shares_sockets_with(Scheme::Quic));
        assert!(Scheme::Quic.shares_sockets_with(Scheme::Dns));
        assert!(Scheme::Tls.shares_sockets_with(Scheme::Https));
        assert_eq!(Scheme::Dns.default_port(1053), 1053);
    }

    #[test]
    fn reverse_keys() {
        assert_eq!(zone("10.0.0.0/8"), ("10.in-addr.arpa.".into(), None));
        assert_eq!(zone("10.96.0.0/12"), ("10.in-addr.arpa.".into(), None));
        assert_eq!(
            zone("192.168.1.0/24:5353"),
            ("1.168.192.in-addr.arpa.".into(), Some(5353))
        );
        assert_eq!(zone("192.168.1.7/32"), ("7.1.168.192.in-addr.arpa.".into(), None));
        assert_eq!(zone("0.0.0.0/0"), ("in-addr.arpa.".into(), None));
        assert_eq!(zone("10.1.2.3/7"), ("in-addr.arpa.".into(), None));
        assert_eq!(zone("fd00::/8"), ("d.f.ip6.arpa.".into(), None));
        assert_eq!(zone("fd00::/8:53"), ("d.f.ip6.arpa.".into(), Some(53)));
        assert_eq!(zone("2001:db8::/32"), ("8.b.d.0.1.0.0.2.ip6.arpa.".into(), None));
        assert_eq!(zone("dns://FD00::/10"), ("d.f.ip6.arpa.".into(), None));
        assert_eq!(zone("::/0"), ("ip6.arpa.".into(), None));
    }

    #[test]
    fn bad_keys() {
        let cases = [
            ("grpc://.", "grpc:// servers are not supported"),
            ("udp://.", "unknown scheme 'udp://'"),
            ("://.", "missing scheme"),
            (".:99999", "invalid port '99999'"),
            (".:x", "invalid port 'x'"),
            (".:+53", "invalid port '+53'"),
            (".:", "missing port after ':'"),
            ("a..b", "empty label"),
            (".a", "empty label"),
            ("..", "empty label"),
            ("a b", "contains ' '"),
            ("10.0.0.0/33", "at most 32 bits"),
            ("fd00::/129", "at most 128 bits"),
            ("300.0.0.0/8", "not a valid CIDR"),
            ("10.0.0.0/", "not a valid CIDR"),
            ("10.0.0.0/x", "not a valid CIDR"),
            ("example.org/8", "not a valid CIDR"),
            ("[::]:53", "not an address"),
            ("10.0.0.1", "is an address, not a zone"),
            ("::1", "is an address, not a zone"),
            ("", "empty key"),
        ];
        for (k, want) in cases {
            let e = key(k).unwrap_err().to_string();
            assert!(e.starts_with("Corefile:3: server block key"), "{k}: {e}");
            assert!(e.contains(want), "{k}: {e}");
        }
    }

    #[test]
    fn zone_names() {
        assert_eq!(normalize_zone("Cluster.LOCAL").unwrap(), "cluster.local.");
        assert_eq!(normalize_zone("cluster.local.").unwrap(), "cluster.local.");
        assert_eq!(normalize_zone(".").unwrap(), ".");
        assert_eq!(normalize_zone("_tcp.x-y.example").unwrap(), "_tcp.x-y.example.");
        assert!(normalize_zone("").is_err());
        assert!(normalize_zone("a..b").unwrap_err().contains("empty label"));
        assert!(normalize_zone(&"a".repeat(64)).unwrap_err().contains("63"));
        assert!(normalize_zone(&"a".repeat(63)).is_ok());
        let long = vec!["a".repeat(63); 4].join(".");
        assert_eq!(long.len(), 255);
        assert!(normalize_zone(&long).unwrap_err().contains("255"));
        assert!(normalize_zone(&long[2..]).is_ok());
        assert!(normalize_zone("bücher.de").unwrap_err().contains("punycode"));
        assert!(normalize_zone("a/b").is_err() && normalize_zone("a:b").is_err());
        assert_eq!(normalize_zone_or_cidr("10.0.0.0/8").unwrap(), "10.in-addr.arpa.");
        assert_eq!(normalize_zone_or_cidr("In-Addr.Arpa").unwrap(), "in-addr.arpa.");
    }

    #[test]
    fn reverse_zones() {
        for z in ["in-addr.arpa.", "10.in-addr.arpa.", "ip6.arpa.", "d.f.ip6.arpa."] {
            assert!(is_reverse_zone(z), "{z}");
        }
        for z in [".", "arpa.", "cluster.local.", "xin-addr.arpa.", "notip6.arpa."] {
            assert!(!is_reverse_zone(z), "{z}");
        }
    }
}
