//! The `kubernetes` plugin's metrics under CoreDNS's names, types and labels
//! (`plugin/kubernetes/object/metrics.go`):
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `coredns_kubernetes_dns_programming_duration_seconds` | histogram | service_kind |
//!
//! The DNS programming latency SLI of SIG Scalability: from the moment the EndpointSlice
//! controller saw the change that made it write a slice (the slice's
//! `endpoints.kubernetes.io/last-change-trigger-time` annotation) to the moment the new slice is
//! in the zone. `service_kind` is `cluster_ip` or `headless_with_selector`, from the Service the
//! slice belongs to; `headless_without_selector` is part of the label's value set but, as in
//! CoreDNS, never observed (slices of such services are not written by the controller, so they
//! carry no trigger time). Buckets: 1 ms doubling to about 17 minutes (CoreDNS's).
//!
//! Observed by the API source ([`crate::cluster::watch::start_with_metrics`]) for slice changes
//! that arrive as watch events after the watch's first list; skipped for objects without the
//! annotation (or with one that does not parse), for slices whose Service is not (yet) in the
//! zone, for deletions and for relists. A trigger time in the future (clock skew between the
//! control plane and this node) counts as 0, never as a negative duration.
//!
//! The API client's requests: `coredns_kubernetes_rest_client_*`, recorded by a layer around the
//! client's HTTP stack ([`crate::cluster::rest_client`]).
//!
//! And two families only cluster-dns has, for the alerts a CoreDNS pod's Go metrics cannot give:
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `cluster_dns_kubernetes_watches_pending` | gauge | (none) |
//! | `cluster_dns_kubernetes_watch_errors_total` | counter | resource |
//!
//! - `watches_pending`: the watches that have not completed their first list. While it is above
//!   0 the zone is not synced and `/ready` answers 503; after the first list it stays 0 through
//!   later errors (the last-known zone answers).
//! - `watch_errors_total`: failed list or watch attempts, by `resource` (`services`,
//!   `endpointslices.discovery.k8s.io`, `pods`, `namespaces`: the RBAC names). A watch that expired (410 Gone) is the API's normal
//!   way to ask for a relist and is not counted.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};

use crate::cluster::model::ServiceKind;
use crate::cluster::rest_client::RestClientMetrics;
use crate::telemetry::register_all;

/// The annotation the EndpointSlice controller writes with the time of the change it reacted to.
pub const LAST_CHANGE_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";

/// The `service_kind` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgrammedKind {
    /// A Service with a cluster IP.
    ClusterIp,
    /// A headless Service with a selector (its slices are written by the controller).
    HeadlessWithSelector,
    /// A headless Service without a selector (never observed; see the module comment).
    HeadlessWithoutSelector,
}

impl ProgrammedKind {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Self::ClusterIp => "cluster_ip",
            Self::HeadlessWithSelector => "headless_with_selector",
            Self::HeadlessWithoutSelector => "headless_without_selector",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::ClusterIp => 0,
            Self::HeadlessWithSelector => 1,
            Self::HeadlessWithoutSelector => 2,
        }
    }

    /// The kind of the Service a controller-written slice (one with a trigger time) belongs to;
    /// `None` for an ExternalName service, which has no endpoints to program.
    pub fn of_controller_slice(kind: &ServiceKind) -> Option<Self> {
        match kind {
            ServiceKind::ClusterIp(_) => Some(Self::ClusterIp),
            ServiceKind::Headless => Some(Self::HeadlessWithSelector),
            ServiceKind::ExternalName(_) => None,
        }
    }
}

/// The trigger time an object's metadata carries, if it has a valid one.
pub fn last_change_trigger_time(meta: &ObjectMeta) -> Option<Timestamp> {
    meta.annotations
        .as_ref()?
        .get(LAST_CHANGE_TRIGGER_TIME)?
        .parse::<Timestamp>()
        .ok()
}

/// The programming latency of a change triggered at `trigger` and in the zone at `now`; 0 when
/// `trigger` is after `now`.
pub fn programming_latency(trigger: Timestamp, now: Timestamp) -> Duration {
    let nanos = now.as_nanosecond().saturating_sub(trigger.as_nanosecond());
    if nanos <= 0 {
        return Duration::ZERO;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Duration::new(secs, sub)
}

/// The kubernetes metric families, registered once per process. Cheap to clone; clones share
/// the resolved series.
#[derive(Debug, Clone)]
pub struct KubernetesMetrics {
    programming: HistogramVec,
    by_kind: Arc<[OnceLock<Histogram>; 3]>,
    /// The API client's requests.
    pub rest_client: RestClientMetrics,
    /// Watches that have not completed their first list.
    pub watches_pending: IntGauge,
    watch_errors: IntCounterVec,
    /// Bytes of names the answerers keep with zone entries, and their bound.
    pub kept_names: IntGauge,
    /// The sum of the answerers' bounds on [`Self::kept_names`].
    pub kept_names_limit: IntGauge,
}

impl crate::telemetry::Families for KubernetesMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        KubernetesMetrics::register(registry)
    }
}

