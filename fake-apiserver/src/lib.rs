//! A fake Kubernetes API server for cluster-dns's tests and benchmarks. It speaks the real
//! list/watch HTTP protocol (as kube-rs's watcher and client-go use it) for core/v1 Namespaces,
//! Services, Pods and Nodes, discovery.k8s.io/v1 EndpointSlices and multicluster.x-k8s.io/v1alpha1
//! ServiceImports (the MCS API's CRD; a missing CRD is `fail_resource(ServiceImports, 404)`)
//! and dns.cluster-dns.io/v1alpha1 DNSPolicies (cluster-dns's own CRD),
//! over a real TCP socket on
//! 127.0.0.1, and gives tests a handle ([`FakeApiServer`]) to change objects and inject faults.
//!
//! What it implements, per the reference notes on kube 5's watcher:
//! - one global, monotonically increasing resourceVersion (a decimal string) stamped on every
//!   write; a bounded event log per resource;
//! - `GET` of the collection paths, cluster-wide (`/api/v1/services`) and namespaced
//!   (`/api/v1/namespaces/{ns}/services`); the query may start with `?&`; no content negotiation;
//! - lists with `limit`/`continue`, answering the list's resourceVersion;
//! - watches (`watch=true`) from a resourceVersion: newer events are replayed from the log, then
//!   the stream goes live; `resourceVersion` unset or `0` sends the current state as ADDED first;
//!   a resourceVersion older than the log gets an in-stream `ERROR` 410 Expired (HTTP 200);
//!   BOOKMARKs with kind and apiVersion when `allowWatchBookmarks=true`; the stream ends after
//!   `timeoutSeconds`; one JSON object per line;
//! - streaming lists ([`StreamingLists`]): a watch with `sendInitialEvents=true` (which needs
//!   `resourceVersionMatch=NotOlderThan` and `allowWatchBookmarks=true`, as the real server
//!   checks) gets the current state as ADDED events, then a BOOKMARK annotated
//!   `k8s.io/initial-events-end: "true"` at the state's resourceVersion, then live events. Or,
//!   as servers without the WatchList feature do, it answers 422 (the feature gate off) or
//!   ignores the parameter (servers before 1.27); `GET /version` says which version it is;
//! - `labelSelector` (equality and set-based) and `fieldSelector` on `metadata.name` and
//!   `metadata.namespace`;
//! - faults on demand: the next N requests answer an HTTP error (500, 403, ...), a resource is
//!   Forbidden, open watches are dropped or cut mid-event, the log is compacted (410 for older
//!   resourceVersions, and every open watch gets the 410), streams stall, and the listener stops
//!   and restarts on the same port (an outage).
//!
//! - HTTPS ([`Options::tls`]): the server's certificate from a test CA made with [`tls::TestPki`],
//!   optionally requiring client certificates; failed handshakes are counted.
//!
//! [`synthetic`] generates large clusters for the benchmarks.

pub mod bench;
pub mod selector;
pub mod synthetic;
pub mod tls;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use selector::Selector;

/// A resource the fake serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// core/v1 Namespaces (cluster-scoped).
    Namespaces,
    /// core/v1 Services.
    Services,
    /// discovery.k8s.io/v1 EndpointSlices.
    EndpointSlices,
    /// core/v1 Pods.
    Pods,
    /// multicluster.x-k8s.io/v1alpha1 ServiceImports (the MCS API's CRD).
    ServiceImports,
    /// core/v1 Nodes (cluster-scoped).
    Nodes,
    /// dns.cluster-dns.io/v1alpha1 DNSPolicies (cluster-dns's CRD).
    DnsPolicies,
}

/// How many kinds of object the server holds (one store, event channel and byte counter each).
const KINDS: usize = 7;

impl Resource {
    /// Every resource.
    pub const ALL: [Resource; KINDS] = [
        Self::Namespaces,
        Self::Services,
        Self::EndpointSlices,
        Self::Pods,
        Self::ServiceImports,
        Self::Nodes,
        Self::DnsPolicies,
    ];

    /// True for the cluster-scoped resources (Namespaces, Nodes).
    pub fn cluster_scoped(self) -> bool {
        matches!(self, Self::Namespaces | Self::Nodes)
    }

    fn index(self) -> usize {
        match self {
            Self::Namespaces => 0,
            Self::Services => 1,
            Self::EndpointSlices => 2,
            Self::Pods => 3,
            Self::ServiceImports => 4,
            Self::Nodes => 5,
            Self::DnsPolicies => 6,
        }
    }

    /// The object kind.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Namespaces => "Namespace",
            Self::Services => "Service",
            Self::EndpointSlices => "EndpointSlice",
            Self::Pods => "Pod",
            Self::ServiceImports => "ServiceImport",
            Self::Nodes => "Node",
            Self::DnsPolicies => "DNSPolicy",
        }
    }

    /// The apiVersion of its objects.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::EndpointSlices => "discovery.k8s.io/v1",
            Self::ServiceImports => "multicluster.x-k8s.io/v1alpha1",
            Self::DnsPolicies => "dns.cluster-dns.io/v1alpha1",
            _ => "v1",
        }
    }

    /// The plural name in paths.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::Services => "services",
            Self::EndpointSlices => "endpointslices",
            Self::Pods => "pods",
            Self::ServiceImports => "serviceimports",
            Self::Nodes => "nodes",
            Self::DnsPolicies => "dnspolicies",
        }
    }

    /// The resource of an object `kind`.
    pub fn from_kind(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.kind() == kind)
    }

    fn api_group(self) -> &'static str {
        match self {
            Self::EndpointSlices => "discovery.k8s.io",
            Self::ServiceImports => "multicluster.x-k8s.io",
            Self::DnsPolicies => "dns.cluster-dns.io",
            _ => "",
        }
    }
}

