//! `noaaaa` over real UDP with a counting scripted upstream and the fake API server: AAAA for
//! outside names is answered NODATA without an upstream exchange while A still goes upstream;
//! cluster names keep their AAAA from `kubernetes`; `auto` follows the cluster's IPv6
//! Services live; `dns64` beside it is refused.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use fake_apiserver::{FakeApiServer, Resource};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use serde_json::json;

use crate::support;
use crate::support::upstream::Scripted;

fn service(name: &str, ips: &[&str]) -> serde_json::Value {
    let families: Vec<&str> = ips
        .iter()
        .map(|ip| if ip.contains(':') { "IPv6" } else { "IPv4" })
        .collect();
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterIP": ips[0], "clusterIPs": ips, "ipFamilies": families,
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})
}

async fn cluster(services: &[(&str, &[&str])]) -> FakeApiServer {
    let fake = FakeApiServer::start().await.unwrap();
    fake.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}))
        .unwrap();
    for (name, ips) in services {
        fake.create(service(name, ips)).unwrap();
    }
    fake
}

fn corefile(mode: &str, fake: &FakeApiServer, upstream: &Scripted) -> String {
    format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n kubernetes cluster.local {{\n  endpoint {}\n }}\n {mode}\n forward . {}\n}}\n",
        fake.url(),
        upstream.addr
    )
}

async fn ask(dns: SocketAddr, name: &str, qtype: RecordType) -> Message {
    support::udp(dns, &support::query(name, qtype)).await.0
}

/// The sum of the series of `name` in a scrape.
fn metric(scrape: &BTreeMap<String, f64>, name: &str) -> f64 {
    scrape
        .iter()
        .filter(|(k, _)| k.as_str() == name || k.starts_with(&format!("{name}{{")))
        .map(|(_, v)| v)
        .sum()
}

