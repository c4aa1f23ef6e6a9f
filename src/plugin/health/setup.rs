//! The `health` directive's Corefile syntax, parsed into a [`HealthConfig`], and its
//! [`Configured`] impl: the lameduck and propagation margin it sets, and the `/health` route
//! (`handler.rs`) it declares.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::handler::{router, self_probe};
use super::metrics::HealthMetrics;
use crate::chain::{BlockSettings, Configured, HttpRoute, SetupCtx};
use crate::corefile::{Args, CorefileError, Directive, parse_duration};

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
