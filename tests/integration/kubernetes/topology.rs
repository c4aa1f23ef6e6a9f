//! Answers that know where the client is (issue 35) over real sockets: `kubernetes`'s
//! `topology` (a headless Service's `trafficDistribution` applied to its A/AAAA and SRV
//! answers, from the client pod's node and the Node's zone) and CoreDNS's `zonal` names. Pods
//! are clients at loopback addresses (127.0.0.x) that the fake API server lists on nodes in
//! zones; the answer memo and a bare `cache 30` are on, so an answer made for one client must
//! never reach another.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use cluster_dns::proto::Transport;
use fake_apiserver::{FakeApiServer, Resource};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use serde_json::{Value, json};
use tokio::net::UdpSocket;

use crate::support;

const NS: &str = "shop";

fn node(name: &str, zone: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}}})
}

fn pod(name: &str, ip: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
           "status": {"phase": "Running", "podIP": ip}})
}

fn headless(name: &str, traffic: Option<&str>) -> Value {
    let mut spec = json!({"clusterIP": "None", "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}]});
    if let Some(t) = traffic {
        spec["trafficDistribution"] = json!(t);
    }
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS}, "spec": spec})
}

/// An endpoint: (ip, node, zone, ready, hinted zones).
type Ep<'a> = (&'a str, &'a str, &'a str, bool, Option<&'a [&'a str]>);

fn slice(service: &str, endpoints: &[Ep<'_>]) -> Value {
    let eps: Vec<Value> = endpoints
        .iter()
        .map(|(ip, node, zone, ready, hints)| {
            let mut e = json!({"addresses": [ip], "nodeName": node, "zone": zone,
                               "conditions": {"ready": ready}});
            if let Some(h) = hints {
                e["hints"] = json!({"forZones": h.iter().map(|z| json!({"name": z})).collect::<Vec<_>>()});
            }
            e
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": format!("{service}-1"), "namespace": NS,
                        "labels": {"kubernetes.io/service-name": service}},
           "addressType": "IPv4", "endpoints": eps,
           "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}]})
}

/// `db`'s nine endpoints, three per zone, two nodes per zone; zone a's ready or not.
fn db_slice(zone_a_ready: bool) -> Value {
    slice(
        "db",
        &[
            ("10.0.1.1", "n-a1", "a", zone_a_ready, None),
            ("10.0.1.2", "n-a2", "a", zone_a_ready, None),
            ("10.0.1.3", "n-a1", "a", zone_a_ready, None),
            ("10.0.2.1", "n-b1", "b", true, None),
            ("10.0.2.2", "n-b2", "b", true, None),
            ("10.0.2.3", "n-b1", "b", true, None),
            ("10.0.3.1", "n-c1", "c", true, None),
            ("10.0.3.2", "n-c2", "c", true, None),
            ("10.0.3.3", "n-c1", "c", true, None),
        ],
    )
}

/// The test cluster: 3 zones of 2 nodes; client pods at 127.0.0.2 (n-a1, zone a),
/// 127.0.0.3 (n-b1, zone b), 127.0.0.4 (n-c2, zone c); headless `db` (PreferSameZone, 9
/// endpoints), `near` (PreferSameNode), `hinted` (PreferSameZone with zone hints), `plain`
/// (no trafficDistribution) and ClusterIP `web`.
fn objects() -> Vec<Value> {
    let mut out = vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})];
    for (n, z) in [
        ("n-a1", "a"),
        ("n-a2", "a"),
        ("n-b1", "b"),
        ("n-b2", "b"),
        ("n-c1", "c"),
        ("n-c2", "c"),
    ] {
        out.push(node(n, z));
    }
    out.push(pod("client-a", "127.0.0.2", "n-a1"));
    out.push(pod("client-b", "127.0.0.3", "n-b1"));
    out.push(pod("client-c", "127.0.0.4", "n-c2"));
    out.push(headless("db", Some("PreferSameZone")));
    out.push(db_slice(true));
    out.push(headless("near", Some("PreferSameNode")));
    out.push(slice(
        "near",
        &[
            ("10.1.0.1", "n-a1", "a", true, None),
            ("10.1.0.2", "n-a2", "a", true, None),
            ("10.1.0.3", "n-b1", "b", true, None),
        ],
    ));
    out.push(headless("hinted", Some("PreferSameZone")));
    // 10.2.0.2 is in zone b but hinted for zone a (the controller balancing zones).
    out.push(slice(
        "hinted",
        &[
            ("10.2.0.1", "n-a1", "a", true, Some(&["a"])),
            ("10.2.0.2", "n-b1", "b", true, Some(&["a"])),
            ("10.2.0.3", "n-c1", "c", true, Some(&["c"])),
        ],
    ));
    // Node hints (PreferSameNode): they, not `nodeName`, say where each endpoint serves.
    out.push(headless("nodehinted", Some("PreferSameNode")));
    let mut hinted = slice(
        "nodehinted",
        &[
            ("10.4.0.1", "n-b1", "b", true, Some(&["a"])),
            ("10.4.0.2", "n-a1", "a", true, Some(&["a"])),
        ],
    );
    hinted["endpoints"][0]["hints"]["forNodes"] = json!([{"name": "n-a1"}]);
    hinted["endpoints"][1]["hints"]["forNodes"] = json!([{"name": "n-a2"}]);
    out.push(hinted);
    out.push(headless("plain", None));
    out.push(slice(
        "plain",
        &[
            ("10.3.0.1", "n-a1", "a", true, None),
            ("10.3.0.2", "n-b1", "b", true, None),
        ],
    ));
    out.push(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
                    "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}}),
    );
    out
}

