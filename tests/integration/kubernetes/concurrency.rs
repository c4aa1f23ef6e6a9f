//! Concurrent watch events end to end: Services and their EndpointSlices created at the same
//! moment through the fake API server (as `kubectl apply` of a Deployment and its Service does),
//! followed by cluster-dns's separate Services and EndpointSlices watch tasks on a
//! multi-threaded runtime; afterwards every Service must answer with its endpoints. The initial
//! list of a large cluster is checked the same way. The deterministic reproduction of the lost
//! update is the cluster zone's unit test (`concurrent_service_and_slice_writers_lose_nothing`);
//! this checks the whole watch path under the same kind of load.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use fake_apiserver::FakeApiServer;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use serde_json::{Value, json};

use crate::support;

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn headless(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": format!("s{i}"), "namespace": "load"},
           "spec": {"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}})
}

fn ip(i: usize) -> String {
    format!("10.7.{}.{}", i / 250, i % 250 + 1)
}

fn slice(i: usize) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": format!("s{i}-abcde"), "namespace": "load",
                        "labels": {"kubernetes.io/service-name": format!("s{i}")}},
           "addressType": "IPv4",
           "endpoints": [{"addresses": [ip(i)], "conditions": {"ready": true}}],
           "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
}

/// The services of `range` whose headless A answer is not their one endpoint address yet,
/// after waiting up to `secs` seconds for all of them.
async fn missing(addr: SocketAddr, range: std::ops::Range<usize>, secs: u64) -> Vec<usize> {
    let mut left: Vec<usize> = range.collect();
    for _ in 0..secs * 10 {
        let mut still = Vec::new();
        for &i in &left {
            let q = support::query(&format!("s{i}.load.svc.cluster.local."), RecordType::A);
            let (m, _) = support::udp(addr, &q).await;
            let ok = m.metadata.response_code == ResponseCode::NoError
                && m.answers.len() == 1
                && support::show(&m.answers[0]).ends_with(&ip(i));
            if !ok {
                still.push(i);
            }
        }
        left = still;
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn services_and_slices_created_together_all_answer() {
    const LISTED: usize = 1000;
    const WATCHED: usize = 400;
    let fake = Arc::new(FakeApiServer::start().await.unwrap());
    fake.create(namespace("load")).unwrap();
    // A large cluster in the first list.
    for i in 0..LISTED {
        fake.create(headless(i)).unwrap();
        fake.create(slice(i)).unwrap();
    }
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local {{\n  endpoint {}\n }}\n}}\n",
        fake.url()
    );
    let running = support::start(&corefile, &support::temp_dir("concurrency")).await;
    let addr = running.dns_addrs()[0];
    assert!(
        missing(addr, 0..LISTED, 30).await.is_empty(),
        "services of the first list lost"
    );
    // Then Services and their slices created at the same moment from separate tasks: the
    // two watches deliver them to cluster-dns together.
    let mut tasks = Vec::new();
    for w in 0..4 {
        let fake = fake.clone();
        tasks.push(tokio::spawn(async move {
            for i in (LISTED + w / 2..LISTED + WATCHED).step_by(2) {
                if w % 2 == 0 {
                    fake.create(headless(i)).unwrap();
                } else {
                    fake.create(slice(i)).unwrap();
                }
                tokio::task::yield_now().await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let lost = missing(addr, LISTED..LISTED + WATCHED, 30).await;
    assert!(lost.is_empty(), "services that lost an update: {lost:?}");
    running.stop().await.unwrap();
}
