//! The Kubernetes API source: builds a `kube` client from the `kubernetes` plugin's connection
//! options and keeps a [`ClusterZone`] in step with the API server through one kube-runtime
//! watcher per resource (Namespaces, Services, EndpointSlices and, with `pods verified`, Pods).
//!
//! What this module owns:
//! - the connection: in-cluster service account (default), `endpoint URL` (http or https, with
//!   `tls CERT KEY CACERT`), or `kubeconfig PATH [CONTEXT]`;
//! - the filters: `namespaces` gives one namespaced watch per listed namespace, `labels` is sent
//!   to the API as the label selector of the Service, EndpointSlice and Pod watches,
//!   `namespace_labels` as the one of the Namespace watch;
//! - applying events object by object. Objects are watched as [`DynamicObject`]s and converted
//!   one at a time, so a malformed object is skipped with a warning that names it instead of
//!   failing the whole list;
//! - streaming lists: the first list of each watch (and each relist) is a watch with
//!   `sendInitialEvents=true`, whose objects arrive one at a time and end with the
//!   initial-events-end bookmark, so no page of decoded objects is ever held. The paginated
//!   list is the fallback: for an API server older than 1.27 by `GET /version` (it would ignore
//!   the parameter), and for one that refuses it (`422 Invalid`: the WatchList feature gate is
//!   off), which the watch then lists in pages for good ([`ListMode`]);
//! - relists without two copies: on `Init` a set of the keys seen starts, every `InitApply` is
//!   applied in place (the zone swaps each service's record set whole), and on `InitDone` what
//!   the zone holds in that watch's scope but the list did not have is deleted;
//! - sync state ([`SyncState`]): the zone is marked synced once every watch has completed its
//!   first list; `/ready` reads the same state;
//! - faults: a watch never ends; after an error it waits out its own [`RetrySchedule`]
//!   (jittered, doubling from 1 s to 30 s as client-go's reflector) before it polls kube's
//!   watcher again, and the schedule starts over only after a completed list or a real event
//!   (kube-runtime's own backoff starts over on the `Init` it emits before every list, so a list
//!   that keeps failing was retried about once a second). After a refused connection the wait
//!   also ends as soon as the API server's port accepts a TCP connection again, so an outage's
//!   end is caught up within about a second. Each distinct error is logged once per
//!   watch with its whole cause chain (rustls's reason for a TLS failure, the API's status for an
//!   HTTP error; RBAC Forbidden at ERROR naming the verb and the resource), and the recovery
//!   once; `/ready` names each watch still waiting and its last error ([`SyncState::waiting`]);
//! - the DNS programming latency ([`start_with_metrics`]): for every EndpointSlice change that
//!   arrives as a watch event after the first list, the time from the slice's
//!   `endpoints.kubernetes.io/last-change-trigger-time` to the moment it is in the zone (see
//!   [`crate::cluster::metrics`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher::{self, Event};
use tokio::task::JoinHandle;

use super::ClusterZone;
use super::model::{PodInfo, ServiceInfo, SliceInfo, namespace_name};
use crate::cluster::metrics::{
    KubernetesMetrics, ProgrammedKind, last_change_trigger_time, programming_latency,
};

/// Page size of the initial lists of Services, Namespaces and Pods (client-go's default).
const PAGE_SIZE: u32 = 500;
/// Page size of the initial EndpointSlice list. Slices are large (up to 100 endpoints each), and
/// kube holds a whole page decoded while it hands the objects out: those short-lived blocks sit
/// between the zone's long-lived ones, and the heap they fragment stays. `bench/watch.sh`
/// (1,500 slices of 100 endpoints), steady RSS by page size: 50, 63-67 MB; 25, 53-54 MB; 20,
/// 50-51 MB; 10, 46 MB with the start 30% slower. 20 costs 76 list requests for those slices.
const SLICE_PAGE_SIZE: u32 = 20;

/// Why the API source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// The in-cluster service-account configuration could not be read.
    #[error(
        "kubernetes: in-cluster configuration is not available (not running in a pod?): {source}. Outside a cluster, add `endpoint URL` or `kubeconfig PATH` to the kubernetes block (see `fake-apiserver` for a local API server)"
    )]
    InCluster {
        /// kube's error.
        #[source]
        source: kube::config::InClusterError,
    },
    /// `endpoint URL` is not a valid URL.
    #[error("kubernetes: endpoint '{url}' is not a valid URL: {message}")]
    Endpoint {
        /// The URL as written.
        url: String,
        /// The parser's message.
        message: String,
    },
    /// The kubeconfig file (or the one built for `tls`) could not be loaded.
    #[error("kubernetes: cannot load kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        /// The file (for `tls`, the endpoint URL).
        path: PathBuf,
        /// kube's error.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The HTTP client could not be built from the configuration.
    #[error("kubernetes: cannot build the API client for {url}: {source}")]
    Client {
        /// The API server URL.
        url: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// The source is not an API source (`manifests` is loaded elsewhere).
    #[error("kubernetes: not an API source")]
    NotApi,
}

/// The resources the source watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    /// core/v1 Namespaces (cluster-scoped).
    Namespaces,
    /// core/v1 Services.
    Services,
    /// discovery.k8s.io/v1 EndpointSlices.
    EndpointSlices,
    /// core/v1 Pods (only with `pods verified`).
    Pods,
}

impl Resource {
    /// The resource as RBAC names it (`services`, `endpointslices.discovery.k8s.io`, ...).
    pub fn rbac_name(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::Services => "services",
            Self::EndpointSlices => "endpointslices.discovery.k8s.io",
            Self::Pods => "pods",
        }
    }

    /// The kind of its objects.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Namespaces => "Namespace",
            Self::Services => "Service",
            Self::EndpointSlices => "EndpointSlice",
            Self::Pods => "Pod",
        }
    }

    fn api_resource(self) -> ApiResource {
        match self {
            Self::Namespaces => ApiResource::erase::<Namespace>(&()),
            Self::Services => ApiResource::erase::<Service>(&()),
            Self::EndpointSlices => ApiResource::erase::<EndpointSlice>(&()),
            Self::Pods => ApiResource::erase::<Pod>(&()),
        }
    }
}

/// How long a failing watch waits before its next attempt: `initial` after the first failure,
/// doubling after each further one up to `max`, every delay jittered down by up to a fifth so
/// that replicas started together spread their retries. The default is 1 s to 30 s (each delay
/// 0.8-1 s at first, 24-30 s at the cap), client-go's reflector range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySchedule {
    /// The delay after the first failure (before jitter).
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for RetrySchedule {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
        }
    }
}

impl RetrySchedule {
    /// The delay before the next attempt after `failures` failures in a row (at least 1),
    /// before jitter.
    pub fn base(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.initial.saturating_mul(1 << doublings).min(self.max)
    }

