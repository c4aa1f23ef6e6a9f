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
use crate::corefile::{Corefile, CorefileError};
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
use crate::telemetry::tcp::TcpMetrics;

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
}

impl Shared {
    fn new() -> Result<Self, StartError> {
        let metrics = DnsMetrics::new()?;
        // Every plugin's families from the start, as CoreDNS registers its plugins' at init.
        crate::plugin::registry::register_families(&metrics)?;
        let reload = ReloadMetrics::register(metrics.registry())?;
        let health_metrics = health::HealthMetrics::register(metrics.registry())?;
        let tcp = TcpMetrics::register(metrics.registry())?;
        Ok(Self {
            metrics,
            health_metrics,
            readiness: Readiness::default(),
            reload,
            tcp,
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
    chains: Vec<Chain>,
}

/// Where a group of server blocks listens: an address (`None`: all interfaces) and a port.
type ListenKey = (Option<IpAddr>, u16);

#[derive(Debug)]
struct Listener {
    addr: SocketAddr,
    cell: RouterCell,
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

fn zone_name(z: &str) -> Result<Name, StartError> {
    Name::from_ascii(z)
        .map(|n| n.to_lowercase())
        .map_err(|_| StartError::Zone(z.to_owned()))
}

/// The `server` label of a listen address, as CoreDNS writes it (`dns://:53`).
fn server_label(key: &ListenKey) -> String {
    match key {
        (None, port) => format!("dns://:{port}"),
        (Some(IpAddr::V6(ip)), port) => format!("dns://[{ip}]:{port}"),
        (Some(ip), port) => format!("dns://{ip}:{port}"),
    }
}

/// Builds everything `config` runs except sockets, keeping the sources of `previous` whose
/// configuration did not change.
async fn build(config: Config, shared: &Shared, previous: &[Arc<Source>]) -> Result<Generation, StartError> {
    let mut sources: Vec<Arc<Source>> = Vec::new();
    let mut routers: BTreeMap<ListenKey, Router> = BTreeMap::new();
    let mut chains = Vec::new();
    for block in &config.blocks {
        let mut cluster_zone = None;
        if let Some(k) = block.get::<KubernetesConfig>() {
            let source = match previous.iter().chain(sources.iter()).find(|s| s.config == *k) {
                Some(s) => s.clone(),
                None => Arc::new(new_source(k, &shared.metrics).await?),
            };
            cluster_zone = Some(source.zone.clone());
            sources.push(source);
        }
        let keys: Vec<ListenKey> = if block.bind().is_empty() {
            vec![(None, block.port)]
        } else {
            block.bind().iter().map(|ip| (Some(*ip), block.port)).collect()
        };
        // The plugin order and composition live in the registry (`plugin::registry`). One chain
        // serves every address of the block; its metrics carry the first address's label.
        let first_server = keys.first().map(server_label).unwrap_or_default();
        let ctx = BuildCtx {
            first_zone: block
                .zones
                .first()
                .and_then(|z| zone_name(z).ok())
                .unwrap_or_else(Name::root),
            server: &first_server,
            metrics: Some(&shared.metrics),
            source: cluster_zone.map(|z| z as Arc<dyn std::any::Any + Send + Sync>),
        };
        let (chain, observing) = build_chain(&block.plugins, &ctx);
        for o in &observing {
            o.start();
        }
        chains.push(chain.clone());
        let zones: Vec<Name> = block
            .zones
            .iter()
            .map(|z| zone_name(z))
            .collect::<Result<_, _>>()?;
        for key in keys {
            let server = server_label(&key);
            let observers = observers(block, &zones, shared, &server, &observing);
            routers.entry(key).or_default().blocks.push(BlockRoute {
                zones: zones.clone(),
                chain: chain.clone(),
                observers,
            });
        }
    }
    // Each address gets its answer memo once its blocks are known.
    let routers = routers.into_iter().map(|(k, r)| (k, r.with_memo())).collect();
    Ok(Generation {
        config,
        sources,
        routers,
        chains,
    })
}

async fn new_source(k: &KubernetesConfig, metrics: &DnsMetrics) -> Result<Source, StartError> {
    let zone = Arc::new(ClusterZone::new());
    let watch = match &k.source {
        ApiSource::Manifests(paths) => {
            let report = manifests::load_files(paths, &zone)?;
            tracing::info!(
                applied = report.applied,
                ignored = report.ignored,
                skipped = report.skipped.len(),
                services = zone.service_count(),
                "loaded cluster objects from manifests"
            );
            None
        }
        // The API source: serving starts at once; until the first lists are in, a would-be
        // NXDOMAIN is answered SERVFAIL.
        _ => {
            let families = metrics.families::<KubernetesMetrics>()?;
            Some(watch::start_with_metrics(&k.watch_options(), zone.clone(), Some(families)).await?)
        }
    };
    Ok(Source {
        config: k.clone(),
        zone,
        watch,
    })
}

/// The observers of `block` on the listener labelled `server`: its `prometheus` recorders and
/// its observing plugins.
fn observers(
    block: &BlockConfig,
    zones: &[Name],
    shared: &Shared,
    server: &str,
    plugins: &[Arc<dyn Observer>],
) -> Observers {
    let metrics = block.get::<PrometheusConfig>().map(|_| {
        for zone in &block.zones {
            for name in block.plugin_names() {
                shared.metrics.plugin_enabled(server, zone, name);
            }
        }
        BlockMetrics::new(&shared.metrics, server, zones)
    });
    Observers {
        metrics,
        plugins: plugins.to_vec(),
    }
}

#[derive(Debug)]
struct Synced(SyncState);

impl ReadinessCheck for Synced {
    fn name(&self) -> &str {
        "kubernetes"
    }
    fn is_ready(&self) -> bool {
        self.0.is_synced()
    }
    fn why_not(&self) -> Vec<String> {
        let waiting = self.0.waiting();
        if waiting.is_empty() {
            // Synced since `is_ready` was asked.
            return vec!["kubernetes".to_owned()];
        }
        waiting.into_iter().map(|w| format!("kubernetes: {w}")).collect()
    }
}

/// A plugin's own readiness ([`Plugin::not_ready`]), as `/ready` reads it.
#[derive(Debug)]
struct PluginReady(Arc<dyn Plugin>);

impl ReadinessCheck for PluginReady {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn is_ready(&self) -> bool {
        self.0.not_ready().is_none()
    }
}

fn readiness_checks(g: &Generation) -> Vec<Arc<dyn ReadinessCheck>> {
    let mut checks: Vec<Arc<dyn ReadinessCheck>> = Vec::new();
    for s in &g.sources {
        if let Some(w) = &s.watch {
            checks.push(Arc::new(Synced(w.sync_state())));
        }
    }
    for chain in &g.chains {
        for p in chain.plugins() {
            checks.push(Arc::new(PluginReady(p.clone())));
        }
    }
    checks
}

async fn bind_dns(key: ListenKey) -> Result<server::Listeners, ServerError> {
    match key {
        (Some(ip), port) => server::bind(SocketAddr::new(ip, port)).await,
        // All interfaces: dual-stack where the host has IPv6, else IPv4 only.
        (None, port) => match server::bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)).await {
            Ok(s) => Ok(s),
            Err(_) => server::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)).await,
        },
    }
}

