//! The `health` plugin: `GET /health` answers 200 `OK` while the process runs (never tied to
//! the API server, so a control-plane outage cannot restart every replica), and
//! `lameduck DURATION` keeps DNS answering that long after SIGTERM.

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;

use crate::corefile::{Args, CorefileError, Directive, parse_duration};

/// The default listen address.
pub const DEFAULT_ADDR: &str = ":8080";

/// `health [ADDR] { lameduck DURATION }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    /// Where `/health` listens.
    pub addr: SocketAddr,
    /// How long DNS keeps answering after SIGTERM.
    pub lameduck: Duration,
}

/// Parses the `health` directive.
pub fn parse(d: &Directive) -> Result<HealthConfig, CorefileError> {
    let mut args = Args::new(d);
    let addr = args.next().map(|t| t.text.as_str()).unwrap_or(DEFAULT_ADDR);
    args.expect_none()?;
    let addr = crate::http::parse_http_addr(addr).map_err(|e| d.error(e))?;
    let mut lameduck = Duration::ZERO;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "lameduck" => {
                let mut a = Args::new(opt);
                let v = a
                    .next()
                    .ok_or_else(|| d.error("lameduck: expects a duration such as 5s"))?;
                a.expect_none()?;
                lameduck = parse_duration(&v.text).ok_or_else(|| {
                    d.error(format!("lameduck: '{}' is not a duration (such as 5s)", v.text))
                })?;
            }
            other => return Err(d.error(format!("unknown property '{other}'"))),
        }
    }
    Ok(HealthConfig { addr, lameduck })
}

/// The `/health` router.
pub fn router() -> axum::Router {
    axum::Router::new().route("/health", get(|| async { "OK" }))
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
        assert!(
            parse_text(" health {\n  lameduck soon\n }")
                .unwrap_err()
                .to_string()
                .contains("Corefile:2")
        );
        assert!(parse_text(" health {\n  frob\n }").is_err());
        assert!(parse_text(" health a b").is_err());
    }
}
