//! The small HTTP side of the server (`/health`, `/ready`, `/metrics`): binding a listener
//! and serving an axum router on it until a shutdown future completes. (The addresses are
//! parsed with the Corefile: [`crate::corefile::parse_http_addr`].)

use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::TcpListener;

/// Set once in node-cache mode: HTTP listeners with a fixed port take `SO_REUSEPORT`, so the
/// new instance of an upgrade binds `health` and `prometheus` beside the old one.
static SHARE_PORTS: AtomicBool = AtomicBool::new(false);

/// Makes every later [`bind_http`] with a fixed port share it (`SO_REUSEPORT`).
pub fn share_ports() {
    SHARE_PORTS.store(true, Ordering::Relaxed);
}

async fn bind_one(addr: SocketAddr) -> std::io::Result<TcpListener> {
    if !SHARE_PORTS.load(Ordering::Relaxed) || addr.port() == 0 {
        return TcpListener::bind(addr).await;
    }
    let sock = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(1024)?;
    TcpListener::from_std(sock.into())
}

/// Binds `addr`; a wildcard IPv6 address falls back to IPv4 on hosts without IPv6.
pub async fn bind_http(addr: SocketAddr) -> std::io::Result<TcpListener> {
    match bind_one(addr).await {
        Ok(l) => Ok(l),
        Err(e) if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) => {
            bind_one(SocketAddr::from(([0, 0, 0, 0], addr.port())))
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