async fn synced(running: &cluster_dns::app::Running) {
    for _ in 0..1500 {
        if support::zone(running).is_synced() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the kubernetes zone never synced");
}

/// True when the AAAA answer for an outside name is ours: NODATA without the upstream's SOA
/// and no upstream exchange.
async fn answered_here(dns: SocketAddr, upstream: &Scripted, name: &str) -> bool {
    let before = upstream.udp_queries();
    let r = ask(dns, name, RecordType::AAAA).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.answers.is_empty());
    let here = upstream.udp_queries() == before;
    assert_eq!(
        here,
        r.authorities.is_empty(),
        "only the upstream's NODATA carries its SOA"
    );
    here
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_aaaa_is_nodata_here_while_a_and_cluster_names_are_answered() {
    let fake = cluster(&[("web", &["10.96.0.20"]), ("dual", &["10.96.0.21", "fd00::21"])]).await;
    let upstream = Scripted::start().await;
    let running = support::start(
        &corefile("noaaaa always", &fake, &upstream),
        &support::temp_dir("noaaaa"),
    )
    .await;
    synced(&running).await;
    let dns = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics listener");

    let before = upstream.udp_queries();
    for i in 0..5 {
        let r = ask(dns, &format!("host{i}.example.com."), RecordType::AAAA).await;
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        assert!(r.answers.is_empty() && r.authorities.is_empty(), "{r:?}");
    }
    assert_eq!(upstream.udp_queries(), before, "no AAAA question went upstream");
    // A still goes upstream.
    let r = ask(dns, "host0.example.com.", RecordType::A).await;
    assert_eq!(r.answers.len(), 1);
    assert_eq!(upstream.udp_queries(), before + 1);
    // Cluster names are the kubernetes plugin's, AAAA included.
    let r = ask(dns, "dual.default.svc.cluster.local.", RecordType::AAAA).await;
    let shown: Vec<String> = r.answers.iter().map(support::show).collect();
    assert_eq!(shown, ["dual.default.svc.cluster.local. AAAA fd00::21"]);
    let r = ask(dns, "nothere.default.svc.cluster.local.", RecordType::AAAA).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(upstream.udp_queries(), before + 1);

    let m = crate::support::scrape(metrics).await;
    assert_eq!(metric(&m, "cluster_dns_noaaaa_answers_total"), 5.0);
    assert_eq!(metric(&m, "cluster_dns_noaaaa_active"), 1.0);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_follows_the_clusters_ipv6_services_live() {
    // An IPv6 Service at start: auto is off.
    let fake = cluster(&[("web", &["10.96.0.20"]), ("dual", &["10.96.0.21", "fd00::21"])]).await;
    let upstream = Scripted::start().await;
    let running = support::start(
        &corefile("noaaaa", &fake, &upstream),
        &support::temp_dir("noaaaa-auto"),
    )
    .await;
    synced(&running).await;
    let dns = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    assert!(
        !answered_here(dns, &upstream, "one.example.com.").await,
        "an IPv6 Service: off"
    );
    assert_eq!(
        metric(
            &crate::support::scrape(metrics).await,
            "cluster_dns_noaaaa_active"
        ),
        0.0
    );

    // It goes: on, without a reload.
    fake.delete(Resource::Services, "default", "dual").unwrap();
    let mut on = false;
    for i in 0..500 {
        if answered_here(dns, &upstream, &format!("wait{i}.example.com.")).await {
            on = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(on, "no IPv6 Service left: auto turns on");
    assert!(answered_here(dns, &upstream, "two.example.com.").await);
    // A still goes upstream while it is on.
    let before = upstream.udp_queries();
    assert_eq!(ask(dns, "two.example.com.", RecordType::A).await.answers.len(), 1);
    assert_eq!(upstream.udp_queries(), before + 1);

    // An IPv6 Service comes back: off again.
    fake.create(service("v6only", &["fd00::99"])).unwrap();
    let mut off = false;
    for i in 0..500 {
        if !answered_here(dns, &upstream, &format!("back{i}.example.com.")).await {
            off = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(off, "an IPv6 Service again: auto turns off");
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_is_on_in_an_ipv4_only_cluster_and_off_without_one() {
    let fake = cluster(&[("web", &["10.96.0.20"])]).await;
    let upstream = Scripted::start().await;
    let running = support::start(
        &corefile("noaaaa auto", &fake, &upstream),
        &support::temp_dir("noaaaa-v4"),
    )
    .await;
    synced(&running).await;
    let dns = running.dns_addrs()[0];
    assert!(answered_here(dns, &upstream, "x.example.com.").await);
    running.stop().await.unwrap();

    // No kubernetes plugin: nothing tells whether the cluster has IPv6, so auto stays off.
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n noaaaa\n forward . {}\n}}\n",
        upstream.addr
    );
    let running = support::start(&corefile, &support::temp_dir("noaaaa-none")).await;
    let dns = running.dns_addrs()[0];
    assert!(!answered_here(dns, &upstream, "y.example.com.").await);
    running.stop().await.unwrap();
}

#[test]
fn dns64_beside_it_and_bad_arguments_are_refused_at_their_line() {
    let dir = support::temp_dir("noaaaa-check");
    let e = support::check_corefile(&dir, ".:53 {\n dns64\n noaaaa\n forward . 127.0.0.1\n}\n").unwrap_err();
    assert!(e.contains("Corefile:3: noaaaa: cannot be used with dns64"), "{e}");
    let e = support::check_corefile(&dir, ".:53 {\n noaaaa always {\n }\n}\n").unwrap_err();
    assert!(e.contains("Corefile:2: noaaaa: takes no block"), "{e}");
    let e = support::check_corefile(&dir, ".:53 {\n noaaaa\n noaaaa always\n}\n").unwrap_err();
    assert!(e.contains("Corefile:3"), "{e}");
    support::check_corefile(
        &dir,
        ".:53 {\n noaaaa always example.com\n forward . 127.0.0.1\n}\n",
    )
    .unwrap();
}

#[test]
fn readme_examples_pass_check() {
    let examples = crate::plugins::rrl::readme_examples("src/plugin/noaaaa/README.md");
    assert_eq!(examples.len(), 2);
    let dir = support::temp_dir("noaaaa-readme");
    for e in examples {
        support::check_corefile(&dir, &e).unwrap_or_else(|err| panic!("{e}: {err}"));
    }
}