    /// [`RetrySchedule::base`] jittered down by up to 20 %: between 0.8 and 1 times it.
    pub fn delay(&self, failures: u32) -> Duration {
        self.base(failures).mul_f64(rand::random_range(0.8..=1.0))
    }
}

/// One watch's state. Invariant: only the watch's own task writes it (`synced` goes from false
/// to true once; `failures` and `last_error` are set on each error and cleared on recovery);
/// `/ready` and tests only read it, and may see an error that is being cleared, which is
/// harmless (the next read is current).
#[derive(Debug)]
struct WatchStatus {
    /// `services`, `pods in testns`.
    name: String,
    /// Whether its first list has completed.
    synced: AtomicBool,
    /// Failed attempts since the last completed list or real event.
    failures: AtomicU32,
    /// The last error (one line, with its cause chain) and when the next attempt is due,
    /// while it keeps failing.
    last_error: Mutex<Option<(String, Instant)>>,
    /// Whether this watch is counted in the pending-watches gauge. Whoever swaps it from true to
    /// false (the first list, or the source's stop) takes it out of the gauge, so it is
    /// decremented exactly once however the two race.
    counted: AtomicBool,
}

/// Whether every watch of one `kubernetes` plugin has completed its first list, and why the
/// others are still waiting. Cheap to clone; `/ready` reads it.
#[derive(Debug, Clone)]
pub struct SyncState {
    inner: Arc<[WatchStatus]>,
    /// `cluster_dns_kubernetes_watches_pending`, when metrics are recorded.
    pending: Option<prometheus::IntGauge>,
}

impl SyncState {
    #[cfg(test)]
    fn new(names: Vec<String>) -> Self {
        Self::counted(names, None)
    }

    /// A state whose unsynced watches are counted in `pending` until their first list.
    fn counted(names: Vec<String>, pending: Option<prometheus::IntGauge>) -> Self {
        if let Some(g) = &pending {
            g.add(i64::try_from(names.len()).unwrap_or(0));
        }
        let counted = pending.is_some();
        Self {
            inner: names
                .into_iter()
                .map(|name| WatchStatus {
                    name,
                    synced: AtomicBool::new(false),
                    failures: AtomicU32::new(0),
                    last_error: Mutex::new(None),
                    counted: AtomicBool::new(counted),
                })
                .collect(),
            pending,
        }
    }

    /// Takes watch `w` out of the pending gauge, if it is still in it.
    fn uncount(&self, w: &WatchStatus) {
        if w.counted.swap(false, Ordering::AcqRel)
            && let Some(g) = &self.pending
        {
            g.dec();
        }
    }

    /// The source stopped: its watches no longer wait for anything.
    fn release(&self) {
        for w in self.inner.iter() {
            self.uncount(w);
        }
    }

    /// True once every watch has completed its first list (it stays true through later errors
    /// and relists: the last-known zone keeps answering).
    pub fn is_synced(&self) -> bool {
        self.inner.iter().all(|w| w.synced.load(Ordering::Acquire))
    }

    /// The watches that have not completed their first list, such as `services` or
    /// `endpointslices.discovery.k8s.io in testns`.
    pub fn pending(&self) -> Vec<String> {
        self.inner
            .iter()
            .filter(|w| !w.synced.load(Ordering::Acquire))
            .map(|w| w.name.clone())
            .collect()
    }

    /// One line per watch that has not completed its first list, saying why:
    /// `endpointslices.discovery.k8s.io: 403 Forbidden: ... (3 failed attempts)`, or
    /// `services: waiting for the first list` while no attempt has failed yet.
    pub fn waiting(&self) -> Vec<String> {
        self.inner
            .iter()
            .filter(|w| !w.synced.load(Ordering::Acquire))
            .map(|w| {
                let error = w.last_error.lock().map(|e| e.clone()).unwrap_or_default();
                match error {
                    Some((e, next)) => {
                        let n = w.failures.load(Ordering::Acquire);
                        let s = if n == 1 { "" } else { "s" };
                        let wait = next.saturating_duration_since(Instant::now()).as_secs_f32();
                        format!("{}: {e} ({n} failed attempt{s}, next in {wait:.0} s)", w.name)
                    }
                    None => format!("{}: waiting for the first list", w.name),
                }
            })
            .collect()
    }

    /// Failed attempts in a row of the watch named `watch` (0 after a success); `None` for an
    /// unknown name.
    pub fn failures(&self, watch: &str) -> Option<u32> {
        self.inner
            .iter()
            .find(|w| w.name == watch)
            .map(|w| w.failures.load(Ordering::Acquire))
    }

    /// When the watch named `watch` is next due to retry by its schedule (it may retry
    /// earlier: see [`WatchTask::wait`]); `None` while it is not failing.
    pub fn next_retry(&self, watch: &str) -> Option<Instant> {
        let w = self.inner.iter().find(|w| w.name == watch)?;
        w.last_error.lock().ok()?.as_ref().map(|(_, next)| *next)
    }

    fn mark(&self, index: usize) -> bool {
        if let Some(w) = self.inner.get(index) {
            w.synced.store(true, Ordering::Release);
            self.uncount(w);
        }
        self.is_synced()
    }

    /// Records a failed attempt of watch `index`; returns the failures in a row.
    fn fail(&self, index: usize, error: &str) -> u32 {
        let Some(w) = self.inner.get(index) else { return 0 };
        if let Ok(mut e) = w.last_error.lock() {
            *e = Some((error.to_owned(), Instant::now()));
        }
        w.failures.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Watch `index`'s next attempt is due at `at`.
    fn retry_at(&self, index: usize, at: Instant) {
        if let Some(w) = self.inner.get(index)
            && let Ok(mut e) = w.last_error.lock()
            && let Some((_, next)) = e.as_mut()
        {
            *next = at;
        }
    }

    /// Watch `index` succeeded: clears its failures; returns how many there were.
    fn recover(&self, index: usize) -> u32 {
        let Some(w) = self.inner.get(index) else { return 0 };
        if let Ok(mut e) = w.last_error.lock() {
            *e = None;
        }
        w.failures.swap(0, Ordering::AcqRel)
    }
}

/// The running watches of one `kubernetes` plugin. Dropping it (or [`WatchSource::stop`]) stops
/// them.
#[derive(Debug)]
pub struct WatchSource {
    sync: SyncState,
    tasks: Vec<JoinHandle<()>>,
}

impl WatchSource {
    /// The sync state (for `/ready`).
    pub fn sync_state(&self) -> SyncState {
        self.sync.clone()
    }