/// A test-handle operation that could not be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FakeError {
    /// The object has no usable `kind`.
    #[error(
        "object has no kind the fake serves (Namespace, Service, EndpointSlice, Pod, ServiceImport, Node): {0}"
    )]
    Kind(String),
    /// The object has no `metadata.name`.
    #[error("{kind} has no metadata.name")]
    NoName {
        /// The kind.
        kind: &'static str,
    },
    /// `create` of an object that exists.
    #[error("{kind} {namespace}/{name} already exists")]
    Exists {
        /// The kind.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// `update` or `delete` of an object that does not exist.
    #[error("{kind} {namespace}/{name} not found")]
    NotFound {
        /// The kind.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The object cannot be serialised.
    #[error("cannot serialise the object: {0}")]
    Json(String),
}

/// One stored object.
#[derive(Debug, Clone)]
struct Obj {
    labels: BTreeMap<String, String>,
    /// The object's JSON, with kind, apiVersion and metadata.resourceVersion.
    json: Bytes,
}

/// One event of a resource's log.
#[derive(Debug)]
struct Ev {
    rv: u64,
    namespace: String,
    name: String,
    labels: BTreeMap<String, String>,
    /// The whole watch line, newline-terminated.
    line: Bytes,
}

#[derive(Debug, Default)]
struct Store {
    objects: BTreeMap<(String, String), Obj>,
    log: VecDeque<Arc<Ev>>,
    /// Watches from a resourceVersion older than this get 410.
    floor: u64,
}

#[derive(Debug)]
struct State {
    rv: u64,
    stores: [Store; KINDS],
    /// Status codes for the next requests, in order.
    fail_next: VecDeque<u16>,
    /// Resources whose every request answers this HTTP status (403: Forbidden, with the
    /// apiserver's RBAC message).
    failing: HashMap<Resource, u16>,
    log_capacity: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    /// End every open watch stream cleanly.
    Drop,
    /// Cut every open watch stream in the middle of a line.
    Cut,
    /// Send every open watch an in-stream 410.
    Expire,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    events: [broadcast::Sender<Arc<Ev>>; KINDS],
    control: broadcast::Sender<Control>,
    stalled: watch::Sender<bool>,
    bookmark_interval: Duration,
    streaming_lists: StreamingLists,
    version: String,
    /// Every request: when it arrived, and `GET /path?query`.
    requests: Mutex<Vec<(Instant, String)>>,
    open_watches: AtomicUsize,
    /// Response body bytes sent to clients, per resource (lists and watch streams).
    served: [AtomicU64; KINDS],
    /// TLS handshakes that failed (the client refused the certificate, or sent none).
    tls_failures: AtomicUsize,
}

#[derive(Debug)]
struct Listener {
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// The fake API server and its test handle. See the crate docs.
#[derive(Debug)]
pub struct FakeApiServer {
    shared: Arc<Shared>,
    port: u16,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    listener: Mutex<Option<Listener>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Options of a fake server.
#[derive(Debug, Clone)]
pub struct Options {
    /// Events kept per resource before older resourceVersions get 410 (default 100,000).
    pub log_capacity: usize,
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK (default 5 s).
    pub bookmark_interval: Duration,
    /// The port to listen on (0: any free port).
    pub port: u16,
    /// Serve HTTPS with this (default: plain HTTP).
    pub tls: Option<tls::ServerTls>,
    /// What a watch with `sendInitialEvents=true` gets (default: the streaming list).
    pub streaming_lists: StreamingLists,
    /// The `gitVersion` that `GET /version` answers (default `v1.34.2`).
    pub version: String,
}

/// How the fake answers a streaming list (`sendInitialEvents=true`), as the three kinds of
/// API server in the field do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamingLists {
    /// The WatchList feature is on (the default from Kubernetes 1.32): the current state, the
    /// initial-events-end bookmark, then live events.
    #[default]
    Offered,
    /// The feature gate is off (1.27 to 1.31 by default): `422 Invalid`, as the real server's
    /// ListOptions validation answers.
    Rejected,
    /// The parameter is unknown (before 1.27) and ignored: a plain watch, so no bookmark ever
    /// marks the end of the initial events.
    Ignored,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            log_capacity: 100_000,
            bookmark_interval: Duration::from_secs(5),
            port: 0,
            tls: None,
            streaming_lists: StreamingLists::Offered,
            version: "v1.34.2".to_owned(),
        }
    }
}

