//! Start-up, reload and shutdown: turns a [`Config`] into running listeners and keeps them
//! running through Corefile changes.
//!
//! [`start`] fills each `kubernetes` plugin's zone from its source, builds the chains, groups
//! server blocks by listen address, binds and serves DNS, and starts the HTTP listeners of
//! `health`, `ready` and `prometheus`. A reload ([`Running::reload`], or the `reload` plugin's
//! timer) builds the new configuration beside the running one and swaps each listen address's
//! routing table in one store, so no query is dropped: listeners that stay keep their sockets,
//! a `kubernetes` source whose configuration did not change is kept with its zone, and a broken
//! Corefile is refused while the old one keeps serving. [`Running::shutdown`] is SIGTERM's
//! lameduck: `/ready` turns 503 at once, DNS keeps answering for the lameduck duration, then
//! the listeners stop.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hickory_proto::rr::Name;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::chain::BuildCtx;
use crate::chain::{Chain, Observer, Plugin};
use crate::cluster::metrics::KubernetesMetrics;
use crate::cluster::watch::{self, SyncState, WatchSource};
use crate::cluster::{ClusterZone, manifests};
use crate::config::{BlockConfig, Config, HttpEndpoints};
use crate::corefile::{Corefile, CorefileError, Scheme};
use crate::plugin::health;
use crate::plugin::kubernetes::setup::{ApiSource, KubernetesConfig};
use crate::plugin::loop_detect::{LoopDetect, LoopStatus};
use crate::plugin::metrics::PrometheusConfig;
use crate::plugin::ready::{Readiness, ReadinessCheck};
use crate::plugin::registry::build_chain;
use crate::plugin::reload::{ChangeDetector, ReloadMetrics};
use crate::server::observe::Observers;
use crate::server::{self, BlockRoute, Router, RouterCell, ServerError};
use crate::telemetry::BlockMetrics;
use crate::telemetry::DnsMetrics;
use crate::telemetry::memo::MemoMetrics;
use crate::telemetry::tcp::TcpMetrics;

mod build;
mod listen;
mod reload;

use build::*;
use listen::*;
use reload::*;

