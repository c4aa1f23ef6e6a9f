//! The `dnspolicy` families. Label values come from fixed sets and from the DNSPolicy objects
//! (their namespace and name), never from a query name or a client address:
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `cluster_dns_dnspolicy_decisions_total` | counter | namespace, policy, decision (`denied`, `audited`) |
//! | `cluster_dns_dnspolicy_policies` | gauge | mode (`Enforce`, `Audit`), state (`valid`, `malformed`) |
//! | `cluster_dns_dnspolicy_malformed_total` | counter | (none) |
//! | `cluster_dns_dnspolicy_observed_names` | gauge | namespace, policy |
//! | `cluster_dns_dnspolicy_observed_dropped_total` | counter | namespace, policy |
//! | `cluster_dns_dnspolicy_unmapped_total` | counter | decision (`allowed`, `denied`) |
//! | `cluster_dns_dnspolicy_cached` | gauge | cache (`views`: one per namespace and pod label set asking, at most 65,536; `classes`: distinct view contents, at most 262,144) |
//! | `cluster_dns_dnspolicy_cache_flushes_total` | counter | cache (`views`, `classes`): times the cache was emptied at its bound |
//!
//! `denied`: questions an `Enforce` policy covering the client answered as hidden or denied
//! (counted under every `Enforce` policy covering it: they decide together); `audited`:
//! questions answered that an `Audit` policy would have denied. The per-policy families are
//! read from the policy stores at scrape time, so a deleted policy's series goes with it.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry};

use crate::cluster::ClusterSource;
use crate::cluster::policy::Mode;

/// The `dnspolicy` families. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PolicyMetrics {
    unmapped_allowed: IntCounter,
    unmapped_denied: IntCounter,
    stores: StoreCollector,
}

/// Reads the policies of every source a `dnspolicy` plugin was built over.
#[derive(Debug, Clone, Default)]
struct StoreCollector {
    sources: Arc<Mutex<Vec<Weak<ClusterSource>>>>,
    descs: Arc<Vec<Desc>>,
}

fn decisions() -> IntCounterVec {
    IntCounterVec::new(
        Opts::new(
            "cluster_dns_dnspolicy_decisions_total",
            "Questions a DNSPolicy denied (Enforce) or would have denied (Audit).",
        ),
        &["namespace", "policy", "decision"],
    )
    .expect("valid metric")
}

fn policies() -> IntGaugeVec {
    IntGaugeVec::new(
        Opts::new(
            "cluster_dns_dnspolicy_policies",
            "DNSPolicy objects, by mode and state.",
        ),
        &["mode", "state"],
    )
    .expect("valid metric")
}

fn malformed() -> IntCounter {
    IntCounter::new(
        "cluster_dns_dnspolicy_malformed_total",
        "Malformed DNSPolicy objects applied (each kept closed until fixed).",
    )
    .expect("valid metric")
}

fn observed() -> IntGaugeVec {
    IntGaugeVec::new(
        Opts::new(
            "cluster_dns_dnspolicy_observed_names",
            "Outside names recorded for an Audit DNSPolicy's allowlist.",
        ),
        &["namespace", "policy"],
    )
    .expect("valid metric")
}

fn observed_dropped() -> IntCounterVec {
    IntCounterVec::new(
        Opts::new(
            "cluster_dns_dnspolicy_observed_dropped_total",
            "Outside names not recorded because the policy's set was full.",
        ),
        &["namespace", "policy"],
    )
    .expect("valid metric")
}

fn cached() -> IntGaugeVec {
    IntGaugeVec::new(
        Opts::new(
            "cluster_dns_dnspolicy_cached",
            "Client views (per namespace and pod label set) and view classes kept.",
        ),
        &["cache"],
    )
    .expect("valid metric")
}

fn cache_flushes() -> IntCounterVec {
    IntCounterVec::new(
        Opts::new(
            "cluster_dns_dnspolicy_cache_flushes_total",
            "Times the view or class cache was emptied because it reached its bound.",
        ),
        &["cache"],
    )
    .expect("valid metric")
}

