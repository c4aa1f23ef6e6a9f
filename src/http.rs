//! The small HTTP side of the server (`/health`, `/ready`, `/metrics`): binding a listener
//! and serving an axum router on it until a shutdown future completes. (The addresses are
//! parsed with the Corefile: [`crate::corefile::parse_http_addr`].)

use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use tokio::net::TcpListener;

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
