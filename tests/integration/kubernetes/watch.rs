//! The Kubernetes API source against the fake API server (`fake-apiserver`, real HTTP on
//! loopback): the conformance table served through list/watch, churn, and the faults (API down
//! at start, API lost while serving, a watch cut mid-event, 410 Gone after compaction,
//! malformed objects, RBAC Forbidden), in process and with the real binary.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cluster_dns::app::Running;
use fake_apiserver::{FakeApiServer, Resource, StreamingLists};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use serde_json::{Value, json};

use crate::conformance::table as conformance;
use crate::support::{self, show};

/// The conformance fixture as JSON objects.
fn fixture() -> Vec<Value> {
    let text = std::fs::read_to_string(support::data_dir().join("conformance-fixture.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// How many requests the fake has seen that start with `prefix` (method and path).
fn requests_starting(fake: &FakeApiServer, prefix: &str) -> usize {
    fake.requests().iter().filter(|r| r.starts_with(prefix)).count()
}

async fn fake_with(objects: &[Value]) -> FakeApiServer {
    let fake = FakeApiServer::start().await.unwrap();
    for o in objects {
        fake.create(o).unwrap();
    }
    fake
}

fn corefile(url: &str, options: &str) -> String {
    format!(
        ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n endpoint {url}\n {options}\n }}\n}}\n"
    )
}

async fn start_dns(url: &str, options: &str) -> (Running, SocketAddr) {
    let running = support::start(&corefile(url, options), &support::temp_dir("watch")).await;
    let addr = running.dns_addrs()[0];
    (running, addr)
}

async fn wait_synced(running: &Running) {
    for _ in 0..1500 {
        if support::zone(running).is_synced() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "not synced after 15 s: pending {:?}",
        support::sync_state(running).pending()
    );
}

async fn ask(addr: SocketAddr, name: &str, qtype: RecordType) -> Message {
    support::udp(addr, &support::query(name, qtype)).await.0
}

fn answers(m: &Message) -> Vec<String> {
    let mut v: Vec<String> = m.answers.iter().map(show).collect();
    v.sort();
    v
}

