//! The small HTTP side of the server (`/health`, `/ready`, `/metrics`): address parsing in
//! CoreDNS's forms and serving an axum router on an already-bound listener until a shutdown
//! future completes.

use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use tokio::net::TcpListener;

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

/// Binds `addr`; a wildcard IPv6 address falls back to IPv4 on hosts without IPv6.
pub async fn bind_http(addr: SocketAddr) -> std::io::Result<TcpListener> {
    match TcpListener::bind(addr).await {
        Ok(l) => Ok(l),
        Err(e) if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) => {
            TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], addr.port())))
                .await
                .map_err(|_| e)
        }
        Err(e) => Err(e),
    }
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
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
