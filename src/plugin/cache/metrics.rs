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
    use std::net::Ipv4Addr;
    use std::path::Path;
    use std::time::Duration;

    use hickory_proto::op::ResponseCode;
    use hickory_proto::rr::rdata::{A, SOA};
    use hickory_proto::rr::{Name, RData, Record, RecordType};

    use super::*;
    use crate::chain::{Chain, Plugin};
    use crate::plugin::cache::{Cache, CacheConfig, setup};
    use crate::proto::{Forwarded, Question, Reply};
    use std::sync::Arc;

    use crate::telemetry::render_registry as render;

    fn config(text: &str) -> CacheConfig {
        let cf =
            crate::corefile::Corefile::parse_str(&format!(".:53 {{\n{text}\n}}\n"), Path::new("Corefile"))
                .unwrap();
        setup::parse(&cf.blocks[0].directives[0], &[".".to_owned()]).unwrap()
    }

    fn q(name: &str) -> Question {
        Question::new(Name::from_ascii(name).unwrap(), RecordType::A)
    }

    fn positive(name: &str) -> Reply {
        Reply::Forwarded(Forwarded {
            rcode: ResponseCode::NoError,
            recursion_available: true,
            authentic_data: false,
            truncated: false,
            answers: vec![Record::from_rdata(
                Name::from_ascii(name).unwrap(),
                60,
                RData::A(A(Ipv4Addr::new(192, 0, 2, 1))),
            )],
            authority: Vec::new(),
            additional: Vec::new(),
        })
    }

    fn nxdomain() -> Reply {
        let zone = Name::from_ascii("example.").unwrap();
        let soa = SOA::new(zone.clone(), zone.clone(), 1, 7200, 1800, 86400, 60);
        Reply::Forwarded(Forwarded {
            rcode: ResponseCode::NXDomain,
            recursion_available: true,
            authentic_data: false,
            truncated: false,
            answers: Vec::new(),
            authority: vec![Record::from_rdata(zone, 60, RData::SOA(soa))],
            additional: Vec::new(),
        })
    }

    fn has(text: &str, want: &str) {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }

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

    #[tokio::test(start_paused = true)]
    async fn hits_misses_entries_and_expiry() {
        let r = Registry::new();
        let m = CacheMetrics::register(&r).unwrap();
        let cache = Cache::new(&config("cache 30")).with_metrics(m.clone(), "dns://:53");
        // The cache alone: a miss gets the end of the chain's SERVFAIL.
        let chain = Chain::new(vec![Arc::new(cache.clone()) as Arc<dyn Plugin>]);
        let now = tokio::time::Instant::now();
        // Two misses that the chain answers: one positive, one NXDOMAIN.
        assert!(
            cache
                .insert(&q("a.example."), &positive("a.example."), now)
                .is_some()
        );
        assert!(cache.insert(&q("nx.example."), &nxdomain(), now).is_some());
        let text = render(&r);
        has(
            &text,
            "coredns_cache_entries{server=\"dns://:53\",type=\"success\",view=\"\",zones=\".\"} 1",
        );
        has(
            &text,
            "coredns_cache_entries{server=\"dns://:53\",type=\"denial\",view=\"\",zones=\".\"} 1",
        );
        // Hits from each store, and a miss (the empty chain answers SERVFAIL, not cached here:
        // `Reply::Rcode(SERVFAIL)` is kept 5 s in the denial store).
        let _ = chain.serve(&q("a.example.")).await;
        let _ = chain.serve(&q("A.example.")).await;
        let _ = chain.serve(&q("nx.example.")).await;
        let _ = chain.serve(&q("miss.example.")).await;
        let text = render(&r);
        for want in [
            "coredns_cache_requests_total{server=\"dns://:53\",view=\"\",zones=\".\"} 4",
            "coredns_cache_hits_total{server=\"dns://:53\",type=\"success\",view=\"\",zones=\".\"} 2",
            "coredns_cache_hits_total{server=\"dns://:53\",type=\"denial\",view=\"\",zones=\".\"} 1",
            "coredns_cache_misses_total{server=\"dns://:53\",view=\"\",zones=\".\"} 1",
            "coredns_cache_drops_total{server=\"dns://:53\",view=\"\",zones=\".\"} 0",
            "coredns_cache_entries{server=\"dns://:53\",type=\"denial\",view=\"\",zones=\".\"} 2",
            "# TYPE coredns_cache_entries gauge",
            "# TYPE coredns_cache_hits_total counter",
        ] {
            has(&text, want);
        }
        // A name that turns positive replaces its denial entry: denial -1, success +1.
        cache.insert(&q("nx.example."), &positive("nx.example."), now);
        let text = render(&r);
        has(
            &text,
            "coredns_cache_entries{server=\"dns://:53\",type=\"success\",view=\"\",zones=\".\"} 2",
        );
        has(
            &text,
            "coredns_cache_entries{server=\"dns://:53\",type=\"denial\",view=\"\",zones=\".\"} 1",
        );
        // Expiry: a lookup of an expired entry removes it and the gauge follows.
        tokio::time::advance(Duration::from_secs(31)).await;
        let _ = chain.serve(&q("a.example.")).await;
        let text = render(&r);
        has(
            &text,
            "coredns_cache_misses_total{server=\"dns://:53\",view=\"\",zones=\".\"} 2",
        );
        has(
            &text,
            "coredns_cache_entries{server=\"dns://:53\",type=\"success\",view=\"\",zones=\".\"} 1",
        );
        // Dropping the cache (a Corefile reload drops the chain holding it) takes its entries
        // out of the gauge.
        drop(chain);
        drop(cache);
        let text = render(&r);
        has(
            &text,
            "coredns_cache_entries{server=\"dns://:53\",type=\"success\",view=\"\",zones=\".\"} 0",
        );
        has(
            &text,
            "coredns_cache_entries{server=\"dns://:53\",type=\"denial\",view=\"\",zones=\".\"} 0",
        );
    }

    #[tokio::test(start_paused = true)]
    async fn evictions_stale_and_prefetch() {
        let r = Registry::new();
        let m = CacheMetrics::register(&r).unwrap();
        // One-entry stores: the second name evicts the first.
        let cache = Cache::new(&config(
            "cache 30 example. {\n success 1\n denial 1\n serve_stale 1h immediate\n prefetch 1 1m 50%\n}",
        ))
        .with_metrics(m, "dns://:1053");
        let chain = Chain::new(vec![Arc::new(cache.clone()) as Arc<dyn Plugin>]);
        let now = tokio::time::Instant::now();
        cache.insert(&q("a.example."), &positive("a.example."), now);
        cache.insert(&q("b.example."), &positive("b.example."), now);
        let text = render(&r);
        has(
            &text,
            "coredns_cache_evictions_total{server=\"dns://:1053\",type=\"success\",view=\"\",zones=\"example.\"} 1",
        );
        has(
            &text,
            "coredns_cache_entries{server=\"dns://:1053\",type=\"success\",view=\"\",zones=\"example.\"} 1",
        );
        // Past half its TTL a hit starts a prefetch.
        tokio::time::advance(Duration::from_secs(20)).await;
        let _ = chain.serve(&q("b.example.")).await;
        // Expired but within serve_stale: a hit, served stale, refreshed in the background
        // (CoreDNS counts that refresh as a prefetch in `immediate` mode).
        tokio::time::advance(Duration::from_secs(20)).await;
        let stale = chain.serve(&q("b.example.")).await.reply;
        assert_eq!(stale.answers().len(), 1);
        let text = render(&r);
        for want in [
            "coredns_cache_hits_total{server=\"dns://:1053\",type=\"success\",view=\"\",zones=\"example.\"} 2",
            "coredns_cache_served_stale_total{server=\"dns://:1053\",view=\"\",zones=\"example.\"} 1",
            "coredns_cache_prefetch_total{server=\"dns://:1053\",view=\"\",zones=\"example.\"} 2",
            "coredns_cache_requests_total{server=\"dns://:1053\",view=\"\",zones=\"example.\"} 2",
        ] {
            has(&text, want);
        }
        // Names outside the cache's zones are not requests of this cache.
        let _ = chain.serve(&q("other.org.")).await;
        has(
            &render(&r),
            "coredns_cache_requests_total{server=\"dns://:1053\",view=\"\",zones=\"example.\"} 2",
        );
    }
}
