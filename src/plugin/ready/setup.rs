//! The `ready` directive's Corefile syntax, parsed into a [`ReadyConfig`], and its
//! [`Configured`] impl: the `/ready` route (`handler.rs`) it declares.

use std::net::SocketAddr;
use std::sync::Arc;

use super::handler::router;
use crate::chain::{BlockSettings, Configured, HttpRoute, SetupCtx};
use crate::corefile::{Args, CorefileError, Directive};

/// The default listen address.
pub const DEFAULT_ADDR: &str = ":8181";

/// Parses `ready [ADDR]`.
pub fn parse(d: &Directive) -> Result<SocketAddr, CorefileError> {
    let mut args = Args::new(d);
    let addr = args.next().map(|t| t.text.as_str()).unwrap_or(DEFAULT_ADDR);
    args.expect_none()?;
    if d.has_block && !d.block.is_empty() {
        return Err(d.error("takes no options"));
    }
    crate::corefile::parse_http_addr(addr).map_err(|e| d.error(e))
}

/// The `ready` directive as configured: where `/ready` listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadyConfig {
    /// The listen address.
    pub addr: SocketAddr,
}

/// The `ready` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(ReadyConfig { addr: parse(d)? }))
}

impl Configured for ReadyConfig {
    /// `/ready` on its address.
    fn configure(&self, settings: &mut BlockSettings) {
        settings.http.push(HttpRoute {
            addr: self.addr,
            path: "/ready",
            router: Arc::new(|ctx| router(ctx.readiness.clone())),
            beside: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::Readiness;
    use crate::chain::ReadinessCheck;

    #[derive(Debug)]
    struct Why;
    impl ReadinessCheck for Why {
        fn not_ready(&self) -> Vec<String> {
            vec!["kubernetes: services: 401".into(), "kubernetes: pods: 403".into()]
        }
    }

    #[tokio::test]
    async fn the_body_says_why_one_line_each() {
        let r = Readiness::default();
        r.replace(vec![Arc::new(Why)]);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move { axum::serve(listener, router(r)).await });
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(b"GET /ready HTTP/1.0\r\n\r\n").await.unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).await.unwrap();
        assert!(reply.starts_with("HTTP/1.0 503"), "{reply}");
        assert!(
            reply.ends_with("\r\n\r\nkubernetes: services: 401\nkubernetes: pods: 403\n"),
            "{reply}"
        );
        server.abort();
    }
}