/// Why the server could not start (or a new configuration could not be applied).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A manifest file could not be loaded.
    #[error(transparent)]
    Manifest(#[from] manifests::ManifestError),
    /// A listener could not be bound.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// A zone in the configuration is not a valid DNS name.
    #[error("invalid zone '{0}'")]
    Zone(String),
    /// The Kubernetes API source could not be set up.
    #[error(transparent)]
    Watch(#[from] watch::WatchError),
    /// An HTTP listener (`health`, `ready`, `prometheus`) could not be bound.
    #[error("cannot listen on {addr} for {what}: {source}")]
    Http {
        /// The address.
        addr: SocketAddr,
        /// What it serves.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The metrics registry refused a metric (a bug).
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// A reloaded Corefile is not UTF-8 text.
    #[error("{}: the Corefile is not UTF-8 text", .0.display())]
    NotUtf8(std::path::PathBuf),
    /// A reloaded Corefile is not valid.
    #[error(transparent)]
    Corefile(#[from] CorefileError),
}

/// Process-wide state that outlives every configuration: the metric families (so counters keep
/// counting through reloads) and the readiness registry `/ready` reads.
#[derive(Debug, Clone)]
struct Shared {
    metrics: DnsMetrics,
    health_metrics: health::HealthMetrics,
    readiness: Readiness,
    reload: ReloadMetrics,
    tcp: TcpMetrics,
    memo: MemoMetrics,
}

impl Shared {
    fn new() -> Result<Self, StartError> {
        let metrics = DnsMetrics::new()?;
        // Every plugin's families from the start, as CoreDNS registers its plugins' at init.
        crate::plugin::registry::register_families(&metrics)?;
        let reload = ReloadMetrics::register(metrics.registry())?;
        let health_metrics = health::HealthMetrics::register(metrics.registry())?;
        let tcp = TcpMetrics::register(metrics.registry())?;
        let memo = MemoMetrics::register(metrics.registry())?;
        Ok(Self {
            metrics,
            health_metrics,
            readiness: Readiness::default(),
            reload,
            tcp,
            memo,
        })
    }
}

/// One `kubernetes` plugin's data: its zone and, for the API source, the watches filling it.
/// Shared by the generations whose configuration of that plugin is the same.
#[derive(Debug)]
struct Source {
    config: KubernetesConfig,
    zone: Arc<ClusterZone>,
    watch: Option<WatchSource>,
}

/// What one configuration runs: its sources, its routing tables and its chains (one per server
/// block, whose background work starts once the listeners are up).
#[derive(Debug)]
struct Generation {
    config: Config,
    sources: Vec<Arc<Source>>,
    routers: BTreeMap<ListenKey, Router>,
    /// The TLS configuration of each `tls://` or `https://` listen address whose blocks have
    /// a `tls` directive (the first block's).
    tls: BTreeMap<ListenKey, Arc<tokio_rustls::rustls::ServerConfig>>,
    chains: Vec<Chain>,
}

/// Where a group of server blocks listens: an address (`None`: all interfaces), a port, and
/// how questions arrive there.
type ListenKey = (Option<IpAddr>, u16, Scheme);

#[derive(Debug)]
struct Listener {
    addr: SocketAddr,
    cell: RouterCell,
    /// What its connections speak (its TLS configuration is replaced on reload).
    protocol: server::tcp::StreamProtocol,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), ServerError>>,
}

#[derive(Debug)]
struct State {
    generation: Generation,
    listeners: BTreeMap<ListenKey, Listener>,
}

#[derive(Debug)]
struct HttpListener {
    /// `/health`'s self-probe, when this listener serves it.
    probe: Option<JoinHandle<()>>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

#[derive(Debug)]
struct Inner {
    shared: Shared,
    default_port: u16,
    state: Mutex<Option<State>>,
    http: Mutex<Vec<HttpListener>>,
    http_addrs: Vec<(SocketAddr, HttpEndpoints)>,
}

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

    /// The HTTP listeners with their real ports and what each serves.
    pub fn http_addrs(&self) -> &[(SocketAddr, HttpEndpoints)] {
        &self.inner.http_addrs
    }

    /// The address serving `/health`, `/ready` or `/metrics` (`path` without the slash).
    pub fn http_addr(&self, path: &str) -> Option<SocketAddr> {
        self.inner
            .http_addrs
            .iter()
            .find(|(_, e)| match path {
                "health" => e.health,
                "ready" => e.ready,
                "metrics" => e.metrics,
                _ => false,
            })
            .map(|(a, _)| *a)
    }

    /// Responses held in the answer memos of every listen address (see [`server::memo`]).
    pub fn memoized(&self) -> usize {
        self.with_state(|s| s.listeners.values().map(|l| l.cell.load().memo.len()).sum())
            .unwrap_or_default()
    }

    /// The cluster zones, one per `kubernetes` plugin, in block order.
    pub fn zones(&self) -> Vec<Arc<ClusterZone>> {
        self.with_state(|s| s.generation.sources.iter().map(|src| src.zone.clone()).collect())
            .unwrap_or_default()
    }

    /// The sync state of every `kubernetes` plugin that watches the API, in block order.
    pub fn sync_states(&self) -> Vec<SyncState> {
        self.with_state(|s| {
            s.generation
                .sources
                .iter()
                .filter_map(|src| src.watch.as_ref().map(WatchSource::sync_state))
                .collect()
        })
        .unwrap_or_default()
    }

    /// What each `loop` plugin found, in block order (for metrics and `/ready`).
    pub fn loop_statuses(&self) -> Vec<Arc<LoopStatus>> {
        self.with_state(|s| {
            s.generation
                .chains
                .iter()
                .filter_map(|c| c.find::<LoopDetect>().map(|l| l.status().clone()))
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

    /// SIGTERM: `/ready` turns 503 at once, DNS keeps answering for the lameduck duration, then
    /// every listener stops.
    pub async fn shutdown(self) -> Result<(), ServerError> {
        self.inner.shared.readiness.set_shutting_down();
        let lameduck = self.lameduck();
        if !lameduck.is_zero() {
            tracing::info!(
                ?lameduck,
                "lameduck: /ready is 503; still answering DNS until it ends"
            );
            tokio::time::sleep(lameduck).await;
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
            if let Some(p) = h.probe {
                p.abort();
            }
            let _ = h.stop.send(());
            let _ = h.task.await;
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
                if let Some(p) = h.probe {
                    p.abort();
                }
                let _ = h.stop.send(());
            }
        }
    }
}

/// The host's name as the kernel holds it (what Go's `os.Hostname` reads on Linux), or
/// `localhost` when it cannot be read, as CoreDNS's `chaos` falls back.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Loads the zones, binds every listener of `config` and starts serving.
pub async fn start(config: &Config) -> Result<Running, StartError> {
    start_with_port(config, crate::config::DEFAULT_DNS_PORT).await
}

/// As [`start`]; a reloaded Corefile's keys without a port get `default_port` (`-dns.port`).
pub async fn start_with_port(config: &Config, default_port: u16) -> Result<Running, StartError> {
    let shared = Shared::new()?;
    if let Ok(text) = std::fs::read(&config.path) {
        shared.reload.running(&text);
    }
    let generation = build(config.clone(), &shared, &[]).await?;
    let mut listeners = BTreeMap::new();
    for (key, router) in &generation.routers {
        let tls = generation.tls.get(key).cloned();
        listeners.insert(*key, listen(*key, router.clone(), tls, &shared.tcp).await?);
    }
    let mut http = Vec::new();
    let mut http_addrs = Vec::new();
    for (addr, what) in config.http_listeners() {
        let (l, bound) = start_http(&shared, addr, what).await?;
        http.push(l);
        http_addrs.push((bound, what));
    }
    shared.readiness.replace(readiness_checks(&generation));
    // The listeners are up: the plugins' background work (the loop probes, bounded: a few
    // tries per upstream; the hosts file's reload).
    for chain in &generation.chains {
        chain.start();
    }
    let reload = config.reload();
    let inner = Arc::new(Inner {
        shared,
        default_port,
        state: Mutex::new(Some(State {
            generation,
            listeners,
        })),
        http: Mutex::new(http),
        http_addrs,
    });
    let reloader = reload.map(|r| {
        let weak = Arc::downgrade(&inner);
        tokio::spawn(reload_loop(weak, config.path.clone(), r))
    });
    Ok(Running { inner, reloader })
}
