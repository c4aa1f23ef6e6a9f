//! The `ready` plugin: `GET /ready` answers 200 `OK` when every plugin that reports readiness
//! is ready, else 503 with what is not ready (and why, when the plugin knows), one per line. [`Readiness`] is the
//! registry plugins report into (the kubernetes source's sync state, loop detection) and that
//! lameduck turns off.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use axum::http::StatusCode;
use axum::routing::get;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{Args, CorefileError, Directive};

/// The default listen address.
pub const DEFAULT_ADDR: &str = ":8181";

/// Something that can say whether it is ready.
pub trait ReadinessCheck: Send + Sync + std::fmt::Debug {
    /// The plugin's name, as `/ready` lists it.
    fn name(&self) -> &str;
    /// True when ready.
    fn is_ready(&self) -> bool;
    /// What `/ready` lists while not ready, one line each: by default the name; a plugin that
    /// knows why it waits says so (`kubernetes: services: 401 Unauthorized: ...`).
    fn why_not(&self) -> Vec<String> {
        vec![self.name().to_owned()]
    }
}

/// The readiness registry shared by the plugins and the `/ready` endpoint.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    checks: Arc<RwLock<Vec<Arc<dyn ReadinessCheck>>>>,
    shutting_down: Arc<AtomicBool>,
}

impl Readiness {
    /// Adds a check.
    pub fn register(&self, check: Arc<dyn ReadinessCheck>) {
        if let Ok(mut c) = self.checks.write() {
            c.push(check);
        }
    }

    /// Replaces every check (a reloaded configuration brings its own plugins).
    pub fn replace(&self, checks: Vec<Arc<dyn ReadinessCheck>>) {
        if let Ok(mut c) = self.checks.write() {
            *c = checks;
        }
    }

    /// Turns readiness off for good (SIGTERM: lameduck starts).
    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    /// What is not ready, one line each (see [`ReadinessCheck::why_not`]); empty when ready.
    pub fn not_ready(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.shutting_down.load(Ordering::Acquire) {
            out.push("shutting down (lameduck)".to_owned());
        }
        if let Ok(checks) = self.checks.read() {
            out.extend(checks.iter().filter(|c| !c.is_ready()).flat_map(|c| c.why_not()));
        }
        out
    }

    /// The `/ready` router.
    pub fn router(&self) -> axum::Router {
        let readiness = self.clone();
        axum::Router::new().route(
            "/ready",
            get(move || {
                let readiness = readiness.clone();
                async move {
                    let not = readiness.not_ready();
                    if not.is_empty() {
                        (StatusCode::OK, "OK".to_owned())
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, format!("{}\n", not.join("\n")))
                    }
                }
            }),
        )
    }
}

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

/// The `ready` directive's setup (one per block; the runtime reads it).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(ReadyConfig { addr: parse(d)? }))
}

impl Configured for ReadyConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Flag(&'static str, Arc<AtomicBool>);
    impl ReadinessCheck for Flag {
        fn name(&self) -> &str {
            self.0
        }
        fn is_ready(&self) -> bool {
            self.1.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn lists_what_is_not_ready() {
        let r = Readiness::default();
        assert!(r.not_ready().is_empty());
        let f = Arc::new(AtomicBool::new(false));
        r.register(Arc::new(Flag("kubernetes", f.clone())));
        assert_eq!(r.not_ready(), ["kubernetes"]);
        f.store(true, Ordering::Relaxed);
        assert!(r.not_ready().is_empty());
        r.set_shutting_down();
        assert_eq!(r.not_ready().len(), 1);
    }

    #[derive(Debug)]
    struct Why;
    impl ReadinessCheck for Why {
        fn name(&self) -> &str {
            "kubernetes"
        }
        fn is_ready(&self) -> bool {
            false
        }
        fn why_not(&self) -> Vec<String> {
            vec!["kubernetes: services: 401".into(), "kubernetes: pods: 403".into()]
        }
    }

    #[tokio::test]
    async fn the_body_says_why_one_line_each() {
        let r = Readiness::default();
        r.register(Arc::new(Why));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move { axum::serve(listener, r.router()).await });
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