async fn listen(key: ListenKey, router: Router, tcp: &TcpMetrics) -> Result<Listener, ServerError> {
    let sockets = bind_dns(key).await?;
    let addr = sockets.local_addr().map_err(|source| ServerError::Bind {
        addr: format!("{key:?}"),
        source,
    })?;
    let zone_list: Vec<String> = router
        .blocks
        .iter()
        .flat_map(|b| b.zones.iter().map(|z| z.to_string()))
        .collect();
    tracing::info!(%addr, zones = %zone_list.join(" "), "serving DNS over UDP and TCP");
    let cell = server::router_cell(router);
    let (stop, rx) = oneshot::channel::<()>();
    let tcp_limits = server::tcp::TcpLimits {
        metrics: Some(tcp.listener(&server_label(&key))),
        ..server::tcp::TcpLimits::from_env()
    };
    let task = tokio::spawn(server::serve_with(
        cell.clone(),
        vec![sockets],
        tcp_limits,
        async move {
            let _ = rx.await;
        },
    ));
    Ok(Listener {
        addr,
        cell,
        stop,
        task,
    })
}

async fn start_http(
    shared: &Shared,
    addr: SocketAddr,
    what: HttpEndpoints,
) -> Result<(HttpListener, SocketAddr), StartError> {
    let mut router = axum::Router::new();
    let mut names = Vec::new();
    if what.health {
        router = router.merge(health::router());
        names.push("/health");
    }
    if what.ready {
        router = router.merge(shared.readiness.router());
        names.push("/ready");
    }
    if what.metrics {
        router = router.merge(shared.metrics.router());
        names.push("/metrics");
    }
    let listener = crate::http::bind_http(addr)
        .await
        .map_err(|source| StartError::Http {
            addr,
            what: names.join(" "),
            source,
        })?;
    let bound = listener.local_addr().unwrap_or(addr);
    tracing::info!(addr = %bound, paths = %names.join(" "), "serving HTTP");
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(crate::http::serve(listener, router, async move {
        let _ = rx.await;
    }));
    let probe = what
        .health
        .then(|| tokio::spawn(health::self_probe(bound, shared.health_metrics.clone())));
    Ok((HttpListener { probe, stop, task }, bound))
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
        listeners.insert(*key, listen(*key, router.clone(), &shared.tcp).await?);
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

/// The `reload` plugin's timer: re-reads the Corefile every interval (± jitter) and applies it
/// when it changed. Ends when the server stops.
async fn reload_loop(inner: Weak<Inner>, path: std::path::PathBuf, cfg: crate::plugin::reload::ReloadConfig) {
    let mut detector = ChangeDetector::new(&path);
    loop {
        let jitter = cfg.jitter.as_millis() as u64;
        let wait = if jitter == 0 {
            cfg.interval
        } else {
            let offset = rand::random_range(0..=2 * jitter);
            (cfg.interval + Duration::from_millis(offset)).saturating_sub(cfg.jitter)
        };
        tokio::time::sleep(wait).await;
        let Some(text) = detector.poll() else {
            if inner.strong_count() == 0 {
                return;
            }
            continue;
        };
        let Some(inner) = inner.upgrade() else { return };
        let parsed = match std::str::from_utf8(&text) {
            Ok(t) => Corefile::parse_str(t, &path)
                .and_then(|cf| Config::from_corefile(&cf, &path, inner.default_port))
                .map_err(StartError::from),
            Err(_) => Err(StartError::NotUtf8(path.clone())),
        };
        let applied = match parsed {
            Ok(config) => apply(&inner, config).await,
            Err(e) => Err(e),
        };
        match applied {
            Ok(()) => inner.shared.reload.running(&text),
            Err(e) => {
                inner.shared.reload.failed();
                tracing::error!("reload: {e}; the running configuration keeps serving");
            }
        }
    }
}

/// Applies `config`: builds it beside the running generation, waits (bounded) for new API
/// sources to sync, binds new addresses, then swaps each kept address's routing table and stops
/// the addresses no longer listed.
async fn apply(inner: &Inner, config: Config) -> Result<(), StartError> {
    let previous: Vec<Arc<Source>> = {
        let state = inner
            .state
            .lock()
            .map_err(|_| ServerError::Serve("state lock poisoned".into()))?;
        match state.as_ref() {
            Some(s) => s.generation.sources.clone(),
            None => return Ok(()),
        }
    };
    if config.http_listeners() != inner.http_addrs_as_configured() {
        tracing::warn!("reload: changed health/ready/prometheus addresses take effect after a restart");
    }
    let generation = build(config, &inner.shared, &previous).await?;
    // A new API source answers SERVFAIL until synced: give it time before it takes traffic.
    for s in &generation.sources {
        if previous.iter().any(|p| Arc::ptr_eq(p, s)) {
            continue;
        }
        if let Some(w) = &s.watch {
            let state = w.sync_state();
            for _ in 0..600 {
                if state.is_synced() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    let running_keys: Vec<ListenKey> = inner
        .state
        .lock()
        .ok()
        .and_then(|s| s.as_ref().map(|s| s.listeners.keys().copied().collect()))
        .unwrap_or_default();
    let mut fresh = BTreeMap::new();
    for (key, router) in &generation.routers {
        if !running_keys.contains(key) {
            fresh.insert(*key, listen(*key, router.clone(), &inner.shared.tcp).await?);
        }
    }
    let mut stopped = Vec::new();
    {
        let mut guard = inner
            .state
            .lock()
            .map_err(|_| ServerError::Serve("state lock poisoned".into()))?;
        let Some(state) = guard.as_mut() else {
            return Ok(());
        };
        for (key, listener) in &state.listeners {
            if let Some(router) = generation.routers.get(key) {
                listener.cell.store(Arc::new(router.clone()));
            }
        }
        let gone: Vec<ListenKey> = state
            .listeners
            .keys()
            .filter(|k| !generation.routers.contains_key(k))
            .copied()
            .collect();
        for k in gone {
            if let Some(l) = state.listeners.remove(&k) {
                stopped.push(l);
            }
        }
        state.listeners.extend(fresh);
        inner.shared.readiness.replace(readiness_checks(&generation));
        for chain in &generation.chains {
            chain.start();
        }
        state.generation = generation;
    }
    for l in stopped {
        tracing::info!(addr = %l.addr, "reload: no server block listens here any more; stopped");
        let _ = l.stop.send(());
        let _ = l.task.await;
    }
    tracing::info!("reload: new configuration applied");
    Ok(())
}

impl Inner {
    fn http_addrs_as_configured(&self) -> Vec<(SocketAddr, HttpEndpoints)> {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| s.generation.config.http_listeners()))
            .unwrap_or_default()
    }
}
