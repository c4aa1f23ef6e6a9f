//! `metadata`: what the plugins publish about each query, read by `view` and `log`. Pods are
//! clients at loopback addresses (127.0.0.2 in `ns-a`, 127.0.0.3 in `ns-b`), the zone comes
//! from the fake API server (Pods watched with `pods verified`), and outside names go through
//! `forward` to an upstream the test runs.

use std::net::SocketAddr;
use std::time::Duration;

use fake_apiserver::FakeApiServer;
use serde_json::{Value, json};

use crate::support;
use crate::support::upstream::Scripted;

fn pod(ns: &str, name: &str, ip: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
           "spec": {"containers": [{"name": "c", "image": "x"}]},
           "status": {"phase": "Running", "podIP": ip}})
}

async fn cluster() -> FakeApiServer {
    let fake = FakeApiServer::start().await.unwrap();
    for n in ["ns-a", "ns-b"] {
        fake.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
            .unwrap();
    }
    fake.create(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "ns-a"},
                        "spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}))
        .unwrap();
    fake.create(pod("ns-a", "a1", "127.0.0.2")).unwrap();
    fake.create(pod("ns-b", "b1", "127.0.0.3")).unwrap();
    fake
}

/// `dig +short` from `from`.
fn short(server: SocketAddr, from: &str, qtype: &str, name: &str) -> String {
    support::dig(server, &["-b", from, "+short", qtype, name])
        .trim()
        .to_owned()
}

