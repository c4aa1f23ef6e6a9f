//! The Kubernetes API source: builds a `kube` client from the `kubernetes` plugin's connection
//! options and keeps a [`ClusterZone`] in step with the API server through one kube-runtime
//! watcher per resource (Namespaces, Services, EndpointSlices and, with `pods verified`, Pods;
//! with `multicluster`, ServiceImports and the imported EndpointSlices; with `dnspolicy`,
//! DNSPolicies, with pods' and namespaces' labels kept).
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
//!
//! This file holds the running source ([`WatchSource`], [`start_with_metrics`]); the seams are
//! files of their own: `client` (the connection), `spec` (what is watched), `task` (one watch:
//! applying events, relists, failures), `list_mode` (streaming or paginated lists), `retry`
//! (the schedule and the outage probe), `sync` (the sync state) and `errors` (how errors read).

mod client;
mod errors;
mod list_mode;
mod retry;
mod spec;
mod sync;
mod task;

use std::collections::HashSet;
use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use tokio::task::JoinHandle;

pub use client::{ApiSource, WatchOptions, client_config};
pub use errors::{WatchError, describe_error, error_chain};
pub use list_mode::ListMode;
pub use retry::RetrySchedule;
pub use spec::Resource;
pub use sync::SyncState;

use crate::cluster::metrics::KubernetesMetrics;
use crate::cluster::zone::ClusterZone;
use retry::probe_address;
use spec::{WatchSpec, watch_specs};
use task::WatchTask;

/// Page size of the initial lists of Services, Namespaces and Pods (client-go's default).
const PAGE_SIZE: u32 = 500;
/// Page size of the initial EndpointSlice list. Slices are large (up to 100 endpoints each), and
/// kube holds a whole page decoded while it hands the objects out: those short-lived blocks sit
/// between the zone's long-lived ones, and the heap they fragment stays. `bench/watch.sh`
/// (1,500 slices of 100 endpoints), steady RSS by page size: 50, 63-67 MB; 25, 53-54 MB; 20,
/// 50-51 MB; 10, 46 MB with the start 30% slower. 20 costs 76 list requests for those slices.
const SLICE_PAGE_SIZE: u32 = 20;

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

/// Connects to the API server named by `config` and starts the watches that fill `zone`. It
/// returns at once: the watches list, retry and follow in background tasks, and the zone is
/// marked synced when all of them have completed their first list. The DNS programming latency
/// of EndpointSlice changes goes into `metrics`
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
    // Every request of every watch goes through the client's limits (outermost: a request
    // waits for them before it is measured), then the rest-client metrics layer when metrics
    // are recorded.
    let limits = config.limits.layer();
    let client = match &metrics {
        Some(m) => builder
            .with_layer(&m.rest_client.layer(host))
            .with_layer(&limits)
            .build(),
        None => builder.with_layer(&limits).build(),
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
        let slices = matches!(spec.resource, Resource::EndpointSlices | Resource::ClusterSlices);
        let mut wc = watcher::Config::default().page_size(if slices { SLICE_PAGE_SIZE } else { PAGE_SIZE });
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
            keep_places: config.endpoint_places,
            keep_labels: config.policies,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
