//! What `health` serves: the `/health` router ([`router`]) and the probe of itself beside it
//! ([`self_probe`], once a second).

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;

use super::metrics::HealthMetrics;

/// How often `/health` probes itself.
pub const SELF_PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Probes `GET /health` on `addr` every second, recording each probe's time or its failure.
/// Runs until the task is aborted.
pub async fn self_probe(addr: SocketAddr, metrics: HealthMetrics) {
    let mut tick = tokio::time::interval(SELF_PROBE_INTERVAL);
    loop {
        tick.tick().await;
        let started = std::time::Instant::now();
        match tokio::time::timeout(SELF_PROBE_INTERVAL, probe_once(addr)).await {
            Ok(Ok(true)) => metrics.duration.observe(started.elapsed().as_secs_f64()),
            _ => metrics.failures.inc(),
        }
    }
}

/// One `GET /health`: true on a 200 answer.
async fn probe_once(addr: SocketAddr) -> std::io::Result<bool> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let target = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv6() => {
            SocketAddr::from(([0, 0, 0, 0, 0, 0, 0, 1], addr.port()))
        }
        ip if ip.is_unspecified() => SocketAddr::from(([127, 0, 0, 1], addr.port())),
        _ => addr,
    };
    let mut s = tokio::net::TcpStream::connect(target).await?;
    s.write_all(b"GET /health HTTP/1.0\r\n\r\n").await?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).await?;
    Ok(head.starts_with(b"HTTP/1.") && &head[9..12] == b"200")
}

/// The `/health` router.
pub fn router() -> axum::Router {
    axum::Router::new().route("/health", get(|| async { "OK" }))
}