impl FakeApiServer {
    /// Starts a fake with the default options on a free port of 127.0.0.1.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(Options::default()).await
    }

    /// Starts a fake with `options`.
    pub async fn start_with(options: Options) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                rv: 1,
                stores: Default::default(),
                fail_next: VecDeque::new(),
                failing: HashMap::new(),
                log_capacity: options.log_capacity.max(1),
            }),
            events: std::array::from_fn(|_| broadcast::channel(65_536).0),
            control: broadcast::channel(64).0,
            stalled: watch::channel(false).0,
            bookmark_interval: options.bookmark_interval,
            streaming_lists: options.streaming_lists,
            version: options.version.clone(),
            requests: Mutex::new(Vec::new()),
            open_watches: AtomicUsize::new(0),
            served: Default::default(),
            tls_failures: AtomicUsize::new(0),
        });
        let tls = match &options.tls {
            Some(t) => Some(t.server_config().map_err(std::io::Error::other)?),
            None => None,
        };
        let listener = TcpListener::bind(("127.0.0.1", options.port)).await?;
        let port = listener.local_addr()?.port();
        let server = Self {
            shared,
            port,
            tls,
            listener: Mutex::new(None),
        };
        server.serve(listener);
        Ok(server)
    }

    fn serve(&self, listener: TcpListener) {
        let (shutdown, rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, self.shared.clone(), self.tls.clone(), rx));
        *lock(&self.listener) = Some(Listener { shutdown, task });
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`, or `https://` with [`Options::tls`].
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// TLS handshakes that failed so far (each is a client's connection attempt).
    pub fn tls_failures(&self) -> usize {
        self.shared.tls_failures.load(Ordering::Acquire)
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    // ------------------------------------------------------------------ objects

    /// Creates an object (its `kind` says which resource); returns its resourceVersion.
    pub fn create(&self, obj: impl serde::Serialize) -> Result<u64, FakeError> {
        self.write(obj, Mode::Create)
    }

    /// Replaces an existing object; returns its new resourceVersion.
    pub fn update(&self, obj: impl serde::Serialize) -> Result<u64, FakeError> {
        self.write(obj, Mode::Update)
    }

    /// Creates or replaces an object; returns its resourceVersion.
    pub fn apply(&self, obj: impl serde::Serialize) -> Result<u64, FakeError> {
        self.write(obj, Mode::Apply)
    }

    /// Deletes an object (`namespace` is ignored for Namespaces and Nodes); returns the resourceVersion of
    /// the deletion.
    pub fn delete(&self, resource: Resource, namespace: &str, name: &str) -> Result<u64, FakeError> {
        let ns = if resource.cluster_scoped() { "" } else { namespace };
        let mut st = lock(&self.shared.state);
        let key = (ns.to_owned(), name.to_owned());
        let old = st.stores[resource.index()]
            .objects
            .remove(&key)
            .ok_or_else(|| FakeError::NotFound {
                kind: resource.kind(),
                namespace: ns.to_owned(),
                name: name.to_owned(),
            })?;
        st.rv += 1;
        let rv = st.rv;
        let mut v: Value = serde_json::from_slice(&old.json).map_err(|e| FakeError::Json(e.to_string()))?;
        v["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let json = Bytes::from(serde_json::to_vec(&v).map_err(|e| FakeError::Json(e.to_string()))?);
        self.log_event(&mut st, resource, rv, "DELETED", ns, name, old.labels, &json);
        Ok(rv)
    }

    /// The stored object, as JSON.
    pub fn get(&self, resource: Resource, namespace: &str, name: &str) -> Option<Value> {
        let ns = if resource.cluster_scoped() { "" } else { namespace };
        let st = lock(&self.shared.state);
        let obj = st.stores[resource.index()]
            .objects
            .get(&(ns.to_owned(), name.to_owned()))?;
        serde_json::from_slice(&obj.json).ok()
    }

    /// The number of stored objects of `resource`.
    pub fn count(&self, resource: Resource) -> usize {
        lock(&self.shared.state).stores[resource.index()].objects.len()
    }

    /// Loads many objects at once, as the starting state: each gets a resourceVersion, but no
    /// watch events are logged (as if the log had been compacted after them).
    pub fn load(&self, objects: impl IntoIterator<Item = Value>) -> Result<usize, FakeError> {
        let mut st = lock(&self.shared.state);
        let mut n = 0;
        for obj in objects {
            let (resource, ns, name, labels, json, _) = prepare(&mut st, obj)?;
            st.stores[resource.index()]
                .objects
                .insert((ns, name), Obj { labels, json });
            n += 1;
        }
        let rv = st.rv;
        for s in &mut st.stores {
            s.floor = s.floor.max(rv);
        }
        Ok(n)
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.state).rv
    }

    fn write(&self, obj: impl serde::Serialize, mode: Mode) -> Result<u64, FakeError> {
        let obj = serde_json::to_value(obj).map_err(|e| FakeError::Json(e.to_string()))?;
        let mut st = lock(&self.shared.state);
        let (resource, ns, name, labels, json, rv) = prepare(&mut st, obj)?;
        let key = (ns.clone(), name.clone());
        let exists = st.stores[resource.index()].objects.contains_key(&key);
        let err_ctx = (resource.kind(), ns.clone(), name.clone());
        match (mode, exists) {
            (Mode::Create, true) => {
                return Err(FakeError::Exists {
                    kind: err_ctx.0,
                    namespace: err_ctx.1,
                    name: err_ctx.2,
                });
            }
            (Mode::Update, false) => {
                return Err(FakeError::NotFound {
                    kind: err_ctx.0,
                    namespace: err_ctx.1,
                    name: err_ctx.2,
                });
            }
            _ => {}
        }
        let ty = if exists { "MODIFIED" } else { "ADDED" };
        st.stores[resource.index()].objects.insert(
            key,
            Obj {
                labels: labels.clone(),
                json: json.clone(),
            },
        );
        self.log_event(&mut st, resource, rv, ty, &ns, &name, labels, &json);
        Ok(rv)
    }

    #[allow(clippy::too_many_arguments)]
    fn log_event(
        &self,
        st: &mut State,
        resource: Resource,
        rv: u64,
        ty: &str,
        ns: &str,
        name: &str,
        labels: BTreeMap<String, String>,
        json: &Bytes,
    ) {
        let mut line = Vec::with_capacity(json.len() + 32);
        line.extend_from_slice(format!("{{\"type\":\"{ty}\",\"object\":").as_bytes());
        line.extend_from_slice(json);
        line.extend_from_slice(b"}\n");
        let ev = Arc::new(Ev {
            rv,
            namespace: ns.to_owned(),
            name: name.to_owned(),
            labels,
            line: Bytes::from(line),
        });
        let cap = st.log_capacity;
        let store = &mut st.stores[resource.index()];
        store.log.push_back(ev.clone());
        while store.log.len() > cap {
            if let Some(old) = store.log.pop_front() {
                store.floor = store.floor.max(old.rv);
            }
        }
        // Sent under the state lock, so a watch that subscribes under it misses nothing.
        let _ = self.shared.events[resource.index()].send(ev);
    }

    // ------------------------------------------------------------------ faults

    /// The next `n` list or watch requests answer HTTP `code` with a Status body.
    pub fn fail_next(&self, n: usize, code: u16) {
        let mut st = lock(&self.shared.state);
        st.fail_next.extend(std::iter::repeat_n(code, n));
    }

    /// Every request for `resource` answers 403 Forbidden until [`FakeApiServer::allow`].
    pub fn forbid(&self, resource: Resource) {
        self.fail_resource(resource, 403);
    }

    /// Every request for `resource` answers HTTP `code` with a Status body until
    /// [`FakeApiServer::allow`] (403 is [`FakeApiServer::forbid`]).
    pub fn fail_resource(&self, resource: Resource, code: u16) {
        lock(&self.shared.state).failing.insert(resource, code);
    }

    /// Ends a [`FakeApiServer::forbid`] or [`FakeApiServer::fail_resource`].
    pub fn allow(&self, resource: Resource) {
        lock(&self.shared.state).failing.remove(&resource);
    }

    /// Ends every open watch stream cleanly (clients re-watch from their last resourceVersion).
    pub fn drop_watches(&self) {
        let _ = self.shared.control.send(Control::Drop);
    }

    /// Cuts every open watch stream in the middle of an event line (the connection breaks).
    pub fn cut_watches(&self) {
        let _ = self.shared.control.send(Control::Cut);
    }

    /// Compacts every resource's log: watches from an older resourceVersion get 410 Expired, and
    /// every open watch is sent the in-stream 410 now (clients relist).
    pub fn compact(&self) {
        let mut st = lock(&self.shared.state);
        let rv = st.rv;
        for s in &mut st.stores {
            s.log.clear();
            s.floor = rv;
        }
        let _ = self.shared.control.send(Control::Expire);
    }

    /// While stalled, requests wait and open watches send nothing.
    pub fn stall(&self, stalled: bool) {
        self.shared.stalled.send_replace(stalled);
    }

    /// Stops listening and closes every connection (an API outage); returns once they are
    /// closed, so no change made after it reaches a client before the restart. The port stays reserved
    /// for [`FakeApiServer::restart_listener`] only by convention.
    pub async fn stop_listener(&self) {
        let l = lock(&self.listener).take();
        if let Some(l) = l {
            let _ = l.shutdown.send(true);
            let _ = l.task.await;
        }
    }

    /// Listens again on the same port after [`FakeApiServer::stop_listener`].
    pub async fn restart_listener(&self) -> std::io::Result<()> {
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(("127.0.0.1", self.port)).await {
                Ok(l) => break l,
                Err(e) if tries < 50 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(e),
            }
        };
        self.serve(listener);
        Ok(())
    }

    /// Every request so far, as `GET /path?query`, with ` (metadata only)` after the ones that
    /// asked for PartialObjectMetadata.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.shared.requests)
            .iter()
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// Every request so far with the moment it arrived (for retry intervals).
    pub fn requests_at(&self) -> Vec<(Instant, String)> {
        lock(&self.shared.requests).clone()
    }

    /// The number of watch streams open now.
    pub fn open_watches(&self) -> usize {
        self.shared.open_watches.load(Ordering::Acquire)
    }

    /// The response body bytes of lists and watches of `resource` sent so far (the API load a
    /// client puts on the server, as the benchmarks count it).
    pub fn served_bytes(&self, resource: Resource) -> u64 {
        self.shared.served[resource.index()].load(Ordering::Relaxed)
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(l) = lock(&self.listener).take() {
            let _ = l.shutdown.send(true);
            l.task.abort();
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Create,
    Update,
    Apply,
}

type Prepared = (Resource, String, String, BTreeMap<String, String>, Bytes, u64);

/// Stamps a new resourceVersion (and kind/apiVersion) on `obj`.
fn prepare(st: &mut State, mut obj: Value) -> Result<Prepared, FakeError> {
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let resource = Resource::from_kind(&kind).ok_or_else(|| FakeError::Kind(kind.clone()))?;
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or(FakeError::NoName {
            kind: resource.kind(),
        })?
        .to_owned();
    let ns = if resource.cluster_scoped() {
        String::new()
    } else {
        meta.get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_owned()
    };
    let labels: BTreeMap<String, String> = meta
        .get("labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    st.rv += 1;
    let rv = st.rv;
    obj["apiVersion"] = Value::String(resource.api_version().to_owned());
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    obj["metadata"]["resourceVersion"] = Value::String(rv.to_string());
    if !resource.cluster_scoped() {
        obj["metadata"]["namespace"] = Value::String(ns.clone());
    }
    let json = Bytes::from(serde_json::to_vec(&obj).map_err(|e| FakeError::Json(e.to_string()))?);
    Ok((resource, ns, name, labels, json, rv))
}

// ---------------------------------------------------------------------- HTTP

type Body = BoxBody<Bytes, std::io::Error>;

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    shutdown: watch::Receiver<bool>,
) {
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut stop = shutdown.clone();
    // The connections, so that a stop returns only once every one is closed: otherwise a
    // change made right after `stop_listener` could still reach an open watch.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            accepted = listener.accept() => {
                while connections.try_join_next().is_some() {}
                let Ok((stream, _)) = accepted else { continue };
                let shared = shared.clone();
                let shutdown = shutdown.clone();
                let tls = tls.clone();
                connections.spawn(async move {
                    match tls {
                        None => serve_connection(TokioIo::new(stream), shared, shutdown).await,
                        Some(acceptor) => match acceptor.accept(stream).await {
                            Ok(stream) => serve_connection(TokioIo::new(stream), shared, shutdown).await,
                            Err(_) => {
                                shared.tls_failures.fetch_add(1, Ordering::AcqRel);
                            }
                        },
                    }
                });
            }
        }
    }
    connections.shutdown().await;
}

