//! The `prometheus` directive's Corefile syntax (see this folder's README), parsed into a
//! [`PrometheusConfig`], and its [`Configured`] impl: what the configured directive sets for its
//! block.

use std::net::SocketAddr;

use crate::chain::{
    AcquireCtx, AcquireError, AcquireFuture, BlockSettings, Capabilities, Configured, HttpRoute, SetupCtx,
};
use crate::corefile::{Args, CorefileError, Directive};
use std::sync::Arc;

use crate::telemetry::runtime::RuntimeMetrics;

/// The default listen address (CoreDNS: `localhost:9153`).
pub const DEFAULT_ADDR: &str = "localhost:9153";

/// Parses `prometheus [ADDR] [{ runtime_metrics }]`.
pub fn parse(d: &Directive) -> Result<PrometheusConfig, CorefileError> {
    let mut args = Args::new(d);
    let addr = args.next().map(|t| t.text.as_str()).unwrap_or(DEFAULT_ADDR);
    args.expect_none()?;
    let addr = crate::corefile::parse_http_addr(addr).map_err(|e| d.error(e))?;
    let mut runtime_metrics = false;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "runtime_metrics" => {
                d.option_no_args(opt)?;
                runtime_metrics = true;
            }
            other => {
                return Err(d.error_at(&opt.name, format!("unknown property '{other}' (runtime_metrics)")));
            }
        }
    }
    Ok(PrometheusConfig {
        addr,
        runtime_metrics,
    })
}

/// The `prometheus` directive as configured: where `/metrics` listens (and that the block's
/// requests are counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrometheusConfig {
    /// The listen address.
    pub addr: SocketAddr,
    /// `runtime_metrics`: the runtime's figures are exported too
    /// ([`crate::telemetry::runtime`]).
    pub runtime_metrics: bool,
}

/// The `prometheus` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d)?))
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

    /// With `runtime_metrics`, the runtime's collector joins the process's registry (once per
    /// process; a reload that drops the option leaves it there).
    fn acquire<'a>(&'a self, ctx: AcquireCtx<'a>) -> AcquireFuture<'a> {
        let registered = match (self.runtime_metrics, ctx.metrics) {
            (true, Some(metrics)) => {
                metrics
                    .families::<RuntimeMetrics>()
                    .map(|_| ())
                    .map_err(|e| AcquireError {
                        plugin: "prometheus",
                        source: Box::new(e),
                    })
            }
            _ => Ok(()),
        };
        Box::pin(std::future::ready(registered.map(|()| Capabilities::default())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;

    fn one(text: &str) -> Result<PrometheusConfig, CorefileError> {
        let cf =
            Corefile::parse_str(&format!(". {{\n{text}\n}}\n"), std::path::Path::new("Corefile")).unwrap();
        parse(&cf.blocks[0].directives[0])
    }

    #[test]
    fn runtime_metrics_is_an_option_and_others_are_refused() {
        let c = one("prometheus :9153 {\n runtime_metrics\n}").unwrap();
        assert!(c.runtime_metrics);
        assert_eq!(c.addr.port(), 9153);
        assert!(!one("prometheus").unwrap().runtime_metrics);
        let e = one("prometheus {\n frobnicate\n}").unwrap_err().to_string();
        assert!(e.contains("unknown property 'frobnicate'"), "{e}");
        let e = one("prometheus {\n runtime_metrics yes\n}")
            .unwrap_err()
            .to_string();
        assert!(!e.is_empty());
    }
}