    /// Stops every watch.
    pub fn stop(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        self.sync.release();
    }
}

impl Drop for WatchSource {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where the cluster's objects come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiSource {
    /// The in-cluster service account (the default).
    InCluster,
    /// `endpoint URL`: the API server at that URL.
    Endpoint(String),
    /// `kubeconfig PATH [CONTEXT]` (wins over `endpoint`, as in CoreDNS).
    Kubeconfig {
        /// The kubeconfig file, as written (relative to the working directory, as in CoreDNS).
        path: PathBuf,
        /// The context; `None` for the file's current-context.
        context: Option<String>,
    },
    /// `manifests PATH...` (cluster-dns only): Kubernetes YAML files, relative to the
    /// Corefile's directory.
    Manifests(Vec<PathBuf>),
}

/// What the API source watches and how it connects: the `kubernetes` plugin's options that
/// concern the data, handed over as plain values (the cluster layer knows no Corefile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchOptions {
    /// Where the objects come from.
    pub source: ApiSource,
    /// A client certificate, key and CA for the API connection (already resolved paths).
    pub tls: Option<(PathBuf, PathBuf, PathBuf)>,
    /// The namespaces watched, lower-case; empty means all.
    pub namespaces: Vec<String>,
    /// A label selector on Namespaces.
    pub namespace_labels: Option<String>,
    /// A label selector on Services, EndpointSlices and Pods.
    pub labels: Option<String>,
    /// Pods are watched (`pods verified`).
    pub pods: bool,
    /// Endpoints keep their pod's name (`endpoint_pod_names`).
    pub endpoint_pod_names: bool,
}

impl Default for WatchOptions {
    /// The in-cluster source, every namespace, no selectors, no pods.
    fn default() -> Self {
        Self {
            source: ApiSource::InCluster,
            tls: None,
            namespaces: Vec::new(),
            namespace_labels: None,
            labels: None,
            pods: false,
            endpoint_pod_names: false,
        }
    }
}

/// Builds the kube client configuration for `config`'s source.
pub async fn client_config(config: &WatchOptions) -> Result<kube::Config, WatchError> {
    match &config.source {
        ApiSource::InCluster => kube::Config::incluster().map_err(|source| WatchError::InCluster { source }),
        ApiSource::Endpoint(url) => match &config.tls {
            None => match url.parse() {
                Ok(uri) => Ok(kube::Config::new(uri)),
                Err(e) => Err(WatchError::Endpoint {
                    url: url.clone(),
                    message: e.to_string(),
                }),
            },
            Some((cert, key, ca)) => {
                // A kubeconfig in memory, so that kube loads the files as it does for a real one.
                let q = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
                let text = format!(
                    "{{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"current-context\":\"c\",\"clusters\":[{{\"name\":\"c\",\"cluster\":{{\"server\":{},\"certificate-authority\":{}}}}}],\"users\":[{{\"name\":\"u\",\"user\":{{\"client-certificate\":{},\"client-key\":{}}}}}],\"contexts\":[{{\"name\":\"c\",\"context\":{{\"cluster\":\"c\",\"user\":\"u\"}}}}]}}",
                    q(url),
                    q(&ca.to_string_lossy()),
                    q(&cert.to_string_lossy()),
                    q(&key.to_string_lossy()),
                );
                let err = |source| WatchError::Kubeconfig {
                    path: PathBuf::from(url),
                    source,
                };
                let kc = Kubeconfig::from_yaml(&text).map_err(err)?;
                kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .map_err(err)
            }
        },
        ApiSource::Kubeconfig { path, context } => {
            let err = |source| WatchError::Kubeconfig {
                path: path.clone(),
                source,
            };
            let kc = Kubeconfig::read_from(path).map_err(err)?;
            let options = KubeConfigOptions {
                context: context.clone(),
                ..KubeConfigOptions::default()
            };
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(err)
        }
        ApiSource::Manifests(_) => Err(WatchError::NotApi),
    }
}

/// One watch to run: a resource in a scope with a label selector.
#[derive(Debug, Clone)]
struct WatchSpec {
    resource: Resource,
    namespace: Option<String>,
    labels: Option<String>,
}

impl WatchSpec {
    fn name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} in {ns}", self.resource.rbac_name()),
            None => self.resource.rbac_name().to_owned(),
        }
    }

    fn scope(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "at the cluster scope".to_owned(),
        }
    }
}

fn watch_specs(config: &WatchOptions) -> Vec<WatchSpec> {
    let mut resources = vec![Resource::Services, Resource::EndpointSlices];
    if config.pods {
        resources.push(Resource::Pods);
    }
    let mut specs = vec![WatchSpec {
        resource: Resource::Namespaces,
        namespace: None,
        labels: config.namespace_labels.clone(),
    }];
    for resource in resources {
        if config.namespaces.is_empty() {
            specs.push(WatchSpec {
                resource,
                namespace: None,
                labels: config.labels.clone(),
            });
        } else {
            for ns in &config.namespaces {
                specs.push(WatchSpec {
                    resource,
                    namespace: Some(ns.clone()),
                    labels: config.labels.clone(),
                });
            }
        }
    }
    specs
}

/// Connects to the API server named by `config` and starts the watches that fill `zone`. It
/// returns at once: the watches list, retry and follow in background tasks, and the zone is
/// marked synced when all of them have completed their first list.
pub async fn start(config: &WatchOptions, zone: Arc<ClusterZone>) -> Result<WatchSource, WatchError> {
    start_with_metrics(config, zone, None).await
}

/// [`start`], recording the DNS programming latency of EndpointSlice changes into `metrics`
/// (`coredns_kubernetes_dns_programming_duration_seconds`) when given.
pub async fn start_with_metrics(
    config: &WatchOptions,
    zone: Arc<ClusterZone>,
    metrics: Option<KubernetesMetrics>,
) -> Result<WatchSource, WatchError> {
    let mut kube_config = client_config(config).await?;
    // kube's client retries 429/503/504 inside itself (15 times, from 5 ms), out of sight of
    // the watch task: the watch's own schedule covers those too, so that every failure is
    // counted, shown by `/ready` and logged once.
    kube_config.default_retry = false;
    let url = kube_config.cluster_url.to_string();
    let probe = probe_address(&kube_config).map(Arc::new);
    let host = kube_config
        .cluster_url
        .authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_default();
    let builder =
        kube::client::ClientBuilder::try_from(kube_config).map_err(|source| WatchError::Client {
            url: url.clone(),
            source,
        })?;
    // Every request of every watch goes through the rest-client metrics layer when metrics are
    // recorded.
    let client = match &metrics {
        Some(m) => builder.with_layer(&m.rest_client.layer(host)).build(),
        None => builder.build(),
    };
    let specs = watch_specs(config);
    let sync = SyncState::counted(
        specs.iter().map(WatchSpec::name).collect(),
        metrics.as_ref().map(|m| m.watches_pending.clone()),
    );
    let allowed: Option<Arc<HashSet<String>>> =
        (!config.namespaces.is_empty()).then(|| Arc::new(config.namespaces.iter().cloned().collect()));
    tracing::info!(
        target: "cluster_dns::watch",
        %url,
        watches = %specs.iter().map(WatchSpec::name).collect::<Vec<_>>().join(", "),
        "watching the Kubernetes API"
    );
    let mut tasks = Vec::new();
    let list_mode = Arc::new(tokio::sync::OnceCell::new());
    for (index, spec) in specs.into_iter().enumerate() {
        let ar = spec.resource.api_resource();
        let api: Api<DynamicObject> = match &spec.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let mut wc = watcher::Config::default().page_size(if spec.resource == Resource::EndpointSlices {
            SLICE_PAGE_SIZE
        } else {
            PAGE_SIZE
        });
        if let Some(l) = &spec.labels {
            wc = wc.labels(l);
        }
        let task = WatchTask {
            spec,
            index,
            zone: zone.clone(),
            sync: sync.clone(),
            allowed: if index == 0 { allowed.clone() } else { None },
            interner: HashSet::new(),
            keep_pod_names: config.endpoint_pod_names,
            metrics: metrics.clone(),
            live: false,
            retry: RetrySchedule::default(),
            probe: probe.clone(),
            last_error: None,
        };
        tasks.push(tokio::spawn(task.run(api, wc, client.clone(), list_mode.clone())));
    }
    Ok(WatchSource { sync, tasks })
}