/// Polls `name` (up to `secs` seconds, every 10 ms) until `ok` holds for the reply.
async fn eventually(
    addr: SocketAddr,
    name: &str,
    qtype: RecordType,
    secs: u64,
    ok: impl Fn(&Message) -> bool,
) -> Message {
    let mut last = None;
    for _ in 0..secs * 100 {
        let m = ask(addr, name, qtype).await;
        if ok(&m) {
            return m;
        }
        last = Some(m);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let last = last.unwrap();
    panic!(
        "{name} {qtype:?}: condition not met after {secs} s; last reply {:?} {:?}",
        last.metadata.response_code,
        answers(&last)
    );
}

fn rcode_is(code: ResponseCode) -> impl Fn(&Message) -> bool {
    move |m| m.metadata.response_code == code
}

fn answers_are(want: &[&str]) -> impl Fn(&Message) -> bool {
    let mut want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    move |m| m.metadata.response_code == ResponseCode::NoError && answers(m) == want
}

const K: &str = "pods insecure\n fallthrough in-addr.arpa ip6.arpa\n ttl 30";

fn service(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

fn slice(ns: &str, name: &str, svc: &str, eps: &[(&str, bool)]) -> Value {
    let endpoints: Vec<Value> = eps
        .iter()
        .map(|(ip, ready)| json!({"addresses": [ip], "conditions": {"ready": ready}}))
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": svc}},
           "addressType": "IPv4", "endpoints": endpoints,
           "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// The conformance table through streaming lists (the default of a current API server).
#[tokio::test]
async fn conformance_table_through_the_fake_api_server() {
    let fake = fake_with(&fixture()).await;
    conformance_through(&fake).await;
    // The first state of every watch came as a streaming list; nothing was listed in pages.
    let reqs = fake.requests();
    for want in [
        "GET /api/v1/services?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
        "GET /apis/discovery.k8s.io/v1/endpointslices?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
        "GET /api/v1/namespaces?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
        "GET /api/v1/pods?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
        "GET /api/v1/namespaces/testns/services?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
    ] {
        assert!(reqs.iter().any(|r| r == want), "no request {want}: {reqs:#?}");
    }
    assert!(!reqs.iter().any(|r| r.contains("limit=")), "{reqs:#?}");
}

/// The conformance table through paginated lists: the API server's WatchList feature gate is
/// off, so it refuses the streaming list with 422 and each watch lists in pages instead.
#[tokio::test]
async fn conformance_table_through_paged_lists_when_streaming_is_refused() {
    let fake = FakeApiServer::start_with(fake_apiserver::Options {
        streaming_lists: StreamingLists::Rejected,
        version: "v1.30.4".to_owned(),
        ..fake_apiserver::Options::default()
    })
    .await
    .unwrap();
    for o in fixture() {
        fake.create(o).unwrap();
    }
    conformance_through(&fake).await;
    // The watches use the collection paths and the watch protocol.
    let reqs = fake.requests();
    for want in [
        "GET /api/v1/services?&limit=500",
        "GET /apis/discovery.k8s.io/v1/endpointslices?&limit=20",
        "GET /api/v1/namespaces?&limit=500",
        "GET /api/v1/pods?&limit=500",
        "GET /api/v1/namespaces/testns/services?&limit=500",
    ] {
        assert!(reqs.iter().any(|r| r == want), "no request {want}: {reqs:#?}");
    }
    assert!(reqs.iter().any(|r| r.contains("watch=true")
        && r.contains("allowWatchBookmarks=true")
        && !r.contains("sendInitialEvents")));
    // Each watch of each run asked for a streaming list once, and listed in pages after that.
    let streaming = reqs
        .iter()
        .filter(|r| r.contains("sendInitialEvents=true"))
        .count();
    let first_pages = reqs
        .iter()
        .filter(|r| r.contains("?&limit=") && !r.contains("continue="))
        .count();
    assert_eq!(streaming, first_pages, "{reqs:#?}");
}

/// Runs every profile of the conformance table against a server watching `fake`.
async fn conformance_through(fake: &FakeApiServer) {
    let cases = conformance::cases();
    let mut profiles: Vec<&str> = cases
        .iter()
        .map(|c| c.profile.as_str())
        .filter(|p| conformance::profile_options(p).is_some())
        .collect();
    profiles.sort();
    profiles.dedup();
    assert_eq!(profiles, ["D", "K", "N", "P", "S", "V"]);
    let mut failures = Vec::new();
    let mut checked = 0;
    for profile in profiles {
        let opts = conformance::profile_options(profile).unwrap();
        let (running, addr) = start_dns(&fake.url(), opts).await;
        wait_synced(&running).await;
        for case in cases.iter().filter(|c| c.profile == profile) {
            let (udp, _) = support::udp(addr, &support::query_edns(&case.qname, case.qtype, 1232)).await;
            failures.extend(conformance::check(case, &udp, "udp via API"));
            let tcp = support::tcp(addr, &support::query(&case.qname, case.qtype)).await;
            failures.extend(conformance::check(case, &tcp, "tcp via API"));
            checked += 1;
        }
        running.stop().await.unwrap();
    }
    assert!(checked >= 100, "only {checked} cases ran");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn churn_is_followed_step_by_step() {
    let fake = fake_with(&fixture()).await;
    let (running, addr) = start_dns(&fake.url(), K).await;
    wait_synced(&running).await;
    let name = "app.churn.svc.cluster.local.";
    let nsname = "churn.svc.cluster.local.";
    eventually(addr, nsname, RecordType::A, 5, rcode_is(ResponseCode::NXDomain)).await;

    fake.create(namespace("churn")).unwrap();
    // NODATA: the namespace exists now, with no services.
    eventually(addr, nsname, RecordType::A, 5, |m| {
        m.metadata.response_code == ResponseCode::NoError && m.answers.is_empty()
    })
    .await;
    fake.create(service(
        "churn",
        "app",
        json!({"clusterIP": "10.96.77.1", "ports": [{"name": "http", "port": 80}]}),
    ))
    .unwrap();
    eventually(
        addr,
        name,
        RecordType::A,
        5,
        answers_are(&[&format!("{name} A 10.96.77.1")]),
    )
    .await;

    // To headless, with endpoints: scale up, down, flip readiness.
    fake.update(service(
        "churn",
        "app",
        json!({"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}),
    ))
    .unwrap();
    eventually(addr, name, RecordType::A, 5, rcode_is(ResponseCode::NXDomain)).await;
    fake.create(slice(
        "churn",
        "app-1",
        "app",
        &[("10.244.9.1", true), ("10.244.9.2", true)],
    ))
    .unwrap();
    let a = |ips: &[&str]| ips.iter().map(|ip| format!("{name} A {ip}")).collect::<Vec<_>>();
    let want = a(&["10.244.9.1", "10.244.9.2"]);
    eventually(
        addr,
        name,
        RecordType::A,
        5,
        answers_are(&want.iter().map(String::as_str).collect::<Vec<_>>()),
    )
    .await;
    let five: Vec<(&str, bool)> = [
        "10.244.9.1",
        "10.244.9.2",
        "10.244.9.3",
        "10.244.9.4",
        "10.244.9.5",
    ]
    .iter()
    .map(|ip| (*ip, true))
    .collect();
    fake.update(slice("churn", "app-1", "app", &five)).unwrap();
    let want = a(&[
        "10.244.9.1",
        "10.244.9.2",
        "10.244.9.3",
        "10.244.9.4",
        "10.244.9.5",
    ]);
    eventually(
        addr,
        name,
        RecordType::A,
        5,
        answers_are(&want.iter().map(String::as_str).collect::<Vec<_>>()),
    )
    .await;
    fake.update(slice("churn", "app-1", "app", &[("10.244.9.3", true)]))
        .unwrap();
    eventually(
        addr,
        name,
        RecordType::A,
        5,
        answers_are(&[&format!("{name} A 10.244.9.3")]),
    )
    .await;
    fake.update(slice("churn", "app-1", "app", &[("10.244.9.3", false)]))
        .unwrap();
    eventually(addr, name, RecordType::A, 5, rcode_is(ResponseCode::NXDomain)).await;
    fake.update(slice("churn", "app-1", "app", &[("10.244.9.3", true)]))
        .unwrap();
    eventually(
        addr,
        name,
        RecordType::A,
        5,
        answers_are(&[&format!("{name} A 10.244.9.3")]),
    )
    .await;
    // The endpoint's PTR follows.
    eventually(addr, "3.9.244.10.in-addr.arpa.", RecordType::PTR, 5, |m| {
        answers(m) == [format!("3.9.244.10.in-addr.arpa. PTR 10-244-9-3.{name}")]
    })
    .await;

    // To ExternalName.
    fake.update(service(
        "churn",
        "app",
        json!({"type": "ExternalName", "externalName": "example.org"}),
    ))
    .unwrap();
    eventually(
        addr,
        name,
        RecordType::CNAME,
        5,
        answers_are(&[&format!("{name} CNAME example.org.")]),
    )
    .await;

    // Delete the service, then the namespace.
    fake.delete(Resource::Services, "churn", "app").unwrap();
    eventually(addr, name, RecordType::A, 5, rcode_is(ResponseCode::NXDomain)).await;
    fake.delete(Resource::Namespaces, "", "churn").unwrap();
    eventually(addr, nsname, RecordType::A, 5, rcode_is(ResponseCode::NXDomain)).await;
    // The rest of the cluster is untouched.
    let m = ask(addr, "kubernetes.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn api_down_at_start_answers_servfail_then_the_cluster() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.stop_listener().await;
    let (running, addr) = start_dns(&fake.url(), &format!("{K}\n startup_timeout 1s")).await;
    // Serving once `startup_timeout` is past; a would-be NXDOMAIN is SERVFAIL (the table's
    // profile U row).
    let cases = conformance::cases();
    let u = cases.iter().find(|c| c.profile == "U").unwrap();
    let m = ask(addr, &u.qname, u.qtype).await;
    let errs = conformance::check(u, &m, "udp, API down");
    assert!(errs.is_empty(), "{errs:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!support::zone(&running).is_synced());
    assert_eq!(support::sync_state(&running).pending().len(), 3);

    for o in fixture() {
        fake.create(o).unwrap();
    }
    fake.restart_listener().await.unwrap();
    wait_synced(&running).await;
    assert!(support::sync_state(&running).is_synced());
    eventually(addr, &u.qname, u.qtype, 5, rcode_is(ResponseCode::NXDomain)).await;
    let m = ask(addr, "kubernetes.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&m), ["kubernetes.default.svc.cluster.local. A 10.96.0.1"]);
    running.stop().await.unwrap();
}

/// `startup_timeout`: a server whose API server comes back within it holds off serving until
/// the first lists are in, so its first answers are the cluster's, not SERVFAIL (CoreDNS holds
/// its server until its informers sync).
#[tokio::test]
async fn start_waits_for_the_first_lists_within_startup_timeout() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.stop_listener().await;
    let url = fake.url();
    let back = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        for o in fixture() {
            fake.create(o).unwrap();
        }
        fake.restart_listener().await.unwrap();
    };
    let options = format!("{K}\n startup_timeout 60s");
    let ((running, addr), ()) = tokio::join!(start_dns(&url, &options), back);
    assert!(
        support::zone(&running).is_synced(),
        "serving before the first lists: {:?}",
        support::sync_state(&running).pending()
    );
    let m = ask(addr, "kubernetes.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&m), ["kubernetes.default.svc.cluster.local. A 10.96.0.1"]);
    running.stop().await.unwrap();
}

/// `apiserver_qps`, `apiserver_burst` and `apiserver_max_inflight` limit the client: with one
/// request at a time and a bucket of one token refilled twice a second, the watches still sync
/// (a watch's stream holds no slot) and the requests' waits show in the rate limiter histogram.
#[tokio::test]
async fn apiserver_limits_space_the_requests_and_the_watches_still_sync() {
    let fake = fake_with(&fixture()).await;
    let dir = support::temp_dir("watch-limits");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n kubernetes cluster.local {{\n endpoint {}\n apiserver_qps 2\n apiserver_burst 1\n apiserver_max_inflight 1\n }}\n}}\n",
        fake.url()
    );
    let running = support::start(&corefile, &dir).await;
    wait_synced(&running).await;
    let addr = running.dns_addrs()[0];
    let m = ask(addr, "kubernetes.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&m), ["kubernetes.default.svc.cluster.local. A 10.96.0.1"]);
    let metrics = running.http_addr("/metrics").expect("metrics listener");
    let scrape = crate::support::http_get(metrics, "/metrics").await.1;
    let host = api_host(&fake);
    let value = |series: &str| series_value(&scrape, series);
    let waits = "coredns_kubernetes_rest_client_rate_limiter_duration_seconds";
    let requests = value(&format!("{waits}_count{{host=\"{host}\",verb=\"GET\"}}"));
    let waited = value(&format!("{waits}_sum{{host=\"{host}\",verb=\"GET\"}}"));
    // The three watches' first requests go out at once: the second waits half a second for
    // its token, the third a second.
    assert!(requests >= 3.0, "{requests} requests");
    assert!(waited >= 1.0, "{waited} s waited by {requests} requests");
    running.stop().await.unwrap();
}

/// The fake API server's `host:port`, as the rest-client metrics label it.
fn api_host(fake: &FakeApiServer) -> String {
    fake.url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned()
}

/// The value of `series` (name and labels, as written) in a Prometheus `scrape`.
fn series_value(scrape: &str, series: &str) -> f64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{scrape}"))
}

/// Creates the Service `late.testns` (made during an outage), restarts the listener and waits
/// (up to 40 s) until it is answered.
async fn end_outage_with_a_new_service(fake: &FakeApiServer, addr: SocketAddr) {
    fake.create(service("testns", "late", json!({"clusterIP": "10.96.88.8"})))
        .unwrap();
    fake.restart_listener().await.unwrap();
    let late = "late.testns.svc.cluster.local.";
    eventually(
        addr,
        late,
        RecordType::A,
        40,
        answers_are(&[&format!("{late} A 10.96.88.8")]),
    )
    .await;
}

#[tokio::test]
async fn api_lost_while_serving_keeps_the_last_known_zone() {
    let fake = fake_with(&fixture()).await;
    let (running, addr) = start_dns(&fake.url(), K).await;
    wait_synced(&running).await;
    let kube = "kubernetes.default.svc.cluster.local.";
    let want = [format!("{kube} A 10.96.0.1")];
    fake.stop_listener().await;
    // Well past the first retries: the answers continue.
    for _ in 0..20 {
        let m = ask(addr, kube, RecordType::A).await;
        assert_eq!(answers(&m), want);
        let m = ask(addr, "nosuch.testns.svc.cluster.local.", RecordType::A).await;
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Changes made during the outage arrive once it is back.
    end_outage_with_a_new_service(&fake, addr).await;
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_watch_cut_mid_event_recovers() {
    let fake = fake_with(&fixture()).await;
    let (running, addr) = start_dns(&fake.url(), K).await;
    wait_synced(&running).await;
    for _ in 0..500 {
        if fake.open_watches() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    fake.cut_watches();
    fake.create(service("testns", "after-cut", json!({"clusterIP": "10.96.88.9"})))
        .unwrap();
    let name = "after-cut.testns.svc.cluster.local.";
    eventually(
        addr,
        name,
        RecordType::A,
        40,
        answers_are(&[&format!("{name} A 10.96.88.9")]),
    )
    .await;
    // Dropped streams (server side end) resume from the last resourceVersion, no relist.
    let lists_before = requests_starting(&fake, "GET /api/v1/services?&limit");
    fake.drop_watches();
    fake.create(service(
        "testns",
        "after-drop",
        json!({"clusterIP": "10.96.88.10"}),
    ))
    .unwrap();
    let name = "after-drop.testns.svc.cluster.local.";
    eventually(
        addr,
        name,
        RecordType::A,
        40,
        answers_are(&[&format!("{name} A 10.96.88.10")]),
    )
    .await;
    let lists_after = requests_starting(&fake, "GET /api/v1/services?&limit");
    assert_eq!(
        lists_before, lists_after,
        "a dropped watch should re-watch, not relist"
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn gone_after_compaction_relists_without_dropping_the_zone() {
    let fake = fake_with(&fixture()).await;
    fake.create(service("testns", "doomed", json!({"clusterIP": "10.96.88.20"})))
        .unwrap();
    let (running, addr) = start_dns(&fake.url(), K).await;
    wait_synced(&running).await;
    let kube = "kubernetes.default.svc.cluster.local.";
    let doomed = "doomed.testns.svc.cluster.local.";
    eventually(addr, doomed, RecordType::A, 5, rcode_is(ResponseCode::NoError)).await;

    // Missed changes: the outage hides a delete and a create, then the log is compacted, so the
    // re-watch from the old resourceVersion gets 410 and the watches relist.
    fake.stop_listener().await;
    fake.delete(Resource::Services, "testns", "doomed").unwrap();
    fake.create(service("testns", "born", json!({"clusterIP": "10.96.88.21"})))
        .unwrap();
    fake.compact();
    fake.restart_listener().await.unwrap();
    let born = "born.testns.svc.cluster.local.";
    // While relisting, the old data answers: never a SERVFAIL or NXDOMAIN for a stable name.
    for _ in 0..4000 {
        let m = ask(addr, kube, RecordType::A).await;
        assert_eq!(
            m.metadata.response_code,
            ResponseCode::NoError,
            "{kube} during relist"
        );
        let b = ask(addr, born, RecordType::A).await;
        let d = ask(addr, doomed, RecordType::A).await;
        if b.metadata.response_code == ResponseCode::NoError
            && d.metadata.response_code == ResponseCode::NXDomain
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eventually(addr, doomed, RecordType::A, 1, rcode_is(ResponseCode::NXDomain)).await;
    eventually(addr, born, RecordType::A, 1, rcode_is(ResponseCode::NoError)).await;
    let lists = fake
        .requests()
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/services?") && r.contains("sendInitialEvents=true"))
        .count();
    assert!(lists >= 2, "expected a relist of services after the 410");

    // A compaction while connected: every open watch gets the in-stream 410 and relists.
    fake.compact();
    fake.create(service(
        "testns",
        "after-410",
        json!({"clusterIP": "10.96.88.22"}),
    ))
    .unwrap();
    let name = "after-410.testns.svc.cluster.local.";
    eventually(addr, name, RecordType::A, 40, rcode_is(ResponseCode::NoError)).await;
    let m = ask(addr, kube, RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn malformed_objects_are_skipped_and_the_rest_applied() {
    let mut objects = fixture();
    objects.push(service("testns", "badip", json!({"clusterIP": "10.96.0.300"})));
    objects.push(service(
        "testns",
        "badtype",
        json!({"clusterIP": "10.96.1.1", "ports": [{"port": "eighty"}]}),
    ));
    let fake = fake_with(&objects).await;
    let (running, addr) = start_dns(&fake.url(), K).await;
    wait_synced(&running).await;
    let m = ask(addr, "kubernetes.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    for bad in ["badip", "badtype"] {
        let m = ask(addr, &format!("{bad}.testns.svc.cluster.local."), RecordType::A).await;
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain, "{bad}");
    }
    // A malformed watch event, then a good one: the good one is applied.
    fake.create(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "bad-slice", "namespace": "testns", "labels": {"kubernetes.io/service-name": "x"}},
        "addressType": "IPv4", "endpoints": "not-a-list"}))
        .unwrap();
    fake.create(slice(
        "testns",
        "good-slice",
        "late-headless",
        &[("10.244.7.7", true)],
    ))
    .unwrap();
    fake.create(service("testns", "late-headless", json!({"clusterIP": "None"})))
        .unwrap();
    let name = "late-headless.testns.svc.cluster.local.";
    eventually(
        addr,
        name,
        RecordType::A,
        5,
        answers_are(&[&format!("{name} A 10.244.7.7")]),
    )
    .await;
    running.stop().await.unwrap();
}

/// The real binary against the fake: the Corefile's `endpoint`, the sync, churn, the malformed
/// object and the RBAC lines in its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_follows_the_fake_api_server() {
    let mut objects = fixture();
    objects.push(service("testns", "broken", json!({"clusterIP": "10.96.0.300"})));
    let fake = fake_with(&objects).await;
    fake.forbid(Resource::EndpointSlices);
    let dir = support::temp_dir("watch-bin");
    let path = dir.join("Corefile");
    std::fs::write(&path, corefile(&fake.url(), K)).unwrap();
    let mut server = tokio::task::spawn_blocking(move || crate::runtime::cli::Server::start(&path))
        .await
        .unwrap();
    let addr = server.addr;
    let nosuch = "nosuch.testns.svc.cluster.local.";
    // EndpointSlices are forbidden: not synced, so a would-be NXDOMAIN is SERVFAIL.
    let m = ask(addr, nosuch, RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    // Positive answers from what has arrived.
    eventually(
        addr,
        "kubernetes.default.svc.cluster.local.",
        RecordType::A,
        10,
        rcode_is(ResponseCode::NoError),
    )
    .await;
    // Long enough for several retries (backoff 0.8 s, 1.6 s, ...): the RBAC line appears once.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let rbac: Vec<String> = server
        .log_lines()
        .into_iter()
        .filter(|l| l.contains("RBAC: cannot watch endpointslices.discovery.k8s.io at the cluster scope"))
        .collect();
    assert_eq!(rbac.len(), 1, "{rbac:#?}\nall: {:#?}", server.log_lines());
    assert!(
        rbac[0].contains("grant list/watch on endpointslices.discovery.k8s.io"),
        "{}",
        rbac[0]
    );
    let lists = requests_starting(&fake, "GET /apis/discovery.k8s.io/v1/endpointslices?");
    assert!(lists >= 2, "the forbidden list is retried ({lists} requests)");
    fake.allow(Resource::EndpointSlices);
    eventually(addr, nosuch, RecordType::A, 40, rcode_is(ResponseCode::NXDomain)).await;
    let m = ask(addr, "web.testns.svc.cluster.local.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(!m.answers.is_empty());
    // Churn through the binary.
    fake.create(service("testns", "bin-new", json!({"clusterIP": "10.96.99.1"})))
        .unwrap();
    let name = "bin-new.testns.svc.cluster.local.";
    eventually(
        addr,
        name,
        RecordType::A,
        5,
        answers_are(&[&format!("{name} A 10.96.99.1")]),
    )
    .await;
    fake.delete(Resource::Services, "testns", "bin-new").unwrap();
    eventually(addr, name, RecordType::A, 5, rcode_is(ResponseCode::NXDomain)).await;
    let log = server.log_lines();
    assert!(
        log.iter()
            .any(|l| l.contains("Service testns/broken: skipped") && l.contains("10.96.0.300")),
        "{log:#?}"
    );
    assert!(
        tokio::task::spawn_blocking(move || server.stop()).await.unwrap(),
        "clean exit"
    );
}

/// A cluster larger than a page of every list, through an API server older than 1.27 (by its
/// `/version`), which would ignore `sendInitialEvents`: listed in pages from the start.
#[tokio::test]
async fn paged_lists_bring_every_object() {
    let fake = FakeApiServer::start_with(fake_apiserver::Options {
        streaming_lists: StreamingLists::Ignored,
        version: "v1.26.15".to_owned(),
        ..fake_apiserver::Options::default()
    })
    .await
    .unwrap();
    large_cluster_answers(&fake).await;
    let reqs = fake.requests();
    assert!(
        reqs.iter().any(
            |r| r.starts_with("GET /apis/discovery.k8s.io/v1/endpointslices?") && r.contains("continue=")
        ),
        "the slice list is paged: {reqs:#?}"
    );
    assert!(
        reqs.iter()
            .any(|r| r.starts_with("GET /api/v1/services?") && r.contains("continue="))
    );
    assert!(!reqs.iter().any(|r| r.contains("sendInitialEvents")), "{reqs:#?}");
    assert_eq!(reqs.iter().filter(|r| r.starts_with("GET /version")).count(), 1);
}

/// The same cluster through streaming lists: every object arrives as an event, no list request
/// is made, and the zone is synced by the initial-events-end bookmark.
#[tokio::test]
async fn streaming_lists_bring_every_object() {
    let fake = FakeApiServer::start().await.unwrap();
    large_cluster_answers(&fake).await;
    let reqs = fake.requests();
    assert!(!reqs.iter().any(|r| r.contains("limit=")), "{reqs:#?}");
    assert_eq!(
        reqs.iter()
            .filter(|r| r.starts_with("GET /apis/discovery.k8s.io/v1/endpointslices?")
                && r.contains("sendInitialEvents=true"))
            .count(),
        1,
        "{reqs:#?}"
    );
}

/// Serves a synthetic cluster of 1,200 Services and 12,000 endpoints from `fake` and checks
/// that every Service and the endpoints of the last slices are answered.
async fn large_cluster_answers(fake: &FakeApiServer) {
    use fake_apiserver::synthetic::{self, SyntheticCluster};
    let c = SyntheticCluster {
        services: 1_200,
        endpoints: 12_000,
        ..SyntheticCluster::default()
    };
    fake.load(c.objects()).unwrap();
    let (running, addr) = start_dns(&fake.url(), K).await;
    wait_synced(&running).await;
    assert_eq!(support::zone(&running).service_count(), 1_200);
    // The last Service, and an endpoint of a headless Service from the last page of slices.
    let name = "svc-1199.ns-99.svc.cluster.local.";
    let m = ask(addr, name, RecordType::A).await;
    assert_eq!(answers(&m), [format!("{name} A {}", synthetic::cluster_ip(1199))]);
    assert!(c.is_headless(c.slice_owner(118)));
    let host = format!("svc-{0}-0.svc-{0}.ns-80.svc.cluster.local.", c.slice_owner(118));
    let m = ask(addr, &host, RecordType::A).await;
    assert_eq!(answers(&m), [format!("{host} A {}", synthetic::pod_ip(11_800))]);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn kubeconfig_context_and_label_selector() {
    let fake = fake_with(&fixture()).await;
    let mut labelled = service("testns", "labelled", json!({"clusterIP": "10.96.66.6"}));
    labelled["metadata"]["labels"] = json!({"team": "a"});
    fake.create(labelled).unwrap();
    let dir = support::temp_dir("kubeconfig");
    let kc = dir.join("kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {{server: \"{}\"}}\ncontexts:\n- name: other\n  context: {{cluster: nowhere, user: u}}\n- name: fake\n  context: {{cluster: fake, user: u}}\nusers:\n- name: u\n  user: {{}}\ncurrent-context: other\n",
            fake.url()
        ),
    )
    .unwrap();
    let cf = format!(
        ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n kubeconfig {} fake\n labels team=a\n }}\n}}\n",
        kc.display()
    );
    let running = support::start(&cf, &dir).await;
    let addr = running.dns_addrs()[0];
    wait_synced(&running).await;
    let name = "labelled.testns.svc.cluster.local.";
    let m = ask(addr, name, RecordType::A).await;
    assert_eq!(answers(&m), [format!("{name} A 10.96.66.6")]);
    // Services without the label are not watched at all.
    let m = ask(addr, "kubernetes.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    let reqs = fake.requests();
    assert!(
        reqs.iter()
            .any(|r| r.starts_with("GET /api/v1/services?") && r.contains("labelSelector=team%3Da")),
        "{reqs:#?}"
    );
    assert!(
        reqs.iter()
            .any(|r| r.starts_with("GET /api/v1/namespaces?") && !r.contains("labelSelector")),
        "{reqs:#?}"
    );
    running.stop().await.unwrap();
}

/// How many list requests the fake has seen for each resource path.
fn list_counts(fake: &FakeApiServer) -> [(&'static str, usize); 4] {
    [
        ("namespaces", requests_starting(fake, "GET /api/v1/namespaces?")),
        ("services", requests_starting(fake, "GET /api/v1/services?")),
        (
            "endpointslices",
            requests_starting(fake, "GET /apis/discovery.k8s.io/v1/endpointslices?"),
        ),
        ("pods", requests_starting(fake, "GET /api/v1/pods?")),
    ]
}

/// The log lines that contain every one of `parts`.
fn lines_with(log: &[String], parts: &[&str]) -> Vec<String> {
    log.iter()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .cloned()
        .collect()
}

/// A first deployment whose lists fail, through the real binary: Namespaces answer 401,
/// Services 403, EndpointSlices 500 and Pods 503 for 10 s. Each watch backs off (attempts at
/// about 0, 1, 3, 7 and 15 s: at most 5 lists in 10 s; kube's own backoff, which starts over
/// before every list, made about 10), each error is logged once with its cause, kube's client
/// logs no ERROR per attempt (it retried the 503 inside itself, an ERROR each time: now the
/// watch's schedule covers the 503 too), and `/ready` names every waiting watch and why. Once
/// the faults clear the zone syncs at the next retry, and each recovery is logged once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_first_lists_back_off_say_why_and_recover() {
    let fake = fake_with(&fixture()).await;
    fake.fail_resource(Resource::Namespaces, 401);
    fake.forbid(Resource::Services);
    fake.fail_resource(Resource::EndpointSlices, 500);
    fake.fail_resource(Resource::Pods, 503);
    let dir = support::temp_dir("watch-faults");
    let path = dir.join("Corefile");
    std::fs::write(
        &path,
        format!(
            ".:0 {{\n bind 127.0.0.1\n ready 127.0.0.1:0\n prometheus 127.0.0.1:0\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n endpoint {}\n pods verified\n startup_timeout 2s\n }}\n}}\n",
            fake.url()
        ),
    )
    .unwrap();
    let mut server = tokio::task::spawn_blocking(move || crate::runtime::cli::Server::start(&path))
        .await
        .unwrap();
    let addr = server.addr;
    let ready = server.wait_http("/ready");
    let metrics = server.wait_http("/metrics");
    tokio::time::sleep(Duration::from_secs(10)).await;

    // The metrics say the same as /ready: four watches pending, each resource's failed
    // attempts counted, and every request the API client made labelled with its status code.
    let scrape = crate::support::http_get(metrics, "/metrics").await.1;
    let host = api_host(&fake);
    let value = |series: &str| series_value(&scrape, series);
    assert_eq!(value("cluster_dns_kubernetes_watches_pending"), 4.0);
    let counts = list_counts(&fake);
    for (code, resource) in [
        ("401", "namespaces"),
        ("403", "services"),
        ("500", "endpointslices.discovery.k8s.io"),
        ("503", "pods"),
    ] {
        let errors = value(&format!(
            "cluster_dns_kubernetes_watch_errors_total{{resource=\"{resource}\"}}"
        ));
        let requests = value(&format!(
            "coredns_kubernetes_rest_client_requests_total{{code=\"{code}\",host=\"{host}\",method=\"GET\"}}"
        ));
        assert!(errors >= 2.0, "{resource}: {errors} errors counted");
        assert!(requests >= 2.0, "{code}: {requests} requests counted");
    }
    assert!(
        value(&format!(
            "coredns_kubernetes_rest_client_request_duration_seconds_count{{host=\"{host}\",verb=\"GET\"}}"
        )) >= 8.0
    );

    for (resource, n) in &counts {
        assert!(
            (2..=5).contains(n),
            "{resource}: {n} lists in 12 s of failures, want 2 to 5 (backoff 1, 2, 4, 8 s): {counts:?}"
        );
    }
    let (status, body) = crate::support::http_get(ready, "/ready").await;
    assert_eq!(status, 503, "{body}");
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 4, "one line per waiting watch: {body}");
    for want in [
        "kubernetes: namespaces: 401 Unauthorized: injected failure 401 (",
        "kubernetes: services: 403 Forbidden: services is forbidden: User \"system:serviceaccount:kube-system:coredns\" cannot watch resource \"services\"",
        "kubernetes: endpointslices.discovery.k8s.io: 500 InternalError: injected failure 500 (",
        "kubernetes: pods: 503 ServiceUnavailable: injected failure 503 (",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(want)),
            "no line {want:?} in\n{body}"
        );
    }

    let log = server.log_lines();
    let all = || format!("{log:#?}");
    for parts in [
        &[
            "WARN",
            "cannot watch namespaces at the cluster scope: 401 Unauthorized: injected failure 401",
        ][..],
        &[
            "ERROR",
            "RBAC: cannot watch services at the cluster scope: grant list/watch on services",
        ][..],
        &[
            "WARN",
            "cannot watch endpointslices.discovery.k8s.io at the cluster scope: 500 InternalError",
        ][..],
        &[
            "WARN",
            "cannot watch pods at the cluster scope: 503 ServiceUnavailable",
        ][..],
    ] {
        let found = lines_with(&log, parts);
        assert_eq!(
            found.len(),
            1,
            "{parts:?} logged once, got {found:#?}\nall: {}",
            all()
        );
    }
    // Nothing per attempt from kube itself: no trace-layer ERROR (connect errors, the 503s
    // retried inside the client), no kube-runtime 403 WARN.
    for noise in [
        "failed with status",
        "failed with error",
        "watch list error",
        "kube_runtime",
    ] {
        assert!(lines_with(&log, &[noise]).is_empty(), "{noise}: {}", all());
    }
    // One line per watch, and the one that says the server serves before they are synced
    // (CoreDNS: "starting server with unsynced Kubernetes API"), once `startup_timeout` is past.
    assert_eq!(
        lines_with(
            &log,
            &["WARN", "serving before every plugin is ready", "waited=2"]
        )
        .len(),
        1,
        "{}",
        all()
    );
    let errors_and_warnings = lines_with(&log, &["ERROR"]).len() + lines_with(&log, &["WARN"]).len();
    assert_eq!(errors_and_warnings, 5, "{}", all());

    for r in [
        Resource::Namespaces,
        Resource::Services,
        Resource::EndpointSlices,
        Resource::Pods,
    ] {
        fake.allow(r);
    }
    // At the next retry (at most 16 s away): synced, a would-be NXDOMAIN is NXDOMAIN again.
    eventually(
        addr,
        "nosuch.testns.svc.cluster.local.",
        RecordType::A,
        40,
        rcode_is(ResponseCode::NXDomain),
    )
    .await;
    assert_eq!(
        crate::support::http_get(ready, "/ready").await,
        (200, "OK".to_owned())
    );
    let scrape = crate::support::http_get(metrics, "/metrics").await.1;
    assert!(
        scrape.contains("cluster_dns_kubernetes_watches_pending 0\n"),
        "{scrape}"
    );
    assert!(
        scrape.contains(&format!(
            "coredns_kubernetes_rest_client_requests_total{{code=\"200\",host=\"{host}\",method=\"GET\"}}"
        )),
        "{scrape}"
    );
    let log = server.log_lines();
    for watch in [
        "namespaces",
        "services",
        "endpointslices.discovery.k8s.io",
        "pods",
    ] {
        let found = lines_with(&log, &["watch recovered", &format!("watch={watch} ")]);
        assert_eq!(found.len(), 1, "{watch}: {found:#?}\nall: {log:#?}");
    }
    assert!(
        tokio::task::spawn_blocking(move || server.stop()).await.unwrap(),
        "clean exit"
    );
}

/// The API refuses connections at start: each watch backs off (at most 5 attempts in 10 s),
/// `/ready` says why, and once the API is back the zone syncs at the next retry.
#[tokio::test]
async fn refused_first_lists_back_off_then_sync() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.stop_listener().await;
    let (running, addr) = start_dns(&fake.url(), K).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let state = support::sync_state(&running).clone();
    for watch in ["namespaces", "services", "endpointslices.discovery.k8s.io"] {
        let n = state.failures(watch).unwrap();
        assert!(
            (2..=5).contains(&n),
            "{watch}: {n} failed attempts in 10 s, want 2 to 5 (backoff 1, 2, 4, 8 s)"
        );
    }
    let why = running.readiness().not_ready();
    assert_eq!(why.len(), 3, "{why:#?}");
    for line in &why {
        assert!(
            line.starts_with("kubernetes: ") && line.contains("Connection refused"),
            "{why:#?}"
        );
    }
    for o in fixture() {
        fake.create(o).unwrap();
    }
    fake.restart_listener().await.unwrap();
    // The next retry is at most 16 s away.
    for _ in 0..3000 {
        if support::zone(&running).is_synced() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(support::zone(&running).is_synced(), "{:?}", state.waiting());
    assert!(running.readiness().not_ready().is_empty());
    eventually(
        addr,
        "kubernetes.default.svc.cluster.local.",
        RecordType::A,
        5,
        answers_are(&["kubernetes.default.svc.cluster.local. A 10.96.0.1"]),
    )
    .await;
    running.stop().await.unwrap();
}

/// Writes `files` (name, contents) under `dir`.
fn write_files(dir: &std::path::Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// A fake API server over HTTPS with `identity`, optionally requiring client certificates of
/// `clients`, holding the fixture.
async fn https_fake(
    identity: fake_apiserver::tls::Identity,
    clients: Option<&fake_apiserver::tls::TestPki>,
) -> FakeApiServer {
    let mut tls = fake_apiserver::tls::ServerTls::new(identity);
    if let Some(pki) = clients {
        tls = tls.require_client_certs(pki);
    }
    let fake = FakeApiServer::start_with(fake_apiserver::Options {
        tls: Some(tls),
        ..fake_apiserver::Options::default()
    })
    .await
    .unwrap();
    for o in fixture() {
        fake.create(o).unwrap();
    }
    fake
}

/// The API over HTTPS with client certificates (`endpoint https://...` + `tls CERT KEY
/// CACERT`, the fake requiring a client certificate signed by the test CA): the zone syncs.
/// The three files are given relative to the Corefile's folder, which is not the working
/// directory.
#[tokio::test]
async fn https_with_client_certificates_relative_to_the_corefile() {
    let pki = fake_apiserver::tls::TestPki::new("test cluster CA").unwrap();
    let fake = https_fake(pki.server(&["127.0.0.1"]).unwrap(), Some(&pki)).await;
    let client = pki.client("system:serviceaccount:kube-system:coredns").unwrap();
    let dir = support::temp_dir("https");
    write_files(
        &dir,
        &[
            ("pki/ca.crt", &pki.ca_pem),
            ("pki/client.crt", &client.cert_pem),
            ("pki/client.key", &client.key_pem),
        ],
    );
    assert_ne!(std::env::current_dir().unwrap(), dir);
    let cf = corefile(
        &fake.url(),
        &format!("{K}\n tls pki/client.crt pki/client.key pki/ca.crt"),
    );
    let running = support::start(&cf, &dir).await;
    let addr = running.dns_addrs()[0];
    wait_synced(&running).await;
    let m = ask(addr, "kubernetes.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&m), ["kubernetes.default.svc.cluster.local. A 10.96.0.1"]);
    assert_eq!(fake.tls_failures(), 0);
    assert!(fake.url().starts_with("https://"));
    running.stop().await.unwrap();
}

/// Misconfigured TLS, through the real binary: a server certificate from another CA, one for
/// another name, an expired one. Each watch logs rustls's cause once (not `client error
/// (Connect)` alone, not once per retry), `/ready` says it, and the retries back off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_failures_name_their_cause_once_and_ready_says_why() {
    let trusted = fake_apiserver::tls::TestPki::new("trusted CA").unwrap();
    let other = fake_apiserver::tls::TestPki::new("other CA").unwrap();
    let client = trusted.client("coredns").unwrap();
    let cases = [
        (
            "wrong-ca",
            other.server(&["127.0.0.1"]).unwrap(),
            "invalid peer certificate: UnknownIssuer",
        ),
        (
            "wrong-name",
            trusted.server(&["10.0.0.1", "kubernetes.default.svc"]).unwrap(),
            "invalid peer certificate: certificate not valid for name \"127.0.0.1\"; certificate is only valid for IpAddress(10.0.0.1) or DnsName(\"kubernetes.default.svc\")",
        ),
        (
            "expired",
            trusted.expired_server(&["127.0.0.1"]).unwrap(),
            "invalid peer certificate: certificate expired",
        ),
    ];
    let mut runs = Vec::new();
    for (tag, identity, cause) in cases {
        let fake = https_fake(identity, None).await;
        let dir = support::temp_dir(tag);
        write_files(
            &dir,
            &[
                ("ca.crt", &trusted.ca_pem),
                ("client.crt", &client.cert_pem),
                ("client.key", &client.key_pem),
            ],
        );
        let path = dir.join("Corefile");
        std::fs::write(
            &path,
            format!(
                ".:0 {{\n bind 127.0.0.1\n ready 127.0.0.1:0\n kubernetes cluster.local {{\n endpoint {}\n tls client.crt client.key ca.crt\n startup_timeout 0s\n }}\n}}\n",
                fake.url()
            ),
        )
        .unwrap();
        let server = tokio::task::spawn_blocking(move || crate::runtime::cli::Server::start(&path))
            .await
            .unwrap();
        runs.push((tag, cause, fake, server));
    }
    // Serving at once (`startup_timeout 0s`); attempts at about 0, 1 and 3 s.
    tokio::time::sleep(Duration::from_secs(5)).await;
    for (tag, cause, fake, server) in &mut runs {
        let ready = server.wait_http("/ready");
        let (status, body) = crate::support::http_get(ready, "/ready").await;
        assert_eq!(status, 503, "{tag}: {body}");
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines.len(), 3, "{tag}: {body}");
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("kubernetes: ") && l.contains(*cause)),
            "{tag}: want {cause} on every line of\n{body}"
        );
        let log = server.log_lines();
        for watch in ["namespaces", "services", "endpointslices.discovery.k8s.io"] {
            let found = lines_with(&log, &["WARN", *cause, &format!("watch={watch} ")]);
            assert_eq!(found.len(), 1, "{tag} {watch}: {found:#?}\nall: {log:#?}");
        }
        assert!(lines_with(&log, &["failed with error"]).is_empty(), "{log:#?}");
        // Three watches, each at most 3 attempts in 5 s (0, 1, 3 s; kube's backoff made 5).
        let attempts = fake.tls_failures();
        assert!((3..=10).contains(&attempts), "{tag}: {attempts} handshakes");
    }
    for (_, _, _, server) in runs {
        assert!(tokio::task::spawn_blocking(move || server.stop()).await.unwrap());
    }
}

/// After an outage long enough for the backoff to grow (the Services watch has failed five
/// times, so its next retry is at least 12.8 s away), the zone catches up as soon as the API
/// server accepts connections again: before that scheduled retry.
#[tokio::test]
async fn after_a_long_outage_the_zone_catches_up_before_the_scheduled_retry() {
    let fake = fake_with(&fixture()).await;
    let (running, addr) = start_dns(&fake.url(), K).await;
    wait_synced(&running).await;
    let state = support::sync_state(&running).clone();
    fake.stop_listener().await;
    for _ in 0..3000 {
        if state.failures("services") >= Some(5) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(state.failures("services"), Some(5));
    let due = state.next_retry("services").unwrap();
    assert!(
        due > std::time::Instant::now() + Duration::from_secs(10),
        "the backoff has grown"
    );
    end_outage_with_a_new_service(&fake, addr).await;
    assert!(
        std::time::Instant::now() < due,
        "caught up only at the scheduled retry"
    );
    running.stop().await.unwrap();
}

/// The lists the fake has served: paged lists and streaming lists (a watch that starts with
/// `sendInitialEvents=true`), every resource.
fn lists_served(fake: &FakeApiServer) -> usize {
    fake.requests()
        .iter()
        .filter(|r| {
            r.contains("sendInitialEvents=true") || (r.starts_with("GET ") && !r.contains("watch=true"))
        })
        .filter(|r| !r.starts_with("GET /version"))
        .count()
}

/// A reload that changes only the `forward` line keeps the kubernetes source: no list is
/// made again, the watches stay open and `/ready` never says the source is waiting. A reload
/// that removes `kubernetes` stops its watches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_watch_it_does_not_change_and_stops_the_one_it_removes() {
    // Frequent bookmarks: the fake notices a closed stream when it next writes to it.
    let fake = FakeApiServer::start_with(fake_apiserver::Options {
        bookmark_interval: Duration::from_millis(100),
        ..fake_apiserver::Options::default()
    })
    .await
    .unwrap();
    for o in fixture() {
        fake.create(o).unwrap();
    }
    let dir = support::temp_dir("watch-reload");
    let with_forward = |upstream: &str| {
        format!(
            ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  endpoint {}\n }}\n forward . {upstream}\n}}\n",
            fake.url()
        )
    };
    let running = support::start(&with_forward("127.0.0.1:9"), &dir).await;
    let addr = running.dns_addrs()[0];
    wait_synced(&running).await;
    let lists = lists_served(&fake);
    let watches = fake.open_watches();
    assert!(lists >= 3 && watches >= 3, "lists {lists}, watches {watches}");
    let source = running.acquired::<cluster_dns::cluster::ClusterSource>()[0].clone();

    let reload = |text: String| {
        let path = dir.join("Corefile");
        std::fs::write(&path, &text).unwrap();
        cluster_dns::config::Config::load(&path, 53).unwrap()
    };
    running
        .reload(reload(with_forward("127.0.0.1:10")))
        .await
        .unwrap();
    assert!(
        Arc::ptr_eq(
            &source,
            &running.acquired::<cluster_dns::cluster::ClusterSource>()[0]
        ),
        "the new configuration answers from the same source"
    );
    assert!(
        running.readiness().not_ready().is_empty(),
        "{:?}",
        running.readiness().not_ready()
    );
    let m = ask(addr, "svc1.testns.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&m), ["svc1.testns.svc.cluster.local. A 10.96.10.1"]);
    assert_eq!(lists_served(&fake), lists, "no relist: {:#?}", fake.requests());
    assert_eq!(fake.open_watches(), watches);
    drop(source);

    // Without `kubernetes`, its watches end (the fake sees their streams close).
    running
        .reload(reload(
            ".:0 {\n bind 127.0.0.1\n forward . 127.0.0.1:10\n}\n".to_owned(),
        ))
        .await
        .unwrap();
    assert!(
        running
            .acquired::<cluster_dns::cluster::ClusterSource>()
            .is_empty()
    );
    for _ in 0..500 {
        if fake.open_watches() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        fake.open_watches(),
        0,
        "the removed source's watches are still open after 5 s"
    );
    assert_eq!(lists_served(&fake), lists);
    running.stop().await.unwrap();
}

