//! `autopath @kubernetes` over real sockets: pods are clients at loopback addresses
//! (127.0.0.x), the zone comes from the fake API server (Pods watched with `pods verified`), and
//! outside names go through `forward` to an upstream the test runs.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use fake_apiserver::{FakeApiServer, Resource};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use serde_json::{Value, json};
use tokio::net::UdpSocket;

use crate::support;
use crate::support::upstream::Scripted;

fn pod(ns: &str, name: &str, ip: &str, host_network: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
           "spec": {"hostNetwork": host_network, "containers": [{"name": "c", "image": "x"}]},
           "status": {"phase": "Running", "podIP": ip}})
}

fn objects() -> Vec<Value> {
    let mut out: Vec<Value> = ["ns-a", "ns-b", "kube-system"]
        .iter()
        .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
        .collect();
    out.push(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "ns-a"},
                    "spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}));
    out.push(pod("ns-a", "a1", "127.0.0.2", false));
    out.push(pod("ns-b", "b1", "127.0.0.3", false));
    out.push(pod("kube-system", "node-agent", "127.0.0.4", true));
    out
}

/// Asks `name` from source address `from`; the reply and its records as `owner TYPE rdata`.
async fn ask_from(
    from: &str,
    server: SocketAddr,
    name: &str,
    qtype: RecordType,
) -> (ResponseCode, Vec<String>) {
    let reply = exchange_from(from, server, name, qtype).await;
    (
        reply.metadata.response_code,
        reply.answers.iter().map(support::show).collect(),
    )
}

/// Asks `name` from source address `from`; the whole reply.
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
    assert_eq!(
        reply.queries[0].name().to_ascii(),
        name,
        "the question is the one asked"
    );
    reply
}

fn noerror(records: &[&str]) -> (ResponseCode, Vec<String>) {
    (
        ResponseCode::NoError,
        records.iter().map(|s| (*s).to_owned()).collect(),
    )
}

fn nxdomain() -> (ResponseCode, Vec<String>) {
    (ResponseCode::NXDomain, Vec::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_their_search_path_walked_in_one_round_trip() {
    walks_in_one_round_trip(Cache::Bare).await;
}

/// The same under today's kubeadm cache block: the cluster zone's answers never come from the
/// cache, so a walk's asks in it reach `kubernetes` as probes every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_their_search_path_walked_under_kubeadms_cache_block() {
    walks_in_one_round_trip(Cache::Kubeadm).await;
}

/// The `cache` of the block the walks are tested in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cache {
    /// `cache 30`: the cluster zone's answers are cached too.
    Bare,
    /// `cache 30 { disable success cluster.local; disable denial cluster.local }`.
    Kubeadm,
}