/// How a watch asks for its initial state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMode {
    /// A watch with `sendInitialEvents=true`: the state comes as events, one object at a time,
    /// and a bookmark marks its end (the WatchList API, on by default from Kubernetes 1.32).
    Streaming,
    /// `list` in pages, then a watch from the list's resourceVersion.
    Pages,
}

/// The first Kubernetes version whose API server knows `sendInitialEvents`; older ones ignore
/// it, and their watch would never end its initial events.
const STREAMING_SINCE: (u32, u32) = (1, 27);

/// How long the API server's version may take before the watches go on without it.
const VERSION_TIMEOUT: Duration = Duration::from_secs(2);

impl ListMode {
    /// The mode to start with, from the API server's `GET /version`: pages for a server older
    /// than [`STREAMING_SINCE`], streaming otherwise, also when the version cannot be had
    /// (every supported Kubernetes release knows the parameter; one with the feature off refuses
    /// it with 422, and [`ListMode::refusal`] falls back).
    async fn of_server(client: &kube::Client) -> Self {
        match tokio::time::timeout(VERSION_TIMEOUT, client.apiserver_version()).await {
            Ok(Ok(info)) => {
                let mode = Self::of_version(&info.major, &info.minor);
                tracing::info!(target: "cluster_dns::watch", version = %info.git_version, lists = ?mode, "API server version");
                mode
            }
            Ok(Err(e)) => {
                tracing::debug!(target: "cluster_dns::watch", error = %describe_error(&e), "no API server version: trying streaming lists");
                Self::Streaming
            }
            Err(_) => Self::Streaming,
        }
    }

    /// [`ListMode::of_server`] for a version's major and minor fields (`"1"`, `"30+"`: managed
    /// clusters add suffixes).
    fn of_version(major: &str, minor: &str) -> Self {
        let number = |s: &str| {
            s.trim_start_matches('v')
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u32>()
                .ok()
        };
        match (number(major), number(minor)) {
            (Some(major), Some(minor)) if (major, minor) < STREAMING_SINCE => Self::Pages,
            _ => Self::Streaming,
        }
    }

    /// The API server's refusal of a streaming list, if `e` is one: an HTTP 422 (or 400) to the
    /// watch request (the real server's answer when its WatchList feature gate is off).
    fn refusal(e: &watcher::Error) -> Option<&kube::core::Status> {
        match e {
            watcher::Error::WatchStartFailed(kube::Error::Api(status))
                if status.code == 422 || status.code == 400 =>
            {
                Some(status)
            }
            _ => None,
        }
    }

    /// `wc` set for this mode.
    fn config(self, wc: &watcher::Config) -> watcher::Config {
        match self {
            Self::Streaming => wc.clone().streaming_lists(),
            Self::Pages => wc.clone(),
        }
    }
}

/// How often a watch whose last attempt was refused checks whether the API server's port
/// accepts connections again.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The API server's host and port, for the outage probe; `None` through a proxy (the route to
/// the server is the proxy's).
fn probe_address(config: &kube::Config) -> Option<(String, u16)> {
    if config.proxy_url.is_some() {
        return None;
    }
    let url = &config.cluster_url;
    let host = url
        .host()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = url
        .port_u16()
        .unwrap_or(if url.scheme_str() == Some("http") { 80 } else { 443 });
    Some((host, port))
}

