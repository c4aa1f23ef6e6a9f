//! The `cache` plugin's metrics under CoreDNS's names, types and labels (`plugin/cache/metrics.go`):
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `coredns_cache_entries` | gauge | server, type, zones, view |
//! | `coredns_cache_requests_total` | counter | server, zones, view |
//! | `coredns_cache_hits_total` | counter | server, type, zones, view |
//! | `coredns_cache_misses_total` | counter | server, zones, view |
//! | `coredns_cache_prefetch_total` | counter | server, zones, view |
//! | `coredns_cache_drops_total` | counter | server, zones, view |
//! | `coredns_cache_served_stale_total` | counter | server, zones, view |
//! | `coredns_cache_evictions_total` | counter | server, type, zones, view |
//!
//! `type` is `success` or `denial`; `zones` is the cache's zones joined by `,` (as CoreDNS's
//! `zonesMetricLabel`); `view` is empty (no views). Every label value comes from the Corefile.
//!
//! [`CacheMetrics`] holds the families: they are created and registered once per process, and
//! every generation of [`Cache`](super::Cache) (one per Corefile load) gets a clone through
//! [`Cache::with_metrics`](super::Cache::with_metrics), which resolves its label values once
//! into [`CacheInstruments`] so that the query path only bumps atomics.

use crate::telemetry::register_all;
use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// The `type` label of the success store.
pub const SUCCESS: &str = "success";
/// The `type` label of the denial store (NXDOMAIN, NODATA, SERVFAIL).
pub const DENIAL: &str = "denial";

/// The cache metric families, registered once per process. Cheap to clone (the families are
/// shared).
#[derive(Debug, Clone)]
pub struct CacheMetrics {
    entries: IntGaugeVec,
    requests: IntCounterVec,
    hits: IntCounterVec,
    misses: IntCounterVec,
    prefetch: IntCounterVec,
    drops: IntCounterVec,
    served_stale: IntCounterVec,
    evictions: IntCounterVec,
}

fn counter(name: &str, help: &str, labels: &[&str]) -> Result<IntCounterVec, prometheus::Error> {
    IntCounterVec::new(Opts::new(name, help), labels)
}

impl crate::telemetry::Families for CacheMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        CacheMetrics::register(registry)
    }
}

impl CacheMetrics {
    /// Creates the families and registers them in `registry`. Registering twice in one registry
    /// fails with [`prometheus::Error::AlreadyReg`] and leaves the registry unchanged.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let m = Self {
            entries: IntGaugeVec::new(
                Opts::new("coredns_cache_entries", "The number of elements in the cache."),
                &["server", "type", "zones", "view"],
            )?,
            requests: counter(
                "coredns_cache_requests_total",
                "The count of cache requests.",
                &["server", "zones", "view"],
            )?,
            hits: counter(
                "coredns_cache_hits_total",
                "The count of cache hits.",
                &["server", "type", "zones", "view"],
            )?,
            misses: counter(
                "coredns_cache_misses_total",
                "The count of cache misses. Deprecated, derive misses from cache hits/requests counters.",
                &["server", "zones", "view"],
            )?,
            prefetch: counter(
                "coredns_cache_prefetch_total",
                "The number of times the cache has prefetched a cached item.",
                &["server", "zones", "view"],
            )?,
            drops: counter(
                "coredns_cache_drops_total",
                "The number responses that are not cached, because the reply is malformed.",
                &["server", "zones", "view"],
            )?,
            served_stale: counter(
                "coredns_cache_served_stale_total",
                "The number of requests served from stale cache entries.",
                &["server", "zones", "view"],
            )?,
            evictions: counter(
                "coredns_cache_evictions_total",
                "The count of cache evictions.",
                &["server", "type", "zones", "view"],
            )?,
        };
        register_all(
            registry,
            vec![
                Box::new(m.entries.clone()),
                Box::new(m.requests.clone()),
                Box::new(m.hits.clone()),
                Box::new(m.misses.clone()),
                Box::new(m.prefetch.clone()),
                Box::new(m.drops.clone()),
                Box::new(m.served_stale.clone()),
                Box::new(m.evictions.clone()),
            ],
        )?;
        Ok(m)
    }

    /// The series of one cache: `server` as the prometheus plugin writes it (`dns://:53`),
    /// `zones` the cache's zones joined by `,`.
    pub fn instruments(&self, server: &str, zones: &str) -> CacheInstruments {
        let store = |t: &str| StoreInstruments {
            entries: self.entries.with_label_values(&[server, t, zones, ""]),
            hits: self.hits.with_label_values(&[server, t, zones, ""]),
            evictions: self.evictions.with_label_values(&[server, t, zones, ""]),
        };
        let plain = |v: &IntCounterVec| v.with_label_values(&[server, zones, ""]);
        CacheInstruments {
            requests: plain(&self.requests),
            misses: plain(&self.misses),
            prefetch: plain(&self.prefetch),
            drops: plain(&self.drops),
            served_stale: plain(&self.served_stale),
            success: store(SUCCESS),
            denial: store(DENIAL),
        }
    }
}

/// The series of one store (success or denial) of one cache.
#[derive(Debug, Clone)]
pub struct StoreInstruments {
    /// `coredns_cache_entries{type}`: kept equal to the entries held, by adding and subtracting
    /// every change (so caches of two Corefile generations alive at once add up).
    pub entries: IntGauge,
    /// `coredns_cache_hits_total{type}`.
    pub hits: IntCounter,
    /// `coredns_cache_evictions_total{type}`: live entries removed to make room.
    pub evictions: IntCounter,
}

/// The resolved series of one cache.
#[derive(Debug, Clone)]
pub struct CacheInstruments {
    /// `coredns_cache_requests_total`: questions in the cache's zones.
    pub requests: IntCounter,
    /// `coredns_cache_misses_total`: questions with no entry, fresh or stale.
    pub misses: IntCounter,
    /// `coredns_cache_prefetch_total`: background refreshes (prefetch, `serve_stale immediate`).
    pub prefetch: IntCounter,
    /// `coredns_cache_drops_total`: always 0 here (the chain only hands back answers to the
    /// question asked, so nothing is dropped for a mismatch).
    pub drops: IntCounter,
    /// `coredns_cache_served_stale_total`.
    pub served_stale: IntCounter,
    /// The success store's series.
    pub success: StoreInstruments,
    /// The denial store's series.
    pub denial: StoreInstruments,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registering_twice_fails_and_leaves_the_registry_alone() {
        let r = Registry::new();
        CacheMetrics::register(&r).unwrap();
        let before = r.gather().len();
        assert!(matches!(
            CacheMetrics::register(&r),
            Err(prometheus::Error::AlreadyReg)
        ));
        assert_eq!(r.gather().len(), before);
        // A registry that holds only one of the families: the rest must not stay registered.
        let partial = Registry::new();
        let lone = IntCounterVec::new(
            Opts::new("coredns_cache_evictions_total", "x"),
            &["server", "type", "zones", "view"],
        )
        .unwrap();
        partial.register(Box::new(lone.clone())).unwrap();
        assert!(CacheMetrics::register(&partial).is_err());
        lone.with_label_values(&["s", "success", ".", ""]).inc();
        let names: Vec<String> = partial.gather().iter().map(|f| f.name().to_owned()).collect();
        assert_eq!(names, ["coredns_cache_evictions_total"]);
    }
}