async fn serve_connection<I>(io: I, shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(handle(shared, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, svc);
    tokio::select! {
        _ = conn => {}
        _ = shutdown.wait_for(|s| *s) => {}
    }
}

fn full(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).map_err(|e: Infallible| match e {}).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn status_json(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn status_response(code: u16, reason: &str, message: &str) -> Response<Body> {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    full(status, status_json(code, reason, message).to_string())
}

fn reason_of(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        410 => "Expired",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

/// Parses `/api/v1/[namespaces/{ns}/]{plural}`, `/apis/discovery.k8s.io/v1/...` and
/// `/apis/multicluster.x-k8s.io/v1alpha1/...`.
fn route(path: &str) -> Option<(Resource, Option<String>)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", "discovery.k8s.io", "v1", rest @ ..] => ("discovery.k8s.io", rest),
        ["apis", "multicluster.x-k8s.io", "v1alpha1", rest @ ..] => ("multicluster.x-k8s.io", rest),
        ["apis", "dns.cluster-dns.io", "v1alpha1", rest @ ..] => ("dns.cluster-dns.io", rest),
        _ => return None,
    };
    let (ns, plural) = match rest {
        [plural] => (None, *plural),
        ["namespaces", ns, plural] => (Some((*ns).to_owned()), *plural),
        _ => return None,
    };
    let r = Resource::ALL.into_iter().find(|r| r.plural() == plural)?;
    if r.api_group() != group {
        return None;
    }
    if r.cluster_scoped() && ns.is_some() {
        return None;
    }
    Some((r, ns))
}

#[derive(Debug, Default)]
struct Query {
    watch: bool,
    resource_version: Option<String>,
    limit: Option<usize>,
    continue_: Option<String>,
    timeout: Option<u64>,
    bookmarks: bool,
    send_initial_events: bool,
    resource_version_match: Option<String>,
    labels: Selector,
    fields: Vec<(String, String)>,
}

fn parse_query(q: &str) -> Result<Query, String> {
    let mut out = Query::default();
    for (k, v) in form_urlencoded::parse(q.as_bytes()) {
        match &*k {
            "" => {}
            "watch" => out.watch = v == "true" || v == "1",
            "resourceVersion" => out.resource_version = Some(v.into_owned()),
            "limit" => out.limit = v.parse().ok().filter(|n| *n > 0),
            "continue" => out.continue_ = Some(v.into_owned()).filter(|c| !c.is_empty()),
            "timeoutSeconds" => out.timeout = v.parse().ok(),
            "allowWatchBookmarks" => out.bookmarks = v == "true",
            "sendInitialEvents" => out.send_initial_events = v == "true",
            "resourceVersionMatch" => out.resource_version_match = Some(v.into_owned()),
            "labelSelector" => out.labels = Selector::parse(&v).map_err(|e| e.to_string())?,
            "fieldSelector" => {
                for part in v.split(',').filter(|p| !p.is_empty()) {
                    let (fk, fv) = part
                        .split_once("==")
                        .or_else(|| part.split_once('='))
                        .ok_or_else(|| format!("invalid field selector '{part}'"))?;
                    if fk != "metadata.name" && fk != "metadata.namespace" {
                        return Err(format!("field label not supported: {fk}"));
                    }
                    out.fields.push((fk.to_owned(), fv.to_owned()));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

struct Filter {
    namespace: Option<String>,
    labels: Selector,
    fields: Vec<(String, String)>,
}

impl Filter {
    fn matches(&self, ns: &str, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == ns)
            && self.labels.matches(labels)
            && self
                .fields
                .iter()
                .all(|(k, v)| if k == "metadata.name" { v == name } else { v == ns })
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    // A client that asks for metadata only (kube's `Api<PartialObjectMeta<K>>`) gets
    // PartialObjectMetadata objects, as the real server answers that content type; the
    // request log says so.
    let meta_only = req
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("as=PartialObjectMetadata")));
    let shown = if meta_only { " (metadata only)" } else { "" };
    lock(&shared.requests).push((Instant::now(), format!("{} {path}?{query}{shown}", req.method())));
    if req.method() != hyper::Method::GET {
        return status_response(405, "MethodNotAllowed", "the fake API server only serves GET");
    }
    if path == "/version" {
        return full(StatusCode::OK, version_json(&shared.version).to_string());
    }
    let Some((resource, namespace)) = route(&path) else {
        return status_response(
            404,
            "NotFound",
            &format!("the server could not find the requested resource ({path})"),
        );
    };
    let q = match parse_query(&query) {
        Ok(q) => q,
        Err(e) => return status_response(400, "BadRequest", &e),
    };
    let mut stalled = shared.stalled.subscribe();
    let _ = stalled.wait_for(|s| !*s).await;
    let verb = if q.watch { "watch" } else { "list" };
    {
        let mut st = lock(&shared.state);
        if let Some(code) = st.fail_next.pop_front() {
            return status_response(code, reason_of(code), &format!("injected failure {code}"));
        }
        if let Some(&code) = st.failing.get(&resource) {
            if code != 403 {
                return status_response(code, reason_of(code), &format!("injected failure {code}"));
            }
            let scope = match &namespace {
                Some(ns) => format!("in the namespace \"{ns}\""),
                None => "at the cluster scope".to_owned(),
            };
            let msg = format!(
                "{} is forbidden: User \"system:serviceaccount:kube-system:coredns\" cannot {verb} resource \"{}\" in API group \"{}\" {scope}",
                resource.plural(),
                resource.plural(),
                resource.api_group()
            );
            return status_response(403, "Forbidden", &msg);
        }
    }
    if q.send_initial_events
        && shared.streaming_lists != StreamingLists::Ignored
        && let Some(message) = streaming_list_invalid(&q, shared.streaming_lists)
    {
        return status_response(
            422,
            "Invalid",
            &format!("ListOptions.meta.k8s.io \"\" is invalid: {message}"),
        );
    }
    let filter = Filter {
        namespace,
        labels: q.labels.clone(),
        fields: q.fields.clone(),
    };
    let response = if q.watch {
        watch_response(shared.clone(), resource, filter, q, meta_only)
    } else {
        list_response(&shared, resource, &filter, &q, meta_only)
    };
    counted(shared, resource, response)
}

/// Adds the body bytes of `response` to `resource`'s count as they are sent.
fn counted(shared: Arc<Shared>, resource: Resource, response: Response<Body>) -> Response<Body> {
    response.map(|inner| {
        BodyExt::boxed(Counted {
            inner,
            shared,
            index: resource.index(),
        })
    })
}

/// A body that counts its data frames into `Shared::served[index]` as they are polled, with
/// the inner body's size hint (so a list keeps its Content-Length rather than going chunked).
struct Counted {
    inner: Body,
    shared: Arc<Shared>,
    index: usize,
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        let polled = std::pin::Pin::new(&mut this.inner).poll_frame(cx);
        if let std::task::Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            this.shared.served[this.index].fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// `obj` (JSON) as a PartialObjectMetadata: its metadata only.
fn partial_object(obj: &[u8]) -> Bytes {
    let Ok(v) = serde_json::from_slice::<Value>(obj) else {
        return Bytes::copy_from_slice(obj);
    };
    let meta = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                      "metadata": v.get("metadata").cloned().unwrap_or_else(|| json!({}))});
    Bytes::from(meta.to_string())
}

/// A watch event line with its object reduced to metadata (bookmarks and errors as they are).
fn partial_line(line: &Bytes) -> Bytes {
    let Ok(mut v) = serde_json::from_slice::<Value>(line) else {
        return line.clone();
    };
    if matches!(v["type"].as_str(), Some("BOOKMARK" | "ERROR")) {
        return line.clone();
    }
    let object = partial_object(v["object"].to_string().as_bytes());
    v["object"] = serde_json::from_slice(&object).unwrap_or(Value::Null);
    Bytes::from(format!("{v}\n"))
}

/// What the real server's ListOptions validation says of a streaming list, if anything.
fn streaming_list_invalid(q: &Query, mode: StreamingLists) -> Option<&'static str> {
    if mode == StreamingLists::Rejected {
        Some(
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        )
    } else if !q.watch {
        Some("sendInitialEvents: Forbidden: sendInitialEvents is allowed for watch requests only")
    } else if q.resource_version_match.as_deref() != Some("NotOlderThan") {
        Some(
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        )
    } else if !q.bookmarks {
        Some(
            "allowWatchBookmarks: Required value: sendInitialEvents requires setting allowWatchBookmarks to true",
        )
    } else {
        None
    }
}

/// `GET /version`'s answer for `git_version` (`v1.34.2`).
fn version_json(git_version: &str) -> Value {
    let digits = |s: &str| s.chars().take_while(char::is_ascii_digit).collect::<String>();
    let mut parts = git_version.trim_start_matches('v').split('.');
    let major = digits(parts.next().unwrap_or_default());
    let minor = digits(parts.next().unwrap_or_default());
    json!({"major": major, "minor": minor, "gitVersion": git_version, "gitCommit": "0000000000000000000000000000000000000000",
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24.0", "compiler": "gc",
           "platform": "linux/amd64"})
}

fn list_response(
    shared: &Shared,
    resource: Resource,
    filter: &Filter,
    q: &Query,
    meta_only: bool,
) -> Response<Body> {
    let st = lock(&shared.state);
    let (list_rv, offset) = match &q.continue_ {
        None => (st.rv, 0),
        Some(c) => match c
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        {
            Some(x) => x,
            None => return status_response(400, "BadRequest", &format!("invalid continue token '{c}'")),
        },
    };
    let store = &st.stores[resource.index()];
    let limit = q.limit.unwrap_or(usize::MAX);
    let mut items: Vec<Bytes> = Vec::new();
    let mut more = false;
    for ((ns, name), obj) in store
        .objects
        .iter()
        .filter(|((ns, name), o)| filter.matches(ns, name, &o.labels))
        .skip(offset)
    {
        let _ = (ns, name);
        if items.len() == limit {
            more = true;
            break;
        }
        items.push(if meta_only {
            partial_object(&obj.json)
        } else {
            obj.json.clone()
        });
    }
    let mut meta = json!({"resourceVersion": list_rv.to_string()});
    if more {
        meta["continue"] = Value::String(format!("{list_rv}:{}", offset + items.len()));
    }
    let mut body = Vec::with_capacity(items.iter().map(|i| i.len() + 1).sum::<usize>() + 128);
    body.extend_from_slice(
        format!(
            "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
            if meta_only {
                "PartialObjectMetadata"
            } else {
                resource.kind()
            },
            if meta_only {
                "meta.k8s.io/v1"
            } else {
                resource.api_version()
            },
            meta
        )
        .as_bytes(),
    );
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(b"]}");
    drop(st);
    full(StatusCode::OK, body)
}

struct WatchGuard(Arc<Shared>);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.open_watches.fetch_sub(1, Ordering::AcqRel);
    }
}

