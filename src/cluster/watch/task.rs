//! One watch's task ([`WatchTask`]): it follows kube-runtime's watcher for good, applies the
//! events to the zone object by object (a malformed object is skipped with a warning that names
//! it), deletes at the end of each (re)list what the list lacked, records its sync state and
//! failures, logs each distinct error once and the recovery once, and observes the DNS
//! programming latency of EndpointSlice changes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};

use super::errors::{describe_error, describe_status, error_shape};
use super::list_mode::ListMode;
use super::retry::{RetrySchedule, is_refused, wait_for_retry};
use super::spec::{Resource, WatchSpec};
use super::sync::SyncState;
use crate::cluster::heap::release_freed_heap;
use crate::cluster::metrics::{
    KubernetesMetrics, ProgrammedKind, last_change_trigger_time, programming_latency,
};
use crate::cluster::model::{PodInfo, ServiceInfo, SliceInfo, namespace_name};
use crate::cluster::multicluster::{ClusterSlice, ImportInfo};
use crate::cluster::policy::PolicyInfo;
use crate::cluster::topology::NodeInfo;
use crate::cluster::zone::ClusterZone;

type Key = (Arc<str>, Arc<str>);

/// One watch: what it watches, where it writes, and how it has been failing. The source builds
/// it and spawns [`WatchTask::run`].
pub(super) struct WatchTask {
    pub(super) spec: WatchSpec,
    pub(super) index: usize,
    pub(super) zone: Arc<ClusterZone>,
    pub(super) sync: SyncState,
    /// For the Namespace watch with a `namespaces` list: the namespaces to keep.
    pub(super) allowed: Option<Arc<HashSet<String>>>,
    /// Namespace names, shared by every object of this watch.
    pub(super) interner: HashSet<Arc<str>>,
    /// Keep endpoints' pod names (only `endpoint_pod_names` answers with them).
    pub(super) keep_pod_names: bool,
    /// Keep endpoints' node, zone and hints (`topology`, `zonal`).
    pub(super) keep_places: bool,
    /// Pods' and namespaces' labels are kept (`dnspolicy`: its selectors read them).
    pub(super) keep_labels: bool,
    /// Where watch errors and (for the EndpointSlice watch) the DNS programming latency go.
    pub(super) metrics: Option<KubernetesMetrics>,
    /// True while the event being applied is a watch event after the first list (the only
    /// ones whose programming latency is observed).
    pub(super) live: bool,
    /// How long to wait after failures.
    pub(super) retry: RetrySchedule,
    /// Where to probe for the end of an outage (the API server's host and port; `None` through
    /// a proxy).
    pub(super) probe: Option<Arc<(String, u16)>>,
    /// The [`error_shape`] of the error last logged, while the watch keeps failing (each
    /// distinct error is logged once).
    pub(super) last_error: Option<String>,
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

/// The `last_error` of a ServiceImport watch whose CRD is absent.
const CRD_ABSENT: &str = "the ServiceImport CRD is not installed";
/// The retry schedule's step while the CRD is absent (16 s, jittered).
const CRD_ABSENT_STEP: u32 = 5;

/// True for a 404 from the API server: the resource (a CRD) does not exist.
fn is_not_found(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s)) if s.code == 404
    )
}

type EventStream = futures::stream::BoxStream<'static, Result<Event<DynamicObject>, watcher::Error>>;