/// Asks `name` from source address `from` over UDP: the reply.
async fn exchange_from(from: &str, server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let sock = UdpSocket::bind((from.parse::<IpAddr>().unwrap(), 0))
        .await
        .unwrap();
    let msg = support::query(name, qtype);
    sock.send_to(&msg.to_bytes().unwrap(), server).await.unwrap();
    let mut buf = vec![0u8; 65535];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), sock.recv_from(&mut buf))
        .await
        .expect("a reply in 5 s")
        .unwrap();
    let reply = Message::from_bytes(&buf[..n]).unwrap();
    assert_eq!(reply.metadata.id, msg.metadata.id);
    reply
}

/// The A addresses of `reply`'s answer (or additional) section, as a set.
fn addresses(records: &[hickory_proto::rr::Record]) -> BTreeSet<String> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}

fn set(ips: &[&str]) -> BTreeSet<String> {
    ips.iter().map(|s| (*s).to_owned()).collect()
}

/// The A addresses `from` gets for `name`.
async fn a_from(from: &str, dns: SocketAddr, name: &str) -> BTreeSet<String> {
    let reply = exchange_from(from, dns, name, RecordType::A).await;
    assert_eq!(
        reply.metadata.response_code,
        ResponseCode::NoError,
        "{name} from {from}"
    );
    addresses(&reply.answers)
}

const ZONE_A: [&str; 3] = ["10.0.1.1", "10.0.1.2", "10.0.1.3"];
const ZONE_B: [&str; 3] = ["10.0.2.1", "10.0.2.2", "10.0.2.3"];
const ZONE_C: [&str; 3] = ["10.0.3.1", "10.0.3.2", "10.0.3.3"];

