//! SIGTERM's drain against the fake API server, with the real binary as a child process (its
//! `POD_IP` is its own; the test sends SIGTERM with `kill`): `/ready` fails at once; while the
//! server's own address is a ready endpoint of a Service it keeps answering, past the
//! propagation margin; once the EndpointSlice marks it not ready it exits within the margin
//! plus a second, long before `lameduck`; without `POD_IP`, or with the API server gone during
//! the drain, it answers for the whole `lameduck`, as CoreDNS does.

use std::time::{Duration, Instant};

use fake_apiserver::FakeApiServer;
use hickory_proto::rr::RecordType;
use serde_json::{Value, json};

use crate::runtime::cli::{Server, bin};
use crate::support;
use crate::support::http_get;

const POD_IP: &str = "127.0.0.53";
const MARGIN: Duration = Duration::from_secs(1);

fn kube_dns_slice(ready: bool) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kube-dns-abcde", "namespace": "kube-system",
                     "labels": {"kubernetes.io/service-name": "kube-dns"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [POD_IP], "conditions": {"ready": ready}},
                      {"addresses": ["127.0.0.54"], "conditions": {"ready": true}}],
        "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]})
}

async fn cluster() -> FakeApiServer {
    let fake = FakeApiServer::start().await.unwrap();
    fake.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}))
        .unwrap();
    fake.create(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system"},
        "spec": {"clusterIP": "10.96.0.10", "selector": {"k8s-app": "kube-dns"},
                 "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}}))
        .unwrap();
    fake.create(kube_dns_slice(true)).unwrap();
    fake
}

/// The binary serving the cluster of `fake`, with `lameduck` and a 1 s margin, `POD_IP` set
/// or not; returned once `/ready` answers 200, with the `/ready` and `/metrics` addresses.
async fn serve(
    fake: &FakeApiServer,
    lameduck: u64,
    pod_ip: bool,
) -> (Server, std::net::SocketAddr, std::net::SocketAddr) {
    let dir = support::temp_dir("drain");
    let corefile = dir.join("Corefile");
    std::fs::write(
        &corefile,
        format!(
            ".:0 {{\n bind 127.0.0.1\n health 127.0.0.1:0 {{\n  lameduck {lameduck}s\n  propagation_margin 1s\n }}\n ready 127.0.0.1:0\n prometheus 127.0.0.1:0\n kubernetes cluster.local {{\n  endpoint {}\n }}\n}}\n",
            fake.url()
        ),
    )
    .unwrap();
    let mut cmd = bin();
    if pod_ip {
        cmd.env("POD_IP", POD_IP);
    } else {
        cmd.env_remove("POD_IP");
    }
    cmd.arg("-conf").arg(&corefile);
    let mut server = Server::start_cmd(cmd);
    let ready = server.wait_http("/ready");
    let metrics = server.wait_http("/metrics");
    for _ in 0..500 {
        if http_get(ready, "/ready").await.0 == 200 {
            return (server, ready, metrics);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("never ready: {:#?}", server.log_lines());
}

/// True when the server answers the cluster's kube-dns Service.
async fn answers(server: &Server) -> bool {
    let q = support::query("kube-dns.kube-system.svc.cluster.local.", RecordType::A);
    let reply = tokio::time::timeout(Duration::from_secs(1), support::tcp(server.addr, &q)).await;
    reply.is_ok_and(|m| !m.answers.is_empty())
}

/// Waits (bounded by `limit`) until the process exits; how long that took.
async fn exit_within(server: &mut Server, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if !server.running() {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_keeps_serving_past_the_margin_then_exits_within_the_margin_of_not_ready() {
    let fake = cluster().await;
    let (mut server, ready, metrics) = serve(&fake, 60, true).await;
    let phase =
        |text: &str, p: &str| text.contains(&format!("cluster_dns_shutdown_phase{{phase=\"{p}\"}} 1"));
    assert!(phase(&http_get(metrics, "/metrics").await.1, "serving"));
    server.signal_term();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(http_get(ready, "/ready").await.0, 503, "/ready fails at once");
    assert!(phase(&http_get(metrics, "/metrics").await.1, "endpoint_listed"));
    // Still a ready endpoint: answering past the margin.
    tokio::time::sleep(MARGIN + Duration::from_millis(1200)).await;
    assert!(
        server.running(),
        "still listed, still serving: {:#?}",
        server.log_lines()
    );
    assert!(answers(&server).await, "answers while listed");
    // The EndpointSlice controller marks the terminating endpoint not ready.
    fake.update(kube_dns_slice(false)).unwrap();
    let took = exit_within(&mut server, Duration::from_secs(20)).await;
    let took = took.unwrap_or_else(|| panic!("no exit 20 s after not ready: {:#?}", server.log_lines()));
    assert!(took < MARGIN + Duration::from_secs(1), "exit took {took:?}");
    assert!(
        took >= MARGIN - Duration::from_millis(200),
        "the margin was kept: {took:?}"
    );
    let log = server.log_lines().join("\n");
    assert!(log.contains("no longer ready in any Service"), "{log}");
}

/// No `POD_IP`: the endpoint cannot be followed; the whole lameduck, answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pod_ip_the_lameduck_is_the_wait() {
    let fake = cluster().await;
    let (mut server, _, _) = serve(&fake, 4, false).await;
    let started = Instant::now();
    server.signal_term();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(server.running(), "within the lameduck");
    assert!(answers(&server).await);
    let took = exit_within(&mut server, Duration::from_secs(20))
        .await
        .expect("exits");
    let total = started.elapsed();
    assert!(
        total >= Duration::from_secs(4),
        "lameduck kept: {total:?} ({took:?} after the check)"
    );
    assert!(server.log_lines().join("\n").contains("cannot be followed"));
}

/// The API server goes away during the drain: "not listed" can no longer be believed, so the
/// lameduck decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_unreachable_during_the_drain_falls_back_to_the_lameduck() {
    let fake = cluster().await;
    let (mut server, _, _) = serve(&fake, 5, true).await;
    let started = Instant::now();
    server.signal_term();
    tokio::time::sleep(Duration::from_millis(300)).await;
    fake.stop_listener().await;
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(server.running(), "within the lameduck: {:#?}", server.log_lines());
    assert!(answers(&server).await);
    exit_within(&mut server, Duration::from_secs(20))
        .await
        .expect("exits");
    let total = started.elapsed();
    assert!(total >= Duration::from_secs(5), "lameduck kept: {total:?}");
}