async fn walks_in_one_round_trip(cache: Cache) {
    let fake = FakeApiServer::start().await.unwrap();
    for o in objects() {
        fake.create(&o).unwrap();
    }
    let upstream = Scripted::start().await;
    let cache_block = match cache {
        Cache::Bare => "cache 30",
        Cache::Kubeadm => "cache 30 {\n  disable success cluster.local\n  disable denial cluster.local\n }",
    };
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n autopath @kubernetes\n {cache_block}\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  endpoint {}\n  pods verified\n }}\n forward . {}\n}}\n",
        fake.url(),
        upstream.addr
    );
    let running = support::start(&corefile, &support::temp_dir("autopath")).await;
    let dns = running.dns_addrs()[0];
    for _ in 0..1500 {
        if support::zone(&running).is_synced() && support::zone(&running).pod_count() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // A short in-cluster name of the pod's own namespace: the first search name exists and
    // is answered as it is.
    assert_eq!(
        ask_from("127.0.0.2", dns, "web.ns-a.svc.cluster.local.", RecordType::A).await,
        noerror(&["web.ns-a.svc.cluster.local. A 10.96.0.10"])
    );
    // Another namespace's service from ns-b ("web.ns-a" + its first search domain).
    assert_eq!(
        ask_from(
            "127.0.0.3",
            dns,
            "web.ns-a.ns-b.svc.cluster.local.",
            RecordType::A
        )
        .await,
        noerror(&[
            "web.ns-a.ns-b.svc.cluster.local. CNAME web.ns-a.svc.cluster.local.",
            "web.ns-a.svc.cluster.local. A 10.96.0.10"
        ])
    );
    // An outside name: the walk ends upstream, behind a CNAME.
    let upstream_before = upstream.udp_queries();
    assert_eq!(
        ask_from(
            "127.0.0.3",
            dns,
            "api.example.com.ns-b.svc.cluster.local.",
            RecordType::A
        )
        .await,
        noerror(&[
            "api.example.com.ns-b.svc.cluster.local. CNAME api.example.com.",
            "api.example.com. A 192.0.2.1"
        ])
    );
    assert!(upstream.udp_queries() > upstream_before);
    // NODATA is a win too: the outside name has no AAAA.
    assert_eq!(
        ask_from(
            "127.0.0.3",
            dns,
            "api.example.com.ns-b.svc.cluster.local.",
            RecordType::AAAA
        )
        .await,
        noerror(&[])
    );
    // A name that exists nowhere: NXDOMAIN after the whole walk, in this one round trip, with
    // the zone's SOA; also the second time, when the cache holds every try's NXDOMAIN (or,
    // under kubeadm's block, `kubernetes` answers them again) and the walk's asks (probes) get
    // them as bare rcodes.
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    let denial_hits = async || {
        crate::support::sum(
            &crate::support::scrape(metrics).await,
            "coredns_cache_hits_total",
            &["type=\"denial\""],
        )
    };
    let mut before = 0.0;
    for _ in 0..2 {
        before = denial_hits().await;
        let reply = exchange_from("127.0.0.3", dns, "nxthing.ns-b.svc.cluster.local.", RecordType::A).await;
        assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
        assert!(reply.answers.is_empty());
        let authority: Vec<String> = reply.authorities.iter().map(support::show).collect();
        assert_eq!(authority.len(), 1, "{authority:?}");
        assert!(authority[0].starts_with("cluster.local. SOA "), "{authority:?}");
    }
    // The second walk is answered from the cache: the question as asked (its probe and its
    // full ask) and both search names in the cluster zone at least. The cache asks whole what
    // it stores, so a probe's NXDOMAIN without its SOA never takes the place of an entry.
    let second = denial_hits().await - before;
    if cache == Cache::Bare {
        assert!(second >= 4.0, "denial hits of the second walk: {second}");
    }
    // Clients that are not pods (an unknown address; a host-network pod's node address) get
    // the plain answer, before and after a pod got the walked one: neither the memo nor the
    // cache carries one client's answer to another.
    for from in ["127.0.0.9", "127.0.0.4"] {
        assert_eq!(
            ask_from(
                from,
                dns,
                "api.example.com.ns-b.svc.cluster.local.",
                RecordType::A
            )
            .await,
            nxdomain(),
            "{from}"
        );
    }
    assert_eq!(
        ask_from(
            "127.0.0.3",
            dns,
            "api.example.com.ns-b.svc.cluster.local.",
            RecordType::A
        )
        .await
        .1
        .len(),
        2
    );
    // A pod of ns-a asking the name ns-b's resolver makes: it is not under ns-a's first
    // search domain, so it is answered as asked.
    assert_eq!(
        ask_from(
            "127.0.0.2",
            dns,
            "api.example.com.ns-b.svc.cluster.local.",
            RecordType::A
        )
        .await,
        nxdomain()
    );

    // The pod IP moves to another namespace: the old pod is deleted, a pod of ns-a gets it.
    fake.delete(Resource::Pods, "ns-b", "b1").unwrap();
    fake.create(pod("ns-a", "a2", "127.0.0.3", false)).unwrap();
    let mut moved = false;
    for _ in 0..500 {
        if support::zone(&running)
            .pod_namespace("127.0.0.3".parse().unwrap())
            .as_deref()
            == Some("ns-a")
        {
            moved = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(moved, "the pod index follows the move");
    assert_eq!(
        ask_from(
            "127.0.0.3",
            dns,
            "api.example.com.ns-b.svc.cluster.local.",
            RecordType::A
        )
        .await,
        nxdomain(),
        "never answered for the old pod's namespace"
    );
    assert_eq!(
        ask_from(
            "127.0.0.3",
            dns,
            "api.example.com.ns-a.svc.cluster.local.",
            RecordType::A
        )
        .await,
        noerror(&[
            "api.example.com.ns-a.svc.cluster.local. CNAME api.example.com.",
            "api.example.com. A 192.0.2.1"
        ])
    );

    let (success, text) = crate::support::counter(&running, "coredns_autopath_success_total").await;
    // web.ns-a, api.example.com A, AAAA (NODATA), the second pod ask, and after the move.
    assert_eq!(success, 5.0, "{text}");
    running.stop().await.unwrap();
}

/// The cluster the resolver test serves: the client pod (127.0.0.1 in `default`), a service
/// per (client, in-cluster name) and the probe's `ready` service.
fn resolver_cluster() -> String {
    let mut out = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: client, namespace: default}\nstatus: {phase: Running, podIP: 127.0.0.1}\n",
    );
    for (i, (ns, name)) in [
        ("default", "ready"),
        ("default", "web-glibc"),
        ("default", "web-musl"),
        ("other", "db-glibc"),
        ("other", "db-musl"),
    ]
    .iter()
    .enumerate()
    {
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{clusterIP: 10.96.0.{}, ports: [{{port: 80}}]}}\n",
            i + 10
        ));
    }
    out
}

