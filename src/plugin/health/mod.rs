//! The `health` plugin: `GET /health` answers 200 `OK` while the process runs (never tied to
//! the API server, so a control-plane outage cannot restart every replica), and
//! `lameduck DURATION` keeps DNS answering at most that long after SIGTERM (`propagation_margin
//! DURATION`: that long after the server's own endpoint left every Service, see
//! `app/drain.rs`). As CoreDNS's, it probes its
//! own `/health` once a second and exports how long that took
//! (`coredns_health_request_duration_seconds`) and how often it failed
//! (`coredns_health_request_failures_total`).

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;

use crate::chain::{BlockSettings, Configured, HttpRoute, SetupCtx};
use crate::corefile::{Args, CorefileError, Directive, parse_duration};
use crate::telemetry::{DnsMetrics, Families};
use std::sync::Arc;

/// The default listen address.
pub const DEFAULT_ADDR: &str = ":8080";

/// `health [ADDR] { lameduck DURATION; propagation_margin DURATION }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    /// Where `/health` listens.
    pub addr: SocketAddr,
    /// How long DNS keeps answering after SIGTERM, at most.
    pub lameduck: Duration,
    /// How long DNS keeps answering once the server's endpoint left every Service.
    pub propagation_margin: Option<Duration>,
}

/// Parses the `health` directive.
pub fn parse(d: &Directive) -> Result<HealthConfig, CorefileError> {
    let mut args = Args::new(d);
    let addr = args.next().map(|t| t.text.as_str()).unwrap_or(DEFAULT_ADDR);
    args.expect_none()?;
    let addr = crate::corefile::parse_http_addr(addr).map_err(|e| d.error(e))?;
    let mut lameduck = Duration::ZERO;
    let mut propagation_margin = None;
    for opt in &d.block {
        let name = opt.name.text.as_str();
        let duration = || -> Result<Duration, CorefileError> {
            let mut a = Args::new(opt);
            let v = a
                .next()
                .ok_or_else(|| d.error_at(&opt.name, format!("{name}: expects a duration such as 5s")))?;
            a.expect_none()?;
            parse_duration(&v.text)
                .ok_or_else(|| d.error_at(v, format!("{name}: '{}' is not a duration (such as 5s)", v.text)))
        };
        match name {
            "lameduck" => lameduck = duration()?,
            "propagation_margin" => propagation_margin = Some(duration()?),
            other => return Err(d.error_at(&opt.name, format!("unknown property '{other}'"))),
        }
    }
    Ok(HealthConfig {
        addr,
        lameduck,
        propagation_margin,
    })
}

/// The health plugin's metric families (registered once per process).
#[derive(Debug, Clone)]
pub struct HealthMetrics {
    duration: prometheus::Histogram,
    failures: prometheus::IntCounter,
}

impl Families for HealthMetrics {
    fn register(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let duration = prometheus::Histogram::with_opts(
            prometheus::HistogramOpts::new(
                "coredns_health_request_duration_seconds",
                "Histogram of the time (in seconds) each request took.",
            )
            .buckets(prometheus::exponential_buckets(0.00025, 10.0, 5)?),
        )?;
        let failures = prometheus::IntCounter::new(
            "coredns_health_request_failures_total",
            "The number of times the health check failed.",
        )?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(failures.clone()))?;
        Ok(Self { duration, failures })
    }
}

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

/// Registers this plugin's metric families (see the registry): CoreDNS shows them from start.
pub fn families(metrics: &DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<HealthMetrics>().map(|_| ())
}

/// The `health` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d)?))
}

impl Configured for HealthConfig {
    /// The lameduck, and `/health` on its address with the probe of itself beside it.
    fn configure(&self, settings: &mut BlockSettings) {
        settings.lameduck = settings.lameduck.max(self.lameduck);
        // The longest of the blocks' (`None` orders below any `Some`).
        settings.propagation_margin = settings.propagation_margin.max(self.propagation_margin);
        settings.http.push(HttpRoute {
            addr: self.addr,
            path: "/health",
            router: Arc::new(|_| router()),
            beside: Some(Arc::new(|bound, ctx| {
                match ctx.metrics.families::<HealthMetrics>() {
                    Ok(metrics) => Box::pin(self_probe(bound, metrics)),
                    Err(error) => {
                        tracing::warn!(%error, "health: no self-probe metrics");
                        Box::pin(std::future::ready(()))
                    }
                }
            })),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::Path;

    fn parse_text(body: &str) -> Result<HealthConfig, CorefileError> {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{body}\n}}\n"), Path::new("Corefile"))?;
        parse(&cf.blocks[0].directives[0])
    }

    #[test]
    fn forms() {
        let h = parse_text(" health {\n  lameduck 5s\n }").unwrap();
        assert_eq!((h.addr.port(), h.lameduck), (8080, Duration::from_secs(5)));
        assert_eq!(parse_text(" health 127.0.0.1:9000").unwrap().addr.port(), 9000);
        let h = parse_text(" health {\n  lameduck 30s\n  propagation_margin 2s\n }").unwrap();
        assert_eq!(h.propagation_margin, Some(Duration::from_secs(2)));
        assert_eq!(parse_text(" health").unwrap().propagation_margin, None);
        for (body, want) in [
            (
                " health {\n  lameduck soon\n }",
                "Corefile:3: health: lameduck: 'soon' is not a duration",
            ),
            (
                " health {\n  propagation_margin\n }",
                "Corefile:3: health: propagation_margin: expects a duration",
            ),
        ] {
            let e = parse_text(body).unwrap_err().to_string();
            assert!(e.contains(want), "{body}: {e}");
        }
        assert!(parse_text(" health {\n  frob\n }").is_err());
        assert!(parse_text(" health a b").is_err());
    }
}