fn expired_line(rv: &str, now: u64) -> Bytes {
    let obj = status_json(410, "Expired", &format!("too old resource version: {rv} ({now})"));
    Bytes::from(format!("{}\n", json!({"type": "ERROR", "object": obj})))
}

fn watch_response(
    shared: Arc<Shared>,
    resource: Resource,
    filter: Filter,
    q: Query,
    meta_only: bool,
) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(256);
    // Subscribe and read the starting point under the state lock, so nothing is missed.
    let (mut events, mut control, first, expired) = {
        let st = lock(&shared.state);
        let events = shared.events[resource.index()].subscribe();
        let control = shared.control.subscribe();
        let store = &st.stores[resource.index()];
        let mut first: Vec<Bytes> = Vec::new();
        let mut expired = None;
        // A streaming list starts from the current state whatever resourceVersion it names
        // (NotOlderThan: the state is at least as new), and ends it with the bookmark.
        let streaming = q.send_initial_events && shared.streaming_lists == StreamingLists::Offered;
        match q
            .resource_version
            .as_deref()
            .filter(|v| !v.is_empty() && *v != "0" && !streaming)
        {
            None => {
                for ((ns, name), o) in &store.objects {
                    if filter.matches(ns, name, &o.labels) {
                        let mut line = b"{\"type\":\"ADDED\",\"object\":".to_vec();
                        line.extend_from_slice(&o.json);
                        line.extend_from_slice(b"}\n");
                        first.push(Bytes::from(line));
                    }
                }
                if streaming {
                    let line = format!(
                        "{}\n",
                        json!({"type": "BOOKMARK", "object": {"kind": resource.kind(), "apiVersion": resource.api_version(),
                               "metadata": {"resourceVersion": st.rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}}})
                    );
                    first.push(Bytes::from(line));
                }
            }
            Some(v) => match v.parse::<u64>() {
                Ok(from) if from >= store.floor => {
                    first.extend(
                        store
                            .log
                            .iter()
                            .filter(|e| e.rv > from && filter.matches(&e.namespace, &e.name, &e.labels))
                            .map(|e| e.line.clone()),
                    );
                }
                _ => expired = Some(expired_line(v, st.rv)),
            },
        }
        (events, control, first, expired)
    };
    shared.open_watches.fetch_add(1, Ordering::AcqRel);
    let guard = WatchGuard(shared.clone());
    let timeout = Duration::from_secs(q.timeout.unwrap_or(1800).clamp(1, 3600));
    let bookmarks = q.bookmarks;
    let mut stalled = shared.stalled.subscribe();
    tokio::spawn(async move {
        let _guard = guard;
        let send = |tx: &mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>, b: Bytes| {
            let tx = tx.clone();
            let b = if meta_only { partial_line(&b) } else { b };
            async move { tx.send(Ok(Frame::data(b))).await.is_ok() }
        };
        if let Some(line) = expired {
            let _ = send(&tx, line).await;
            return;
        }
        for line in first {
            if !send(&tx, line).await {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(shared.bookmark_interval);
        tick.tick().await;
        loop {
            let _ = stalled.wait_for(|s| !*s).await;
            tokio::select! {
                _ = &mut deadline => return,
                ev = events.recv() => match ev {
                    Ok(ev) => {
                        if filter.matches(&ev.namespace, &ev.name, &ev.labels) && !send(&tx, ev.line.clone()).await {
                            return;
                        }
                    }
                    // Lagged or closed: end the stream; the client re-watches from its last
                    // resourceVersion and the log replays what it missed.
                    Err(_) => return,
                },
                c = control.recv() => match c {
                    Ok(Control::Drop) | Err(_) => return,
                    Ok(Control::Cut) => {
                        let _ = send(&tx, Bytes::from_static(b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":")).await;
                        let _ = tx.send(Err(std::io::Error::other("connection cut by the fake"))).await;
                        return;
                    }
                    Ok(Control::Expire) => {
                        let now = lock(&shared.state).rv;
                        let _ = send(&tx, expired_line("0", now)).await;
                        return;
                    }
                },
                _ = tick.tick(), if bookmarks => {
                    // Everything up to `rv` has been broadcast: drain it before bookmarking.
                    let rv = {
                        let _st = lock(&shared.state);
                        let mut pending = Vec::new();
                        while let Ok(ev) = events.try_recv() {
                            pending.push(ev);
                        }
                        (_st.rv, pending)
                    };
                    for ev in rv.1 {
                        if filter.matches(&ev.namespace, &ev.name, &ev.labels) && !send(&tx, ev.line.clone()).await {
                            return;
                        }
                    }
                    let line = format!(
                        "{}\n",
                        json!({"type": "BOOKMARK", "object": {"kind": resource.kind(), "apiVersion": resource.api_version(), "metadata": {"resourceVersion": rv.0.to_string()}}})
                    );
                    if !send(&tx, Bytes::from(line)).await {
                        return;
                    }
                }
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("/api/v1/services"), Some((Resource::Services, None)));
        assert_eq!(
            route("/api/v1/namespaces/a/pods"),
            Some((Resource::Pods, Some("a".into())))
        );
        assert_eq!(
            route("/apis/discovery.k8s.io/v1/namespaces/a/endpointslices"),
            Some((Resource::EndpointSlices, Some("a".into())))
        );
        assert_eq!(route("/api/v1/namespaces"), Some((Resource::Namespaces, None)));
        assert_eq!(route("/api/v1/endpointslices"), None);
        assert_eq!(route("/apis/discovery.k8s.io/v1/services"), None);
        assert_eq!(
            route("/apis/multicluster.x-k8s.io/v1alpha1/namespaces/a/serviceimports"),
            Some((Resource::ServiceImports, Some("a".into())))
        );
        assert_eq!(
            route("/apis/multicluster.x-k8s.io/v1alpha1/serviceimports"),
            Some((Resource::ServiceImports, None))
        );
        assert_eq!(route("/api/v1/serviceimports"), None);
        assert_eq!(route("/apis/multicluster.x-k8s.io/v1alpha1/services"), None);
        assert_eq!(route("/apis/discovery.k8s.io/v1/serviceimports"), None);
    }

    #[test]
    fn query_tolerates_the_leading_ampersand() {
        let q = parse_query("&watch=true&timeoutSeconds=290&labelSelector=app%3Ddns&allowWatchBookmarks=true&resourceVersion=10").unwrap();
        assert!(q.watch && q.bookmarks);
        assert_eq!(q.timeout, Some(290));
        assert_eq!(q.resource_version.as_deref(), Some("10"));
        let mut l = BTreeMap::new();
        l.insert("app".to_owned(), "dns".to_owned());
        assert!(q.labels.matches(&l));
    }

    #[test]
    fn streaming_lists_are_validated_as_the_real_server_does() {
        let q = parse_query("&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0").unwrap();
        assert!(q.send_initial_events);
        assert_eq!(streaming_list_invalid(&q, StreamingLists::Offered), None);
        assert!(
            streaming_list_invalid(&q, StreamingLists::Rejected)
                .unwrap()
                .contains("WatchList feature gate")
        );
        let q = parse_query("watch=true&allowWatchBookmarks=true&sendInitialEvents=true").unwrap();
        assert!(
            streaming_list_invalid(&q, StreamingLists::Offered)
                .unwrap()
                .contains("NotOlderThan")
        );
        let q = parse_query("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan").unwrap();
        assert!(
            streaming_list_invalid(&q, StreamingLists::Offered)
                .unwrap()
                .contains("allowWatchBookmarks")
        );
    }

    /// served_bytes counts exactly the list body a client reads, under its resource only.
    #[tokio::test]
    async fn served_bytes_counts_the_bodies_sent() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let fake = FakeApiServer::start().await.unwrap();
        fake.load([
            synthetic::service("a", "one", Some(std::net::Ipv4Addr::new(10, 96, 0, 1))),
            synthetic::service("a", "two", None),
        ])
        .unwrap();
        assert_eq!(fake.served_bytes(Resource::Services), 0);
        let mut conn = tokio::net::TcpStream::connect(fake.addr()).await.unwrap();
        conn.write_all(b"GET /api/v1/services HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = Vec::new();
        conn.read_to_end(&mut reply).await.unwrap();
        let text = String::from_utf8(reply).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        // Counting keeps the list's Content-Length (no chunked framing in `body`).
        assert!(
            head.to_ascii_lowercase()
                .contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        assert!(body.contains("\"two\""), "{body}");
        assert_eq!(fake.served_bytes(Resource::Services), body.len() as u64);
        assert_eq!(fake.served_bytes(Resource::EndpointSlices), 0);
    }

    #[test]
    fn version_names_major_and_minor() {
        let v = version_json("v1.30.4-eks-1234");
        assert_eq!(
            (v["major"].as_str(), v["minor"].as_str()),
            (Some("1"), Some("30"))
        );
    }
}