/// Asks `name` from `from` until the answer is `want`, a bounded number of times (a change
/// comes in through the watch): whether it came.
async fn answers_become(from: &str, dns: SocketAddr, name: &str, want: &BTreeSet<String>) -> bool {
    for _ in 0..500 {
        if a_from(from, dns, name).await == *want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Every endpoint of `db`, zones a, b and c.
fn all_zones() -> BTreeSet<String> {
    ZONE_A
        .iter()
        .chain(&ZONE_B)
        .chain(&ZONE_C)
        .map(|s| (*s).to_owned())
        .collect()
}

fn db(name: &str) -> String {
    format!("{name}.{NS}.svc.cluster.local.")
}

/// The server over `fake` with these `kubernetes` options, once its lists are in (with
/// `topology`, its pods and nodes too).
async fn start(fake: &FakeApiServer, options: &str) -> cluster_dns::app::Running {
    let places = options.contains("topology");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n cache 30\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  endpoint {}\n{options} }}\n}}\n",
        fake.url()
    );
    let running = support::start(&corefile, &support::temp_dir("topology")).await;
    for _ in 0..1500 {
        let zone = support::zone(&running);
        if zone.is_synced() && !places {
            break;
        }
        if zone.is_synced()
            && zone.pod_count() == 3
            && zone
                .client_place("127.0.0.4".parse().unwrap())
                .is_some_and(|p| p.zone.is_some())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    running
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_answers_follow_traffic_distribution_and_the_clients_place() {
    let fake = FakeApiServer::start().await.unwrap();
    for o in objects() {
        fake.create(&o).unwrap();
    }
    let running = start(&fake, "  topology\n").await;
    let dns = running.dns_addrs()[0];
    let all = all_zones();

    // Same zone, asked in turns (the memo keeps an answer per place, the cache none): every
    // answer to a zone-a pod holds only zone a.
    for _ in 0..3 {
        assert_eq!(a_from("127.0.0.2", dns, &db("db")).await, set(&ZONE_A));
        assert_eq!(a_from("127.0.0.3", dns, &db("db")).await, set(&ZONE_B));
        assert_eq!(a_from("127.0.0.4", dns, &db("db")).await, set(&ZONE_C));
        // Not a pod: every endpoint.
        assert_eq!(a_from("127.0.0.9", dns, &db("db")).await, all);
    }
    // SRV: the targets and their glue are zone a's too.
    let srv = exchange_from("127.0.0.2", dns, &db("db"), RecordType::SRV).await;
    assert_eq!(srv.answers.len(), 3, "{:?}", srv.answers);
    assert_eq!(addresses(&srv.additionals), set(&ZONE_A));
    // The port's SRV name is narrowed the same way; to a client that is not a pod, all nine.
    let port = exchange_from("127.0.0.2", dns, &db("_sql._tcp.db"), RecordType::SRV).await;
    assert_eq!(port.answers.len(), 3, "{:?}", port.answers);
    assert_eq!(addresses(&port.additionals), set(&ZONE_A));
    let port = exchange_from("127.0.0.3", dns, &db("_sql._tcp.db"), RecordType::SRV).await;
    assert_eq!(addresses(&port.additionals), set(&ZONE_B));
    // (Nine SRV records with their glue pass 1,232 bytes: as many as fit, from every zone.)
    let port = exchange_from("127.0.0.9", dns, &db("_sql._tcp.db"), RecordType::SRV).await;
    let targets: BTreeSet<String> = port
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            hickory_proto::rr::RData::SRV(srv) => Some(srv.target.to_string()[..8].to_owned()),
            _ => None,
        })
        .collect();
    assert!(
        ["10-0-1-", "10-0-2-", "10-0-3-"]
            .iter()
            .all(|z| targets.iter().any(|t| t.starts_with(z))),
        "{targets:?}"
    );

    // PreferSameNode: the client's node, else its zone, else all.
    assert_eq!(a_from("127.0.0.2", dns, &db("near")).await, set(&["10.1.0.1"]));
    assert_eq!(a_from("127.0.0.3", dns, &db("near")).await, set(&["10.1.0.3"]));
    assert_eq!(
        a_from("127.0.0.4", dns, &db("near")).await,
        set(&["10.1.0.1", "10.1.0.2", "10.1.0.3"]),
        "nothing near zone c: every endpoint"
    );
    // Hints present: zone a's pods get what is hinted for zone a (one endpoint is in zone b);
    // nothing is hinted for zone b: all.
    assert_eq!(
        a_from("127.0.0.2", dns, &db("hinted")).await,
        set(&["10.2.0.1", "10.2.0.2"])
    );
    assert_eq!(
        a_from("127.0.0.3", dns, &db("hinted")).await,
        set(&["10.2.0.1", "10.2.0.2", "10.2.0.3"])
    );
    assert_eq!(
        a_from("127.0.0.2", dns, &db("nodehinted")).await,
        set(&["10.4.0.1"])
    );
    // No trafficDistribution: every endpoint, for everyone.
    assert_eq!(
        a_from("127.0.0.2", dns, &db("plain")).await,
        set(&["10.3.0.1", "10.3.0.2"])
    );

    // Fallback: zone a's endpoints go not ready; zone a's pod's answers widen (within the
    // watch delay) and are never empty.
    fake.apply(db_slice(false)).unwrap();
    let mut widened = false;
    for _ in 0..500 {
        let got = a_from("127.0.0.2", dns, &db("db")).await;
        assert!(!got.is_empty(), "never NODATA while an endpoint is ready");
        if got == ZONE_B.iter().chain(&ZONE_C).map(|s| (*s).to_owned()).collect() {
            widened = true;
            break;
        }
        assert_eq!(got, set(&ZONE_A), "zone a's until the change is in");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(widened, "zone a's pod gets every ready endpoint");
    assert_eq!(a_from("127.0.0.3", dns, &db("db")).await, set(&ZONE_B));
    fake.apply(db_slice(true)).unwrap();

    // A pod that moved: client-a is recreated on n-b2 (zone b) at the same address.
    fake.delete(Resource::Pods, NS, "client-a").unwrap();
    fake.create(pod("client-a2", "127.0.0.2", "n-b2")).unwrap();
    assert!(
        answers_become("127.0.0.2", dns, &db("db"), &set(&ZONE_B)).await,
        "the moved pod gets its new zone's endpoints"
    );
    assert_eq!(
        a_from("127.0.0.2", dns, &db("near")).await,
        set(&["10.1.0.3"]),
        "nothing on n-b2: zone b's"
    );
    // Its node relabelled into zone c (no Service changed): zone c's endpoints, though the
    // answer memo held zone b's for this node.
    fake.apply(node("n-b2", "c")).unwrap();
    assert!(
        answers_become("127.0.0.2", dns, &db("db"), &set(&ZONE_C)).await,
        "a node's new zone decides its pods' answers"
    );

    // Nodes are watched as metadata only (their zone label is all DNS reads of them).
    let nodes: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET /api/v1/nodes"))
        .collect();
    assert!(
        !nodes.is_empty() && nodes.iter().all(|r| r.ends_with("(metadata only)")),
        "{nodes:?}"
    );

    // The answers narrowed, by reason.
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    let text = crate::support::scrape(metrics).await;
    for reason in ["node", "zone", "fallback"] {
        let n = crate::support::sum(
            &text,
            "cluster_dns_topology_answers_total",
            &[&format!("reason=\"{reason}\"")],
        );
        assert!(n >= 1.0, "{reason}: {n}");
    }
}