/// The watcher of `resource`: Nodes are watched as metadata only (their zone label is all DNS
/// reads of them, and a Node's status is most of its bytes), everything else whole.
fn open(api: &Api<DynamicObject>, wc: watcher::Config, resource: Resource) -> EventStream {
    if resource != Resource::Nodes {
        return watcher::watcher(api.clone(), wc).boxed();
    }
    let whole = |m: kube::core::PartialObjectMeta<DynamicObject>| DynamicObject {
        types: m.types,
        metadata: m.metadata,
        data: serde_json::Value::Null,
    };
    // An `Api` of `PartialObjectMeta` asks for metadata only (`as=PartialObjectMetadata`).
    let meta: Api<kube::core::PartialObjectMeta<DynamicObject>> =
        Api::all_with(api.clone().into_client(), &resource.api_resource());
    watcher::watcher(meta, wc)
        .map(move |item| {
            item.map(|event| match event {
                Event::Apply(m) => Event::Apply(whole(m)),
                Event::Delete(m) => Event::Delete(whole(m)),
                Event::Init => Event::Init,
                Event::InitApply(m) => Event::InitApply(whole(m)),
                Event::InitDone => Event::InitDone,
            })
        })
        .boxed()
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

impl WatchTask {
    /// Follows the watch for good. `first_mode` is shared by every watch of the source: the
    /// first to need it asks the API server's version.
    pub(super) async fn run(
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
        let mut stream = open(&api, mode.config(&wc), self.spec.resource);
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
                    release_freed_heap();
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
                        stream = open(&api, mode.config(&wc), self.spec.resource);
                        continue;
                    }
                    let delay = self.failed(&e);
                    let refused = is_refused(&e);
                    self.wait(delay, refused).await;
                }
            }
        }
    }

    /// Waits out `delay` before the next attempt. After a refused connection the wait ends as
    /// soon as the API server's port accepts a connection again ([`wait_for_retry`]), so that
    /// the zone catches up within about a second of an outage's end, however long the delay has
    /// grown. The schedule goes on: if the attempt fails again, the next delay is the next step.
    async fn wait(&self, delay: Duration, refused: bool) {
        let deadline = tokio::time::Instant::now() + delay;
        self.sync.retry_at(self.index, deadline.into_std());
        let probe = self.probe.as_deref().filter(|_| refused);
        if wait_for_retry(deadline, probe).await {
            tracing::debug!(target: "cluster_dns::watch", watch = %self.spec.name(), "the API server accepts connections again: retrying now");
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
        if matches!(
            self.spec.resource,
            Resource::ServiceImports | Resource::DnsPolicies
        ) && is_not_found(e)
        {
            return self.crd_absent();
        }
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

    /// The ServiceImport CRD is not installed (the API answers 404): said once, clearly, and
    /// the watch counts as synced and healthy (not failing: nothing is wrong with the
    /// connection) so that the rest of the zone is served; clusterset names answer as if no
    /// import existed. The watch asks again every 13-16 s, so a CRD installed later is picked
    /// up.
    fn crd_absent(&mut self) -> Duration {
        let delay = self.retry.delay(CRD_ABSENT_STEP);
        if self.last_error.as_deref() == Some(CRD_ABSENT) {
            return delay;
        }
        self.last_error = Some(CRD_ABSENT.to_owned());
        if self.spec.resource == Resource::DnsPolicies {
            // No DNSPolicy can exist without its CRD: there is nothing to enforce.
            tracing::warn!(
                target: "cluster_dns::watch",
                retry_in = ?delay,
                "dnspolicy: the DNSPolicy CRD (dnspolicies.dns.cluster-dns.io/v1alpha1) is not installed (404 from the API server): no policy exists, every client sees every name; apply deploy/dnspolicy-crd.yaml"
            );
        } else {
            tracing::error!(
                target: "cluster_dns::watch",
                retry_in = ?delay,
                "multicluster: the ServiceImport CRD (serviceimports.multicluster.x-k8s.io/v1alpha1) is not installed (404 from the API server): clusterset names have no imports to answer; every other name is served; install an MCS API implementation's CRDs, or remove 'multicluster'"
            );
        }
        if self.sync.mark(self.index) {
            self.zone.set_synced(true);
        }
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
            Resource::Namespaces | Resource::Nodes => String::new(),
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
                if self.keep_labels {
                    let labels = crate::cluster::policy::label_set(ns.metadata.labels.iter().flatten());
                    self.zone.policies().set_namespace(name.clone(), labels);
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
                let mut info = SliceInfo::from_k8s_placed(&slice, self.keep_pod_names, self.keep_places)
                    .map_err(|e| e.to_string())?;
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
                let mut info = if self.keep_labels {
                    PodInfo::from_k8s_labelled(&pod)
                } else {
                    PodInfo::from_k8s(&pod)
                }
                .map_err(|e| e.to_string())?;
                info.namespace = self.intern(&info.namespace);
                self.zone.apply_pod(info);
            }
            Resource::ServiceImports => {
                let info = ImportInfo::from_json(&value).map_err(|e| e.to_string())?;
                self.zone.apply_import(info);
            }
            Resource::ClusterSlices => {
                let slice: EndpointSlice = serde_json::from_value(value).map_err(|e| e.to_string())?;
                let info = ClusterSlice::from_k8s(&slice, self.keep_pod_names).map_err(|e| e.to_string())?;
                self.zone.apply_cluster_slice(info);
            }
            Resource::Nodes => {
                let node: Node = serde_json::from_value(value).map_err(|e| e.to_string())?;
                let info = NodeInfo::from_k8s(&node).map_err(|e| e.to_string())?;
                self.zone.apply_node(&info);
            }
            // Never skipped: a malformed policy is kept closed (it must not widen anything).
            Resource::DnsPolicies => {
                let info = PolicyInfo::from_json(&value).map_err(|e| e.to_string())?;
                self.zone.policies().apply(info);
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
            Resource::Namespaces => {
                self.zone.policies().delete_namespace(name);
                self.zone.delete_namespace(name);
            }
            Resource::Services => self.zone.delete_service(namespace, name),
            Resource::EndpointSlices => self.zone.delete_slice(namespace, name),
            Resource::Pods => self.zone.delete_pod(namespace, name),
            Resource::ServiceImports => self.zone.delete_import(namespace, name),
            Resource::ClusterSlices => self.zone.delete_cluster_slice(namespace, name),
            Resource::Nodes => self.zone.delete_node(name),
            Resource::DnsPolicies => self.zone.policies().delete(namespace, name),
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
            Resource::ServiceImports => self.zone.import_keys(),
            Resource::ClusterSlices => self.zone.cluster_slice_keys(),
            Resource::DnsPolicies => self.zone.policies().keys(),
            Resource::Nodes => self
                .zone
                .node_names()
                .into_iter()
                .map(|n| (Arc::from(""), n))
                .collect(),
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

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
            keep_places: false,
            keep_labels: false,
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
