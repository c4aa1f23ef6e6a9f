//! Start-up, reload and shutdown: turns a [`Config`] into running listeners and keeps them
//! running through Corefile changes. It names no plugin: it reads the blocks' settings, the
//! HTTP routes plugins declare, and the resources they keep, and builds through the one
//! builder ([`build::build`]).
//!
//! [`start`] builds the configuration, groups server blocks by listen address, binds and serves
//! DNS, and serves each HTTP address's declared routes. A reload ([`Running::reload`], or the
//! `reload` timer) builds the new configuration beside the running one and swaps each listen
//! address's routing table in one store, so no query is dropped: listeners that stay keep their
//! sockets, resources whose configuration did not change are taken over (a `kubernetes` zone
//! and its watches, with no relist), and a broken Corefile is refused while the old one keeps
//! serving. [`Running::shutdown`] is SIGTERM's drain: `/ready` turns 503 at once, DNS keeps
//! answering while the server's own endpoint is still ready in a Service and a propagation
//! margin after (or for the lameduck duration when that cannot be told), then the listeners
//! stop.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `build.rs` | the builder: a configuration's chains, routing tables and memos |
//! | `state.rs` | what a running server holds: process-wide state, the generation, listeners |
//! | `listen.rs` | binding and serving DNS and HTTP listeners |
//! | `reload.rs` | the reload timer, the change detector, applying a configuration |
//! | `drain.rs` | SIGTERM's drain: how long DNS keeps answering |
//! | `error.rs` | [`StartError`] |
//!
//! Node management (node-cache mode: interfaces, rules) is not the runtime's: it lives beside
//! it in `crate::nodecache`, and starts the server through [`start_with_port`].

pub mod build;
mod drain;
mod error;
mod listen;
mod reload;
mod state;

use std::any::Any;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::chain::{Chain, OwnEndpoint, Readiness};
use crate::config::Config;
use crate::server::ServerError;
use crate::telemetry::DnsMetrics;
use crate::telemetry::shutdown::{ShutdownMetrics, ShutdownPhase};

pub use error::StartError;
pub use state::host_name;

use build::build;
use listen::{listen, start_http};
use reload::{apply, reload_loop};
use state::{Inner, Shared, State};

/// A started server.
#[derive(Debug)]
pub struct Running {
    inner: Arc<Inner>,
    reloader: Option<JoinHandle<()>>,
}

impl Running {
    fn with_state<T>(&self, f: impl FnOnce(&State) -> T) -> Option<T> {
        self.inner.state.lock().ok()?.as_ref().map(f)
    }

    /// The addresses DNS is served on (UDP and TCP on each), with the real ports.
    pub fn dns_addrs(&self) -> Vec<SocketAddr> {
        self.with_state(|s| s.listeners.values().map(|l| l.addr).collect())
            .unwrap_or_default()
    }