/// Queries per lookup from real stub resolvers (glibc's and musl's getaddrinfo, AF_UNSPEC) in
/// a pod with kubelet's resolv.conf: an outside name costs 2 with autopath against 8 without, a
/// name of another namespace 2 against 4, a short name 2 either way. Counted from the `log`
/// plugin's lines, in a private network namespace where the server has port 53.
#[test]
fn stub_resolvers_send_two_queries_per_lookup_with_autopath() {
    let dir = support::temp_dir("resolvers");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/resolvers");
    for (compiler, out, flags) in [
        ("gcc", "gai-glibc", &[][..]),
        ("musl-gcc", "gai-musl", &["-static"][..]),
    ] {
        let status = std::process::Command::new(compiler)
            .args(flags)
            .arg("-O1")
            .arg("-o")
            .arg(dir.join(out))
            .arg(src.join("gai.c"))
            .status()
            .unwrap_or_else(|e| panic!("{compiler}: {e} (test.sh installs musl-tools)"));
        assert!(status.success(), "{compiler} failed");
    }
    std::fs::write(dir.join("cluster.yaml"), resolver_cluster()).unwrap();
    // The outside world: `example.com` from a hosts file, NXDOMAIN for every other name in it.
    std::fs::write(
        dir.join("example.hosts"),
        "192.0.2.7 api-glibc.example.com api-musl.example.com\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("resolv.conf"),
        "nameserver 127.0.0.1\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
    )
    .unwrap();
    for (mode, autopath) in [("with", " autopath @kubernetes\n"), ("without", "")] {
        std::fs::write(
            dir.join(format!("Corefile.{mode}")),
            format!(
                ".:53 {{\n bind 127.0.0.1\n log\n{autopath} hosts example.hosts example.com\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  manifests cluster.yaml\n  pods verified\n }}\n}}\n"
            ),
        )
        .unwrap();
    }
    let output = std::process::Command::new("unshare")
        .args(["--net", "--mount", "--"])
        .arg(src.join("count.sh"))
        .arg(env!("CARGO_BIN_EXE_cluster-dns"))
        .arg(&dir)
        .output()
        .expect("unshare runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "count.sh failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut got = Vec::new();
    for line in stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        got.push(format!("{} {} {} {}", f[0], f[1], f[2], f[3]));
        if f[2] != "nothing.example.com" {
            assert_eq!(f[4], "ok", "{line}");
        }
    }
    let mut want = Vec::new();
    for (mode, api, other) in [("with", 2, 2), ("without", 8, 4)] {
        for client in ["glibc", "musl"] {
            want.push(format!("{mode} {client} api.example.com {api}"));
            want.push(format!("{mode} {client} web 2"));
            want.push(format!("{mode} {client} db.other {other}"));
            // A name that exists nowhere: the first query is NXDOMAIN after the server's walk,
            // and the resolver then walks its own list as usual.
            want.push(format!("{mode} {client} nothing.example.com 8"));
        }
    }
    assert_eq!(got, want, "{stdout}");
}

/// `autopath @kubernetes` beside `pods insecure` (CoreDNS starts, and its autopath does
/// nothing): `--check` passes with a warning at the autopath line that says what to add, and the
/// server starts and answers each name as asked (the walk is not taken: the outside name
/// under the pod's search domain is NXDOMAIN, no CNAME).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autopath_without_pods_verified_starts_warns_and_walks_nothing() {
    let fake = FakeApiServer::start().await.unwrap();
    for o in objects() {
        fake.create(&o).unwrap();
    }
    let upstream = Scripted::start().await;
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n autopath @kubernetes\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  endpoint {}\n  pods insecure\n }}\n forward . {}\n}}\n",
        fake.url(),
        upstream.addr
    );
    let dir = support::temp_dir("autopath-insecure");
    std::fs::write(dir.join("Corefile"), &corefile).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cluster-dns"))
        .args(["--check", "-conf"])
        .arg(dir.join("Corefile"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: ") && err.contains("Corefile:3") && err.contains("add `pods verified`"),
        "{err}"
    );

    let running = support::start(&corefile, &dir).await;
    let dns = running.dns_addrs()[0];
    for _ in 0..1500 {
        if support::zone(&running).is_synced() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        ask_from("127.0.0.2", dns, "web.ns-a.svc.cluster.local.", RecordType::A).await,
        noerror(&["web.ns-a.svc.cluster.local. A 10.96.0.10"])
    );
    let (rcode, records) = ask_from(
        "127.0.0.3",
        dns,
        "web.ns-a.ns-b.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_eq!(rcode, ResponseCode::NXDomain, "{records:?}");
    assert!(records.is_empty(), "{records:?}");
}