impl KubernetesMetrics {
    /// Creates the families and registers them in `registry`. Registering twice in one registry
    /// fails with [`prometheus::Error::AlreadyReg`] and leaves the registry unchanged.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let programming = HistogramVec::new(
            HistogramOpts::new(
                "coredns_kubernetes_dns_programming_duration_seconds",
                "Histogram of the time (in seconds) it took to program a dns instance.",
            )
            .buckets(prometheus::exponential_buckets(0.001, 2.0, 20)?),
            &["service_kind"],
        )?;
        let watches_pending = IntGauge::new(
            "cluster_dns_kubernetes_watches_pending",
            "Kubernetes watches that have not completed their first list (the zone is not synced while above 0).",
        )?;
        let watch_errors = IntCounterVec::new(
            Opts::new(
                "cluster_dns_kubernetes_watch_errors_total",
                "Failed list or watch attempts against the Kubernetes API, by resource.",
            ),
            &["resource"],
        )?;
        let kept_names = IntGauge::new(
            "cluster_dns_kubernetes_kept_names_bytes",
            "Bytes of SRV and PTR target names the kubernetes plugin keeps with Services between questions (counted against cluster_dns_kubernetes_kept_names_limit_bytes).",
        )?;
        let kept_names_limit = IntGauge::new(
            "cluster_dns_kubernetes_kept_names_limit_bytes",
            "The most bytes of names the kubernetes plugin keeps with Services; past it, names are built for each answer.",
        )?;
        let rest_client = RestClientMetrics::new()?;
        let mut collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(programming.clone()),
            Box::new(watches_pending.clone()),
            Box::new(watch_errors.clone()),
            Box::new(kept_names.clone()),
            Box::new(kept_names_limit.clone()),
        ];
        collectors.extend(rest_client.collectors());
        register_all(registry, collectors)?;
        Ok(Self {
            programming,
            by_kind: Arc::new(std::array::from_fn(|_| OnceLock::new())),
            rest_client,
            watches_pending,
            watch_errors,
            kept_names,
            kept_names_limit,
        })
    }

    /// Counts one failed attempt of the watch of `resource` (a name from the fixed set of
    /// watched resources).
    pub fn watch_failed(&self, resource: &'static str) {
        self.watch_errors.with_label_values(&[resource]).inc();
    }

    /// Observes one programmed change (the series of a kind is resolved on its first use).
    pub fn observe_programming(&self, kind: ProgrammedKind, latency: Duration) {
        if let Some(cell) = self.by_kind.get(kind.index()) {
            cell.get_or_init(|| self.programming.with_label_values(&[kind.label()]))
                .observe(latency.as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    use crate::telemetry::render_registry as render;

    fn meta(value: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            annotations: value.map(|v| BTreeMap::from([(LAST_CHANGE_TRIGGER_TIME.to_owned(), v.to_owned())])),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn trigger_times_and_latencies() {
        let t = last_change_trigger_time(&meta(Some("2026-01-02T03:04:05.25Z"))).unwrap();
        assert!(last_change_trigger_time(&meta(Some("2026-01-02T03:04:05Z"))).is_some());
        assert!(last_change_trigger_time(&meta(Some("yesterday"))).is_none());
        assert!(last_change_trigger_time(&meta(None)).is_none());
        let later: Timestamp = "2026-01-02T03:04:07Z".parse().unwrap();
        assert_eq!(programming_latency(t, later), Duration::from_millis(1750));
        // Clock skew: never negative.
        assert_eq!(programming_latency(later, t), Duration::ZERO);
        assert_eq!(
            ProgrammedKind::of_controller_slice(&ServiceKind::Headless),
            Some(ProgrammedKind::HeadlessWithSelector)
        );
        assert_eq!(
            ProgrammedKind::of_controller_slice(&ServiceKind::ClusterIp(Vec::new()))
                .map(ProgrammedKind::label),
            Some("cluster_ip")
        );
        assert_eq!(
            ProgrammedKind::of_controller_slice(&ServiceKind::ExternalName(None)),
            None
        );
    }

    #[test]
    fn registers_once_and_observes_per_kind() {
        let r = Registry::new();
        let m = KubernetesMetrics::register(&r).unwrap();
        assert!(matches!(
            KubernetesMetrics::register(&r),
            Err(prometheus::Error::AlreadyReg)
        ));
        // Nothing observed yet: no series.
        assert!(!render(&r).contains("coredns_kubernetes_dns_programming_duration_seconds"));
        m.clone()
            .observe_programming(ProgrammedKind::HeadlessWithSelector, Duration::from_millis(3));
        m.observe_programming(ProgrammedKind::HeadlessWithSelector, Duration::from_secs(2));
        let text = render(&r);
        for want in [
            "# TYPE coredns_kubernetes_dns_programming_duration_seconds histogram",
            "coredns_kubernetes_dns_programming_duration_seconds_bucket{service_kind=\"headless_with_selector\",le=\"0.004\"} 1",
            "coredns_kubernetes_dns_programming_duration_seconds_bucket{service_kind=\"headless_with_selector\",le=\"2.048\"} 2",
            "coredns_kubernetes_dns_programming_duration_seconds_count{service_kind=\"headless_with_selector\"} 2",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        assert!(!text.contains("cluster_ip"));
    }
}