/// The answer memo replays by request bytes: the same bytes from clients in different zones
/// still get their own answers (a narrowed answer is kept per place, the pod's node and zone,
/// and replayed to clients of that place only), and a question whose answer does not depend
/// on the client is memoized as before.
#[test]
fn the_memo_never_gives_one_clients_answer_to_another() {
    let yaml: String = objects().iter().map(|o| format!("---\n{o}\n")).collect();
    let corefile = ".:53 {\n kubernetes cluster.local {\n  topology\n }\n}\n";
    let (handler, _zone) = cluster_dns::testing::handler_with_zone(corefile, &yaml, true).unwrap();
    let mut msg = support::query(&db("db"), RecordType::A);
    msg.metadata.id = 7;
    let bytes = msg.to_bytes().unwrap();
    let ask = |from: &str| {
        let src: SocketAddr = format!("{from}:40000").parse().unwrap();
        let reply = handler
            .answer_wire(&bytes, src, Transport::Udp)
            .expect("a response");
        addresses(&Message::from_bytes(&reply).unwrap().answers)
    };
    let all = all_zones();
    for round in 0..3 {
        assert_eq!(ask("127.0.0.2"), set(&ZONE_A));
        assert_eq!(ask("127.0.0.3"), set(&ZONE_B));
        assert_eq!(ask("127.0.0.9"), all, "not a pod");
        assert_eq!(ask("127.0.0.4"), set(&ZONE_C));
        // The request's marker and one response per place (n-a1/a, n-b1/b, no pod, n-c2/c).
        assert_eq!(handler.router().memo.len(), 5, "round {round}");
    }
    let mut plain = support::query(&db("plain"), RecordType::A);
    plain.metadata.id = 8;
    let src: SocketAddr = "127.0.0.2:40000".parse().unwrap();
    for _ in 0..2 {
        handler
            .answer_wire(&plain.to_bytes().unwrap(), src, Transport::Udp)
            .expect("a response");
    }
    assert!(
        !handler.router().memo.is_empty(),
        "a plain headless answer is memoized as before"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zonal_names_as_coredns_answers_them() {
    let fake = FakeApiServer::start().await.unwrap();
    for o in objects() {
        fake.create(&o).unwrap();
    }
    let running = start(&fake, "  zonal\n").await;
    let dns = running.dns_addrs()[0];
    let all = all_zones();
    let status = |out: &str| support::dig_status(out);

    // pin: the zone's endpoints, whoever asks (also in upper case).
    assert_eq!(
        a_from("127.0.0.9", dns, &db("a.pin._zone.db")).await,
        set(&ZONE_A)
    );
    assert_eq!(
        a_from("127.0.0.3", dns, &db("A.PIN._zone.db")).await,
        set(&ZONE_A)
    );
    // Without topology, plain names are not narrowed.
    assert_eq!(a_from("127.0.0.2", dns, &db("db")).await, all);
    // pin to a zone no endpoint carries: NODATA; prefer: every endpoint.
    let out = support::dig(dns, &[&db("x.pin._zone.db"), "A"]);
    assert_eq!(status(&out), "NOERROR", "{out}");
    assert!(out.contains("ANSWER: 0,"), "NODATA: {out}");
    assert_eq!(a_from("127.0.0.9", dns, &db("x.prefer._zone.db")).await, all);
    assert_eq!(
        a_from("127.0.0.9", dns, &db("b.prefer._zone.db")).await,
        set(&ZONE_B)
    );
    // A zone value with dots is every label left of the directive.
    let out = support::dig(dns, &[&db("corp.example.com.pin._zone.db"), "A"]);
    assert_eq!(status(&out), "NOERROR", "{out}");
    // SRV: targets and glue of the zone only.
    let srv = exchange_from("127.0.0.9", dns, &db("c.pin._zone.db"), RecordType::SRV).await;
    assert_eq!(srv.answers.len(), 3);
    assert_eq!(addresses(&srv.additionals), set(&ZONE_C));
    // Other types: NODATA.
    let out = support::dig(dns, &[&db("a.pin._zone.db"), "TXT"]);
    assert_eq!(status(&out), "NOERROR", "{out}");
    assert!(out.contains("ANSWER: 0,"), "NODATA: {out}");
    // No such service, a ClusterIP service, an unknown directive: NXDOMAIN.
    for name in ["a.pin._zone.nosuch", "a.pin._zone.web", "a.near._zone.db"] {
        let out = support::dig(dns, &[&db(name), "A"]);
        assert_eq!(status(&out), "NXDOMAIN", "{name}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_zonal_the_shape_is_nxdomain() {
    let fake = FakeApiServer::start().await.unwrap();
    for o in objects() {
        fake.create(&o).unwrap();
    }
    let running = start(&fake, "").await;
    let dns = running.dns_addrs()[0];
    let out = support::dig(dns, &[&db("a.pin._zone.db"), "A"]);
    assert_eq!(support::dig_status(&out), "NXDOMAIN", "{out}");
    // Without `topology` (or `pods verified`) neither Pods nor Nodes are watched.
    let watched = fake.requests();
    assert!(
        !watched
            .iter()
            .any(|r| r.contains("/pods") || r.contains("/nodes")),
        "{watched:?}"
    );
}

/// The Corefile of CoreDNS's README with `zonal` (its syntax block's options) passes `--check`
/// in the real binary, serves, and `zonal` with `noendpoints` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coredns_corefile_with_zonal_checks_and_serves() {
    let dir = support::temp_dir("zonal-check");
    let text = ".:53 {\n    errors\n    health {\n       lameduck 5s\n    }\n    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       zonal\n       ttl 30\n    }\n    prometheus :9153\n    forward . /etc/resolv.conf\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n";
    std::fs::write(dir.join("Corefile"), text).unwrap();
    let out = crate::runtime::cli::bin()
        .args(["--check", "-conf"])
        .arg(dir.join("Corefile"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bad = support::check_corefile(
        &dir,
        ".:53 {\n kubernetes cluster.local {\n  zonal\n  noendpoints\n }\n}\n",
    )
    .unwrap_err();
    assert!(bad.contains("Corefile:3") && bad.contains("noendpoints"), "{bad}");

    // The same block over the fake API server serves zonal names.
    let fake = FakeApiServer::start().await.unwrap();
    for o in objects() {
        fake.create(&o).unwrap();
    }
    let running = start(
        &fake,
        "  pods insecure\n  fallthrough in-addr.arpa ip6.arpa\n  zonal\n  ttl 30\n",
    )
    .await;
    let dns = running.dns_addrs()[0];
    assert_eq!(
        a_from("127.0.0.9", dns, &db("b.pin._zone.db")).await,
        set(&ZONE_B)
    );
}

/// With `zonal`, `kubernetes/zone` is the zone a zonal name asks for (empty for other names):
/// a view routes on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_routes_by_the_requested_zone() {
    let fake = FakeApiServer::start().await.unwrap();
    for o in objects() {
        fake.create(&o).unwrap();
    }
    let k8s = format!(
        "kubernetes cluster.local {{\n  endpoint {}\n  zonal\n }}",
        fake.url()
    );
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n metadata\n view zone-a {{\n  expr metadata('kubernetes/zone') == 'a'\n }}\n template IN A cluster.local {{\n  match \".*\"\n  answer \"{{{{ .Name }}}} 60 IN A 192.0.2.1\"\n }}\n {k8s}\n}}\n\
         .:0 {{\n bind 127.0.0.1\n {k8s}\n}}\n"
    );
    let running = support::start(&corefile, &support::temp_dir("zonal-view")).await;
    let dns = running.dns_addrs()[0];
    for _ in 0..1500 {
        if support::zone(&running).is_synced() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        a_from("127.0.0.9", dns, &db("a.pin._zone.db")).await,
        set(&["192.0.2.1"])
    );
    assert_eq!(
        a_from("127.0.0.9", dns, &db("b.pin._zone.db")).await,
        set(&ZONE_B)
    );
    assert_eq!(
        a_from("127.0.0.9", dns, &db("db")).await.len(),
        9,
        "not a zonal name: zone ''"
    );
}