/// Issue 46: `cache 30` in the cluster zone's block without `disable` (the k3s and EKS
/// Corefiles, every node-local tier). Once the zone has a change, the cache answers what the
/// zone says: a name asked before its Service existed, a headless Service that gained an
/// endpoint and an address whose pod went away are not held stale for the cache's window (the
/// kubernetes plugin's `ttl 30` here, 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_never_holds_a_cluster_name_the_zone_changed() {
    let fake = fake_with(&[
        namespace("team"),
        service(
            "team",
            "db",
            json!({"clusterIP": "None", "ports": [{"name": "http", "port": 8080}]}),
        ),
        slice("team", "db-1", "db", &[("10.244.0.1", true)]),
    ])
    .await;
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local {{\n  endpoint {}\n  ttl 30\n }}\n cache 30\n}}\n",
        fake.url()
    );
    let running = support::start(&corefile, &support::temp_dir("watch-cache")).await;
    let addr = running.dns_addrs()[0];
    wait_synced(&running).await;
    let zone = support::zone(&running);
    // Waits until the zone has taken in the fake's latest change.
    let applied = |before: u64| {
        let zone = zone.clone();
        async move {
            for _ in 0..500 {
                if cluster_dns::proto::ChangeCounter::generation(zone.as_ref()) != before {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("the zone did not change within 5 s");
        }
    };
    let new = "web.team.svc.cluster.local.";
    let headless = "db.team.svc.cluster.local.";
    // Asked twice, so the second answer comes from the cache.
    for _ in 0..2 {
        assert_eq!(
            ask(addr, new, RecordType::A).await.metadata.response_code,
            ResponseCode::NXDomain
        );
        assert_eq!(
            answers(&ask(addr, headless, RecordType::A).await),
            [format!("{headless} A 10.244.0.1")]
        );
    }
    let before = cluster_dns::proto::ChangeCounter::generation(zone.as_ref());
    fake.create(service(
        "team",
        "web",
        json!({"clusterIP": "10.96.7.7", "ports": [{"name": "http", "port": 80}]}),
    ))
    .unwrap();
    applied(before).await;
    let m = ask(addr, new, RecordType::A).await;
    assert_eq!(
        answers(&m),
        [format!("{new} A 10.96.7.7")],
        "{:?}",
        m.metadata.response_code
    );

    let before = cluster_dns::proto::ChangeCounter::generation(zone.as_ref());
    fake.create(slice("team", "db-2", "db", &[("10.244.0.2", true)]))
        .unwrap();
    applied(before).await;
    let mut want = vec![
        format!("{headless} A 10.244.0.1"),
        format!("{headless} A 10.244.0.2"),
    ];
    want.sort();
    assert_eq!(answers(&ask(addr, headless, RecordType::A).await), want);

    let before = cluster_dns::proto::ChangeCounter::generation(zone.as_ref());
    fake.delete(Resource::Services, "team", "web").unwrap();
    applied(before).await;
    assert_eq!(
        ask(addr, new, RecordType::A).await.metadata.response_code,
        ResponseCode::NXDomain
    );
    // From the API event to the first answer that has a new endpoint (shown with
    // --nocapture; the poll's bound is not a timing assertion).
    let published = std::time::Instant::now();
    fake.create(slice("team", "db-3", "db", &[("10.244.0.3", true)]))
        .unwrap();
    let m = eventually(addr, headless, RecordType::A, 5, |m| {
        answers(m).contains(&format!("{headless} A 10.244.0.3"))
    })
    .await;
    eprintln!(
        "a new endpoint of a cached headless name answered {:?} after the API event (cache 30)",
        published.elapsed()
    );
    assert_eq!(answers(&m).len(), 3);
    running.stop().await.unwrap();
}