/// Whether `e` is a refused TCP connection to the API server (an `io::Error` of that kind in
/// its cause chain): the server is down, not failing requests.
fn is_refused(e: &watcher::Error) -> bool {
    let source = match e {
        watcher::Error::InitialListFailed(s)
        | watcher::Error::WatchStartFailed(s)
        | watcher::Error::WatchFailed(s) => s,
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => return false,
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source);
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

type Key = (Arc<str>, Arc<str>);

struct WatchTask {
    spec: WatchSpec,
    index: usize,
    zone: Arc<ClusterZone>,
    sync: SyncState,
    /// For the Namespace watch with a `namespaces` list: the namespaces to keep.
    allowed: Option<Arc<HashSet<String>>>,
    /// Namespace names, shared by every object of this watch.
    interner: HashSet<Arc<str>>,
    /// Keep endpoints' pod names (only `endpoint_pod_names` answers with them).
    keep_pod_names: bool,
    /// Where watch errors and (for the EndpointSlice watch) the DNS programming latency go.
    metrics: Option<KubernetesMetrics>,
    /// True while the event being applied is a watch event after the first list (the only
    /// ones whose programming latency is observed).
    live: bool,
    /// How long to wait after failures.
    retry: RetrySchedule,
    /// Where to probe for the end of an outage (the API server's host and port; `None` through
    /// a proxy).
    probe: Option<Arc<(String, u16)>>,
    /// The [`error_shape`] of the error last logged, while the watch keeps failing (each
    /// distinct error is logged once).
    last_error: Option<String>,
}

/// What a list has brought so far, so that at its end what it lacks is deleted. Pods are kept
/// by the pod index's identity (8 bytes, where a key is two strings): a list of 150,000 Pods
/// would otherwise allocate about 20 MB of keys and leave the heap they were in fragmented.
enum Seen {
    Keys(HashSet<Key>),
    Pods(HashSet<u64>),
}

impl Seen {
    fn new(resource: Resource) -> Self {
        match resource {
            Resource::Pods => Self::Pods(HashSet::new()),
            _ => Self::Keys(HashSet::new()),
        }
    }

    fn insert(&mut self, zone: &ClusterZone, key: Key) {
        match self {
            Self::Keys(keys) => {
                keys.insert(key);
            }
            Self::Pods(ids) => {
                ids.insert(zone.pod_identity(&key.0, &key.1));
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Keys(keys) => keys.len(),
            Self::Pods(ids) => ids.len(),
        }
    }
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

impl WatchTask {
    /// Follows the watch for good. `first_mode` is shared by every watch of the source: the
    /// first to need it asks the API server's version.
    async fn run(
        mut self,
        api: Api<DynamicObject>,
        wc: watcher::Config,
        client: kube::Client,
        first_mode: Arc<tokio::sync::OnceCell<ListMode>>,
    ) {
        let mut mode = *first_mode.get_or_init(|| ListMode::of_server(&client)).await;
        drop(client);
        // No `.default_backoff()`: it starts over on every `Init`, which kube emits before each
        // list attempt, so a failing list was retried about once a second forever. The task
        // waits out its own schedule instead, and does not poll the watcher meanwhile (the
        // watcher only makes requests when polled).
        let mut stream = watcher::watcher(api.clone(), mode.config(&wc)).boxed();
        let mut seen: Option<Seen> = None;
        let mut synced_once = false;
        while let Some(item) = stream.next().await {
            match item {
                Ok(Event::Init) => seen = Some(Seen::new(self.spec.resource)),
                Ok(Event::InitApply(obj)) => {
                    let key = self.apply(obj);
                    if let (Some(seen), Some(key)) = (seen.as_mut(), key) {
                        seen.insert(&self.zone, key);
                    }
                }
                Ok(Event::InitDone) => {
                    let seen = seen.take().unwrap_or_else(|| Seen::new(self.spec.resource));
                    let removed = self.remove_unseen(&seen);
                    let objects = seen.len();
                    drop(seen);
                    super::heap::release_freed_heap();
                    self.recovered();
                    if !synced_once {
                        synced_once = true;
                        tracing::info!(target: "cluster_dns::watch", watch = %self.spec.name(), objects, "initial list applied");
                        if self.sync.mark(self.index) {
                            self.zone.set_synced(true);
                            tracing::info!(target: "cluster_dns::watch", services = self.zone.service_count(), "cluster zone synced");
                        }
                    } else {
                        tracing::info!(target: "cluster_dns::watch", watch = %self.spec.name(), objects, removed, "relist applied");
                    }
                }
                Ok(Event::Apply(obj)) => {
                    self.recovered();
                    self.live = synced_once;
                    self.apply(obj);
                    self.live = false;
                }
                Ok(Event::Delete(obj)) => {
                    self.recovered();
                    self.delete(&obj);
                }
                Err(e) => {
                    if mode == ListMode::Streaming
                        && let Some(status) = ListMode::refusal(&e)
                    {
                        let reason = describe_status(status);
                        tracing::info!(target: "cluster_dns::watch", watch = %self.spec.name(), %reason, "the API server does not offer streaming lists: listing in pages");
                        mode = ListMode::Pages;
                        seen = None;
                        stream = watcher::watcher(api.clone(), mode.config(&wc)).boxed();
                        continue;
                    }
                    let delay = self.failed(&e);
                    let refused = is_refused(&e);
                    self.wait(delay, refused).await;
                }
            }
        }
    }

    /// Waits out `delay` before the next attempt. After a refused connection it also tries a
    /// bare TCP connection to the API server every [`PROBE_INTERVAL`] (a refused connect costs a
    /// down API server nothing) and ends the wait as soon as one is accepted, so that the zone
    /// catches up within about a second of an outage's end, however long the delay has grown.
    /// The schedule goes on: if the attempt fails again, the next delay is the next step.
    async fn wait(&self, delay: Duration, refused: bool) {
        let deadline = tokio::time::Instant::now() + delay;
        self.sync.retry_at(self.index, deadline.into_std());
        let Some((host, port)) = self.probe.as_deref().filter(|_| refused) else {
            tokio::time::sleep_until(deadline).await;
            return;
        };
        loop {
            let next = (tokio::time::Instant::now() + PROBE_INTERVAL).min(deadline);
            tokio::time::sleep_until(next).await;
            if next >= deadline {
                return;
            }
            let connect = tokio::net::TcpStream::connect((host.as_str(), *port));
            if let Ok(Ok(_)) = tokio::time::timeout(PROBE_INTERVAL, connect).await {
                tracing::debug!(target: "cluster_dns::watch", watch = %self.spec.name(), "the API server accepts connections again: retrying now");
                return;
            }
        }
    }

    /// A completed list or a real event: the API answers again. Logs the recovery once.
    fn recovered(&mut self) {
        let failures = self.sync.recover(self.index);
        if self.last_error.take().is_some() {
            tracing::info!(target: "cluster_dns::watch", watch = %self.spec.name(), failed_attempts = failures, "the API answers again: watch recovered");
        }
    }

    /// Records and (once per distinct error) logs a failed attempt; returns how long to wait
    /// before the next one.
    fn failed(&mut self, e: &watcher::Error) -> Duration {
        let (verb, source) = match e {
            watcher::Error::InitialListFailed(s) => ("list", Some(s)),
            watcher::Error::WatchStartFailed(s) | watcher::Error::WatchFailed(s) => ("watch", Some(s)),
            watcher::Error::WatchError(status) => {
                if status.code == 410 {
                    // The server answers: relist soon, whatever came before.
                    tracing::info!(target: "cluster_dns::watch", watch = %self.spec.name(), "watch expired (410 Gone): relisting; the last-known zone answers meanwhile");
                    self.recovered();
                    return self.retry.delay(1);
                }
                ("watch", None)
            }
            watcher::Error::NoResourceVersion => ("watch", None),
        };
        let what = match (e, source) {
            (_, Some(source)) => describe_error(source),
            (watcher::Error::WatchError(status), None) => describe_status(status),
            _ => "the API server sent an object without metadata.resourceVersion".to_owned(),
        };
        let failures = self.sync.fail(self.index, &what);
        if let Some(m) = &self.metrics {
            m.watch_failed(self.spec.resource.rbac_name());
        }
        let delay = self.retry.delay(failures);
        let shape = error_shape(&what);
        if self.last_error.as_deref() == Some(shape.as_str()) {
            return delay;
        }
        let r = self.spec.resource.rbac_name();
        let scope = self.spec.scope();
        if let Some(kube::Error::Api(status)) = source
            && status.code == 403
        {
            tracing::error!(
                target: "cluster_dns::watch",
                retry_in = ?delay,
                "RBAC: cannot {verb} {r} {scope}: grant list/watch on {r} ({})",
                status.message
            );
        } else {
            tracing::warn!(
                target: "cluster_dns::watch",
                watch = %self.spec.name(),
                retry_in = ?delay,
                "cannot {verb} {r} {scope}: {what}; retrying with backoff (logged again only if the error changes)"
            );
        }
        self.last_error = Some(shape);
        delay
    }

    fn intern(&mut self, ns: &Arc<str>) -> Arc<str> {
        if let Some(s) = self.interner.get(ns) {
            return s.clone();
        }
        self.interner.insert(ns.clone());
        ns.clone()
    }

    /// Converts and applies one object; returns its key when it has a name (even if it is
    /// malformed, so that a relist keeps the last good version of it).
    fn apply(&mut self, obj: DynamicObject) -> Option<Key> {
        let kind = self.spec.resource.kind();
        let name = lower(obj.metadata.name.as_deref().unwrap_or_default());
        let namespace = match self.spec.resource {
            Resource::Namespaces => String::new(),
            _ => lower(obj.metadata.namespace.as_deref().unwrap_or("default")),
        };
        if name.is_empty() {
            tracing::warn!(target: "cluster_dns::watch", "{kind} without metadata.name skipped");
            return None;
        }
        let key: Key = (Arc::from(namespace.as_str()), Arc::from(name.as_str()));
        let DynamicObject { metadata, data, .. } = obj;
        let mut value = data;
        let result: Result<(), String> = match serde_json::to_value(metadata) {
            Err(e) => Err(e.to_string()),
            Ok(meta) => {
                if let serde_json::Value::Object(map) = &mut value {
                    map.insert("metadata".into(), meta);
                } else {
                    value = serde_json::json!({ "metadata": meta });
                }
                self.apply_value(value)
            }
        };
        if let Err(reason) = result {
            tracing::warn!(target: "cluster_dns::watch", "{kind} {}/{}: skipped: {reason}", key.0, key.1);
        }
        Some(key)
    }

    fn apply_value(&mut self, value: serde_json::Value) -> Result<(), String> {
        match self.spec.resource {
            Resource::Namespaces => {
                let ns: Namespace = serde_json::from_value(value).map_err(|e| e.to_string())?;
                let name = namespace_name(&ns).map_err(|e| e.to_string())?;
                if self.allowed.as_ref().is_some_and(|a| !a.contains(&*name)) {
                    return Ok(());
                }
                self.zone.apply_namespace(name);
            }
            Resource::Services => {
                let svc: Service = serde_json::from_value(value).map_err(|e| e.to_string())?;
                let mut info = ServiceInfo::from_k8s(&svc).map_err(|e| e.to_string())?;
                info.namespace = self.intern(&info.namespace);
                self.zone.apply_service(info);
            }
            Resource::EndpointSlices => {
                let slice: EndpointSlice = serde_json::from_value(value).map_err(|e| e.to_string())?;
                let mut info = SliceInfo::from_k8s(&slice, self.keep_pod_names).map_err(|e| e.to_string())?;
                let trigger = if self.live && self.metrics.is_some() {
                    last_change_trigger_time(&slice.metadata)
                } else {
                    None
                };
                drop(slice);
                info.namespace = self.intern(&info.namespace);
                // Store only what DNS needs, without spare capacity: this is most of the zone.
                info.endpoints.shrink_to_fit();
                let owner = trigger.and_then(|t| Some((t, info.namespace.clone(), info.service.clone()?)));
                self.zone.apply_slice(info);
                if let Some((trigger, namespace, service)) = owner {
                    self.record_programming(trigger, &namespace, &service);
                }
            }
            Resource::Pods => {
                let pod: Pod = serde_json::from_value(value).map_err(|e| e.to_string())?;
                let mut info = PodInfo::from_k8s(&pod).map_err(|e| e.to_string())?;
                info.namespace = self.intern(&info.namespace);
                self.zone.apply_pod(info);
            }
        }
        Ok(())
    }

    /// Observes the programming latency of a slice of `namespace/service` that is now in the
    /// zone, if that Service is known and has endpoints.
    fn record_programming(&self, trigger: k8s_openapi::jiff::Timestamp, namespace: &str, service: &str) {
        let Some(metrics) = &self.metrics else { return };
        let kind = self.zone.service(namespace, service).and_then(|e| {
            e.service
                .as_ref()
                .and_then(|s| ProgrammedKind::of_controller_slice(&s.kind))
        });
        if let Some(kind) = kind {
            let now = k8s_openapi::jiff::Timestamp::now();
            metrics.observe_programming(kind, programming_latency(trigger, now));
        }
    }

    fn delete(&self, obj: &DynamicObject) {
        let name = lower(obj.metadata.name.as_deref().unwrap_or_default());
        let namespace = lower(obj.metadata.namespace.as_deref().unwrap_or("default"));
        self.delete_key(&namespace, &name);
    }

    fn delete_key(&self, namespace: &str, name: &str) {
        match self.spec.resource {
            Resource::Namespaces => self.zone.delete_namespace(name),
            Resource::Services => self.zone.delete_service(namespace, name),
            Resource::EndpointSlices => self.zone.delete_slice(namespace, name),
            Resource::Pods => self.zone.delete_pod(namespace, name),
        }
    }

    /// After a (re)list: deletes what the zone holds in this watch's scope but the list lacked.
    fn remove_unseen(&self, seen: &Seen) -> usize {
        let in_scope = |ns: &str| self.spec.namespace.as_deref().is_none_or(|s| s == ns);
        let seen = match seen {
            // The pod index keeps no names: it is swept by identity.
            Seen::Pods(ids) => return self.zone.retain_pods(ids, in_scope),
            Seen::Keys(keys) => keys,
        };
        let stored: Vec<Key> = match self.spec.resource {
            Resource::Namespaces => self
                .zone
                .namespace_names()
                .into_iter()
                .map(|n| (Arc::from(""), n))
                .collect(),
            Resource::Services => self.zone.service_keys(),
            Resource::EndpointSlices => self.zone.slice_keys(),
            // Swept by identity above.
            Resource::Pods => Vec::new(),
        };
        let mut removed = 0;
        for key in stored {
            if in_scope(&key.0) && !seen.contains(&key) {
                self.delete_key(&key.0, &key.1);
                removed += 1;
            }
        }
        removed
    }
}

/// One line for a failed API request: the API's status for an HTTP error
/// (`403 Forbidden: services is forbidden: ...`), else the error with its whole cause chain
/// (`ServiceError: client error (Connect): ...: invalid peer certificate: UnknownIssuer`).
pub fn describe_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => describe_status(status),
        other => error_chain(other),
    }
}

fn describe_status(status: &kube::core::Status) -> String {
    let reason = if status.reason.is_empty() {
        axum::http::StatusCode::from_u16(status.code)
            .ok()
            .and_then(|c| c.canonical_reason())
            .unwrap_or("error")
    } else {
        status.reason.as_str()
    };
    if status.message.is_empty() {
        format!("{} {reason}", status.code)
    } else {
        format!("{} {reason}: {}", status.code, status.message)
    }
}

/// What makes two errors "the same" for logging: their text with every run of digits as one
/// `0`, so that an expired certificate's changing verification time (`verification time
/// 1796288422 (UNIX) ... (86401 seconds ago)`) does not log again at every retry.
fn error_shape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_digits = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('0');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// `e` and every error in its `source()` chain, joined with `: `; a cause whose text its parent
/// already includes is not repeated.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options as `namespaces`, `labels`, `namespace_labels` and `pods verified` set them.
    fn config(
        namespaces: &[&str],
        labels: Option<&str>,
        namespace_labels: Option<&str>,
        pods: bool,
    ) -> WatchOptions {
        WatchOptions {
            source: ApiSource::Endpoint("http://127.0.0.1:1".into()),
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            labels: labels.map(str::to_owned),
            namespace_labels: namespace_labels.map(str::to_owned),
            pods,
            ..WatchOptions::default()
        }
    }

    #[test]
    fn watches_follow_the_filters() {
        let names = |c: &WatchOptions| watch_specs(c).iter().map(WatchSpec::name).collect::<Vec<_>>();
        assert_eq!(
            names(&config(&[], None, None, false)),
            ["namespaces", "services", "endpointslices.discovery.k8s.io"]
        );
        let c = config(&["a", "b"], Some("app=x"), None, true);
        assert_eq!(
            names(&c),
            [
                "namespaces",
                "services in a",
                "services in b",
                "endpointslices.discovery.k8s.io in a",
                "endpointslices.discovery.k8s.io in b",
                "pods in a",
                "pods in b"
            ]
        );
        assert!(
            watch_specs(&c)[1..]
                .iter()
                .all(|s| s.labels.as_deref() == Some("app=x"))
        );
        let c = config(&[], None, Some("team=dns"), false);
        assert_eq!(watch_specs(&c)[0].labels.as_deref(), Some("team=dns"));
        assert_eq!(watch_specs(&c)[1].labels, None);
    }

    /// The DNS programming latency through a real list/watch against the fake API server:
    /// observed for annotated slice changes after the first list, by the kind of their Service,
    /// never negative; not for the first list, nor for slices without the annotation.
    #[tokio::test]
    async fn programming_latency_of_slice_changes_after_the_first_list() {
        use k8s_openapi::jiff::Timestamp;
        use prometheus::{Encoder, TextEncoder};
        use serde_json::{Value, json};

        let trigger = |offset: i64| {
            Timestamp::from_second(Timestamp::now().as_second() + offset)
                .unwrap()
                .to_string()
        };
        let slice = |name: &str, svc: &str, ip: &str, at: Option<String>| -> Value {
            let mut meta = json!({"name": name, "namespace": "lat",
                                  "labels": {"kubernetes.io/service-name": svc}});
            if let Some(at) = at {
                meta["annotations"] = json!({ crate::cluster::metrics::LAST_CHANGE_TRIGGER_TIME: at });
            }
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta,
                   "addressType": "IPv4", "endpoints": [{"addresses": [ip]}],
                   "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
        };
        let fake = fake_apiserver::FakeApiServer::start().await.unwrap();
        fake.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lat"}}))
            .unwrap();
        for (name, ip) in [("db", "None"), ("web", "10.96.5.5")] {
            fake.create(json!({"apiVersion": "v1", "kind": "Service",
                               "metadata": {"name": name, "namespace": "lat"},
                               "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80}]}}))
                .unwrap();
        }
        // In the first list, annotated: not observed.
        fake.create(slice("db-1", "db", "10.0.0.1", Some(trigger(-5))))
            .unwrap();
        fake.create(slice("web-1", "web", "10.0.0.2", Some(trigger(-5))))
            .unwrap();

        let registry = prometheus::Registry::new();
        let metrics = KubernetesMetrics::register(&registry).unwrap();
        let config = WatchOptions {
            source: ApiSource::Endpoint(fake.url()),
            ..WatchOptions::default()
        };
        let zone = Arc::new(ClusterZone::new());
        let _source = start_with_metrics(&config, zone.clone(), Some(metrics))
            .await
            .unwrap();
        let render = || {
            let mut buf = Vec::new();
            TextEncoder::new().encode(&registry.gather(), &mut buf).unwrap();
            String::from_utf8(buf).unwrap()
        };
        for _ in 0..1000 {
            if zone.is_synced() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(zone.is_synced());
        assert!(!render().contains("dns_programming"), "{}", render());

        // Changes, in one watch stream: one without the annotation, then a headless one
        // triggered 2 s ago, then a cluster-IP one whose trigger is in the future (skew).
        fake.update(slice("db-1", "db", "10.0.0.3", None)).unwrap();
        fake.update(slice("db-1", "db", "10.0.0.4", Some(trigger(-2))))
            .unwrap();
        fake.update(slice("web-1", "web", "10.0.0.5", Some(trigger(3600))))
            .unwrap();
        let last = "coredns_kubernetes_dns_programming_duration_seconds_count{service_kind=\"cluster_ip\"} 1";
        for _ in 0..1000 {
            if render().contains(last) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let text = render();
        for want in [
            last,
            // Skew: counted as 0, in the first bucket.
            "coredns_kubernetes_dns_programming_duration_seconds_bucket{service_kind=\"cluster_ip\",le=\"0.001\"} 1",
            "coredns_kubernetes_dns_programming_duration_seconds_sum{service_kind=\"cluster_ip\"} 0",
            "coredns_kubernetes_dns_programming_duration_seconds_count{service_kind=\"headless_with_selector\"} 1",
            // At least the 2 s since its trigger.
            "coredns_kubernetes_dns_programming_duration_seconds_bucket{service_kind=\"headless_with_selector\",le=\"1.024\"} 0",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        // The change is in the zone.
        let db = zone.service("lat", "db").unwrap();
        assert_eq!(
            db.slices.values().next().unwrap().endpoints[0].addresses[0].to_string(),
            "10.0.0.4"
        );
    }

    /// Streaming lists unless the version says the server predates them; only a 422 or 400 to
    /// the streaming watch is a refusal of the mode (RBAC and server errors go the usual way).
    #[test]
    fn streaming_lists_from_1_27_and_when_the_version_is_unclear() {
        assert_eq!(ListMode::of_version("1", "26"), ListMode::Pages);
        assert_eq!(ListMode::of_version("1", "20+"), ListMode::Pages);
        assert_eq!(ListMode::of_version("1", "27"), ListMode::Streaming);
        assert_eq!(ListMode::of_version("1", "30+"), ListMode::Streaming);
        assert_eq!(ListMode::of_version("2", "0"), ListMode::Streaming);
        assert_eq!(ListMode::of_version("", ""), ListMode::Streaming);
        let status = |code| {
            watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..Default::default()
            })))
        };
        assert!(ListMode::refusal(&status(422)).is_some());
        assert!(ListMode::refusal(&status(400)).is_some());
        assert!(
            ListMode::refusal(&status(403)).is_none(),
            "RBAC is not a refusal of the mode"
        );
        assert!(ListMode::refusal(&status(500)).is_none());
    }

    /// The pending-watches gauge is decremented exactly once per watch, whether its first list
    /// or the source's stop comes first, even when they race on different threads.
    #[test]
    fn pending_gauge_counts_each_watch_out_once() {
        let gauge = prometheus::IntGauge::new("pending", "test").unwrap();
        let s = SyncState::counted(vec!["a".into(), "b".into(), "c".into()], Some(gauge.clone()));
        assert_eq!(gauge.get(), 3);
        s.mark(0);
        s.mark(0);
        assert_eq!(gauge.get(), 2);
        s.release();
        assert_eq!(gauge.get(), 0);
        s.mark(1);
        assert_eq!(gauge.get(), 0);
        for _ in 0..200 {
            let s = SyncState::counted((0..8).map(|i| format!("w{i}")).collect(), Some(gauge.clone()));
            std::thread::scope(|scope| {
                for i in 0..8 {
                    let s = &s;
                    scope.spawn(move || s.mark(i));
                }
                scope.spawn(|| s.release());
            });
            assert_eq!(gauge.get(), 0);
        }
    }

    #[test]
    fn sync_state_waits_for_every_watch() {
        let s = SyncState::new(vec!["a".into(), "b".into()]);
        assert!(!s.is_synced());
        assert!(!s.mark(1));
        assert_eq!(s.pending(), ["a"]);
        assert!(s.mark(0));
        assert!(s.clone().is_synced());
    }

    #[test]
    fn retry_schedule_doubles_to_its_cap_with_jitter_down_only() {
        let r = RetrySchedule::default();
        let secs: Vec<u64> = (1..=8).map(|n| r.base(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(r.base(u32::MAX), Duration::from_secs(30));
        for n in 1..=40 {
            for _ in 0..20 {
                let d = r.delay(n);
                assert!(d <= r.base(n) && d >= r.base(n).mul_f64(0.8), "{n}: {d:?}");
            }
        }
        // Client-go's cap is 30 s: never more.
        assert!((1..100).all(|n| r.delay(n) <= Duration::from_secs(30)));
    }

    #[test]
    fn error_chain_names_every_cause_once() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let e = E(
            "client error (Connect)",
            Some(Box::new(E(
                "invalid peer certificate: UnknownIssuer",
                Some(Box::new(E("UnknownIssuer", None))),
            ))),
        );
        assert_eq!(
            error_chain(&e),
            "client error (Connect): invalid peer certificate: UnknownIssuer"
        );
        assert_eq!(
            error_shape("expired: verification time 1796288422 (UNIX), not after 1796202021 (86401 s ago)"),
            error_shape("expired: verification time 1796288424 (UNIX), not after 1796202021 (86403 s ago)"),
        );
        assert_ne!(error_shape("401 Unauthorized"), error_shape("403 Forbidden"));
        let status = kube::core::Status::failure("services is forbidden", "Forbidden").with_code(403);
        assert_eq!(
            describe_error(&kube::Error::Api(Box::new(status))),
            "403 Forbidden: services is forbidden"
        );
    }

    /// Every watch task writes its own entry while `/ready` reads them all: on a multi-threaded
    /// runtime, readers always see whole lines, and the final state is each writer's last.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sync_state_under_concurrent_watch_tasks() {
        let s = SyncState::new((0..4).map(|i| format!("w{i}")).collect());
        let mut tasks = Vec::new();
        for i in 0..4 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0..2000u32 {
                    assert_eq!(s.fail(i, &format!("error {}", n % 3)), n % 50 + 1);
                    if n % 50 == 49 {
                        s.recover(i);
                    }
                    tokio::task::yield_now().await;
                }
                s.fail(i, "last");
                s.mark(i);
            }));
        }
        let reader = {
            let s = s.clone();
            tokio::spawn(async move {
                while !s.is_synced() {
                    for line in s.waiting() {
                        assert!(
                            line.ends_with("waiting for the first list")
                                || line.contains(": error ")
                                || line.contains(": last ("),
                            "{line}"
                        );
                    }
                    tokio::task::yield_now().await;
                }
            })
        };
        for t in tasks {
            t.await.unwrap();
        }
        reader.await.unwrap();
        assert!(s.waiting().is_empty());
        assert_eq!(s.failures("w2"), Some(1));
        assert_eq!(s.failures("nope"), None);
    }

    #[test]
    fn waiting_says_why_each_watch_waits() {
        let s = SyncState::new(vec!["services".into(), "pods".into()]);
        assert_eq!(
            s.waiting(),
            [
                "services: waiting for the first list",
                "pods: waiting for the first list"
            ]
        );
        s.fail(0, "401 Unauthorized");
        s.fail(0, "401 Unauthorized");
        s.fail(1, "refused");
        s.retry_at(0, Instant::now() + Duration::from_millis(2400));
        assert_eq!(
            s.waiting(),
            [
                "services: 401 Unauthorized (2 failed attempts, next in 2 s)",
                "pods: refused (1 failed attempt, next in 0 s)"
            ]
        );
        assert!(s.next_retry("services").is_some());
        assert_eq!(s.recover(0), 2);
        assert_eq!(s.next_retry("services"), None);
        s.mark(0);
        assert_eq!(s.waiting(), ["pods: refused (1 failed attempt, next in 0 s)"]);
    }

    /// The log-once rule, on the watch task itself with a capturing subscriber: the same error
    /// (even with other numbers in it) is logged once, a different one again, the recovery once.
    #[test]
    fn each_distinct_error_is_logged_once_and_the_recovery_once() {
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let mut task = WatchTask {
            spec: WatchSpec {
                resource: Resource::Services,
                namespace: None,
                labels: None,
            },
            index: 0,
            zone: Arc::new(ClusterZone::new()),
            sync: SyncState::new(vec!["services".into()]),
            allowed: None,
            interner: HashSet::new(),
            keep_pod_names: false,
            metrics: None,
            live: false,
            retry: RetrySchedule::default(),
            probe: None,
            last_error: None,
        };
        let api = |code: u16, message: &str| {
            let status = kube::core::Status::failure(message, "").with_code(code);
            watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)))
        };
        tracing::subscriber::with_default(subscriber, || {
            let d1 = task.failed(&api(401, "Unauthorized"));
            let d2 = task.failed(&api(401, "Unauthorized"));
            task.failed(&api(500, "etcd timeout after 3001 ms"));
            task.failed(&api(500, "etcd timeout after 3017 ms"));
            task.failed(&api(500, "etcd timeout after 2990 ms"));
            assert_eq!(task.sync.failures("services"), Some(5));
            assert!(d1 <= Duration::from_secs(1) && d2 > Duration::from_millis(1500));
            task.recovered();
            task.recovered();
            assert_eq!(task.sync.failures("services"), Some(0));
            task.failed(&api(500, "etcd timeout after 3001 ms"));
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0].contains("WARN")
                && lines[0]
                    .contains("cannot list services at the cluster scope: 401 Unauthorized: Unauthorized"),
            "{text}"
        );
        assert!(
            lines[1].contains("500 Internal Server Error: etcd timeout after 3001 ms"),
            "{text}"
        );
        assert!(
            lines[2].contains("INFO")
                && lines[2].contains("watch recovered")
                && lines[2].contains("failed_attempts=5"),
            "{text}"
        );
        assert!(lines[3].contains("etcd timeout"), "{text}");
    }
}