    /// The HTTP listeners with their real ports and the paths each serves.
    pub fn http_addrs(&self) -> &[(SocketAddr, Vec<&'static str>)] {
        &self.inner.http_addrs
    }

    /// The address serving HTTP path `path` (`/metrics`, or `metrics`).
    pub fn http_addr(&self, path: &str) -> Option<SocketAddr> {
        let path = path.trim_start_matches('/');
        self.inner
            .http_addrs
            .iter()
            .find(|(_, paths)| paths.iter().any(|p| p.trim_start_matches('/') == path))
            .map(|(a, _)| *a)
    }

    /// Responses held in the answer memos of every listen address (see
    /// [`crate::server::memo`]).
    pub fn memoized(&self) -> usize {
        self.with_state(|s| s.listeners.values().map(|l| l.cell.load().memo.len()).sum())
            .unwrap_or_default()
    }

    /// The chains of the running configuration, one per server block, in block order.
    pub fn chains(&self) -> Vec<Chain> {
        self.with_state(|s| s.generation.chains.clone())
            .unwrap_or_default()
    }

    /// What the running configuration's blocks acquired of type `T` (a `kubernetes` block's
    /// `cluster::ClusterSource`), in block order.
    pub fn acquired<T: Any + Send + Sync>(&self) -> Vec<Arc<T>> {
        self.with_state(|s| {
            s.generation
                .acquired
                .iter()
                .filter_map(|c| c.get::<T>())
                .collect()
        })
        .unwrap_or_default()
    }

    /// What `/ready` reads.
    pub fn readiness(&self) -> &Readiness {
        &self.inner.shared.readiness
    }

    /// The metrics `/metrics` renders.
    pub fn metrics(&self) -> &DnsMetrics {
        &self.inner.shared.metrics
    }

    /// How long DNS keeps answering after SIGTERM under the running configuration.
    pub fn lameduck(&self) -> Duration {
        self.with_state(|s| s.generation.config.lameduck())
            .unwrap_or_default()
    }

    /// Applies `config` in place of the running one without dropping queries. On error the
    /// running configuration keeps serving.
    pub async fn reload(&self, config: Config) -> Result<(), StartError> {
        apply(&self.inner, config).await
    }

    /// How long DNS keeps answering after SIGTERM once this server's endpoint left every
    /// Service (`health { propagation_margin }`).
    pub fn propagation_margin(&self) -> Duration {
        self.with_state(|s| s.generation.config.propagation_margin())
            .unwrap_or(crate::config::DEFAULT_PROPAGATION_MARGIN)
    }

    /// SIGTERM: `/ready` turns 503 at once; DNS keeps answering while clients can still be sent
    /// here (see `drain`), never longer than the lameduck duration; then every listener stops.
    pub async fn shutdown(self) -> Result<(), ServerError> {
        self.inner.shared.readiness.set_shutting_down();
        let watches: Vec<Arc<dyn OwnEndpoint>> = self
            .acquired::<Arc<dyn OwnEndpoint>>()
            .iter()
            .map(|w| (**w).clone())
            .collect();
        let phases = self.inner.shared.metrics.families::<ShutdownMetrics>().ok();
        drain::drain(
            &watches,
            self.lameduck(),
            self.propagation_margin(),
            phases.as_ref(),
        )
        .await;
        if let Some(p) = &phases {
            p.set(ShutdownPhase::Stopping);
        }
        self.stop().await
    }

    /// Stops every listener and waits for them.
    pub async fn stop(mut self) -> Result<(), ServerError> {
        if let Some(r) = self.reloader.take() {
            r.abort();
        }
        let state = self.inner.state.lock().ok().and_then(|mut s| s.take());
        let http = self
            .inner
            .http
            .lock()
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default();
        for h in http {
            let _ = h.stop().await;
        }
        let Some(state) = state else { return Ok(()) };
        let mut result = Ok(());
        for (_, l) in state.listeners {
            let _ = l.stop.send(());
            match l.task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(e) => result = Err(ServerError::Serve(format!("server task failed: {e}"))),
            }
        }
        drop(state.generation);
        result
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(r) = self.reloader.take() {
            r.abort();
        }
        if let Ok(mut http) = self.inner.http.lock() {
            for h in http.drain(..) {
                drop(h.stop());
            }
        }
    }
}

/// Builds `config`, binds every listener and starts serving.
pub async fn start(config: &Config) -> Result<Running, StartError> {
    start_with_port(config, crate::config::DEFAULT_DNS_PORT).await
}

/// As [`start`]; a reloaded Corefile's keys without a port get `default_port` (`-dns.port`).
pub async fn start_with_port(config: &Config, default_port: u16) -> Result<Running, StartError> {
    let shared = Shared::new()?;
    // The drain's phase shows `serving` from the start.
    if let Err(error) = shared.metrics.families::<ShutdownMetrics>() {
        tracing::warn!(%error, "no shutdown phase metric");
    }
    if let Ok(text) = std::fs::read(&config.path) {
        shared.reload.running(&text);
    }
    let generation = build(config.clone(), &shared.build_env()).await?;
    generation.wait_for_startup().await;
    let mut listeners = BTreeMap::new();
    for (key, router) in &generation.routers {
        listeners.insert(
            *key,
            listen(*key, router.clone(), generation.listener_settings(key), &shared).await?,
        );
    }
    let mut http = Vec::new();
    let mut http_addrs = Vec::new();
    for (addr, routes) in config.http_listeners() {
        let (l, bound) = start_http(&shared, addr, &routes).await?;
        http.push(l);
        http_addrs.push((bound, routes.iter().map(|r| r.path).collect()));
    }
    shared.readiness.replace(generation.readiness_checks());
    // The listeners are up: the plugins' background work (the loop probes, bounded: a few
    // tries per upstream; the hosts file's reload; errors' consolidation timers).
    generation.start();
    let reload = config.reload();
    let inner = Arc::new(Inner {
        shared,
        default_port,
        state: Mutex::new(Some(State {
            generation,
            listeners,
        })),
        applying: tokio::sync::Mutex::new(()),
        http: Mutex::new(http),
        http_addrs,
    });
    let reloader = reload.map(|r| {
        let weak = Arc::downgrade(&inner);
        tokio::spawn(reload_loop(weak, config.path.clone(), r))
    });
    Ok(Running { inner, reloader })
}
