//! The `prometheus` plugin: where `/metrics` listens, and that a server block's requests are
//! counted. The metrics themselves (the registry, CoreDNS's core families, the per-block
//! recorders) are in [`crate::telemetry`]; each plugin's own families are in its folder,
//! registered once per process through [`crate::telemetry::DnsMetrics::families`]. See this
//! folder's README for the names and labels.

use std::net::SocketAddr;

use crate::chain::{BlockSettings, Configured, HttpRoute, SetupCtx};
use crate::corefile::{Args, CorefileError, Directive};
use std::sync::Arc;

/// The default listen address (CoreDNS: `localhost:9153`).
pub const DEFAULT_ADDR: &str = "localhost:9153";

/// Parses `prometheus [ADDR]`.
pub fn parse(d: &Directive) -> Result<SocketAddr, CorefileError> {
    let mut args = Args::new(d);
    let addr = args.next().map(|t| t.text.as_str()).unwrap_or(DEFAULT_ADDR);
    args.expect_none()?;
    if !d.block.is_empty() {
        return Err(d.error("takes no options"));
    }
    crate::corefile::parse_http_addr(addr).map_err(|e| d.error(e))
}

/// The `prometheus` directive as configured: where `/metrics` listens (and that the block's
/// requests are counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrometheusConfig {
    /// The listen address.
    pub addr: SocketAddr,
}

/// The `prometheus` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(PrometheusConfig { addr: parse(d)? }))
}

impl Configured for PrometheusConfig {
    /// The block's requests are counted, and `/metrics` is served on its address.
    fn configure(&self, settings: &mut BlockSettings) {
        settings.records_metrics = true;
        settings.http.push(HttpRoute {
            addr: self.addr,
            path: "/metrics",
            router: Arc::new(|ctx| ctx.metrics.router()),
            beside: None,
        });
    }
}