impl StoreCollector {
    fn new() -> Self {
        let mut descs = Vec::new();
        descs.extend(decisions().desc().into_iter().cloned());
        descs.extend(policies().desc().into_iter().cloned());
        descs.extend(malformed().desc().into_iter().cloned());
        descs.extend(observed().desc().into_iter().cloned());
        descs.extend(observed_dropped().desc().into_iter().cloned());
        descs.extend(cached().desc().into_iter().cloned());
        descs.extend(cache_flushes().desc().into_iter().cloned());
        Self {
            sources: Arc::default(),
            descs: Arc::new(descs),
        }
    }

    fn live(&self) -> Vec<Arc<ClusterSource>> {
        let mut held = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        held.retain(|w| w.strong_count() > 0);
        held.iter().filter_map(Weak::upgrade).collect()
    }
}

impl Collector for StoreCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let (d, p, m, o, od) = (
            decisions(),
            policies(),
            malformed(),
            observed(),
            observed_dropped(),
        );
        let (c, cf) = (cached(), cache_flushes());
        for cache in ["views", "classes"] {
            c.with_label_values(&[cache]).set(0);
            cf.with_label_values(&[cache]).inc_by(0);
        }
        for source in self.live() {
            let store = source.zone().policies();
            m.inc_by(store.malformed_seen.load(std::sync::atomic::Ordering::Relaxed));
            let counts = store.cache_counts();
            let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
            c.with_label_values(&["views"]).add(gauge(counts.views));
            c.with_label_values(&["classes"]).add(gauge(counts.classes));
            cf.with_label_values(&["views"]).inc_by(counts.view_flushes);
            cf.with_label_values(&["classes"]).inc_by(counts.class_flushes);
            for policy in store.policies() {
                let (ns, name, stats) = (&policy.namespace, &policy.name, &policy.stats);
                let mode = match policy.mode {
                    Mode::Enforce => "Enforce",
                    Mode::Audit => "Audit",
                };
                let state = if policy.error.is_some() {
                    "malformed"
                } else {
                    "valid"
                };
                p.with_label_values(&[mode, state]).inc();
                let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
                d.with_label_values(&[ns, name, "denied"])
                    .inc_by(load(&stats.denied));
                d.with_label_values(&[ns, name, "audited"])
                    .inc_by(load(&stats.audited));
                if mode == "Audit" {
                    let seen = i64::try_from(stats.observed().len()).unwrap_or(i64::MAX);
                    o.with_label_values(&[ns, name]).set(seen);
                    od.with_label_values(&[ns, name])
                        .inc_by(load(&stats.observed_dropped));
                }
            }
        }
        let mut out = Vec::new();
        out.extend(d.collect());
        out.extend(p.collect());
        out.extend(m.collect());
        out.extend(o.collect());
        out.extend(od.collect());
        out.extend(c.collect());
        out.extend(cf.collect());
        out
    }
}

impl crate::telemetry::Families for PolicyMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let unmapped = IntCounterVec::new(
            Opts::new(
                "cluster_dns_dnspolicy_unmapped_total",
                "Questions from clients that are not known pods, by what `unmapped` decided.",
            ),
            &["decision"],
        )?;
        let stores = StoreCollector::new();
        crate::telemetry::register_all(registry, vec![Box::new(unmapped.clone())])?;
        registry.register(Box::new(stores.clone()))?;
        Ok(Self {
            unmapped_allowed: unmapped.with_label_values(&["allowed"]),
            unmapped_denied: unmapped.with_label_values(&["denied"]),
            stores,
        })
    }
}

impl PolicyMetrics {
    /// Counts a question from a client that is not a known pod.
    pub fn unmapped(&self, allowed: bool) {
        if allowed {
            self.unmapped_allowed.inc();
        } else {
            self.unmapped_denied.inc();
        }
    }

    /// Exports the policies of `source` (once per source).
    pub fn watch(&self, source: &Arc<ClusterSource>) {
        let mut held = self.stores.sources.lock().unwrap_or_else(PoisonError::into_inner);
        if !held.iter().any(|w| w.as_ptr() == Arc::as_ptr(source)) {
            held.push(Arc::downgrade(source));
        }
    }
}