/// A view routes by `metadata('kubernetes/client-namespace')`: pods of `ns-a` get the first
/// block, other pods and non-pods the catch-all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_routes_by_the_client_pods_namespace() {
    let fake = cluster().await;
    let k8s = format!(
        "kubernetes cluster.local {{\n  endpoint {}\n  pods verified\n }}",
        fake.url()
    );
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n metadata\n view ns-a {{\n  expr metadata('kubernetes/client-namespace') == 'ns-a'\n }}\n {k8s}\n template IN TXT who.example {{\n  answer \"{{{{ .Name }}}} 60 IN TXT ns-a-view\"\n }}\n}}\n\
         .:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n {k8s}\n template IN TXT who.example {{\n  answer \"{{{{ .Name }}}} 60 IN TXT default\"\n }}\n}}\n"
    );
    let running = support::start(&corefile, &support::temp_dir("metadata-view")).await;
    let dns = running.dns_addrs()[0];
    for _ in 0..1500 {
        if support::zone(&running).is_synced() && support::zone(&running).pod_count() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = tokio::task::spawn_blocking(move || {
        [
            short(dns, "127.0.0.2", "TXT", "who.example"),
            short(dns, "127.0.0.3", "TXT", "who.example"),
            short(dns, "127.0.0.1", "TXT", "who.example"),
            short(dns, "127.0.0.2", "TXT", "who.example"),
            // The cluster zone is answered in both blocks.
            short(dns, "127.0.0.2", "A", "web.ns-a.svc.cluster.local"),
        ]
    })
    .await
    .unwrap();
    assert_eq!(got[0], "\"ns-a-view\"", "a pod of ns-a gets the ns-a view");
    assert_eq!(got[1], "\"default\"", "a pod of ns-b does not");
    assert_eq!(got[2], "\"default\"", "nor does a client that is no pod");
    assert_eq!(got[3], "\"ns-a-view\"", "every time");
    assert_eq!(got[4], "10.96.0.10");
    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let requests =
        |view: &str| crate::support::sum(&m, "coredns_dns_requests_total", &[&format!("view=\"{view}\"")]);
    assert_eq!(requests("ns-a"), 3.0);
    assert_eq!(requests(""), 2.0);
    running.stop().await.unwrap();
}

/// `log` writes the metadata labels of each query: the client pod's namespace, what the
/// cluster name denotes, the upstream `forward` asked, and `log`'s own type and class; `-` for
/// labels no plugin set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_carry_the_client_namespace_and_the_upstream() {
    let fake = cluster().await;
    let upstream = Scripted::start().await;
    let dir = support::temp_dir("metadata-log");
    let path = dir.join("Corefile");
    std::fs::write(
        &path,
        format!(
            ".:0 {{\n bind 127.0.0.1\n ready 127.0.0.1:0\n metadata\n log . \"META {{remote}} {{name}} ns={{/kubernetes/client-namespace}} kind={{/kubernetes/kind}} svc={{/kubernetes/service}} port={{/kubernetes/port-name}} up={{/forward/upstream}} {{/log/type}} {{/log/class}} {{/nosuch/label}}\"\n kubernetes cluster.local {{\n  endpoint {}\n  pods verified\n }}\n forward . {}\n}}\n",
            fake.url(),
            upstream.addr
        ),
    )
    .unwrap();
    let mut server = tokio::task::spawn_blocking(move || crate::runtime::cli::Server::start(&path))
        .await
        .unwrap();
    let dns = server.addr;
    let ready = server.wait_http("/ready");
    for _ in 0..500 {
        if crate::support::http_get(ready, "/ready").await.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let up = upstream.addr;
    tokio::task::spawn_blocking(move || {
        for (from, qtype, name) in [
            ("127.0.0.2", "A", "web.ns-a.svc.cluster.local"),
            ("127.0.0.3", "SRV", "_http._tcp.web.ns-a.svc.cluster.local"),
            ("127.0.0.3", "A", "nosuch.ns-a.svc.cluster.local"),
            ("127.0.0.2", "A", "outside.example"),
            ("127.0.0.1", "A", "outside.example"),
        ] {
            support::dig(dns, &["-b", from, qtype, name]);
        }
    })
    .await
    .unwrap();
    let want = [
        "META 127.0.0.2 web.ns-a.svc.cluster.local. ns=ns-a kind=svc svc=web port= up=- NOERROR success -".to_owned(),
        "META 127.0.0.3 _http._tcp.web.ns-a.svc.cluster.local. ns=ns-b kind=svc svc=web port=http up=- NOERROR success -".to_owned(),
        "META 127.0.0.3 nosuch.ns-a.svc.cluster.local. ns=ns-b kind=svc svc=nosuch port= up=- NXDOMAIN denial -".to_owned(),
        format!("META 127.0.0.2 outside.example. ns=ns-a kind=- svc=- port=- up={up} NOERROR success -"),
        format!("META 127.0.0.1 outside.example. ns=- kind=- svc=- port=- up={up} NOERROR success -"),
    ];
    let mut lines = Vec::new();
    for _ in 0..200 {
        lines = server
            .log_lines()
            .into_iter()
            .filter_map(|l| l.strip_prefix("[INFO] ").map(str::to_owned))
            .filter(|l| l.starts_with("META "))
            .collect();
        if lines.len() >= want.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(lines, want);
    assert!(server.stop(), "stops cleanly on SIGTERM");
}

/// `metadata`'s Corefile errors carry file:line.
#[test]
fn corefile_errors_name_the_line() {
    let dir = support::temp_dir("metadata-check");
    support::check_corefile(&dir, ".:53 {\n metadata cluster.local\n}\n").unwrap();
    let err = support::check_corefile(&dir, ".:53 {\n metadata\n metadata\n}\n").unwrap_err();
    assert!(err.contains("Corefile:3"), "{err}");
    let err = support::check_corefile(&dir, ".:53 {\n metadata {\n  x\n }\n}\n").unwrap_err();
    assert!(err.contains("Corefile:2"), "{err}");
    // `trace` stays refused, with what to do (no tracing exporter is built in).
    let err =
        support::check_corefile(&dir, ".:53 {\n metadata\n trace zipkin localhost:9411\n}\n").unwrap_err();
    assert!(
        err.contains("Corefile:3")
            && err.contains("not implemented")
            && err.contains("remove the 'trace' line"),
        "{err}"
    );
}
