//! IP address spellings in DNS names: reverse names (`in-addr.arpa.`, `ip6.arpa.`), the dashed
//! endpoint label (`10-244-1-10`, `fd00-10-244-2--10`) and the dashed pod label.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Parses a complete reverse name given as lower-case labels in query order, the zone included
/// (`["1","0","96","10","in-addr","arpa"]`). Partial names give `None`.
pub fn parse_reverse(labels: &[&str]) -> Option<IpAddr> {
    match labels {
        [a, b, c, d, "in-addr", "arpa"] => {
            let octet = |s: &str| -> Option<u8> {
                if s.is_empty() || s.len() > 3 || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                s.parse().ok()
            };
            Some(IpAddr::V4(Ipv4Addr::new(
                octet(d)?,
                octet(c)?,
                octet(b)?,
                octet(a)?,
            )))
        }
        [nibbles @ .., "ip6", "arpa"] if nibbles.len() == 32 => {
            let mut value: u128 = 0;
            for n in nibbles.iter().rev() {
                let digit = match n.as_bytes() {
                    [c] => char::from(*c).to_digit(16)?,
                    _ => return None,
                };
                value = (value << 4) | u128::from(digit);
            }
            Some(IpAddr::V6(Ipv6Addr::from(value)))
        }
        _ => None,
    }
}

/// The endpoint-name form of an IP: dots (IPv4) or colons (IPv6, canonical short form) become
/// dashes, and a trailing dash gets a `0` (`2001:db8::` gives `2001-db8--0`).
pub fn dashed(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => {
            // Written digit by digit: this is built per endpoint of every headless answer, and
            // formatting then replacing cost two allocations and the formatter.
            let mut s = String::with_capacity(15);
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    s.push('-');
                }
                if octet >= 100 {
                    s.push(char::from(b'0' + octet / 100));
                }
                if octet >= 10 {
                    s.push(char::from(b'0' + octet / 10 % 10));
                }
                s.push(char::from(b'0' + octet % 10));
            }
            s
        }
        IpAddr::V6(v6) => {
            let mut s = v6.to_string().replace(':', "-");
            if s.ends_with('-') {
                s.push('0');
            }
            s
        }
    }
}

/// Parses a pod label: exactly three dashes and no `--` is IPv4; anything else has every dash
/// read as a colon and must be IPv6.
pub fn parse_pod_label(label: &str) -> Option<IpAddr> {
    let dashes = label.bytes().filter(|b| *b == b'-').count();
    if dashes == 3 && !label.contains("--") {
        label.replace('-', ".").parse::<Ipv4Addr>().ok().map(IpAddr::V4)
    } else {
        label.replace('-', ":").parse::<Ipv6Addr>().ok().map(IpAddr::V6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn reverse_names() {
        assert_eq!(
            parse_reverse(&["1", "0", "96", "10", "in-addr", "arpa"]),
            Some(ip("10.96.0.1"))
        );
        assert_eq!(parse_reverse(&["10", "in-addr", "arpa"]), None);
        assert_eq!(parse_reverse(&["256", "0", "96", "10", "in-addr", "arpa"]), None);
        assert_eq!(parse_reverse(&["+1", "0", "96", "10", "in-addr", "arpa"]), None);
        let v6 = "6.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa";
        let labels: Vec<&str> = v6.split('.').collect();
        assert_eq!(parse_reverse(&labels), Some(ip("fd00:10:96::6")));
        assert_eq!(parse_reverse(&labels[1..]), None);
        let mut bad = labels.clone();
        bad[0] = "g";
        assert_eq!(parse_reverse(&bad), None);
        bad[0] = "10";
        assert_eq!(parse_reverse(&bad), None);
    }

    #[test]
    fn dashed_names() {
        assert_eq!(dashed(&ip("10.244.1.10")), "10-244-1-10");
        for v4 in ["0.0.0.0", "255.255.255.255", "1.20.100.109", "192.168.0.250"] {
            assert_eq!(dashed(&ip(v4)), v4.replace('.', "-"));
        }
        assert_eq!(dashed(&ip("fd00:10:244:2::10")), "fd00-10-244-2--10");
        assert_eq!(dashed(&ip("2001:db8::")), "2001-db8--0");
    }

    #[test]
    fn pod_labels() {
        assert_eq!(parse_pod_label("10-244-7-10"), Some(ip("10.244.7.10")));
        assert_eq!(
            parse_pod_label("fd00-10-244-7--10"),
            Some(ip("fd00:10:244:7::10"))
        );
        assert_eq!(parse_pod_label("10-244-7"), None);
        assert_eq!(parse_pod_label("blah"), None);
        assert_eq!(parse_pod_label("10-244-7-300"), None);
        assert_eq!(parse_pod_label(""), None);
    }
}
