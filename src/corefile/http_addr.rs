//! The HTTP listen addresses of `health`, `ready` and `prometheus`, in CoreDNS's forms.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// Parses a CoreDNS HTTP address: `:8080` (all interfaces), `127.0.0.1:8080`, `[::1]:8080`,
/// `localhost:8080`.
pub fn parse_http_addr(s: &str) -> Result<SocketAddr, String> {
    let bad = || format!("'{s}' is not an address such as :8080 or 127.0.0.1:8080");
    if let Some(port) = s.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| bad())?;
        return Ok(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port));
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        let port: u16 = port.parse().map_err(|_| bad())?;
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(parse_http_addr(":8080").unwrap().port(), 8080);
        assert_eq!(
            parse_http_addr("127.0.0.1:8181").unwrap(),
            SocketAddr::from(([127, 0, 0, 1], 8181))
        );
        assert_eq!(
            parse_http_addr("localhost:9153").unwrap(),
            SocketAddr::from(([127, 0, 0, 1], 9153))
        );
        assert_eq!(
            parse_http_addr("[::1]:53").unwrap().ip(),
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        );
        for bad in ["8080", ":x", "host:80", ":99999", ""] {
            assert!(parse_http_addr(bad).is_err(), "{bad}");
        }
    }
}
