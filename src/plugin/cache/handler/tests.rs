//! The tests of the `cache` handler (`handler.rs`), on configurations its setup (`setup.rs`)
//! parses: a file of their own, so that the handler itself never imports the setup.

use std::net::Ipv4Addr;
use std::path::Path;

use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::{RData, Record, RecordType};
use prometheus::Registry;

use super::*;
use crate::chain::Chain;
use crate::plugin::cache::setup;
use crate::proto::Forwarded;
use crate::telemetry::render_registry as render;

fn config(text: &str) -> CacheConfig {
    let cf = crate::corefile::Corefile::parse_str(&format!(".:53 {{\n{text}\n}}\n"), Path::new("Corefile"))
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
        flags: crate::proto::FlagEdit::KEEP,
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
        flags: crate::proto::FlagEdit::KEEP,
        answers: Vec::new(),
        authority: vec![Record::from_rdata(zone, 60, RData::SOA(soa))],
        additional: Vec::new(),
    })
}

fn has(text: &str, want: &str) {
    assert!(text.contains(want), "missing {want} in\n{text}");
}

/// A zone transfer is made for the client `transfer` allowed: the cache keeps none
/// (issue 42), whatever the plugins after it declare.
#[tokio::test(start_paused = true)]
async fn a_zone_transfer_is_never_stored() {
    let cache = Cache::new(&config("cache 30"));
    let now = tokio::time::Instant::now();
    for qtype in [RecordType::AXFR, RecordType::IXFR] {
        let q = Question::new(Name::from_ascii("example.").unwrap(), qtype);
        assert_eq!(cache.insert(&q, &positive("example."), now), None, "{qtype}");
    }
    assert_eq!(cache.len(), (0, 0));
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
