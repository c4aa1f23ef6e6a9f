//! `cache { serve_stale }` against a real upstream the test stops and starts (Debian's
//! `unbound`) and a cluster zone the test changes through the fake API server: with the upstream
//! gone, a name answered before is served stale with the configured TTL for the configured
//! window and not after; once the upstream is back, fresh answers return; `verify` asks the
//! upstream first; and a cluster name is never served stale (a deleted Service is NXDOMAIN as
//! soon as its TTL is out, whatever the window).

use std::net::SocketAddr;
use std::time::Duration;

use cluster_dns::app::Running;
use fake_apiserver::{FakeApiServer, Resource};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use serde_json::json;

use crate::support;
use crate::support::upstream::{Unbound, free_port};

async fn ask(addr: SocketAddr, name: &str) -> Message {
    support::udp(addr, &support::query_edns(name, RecordType::A, 1232))
        .await
        .0
}

/// The A records of `m` with their TTLs.
fn a_with_ttl(m: &Message) -> Vec<(String, u32)> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some((a.0.to_string(), r.ttl)),
            _ => None,
        })
        .collect()
}

/// A server whose cache serves stale with `serve_stale`, forwarding to `upstream`, with the
/// cluster zone from `fake` (TTL 1).
async fn start(fake: &FakeApiServer, upstream: SocketAddr, serve_stale: &str) -> (Running, SocketAddr) {
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local {{\n  endpoint {}\n  ttl 1\n }}\n cache 30 {{\n  success 100 30 1\n  denial 100 30 1\n  serve_stale {serve_stale}\n }}\n forward . {upstream} {{\n  max_fails 0\n }}\n}}\n",
        fake.url()
    );
    let running = support::start(&corefile, &support::temp_dir("serve-stale")).await;
    for _ in 0..1500 {
        if support::zone(&running).is_synced() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(support::zone(&running).is_synced(), "the cluster zone synced");
    let addr = running.dns_addrs()[0];
    (running, addr)
}

async fn fake_with_service() -> FakeApiServer {
    let fake = FakeApiServer::start().await.unwrap();
    fake.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}))
        .unwrap();
    fake.create(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "cart", "namespace": "shop"},
        "spec": {"clusterIP": "10.96.77.7", "ports": [{"name": "http", "port": 80}]}}))
        .unwrap();
    fake
}

const OUTSIDE: &str = "short.example.com."; // unbound: A 192.0.2.11, TTL 1
const CLUSTER: &str = "cart.shop.svc.cluster.local.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_for_the_window_with_its_ttl_then_fresh_when_the_upstream_is_back_never_a_cluster_name() {
    let dir = support::temp_dir("serve-stale-unbound");
    let port = free_port();
    let unbound = Unbound::start_on(&dir, port).await.expect("unbound starts");
    let fake = fake_with_service().await;
    let (running, addr) = start(&fake, unbound.addr, "3s immediate 7s").await;

    assert_eq!(a_with_ttl(&ask(addr, OUTSIDE).await), [("192.0.2.11".into(), 1)]);
    assert_eq!(a_with_ttl(&ask(addr, CLUSTER).await), [("10.96.77.7".into(), 1)]);

    // The upstream stops; the Service is deleted.
    unbound.stop();
    fake.delete(Resource::Services, "shop", "cart").unwrap();
    tokio::time::sleep(Duration::from_millis(1300)).await;

    // Within the window: the outside name is served stale with RESPONSE_TTL, again and again.
    for _ in 0..3 {
        let m = ask(addr, OUTSIDE).await;
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert_eq!(a_with_ttl(&m), [("192.0.2.11".into(), 7)]);
    }
    // The cluster name is not: the zone says the Service is gone.
    let m = ask(addr, CLUSTER).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain, "{m:?}");

    // Past the window (3 s after expiry, 4 s after the answer): nothing stale is left, the
    // dead upstream fails.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let m = ask(addr, OUTSIDE).await;
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail, "{m:?}");
    assert!(a_with_ttl(&m).is_empty());

    // The upstream comes back on its address: fresh answers, with its own TTL.
    let unbound = Unbound::start_on(&dir, port).await.expect("unbound starts again");
    let m = ask(addr, OUTSIDE).await;
    assert_eq!(a_with_ttl(&m), [("192.0.2.11".into(), 1)]);
    running.stop().await.unwrap();
    drop(unbound);
}

/// `verify`: an expired entry makes the upstream be asked first, so with the upstream up the
/// answer is fresh (its own TTL 1), not the stale copy (RESPONSE_TTL 7) that `immediate` gives
/// first; with the upstream stopped, the stale copy after the verify timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_asks_the_upstream_first() {
    let dir = support::temp_dir("serve-stale-verify");
    let port = free_port();
    let fake = fake_with_service().await;
    for (mode, fresh_first) in [("1h verify 500ms 7s", true), ("1h immediate 7s", false)] {
        let unbound = Unbound::start_on(&dir, port).await.expect("unbound starts");
        let (running, addr) = start(&fake, unbound.addr, mode).await;
        assert_eq!(a_with_ttl(&ask(addr, OUTSIDE).await), [("192.0.2.11".into(), 1)]);
        tokio::time::sleep(Duration::from_millis(1300)).await;
        let ttl = if fresh_first { 1 } else { 7 };
        assert_eq!(
            a_with_ttl(&ask(addr, OUTSIDE).await),
            [("192.0.2.11".into(), ttl)],
            "{mode}"
        );
        if fresh_first {
            unbound.stop();
            tokio::time::sleep(Duration::from_millis(1300)).await;
            let m = ask(addr, OUTSIDE).await;
            assert_eq!(
                a_with_ttl(&m),
                [("192.0.2.11".into(), 7)],
                "{mode}: stale once the upstream is gone"
            );
        } else {
            drop(unbound);
        }
        running.stop().await.unwrap();
    }
}
