//! `kubernetes ... { multicluster clusterset.local }` (MCS API, KEP-1645) against the fake API
//! server over real sockets, asked with the real `dig`: ClusterSetIP A and SRV, headless imports
//! and their per-cluster names, NXDOMAIN and NODATA forms with the SOA, imports and imported
//! slices appearing and going live, the ServiceImport CRD absent (and installed later), the
//! watches started only with the option, and the option's Corefile errors.

use std::net::SocketAddr;
use std::time::Duration;

use cluster_dns::app::Running;
use fake_apiserver::{FakeApiServer, Resource};
use serde_json::{Value, json};

use crate::support;

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn import(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
           "metadata": {"name": name, "namespace": "demo"}, "spec": spec})
}

/// An imported slice of `svc` from `cluster`: (address, hostname) endpoints, port `pg` 5432.
fn imported_slice(name: &str, svc: &str, cluster: &str, eps: &[(&str, Option<&str>)]) -> Value {
    let endpoints: Vec<Value> = eps
        .iter()
        .map(|(ip, host)| match host {
            Some(h) => json!({"addresses": [ip], "hostname": h}),
            None => json!({"addresses": [ip]}),
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": name, "namespace": "demo",
                        "labels": {"multicluster.kubernetes.io/service-name": svc,
                                   "multicluster.kubernetes.io/source-cluster": cluster}},
           "addressType": "IPv4", "endpoints": endpoints,
           "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}]})
}

/// The demo namespace, a ClusterSetIP import `web` (two ports) and a headless import `db`
/// with endpoints in clusters `east` and `west`.
fn objects() -> Vec<Value> {
    vec![
        namespace("demo"),
        import(
            "web",
            json!({"type": "ClusterSetIP", "ips": ["10.9.0.1"],
                   "ports": [{"name": "http", "port": 80, "protocol": "TCP"},
                             {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        ),
        import(
            "db",
            json!({"type": "Headless", "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}]}),
        ),
        imported_slice(
            "db-east",
            "db",
            "east",
            &[("10.1.0.1", Some("db-0")), ("10.1.0.2", None)],
        ),
        imported_slice("db-west", "db", "west", &[("10.2.0.1", Some("db-0"))]),
    ]
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
        ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local clusterset.local {{\n  endpoint {url}\n  {options}\n }}\n}}\n"
    )
}

async fn start(fake: &FakeApiServer, options: &str) -> (Running, SocketAddr) {
    let running = support::start(
        &corefile(&fake.url(), options),
        &support::temp_dir("multicluster"),
    )
    .await;
    for _ in 0..1500 {
        if support::zone(&running).is_synced() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        support::zone(&running).is_synced(),
        "pending {:?}",
        support::sync_state(&running).pending()
    );
    let addr = running.dns_addrs()[0];
    (running, addr)
}

/// `dig` in a blocking task: its whole output.
async fn dig(addr: SocketAddr, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        support::dig(addr, &args)
    })
    .await
    .unwrap()
}

/// The sorted answer records of `dig +noall +answer +comments TYPE NAME`, and its status.
async fn records(addr: SocketAddr, qtype: &str, name: &str) -> (String, Vec<String>) {
    let out = dig(addr, &["+noall", "+answer", "+comments", qtype, name]).await;
    let mut recs = support::dig_records(&out);
    recs.sort();
    (support::dig_status(&out), recs)
}

/// Asks until `ok` holds (up to `secs` seconds, every 50 ms); the last records otherwise.
async fn eventually(
    addr: SocketAddr,
    qtype: &str,
    name: &str,
    secs: u64,
    ok: impl Fn(&str, &[String]) -> bool,
) -> (String, Vec<String>) {
    let mut last = (String::new(), Vec::new());
    for _ in 0..secs * 20 {
        last = records(addr, qtype, name).await;
        if ok(&last.0, &last.1) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{qtype} {name}: condition not met after {secs} s; last {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusterset_ip_imports_answer_a_and_srv() {
    let fake = fake_with(&objects()).await;
    let (running, addr) = start(&fake, "multicluster clusterset.local").await;
    let (status, a) = records(addr, "A", "web.demo.svc.clusterset.local").await;
    assert_eq!(status, "NOERROR");
    assert_eq!(a, ["web.demo.svc.clusterset.local. 5 IN A 10.9.0.1"]);
    let out = dig(
        addr,
        &[
            "+noall",
            "+answer",
            "+additional",
            "SRV",
            "_http._tcp.web.demo.svc.clusterset.local",
        ],
    )
    .await;
    assert_eq!(
        support::dig_records(&out),
        [
            "_http._tcp.web.demo.svc.clusterset.local. 5 IN SRV 0 100 80 web.demo.svc.clusterset.local.",
            "web.demo.svc.clusterset.local. 5 IN A 10.9.0.1",
        ]
    );
    // The name's SRV: every port.
    let (_, srv) = records(addr, "SRV", "web.demo.svc.clusterset.local").await;
    assert_eq!(
        srv,
        [
            "web.demo.svc.clusterset.local. 5 IN SRV 0 50 53 web.demo.svc.clusterset.local.",
            "web.demo.svc.clusterset.local. 5 IN SRV 0 50 80 web.demo.svc.clusterset.local.",
        ]
    );
    // Over TCP too; and the cluster zone knows nothing of imports.
    let out = dig(addr, &["+tcp", "+short", "A", "web.demo.svc.clusterset.local"]).await;
    assert_eq!(out.trim(), "10.9.0.1");
    let (status, _) = records(addr, "A", "web.demo.svc.cluster.local").await;
    assert_eq!(status, "NXDOMAIN");
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_imports_answer_every_cluster_and_per_cluster_names() {
    let fake = fake_with(&objects()).await;
    let (running, addr) = start(&fake, "multicluster clusterset.local").await;
    let (_, a) = records(addr, "A", "db.demo.svc.clusterset.local").await;
    assert_eq!(
        a,
        [
            "db.demo.svc.clusterset.local. 5 IN A 10.1.0.1",
            "db.demo.svc.clusterset.local. 5 IN A 10.1.0.2",
            "db.demo.svc.clusterset.local. 5 IN A 10.2.0.1",
        ]
    );
    let (_, srv) = records(addr, "SRV", "_pg._tcp.db.demo.svc.clusterset.local").await;
    assert_eq!(
        srv,
        [
            "_pg._tcp.db.demo.svc.clusterset.local. 5 IN SRV 0 33 5432 10-1-0-2.east.db.demo.svc.clusterset.local.",
            "_pg._tcp.db.demo.svc.clusterset.local. 5 IN SRV 0 33 5432 db-0.east.db.demo.svc.clusterset.local.",
            "_pg._tcp.db.demo.svc.clusterset.local. 5 IN SRV 0 33 5432 db-0.west.db.demo.svc.clusterset.local.",
        ]
    );
    for (name, ip) in [
        ("db-0.east.db.demo.svc.clusterset.local", "10.1.0.1"),
        ("db-0.west.db.demo.svc.clusterset.local", "10.2.0.1"),
        ("10-1-0-2.east.db.demo.svc.clusterset.local", "10.1.0.2"),
    ] {
        let (status, a) = records(addr, "A", name).await;
        assert_eq!(
            (status.as_str(), a),
            ("NOERROR", vec![format!("{name}. 5 IN A {ip}")])
        );
    }
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nxdomain_and_nodata_forms_carry_the_soa() {
    let fake = fake_with(&objects()).await;
    let (running, addr) = start(&fake, "multicluster clusterset.local").await;
    let negative = |want: &'static str| {
        move |out: String| {
            assert_eq!(support::dig_status(&out), want, "{out}");
            let soa: Vec<String> = support::dig_records(&out)
                .into_iter()
                .filter(|l| l.contains(" IN SOA "))
                .collect();
            assert_eq!(soa.len(), 1, "{out}");
            assert!(
                soa[0].starts_with(
                    "clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local."
                ),
                "{out}"
            );
            assert!(!out.contains("ANSWER SECTION"), "{out}");
        }
    };
    for (qtype, name) in [
        ("A", "nosuch.demo.svc.clusterset.local"),
        ("A", "web.nosuchns.svc.clusterset.local"),
        // An endpoint name without its cluster id (CoreDNS: NXDOMAIN).
        ("A", "db-0.db.demo.svc.clusterset.local"),
        ("A", "db-0.north.db.demo.svc.clusterset.local"),
        ("SRV", "_http._tcp.db.demo.svc.clusterset.local"),
        ("SRV", "_http._sctp.web.demo.svc.clusterset.local"),
    ] {
        negative("NXDOMAIN")(
            dig(
                addr,
                &["+noall", "+comments", "+answer", "+authority", qtype, name],
            )
            .await,
        );
    }
    for (qtype, name) in [
        ("AAAA", "web.demo.svc.clusterset.local"),
        ("TXT", "db.demo.svc.clusterset.local"),
        ("A", "_http._tcp.web.demo.svc.clusterset.local"),
        ("AAAA", "db-0.east.db.demo.svc.clusterset.local"),
        ("A", "demo.svc.clusterset.local"),
        ("A", "clusterset.local"),
    ] {
        negative("NOERROR")(
            dig(
                addr,
                &["+noall", "+comments", "+answer", "+authority", qtype, name],
            )
            .await,
        );
    }
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_and_their_slices_come_and_go_live() {
    let fake = fake_with(&[namespace("demo")]).await;
    let (running, addr) = start(&fake, "multicluster clusterset.local").await;
    let name = "api.demo.svc.clusterset.local";
    assert_eq!(records(addr, "A", name).await.0, "NXDOMAIN");
    fake.create(import(
        "api",
        json!({"type": "ClusterSetIP", "ips": ["10.9.0.7"]}),
    ))
    .unwrap();
    eventually(addr, "A", name, 20, |s, r| {
        s == "NOERROR" && r == [format!("{name}. 5 IN A 10.9.0.7")]
    })
    .await;
    fake.update(import(
        "api",
        json!({"type": "ClusterSetIP", "ips": ["10.9.0.8"]}),
    ))
    .unwrap();
    eventually(addr, "A", name, 20, |_, r| {
        r == [format!("{name}. 5 IN A 10.9.0.8")]
    })
    .await;
    // Headless: NXDOMAIN until an imported slice brings a ready endpoint, and after it goes.
    let db = "db.demo.svc.clusterset.local";
    fake.create(import("db", json!({"type": "Headless"}))).unwrap();
    eventually(addr, "A", name, 20, |_, r| !r.is_empty()).await;
    assert_eq!(records(addr, "A", db).await.0, "NXDOMAIN");
    fake.create(imported_slice(
        "db-east",
        "db",
        "east",
        &[("10.1.0.9", Some("db-0"))],
    ))
    .unwrap();
    eventually(addr, "A", "db-0.east.db.demo.svc.clusterset.local", 20, |s, _| {
        s == "NOERROR"
    })
    .await;
    eventually(addr, "A", db, 20, |_, r| r == [format!("{db}. 5 IN A 10.1.0.9")]).await;
    fake.delete(Resource::EndpointSlices, "demo", "db-east").unwrap();
    eventually(addr, "A", db, 20, |s, _| s == "NXDOMAIN").await;
    fake.delete(Resource::ServiceImports, "demo", "api").unwrap();
    eventually(addr, "A", name, 20, |s, _| s == "NXDOMAIN").await;
    running.stop().await.unwrap();
}

/// Without the ServiceImport CRD (every request for it 404), the rest is served: the zone
/// syncs, cluster names answer (NXDOMAIN, not the SERVFAIL of an unsynced zone), clusterset
/// names answer NXDOMAIN, and the log says why once. A CRD installed later is picked up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_crd_is_logged_and_the_rest_is_served() {
    let mut objects = objects();
    objects.push(json!({"apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": "local", "namespace": "demo"},
                        "spec": {"clusterIP": "10.96.0.5"}}));
    let fake = fake_with(&objects).await;
    fake.fail_resource(Resource::ServiceImports, 404);
    let dir = support::temp_dir("multicluster-crd");
    let path = dir.join("Corefile");
    std::fs::write(&path, corefile(&fake.url(), "multicluster clusterset.local")).unwrap();
    let mut server = tokio::task::spawn_blocking(move || crate::runtime::cli::Server::start(&path))
        .await
        .unwrap();
    let addr = server.addr;
    eventually(addr, "A", "nosuch.demo.svc.cluster.local", 15, |s, _| {
        s == "NXDOMAIN"
    })
    .await;
    let (status, a) = records(addr, "A", "local.demo.svc.cluster.local").await;
    assert_eq!((status.as_str(), a.len()), ("NOERROR", 1));
    assert_eq!(
        records(addr, "A", "web.demo.svc.clusterset.local").await.0,
        "NXDOMAIN"
    );
    // The imported slices are watched all the same: the headless import is still unknown.
    assert_eq!(
        records(addr, "A", "db.demo.svc.clusterset.local").await.0,
        "NXDOMAIN"
    );
    let lines: Vec<String> = server
        .log_lines()
        .into_iter()
        .filter(|l| l.contains("the ServiceImport CRD"))
        .collect();
    assert_eq!(lines.len(), 1, "{:#?}", server.log_lines());
    assert!(
        lines[0].contains("ERROR") && lines[0].contains("not installed"),
        "{}",
        lines[0]
    );
    // /ready-style waiting list: nothing is waiting.
    assert!(
        !server
            .log_lines()
            .iter()
            .any(|l| l.contains("cannot list serviceimports")),
        "{:#?}",
        server.log_lines()
    );
    // The CRD is installed: within the retry (13-16 s) the imports answer.
    fake.allow(Resource::ServiceImports);
    eventually(addr, "A", "web.demo.svc.clusterset.local", 40, |s, _| {
        s == "NOERROR"
    })
    .await;
    assert!(server.stop());
}

/// Without `multicluster`, ServiceImports are not watched (nothing asks the API for them)
/// and `clusterset.local` is an ordinary cluster zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_option_nothing_watches_imports() {
    let fake = fake_with(&objects()).await;
    let (running, addr) = start(&fake, "ttl 5").await;
    assert_eq!(
        records(addr, "A", "web.demo.svc.clusterset.local").await.0,
        "NXDOMAIN"
    );
    let asked: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.contains("serviceimports") || r.contains("multicluster"))
        .collect();
    assert!(asked.is_empty(), "{asked:?}");
    running.stop().await.unwrap();
    // With it, both watches start.
    let (running, _) = start(&fake, "multicluster clusterset.local").await;
    let reqs = fake.requests();
    assert!(
        reqs.iter()
            .any(|r| r.starts_with("GET /apis/multicluster.x-k8s.io/v1alpha1/serviceimports"))
    );
    assert!(
        reqs.iter()
            .any(|r| r.starts_with("GET /apis/discovery.k8s.io/v1/endpointslices")
                && r.contains("multicluster.kubernetes.io%2Fservice-name"))
    );
    running.stop().await.unwrap();
}

#[test]
fn multicluster_zones_must_be_the_plugins_forward_zones() {
    let dir = support::temp_dir("multicluster-check");
    let check = |body: &str| {
        support::check_corefile(
            &dir,
            &format!(".:53 {{\n kubernetes cluster.local clusterset.local {{\n  {body}\n }}\n}}\n"),
        )
    };
    check("multicluster clusterset.local").unwrap();
    check("multicluster").unwrap();
    let e = check("multicluster other.local").unwrap_err();
    assert!(
        e.contains("Corefile:3: kubernetes: multicluster: 'other.local.' is not one of the plugin's zones"),
        "{e}"
    );
    let e = check("multicluster 10.0.0.0/8").unwrap_err();
    assert!(e.contains("is a reverse zone"), "{e}");
}

/// With *metadata*, names in the multicluster zone publish `kubernetes/cluster` and the
/// per-cluster endpoint (as CoreDNS reads `<endpoint>.<clusterid>`); the cluster zone does not
/// publish `kubernetes/cluster` at all. Read from the real binary's `log` lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_names_the_cluster_of_per_cluster_names() {
    let fake = fake_with(&objects()).await;
    let dir = support::temp_dir("multicluster-metadata");
    let path = dir.join("Corefile");
    std::fs::write(
        &path,
        format!(
            ".:0 {{\n bind 127.0.0.1\n metadata\n log . \"META {{name}} cluster={{/kubernetes/cluster}} ep={{/kubernetes/endpoint}} port={{/kubernetes/port-name}}\"\n kubernetes cluster.local clusterset.local {{\n  endpoint {}\n  multicluster clusterset.local\n }}\n}}\n",
            fake.url()
        ),
    )
    .unwrap();
    let mut server = tokio::task::spawn_blocking(move || crate::runtime::cli::Server::start(&path))
        .await
        .unwrap();
    let addr = server.addr;
    eventually(addr, "A", "db-0.east.db.demo.svc.clusterset.local", 15, |s, _| {
        s == "NOERROR"
    })
    .await;
    for (qtype, name) in [
        ("A", "db-0.west.db.demo.svc.clusterset.local"),
        ("SRV", "_pg._tcp.db.demo.svc.clusterset.local"),
        ("A", "db-0.west.db.demo.svc.cluster.local"),
    ] {
        records(addr, qtype, name).await;
    }
    let want = [
        "META db-0.west.db.demo.svc.clusterset.local. cluster=west ep=db-0 port=",
        "META _pg._tcp.db.demo.svc.clusterset.local. cluster= ep= port=pg",
        "META db-0.west.db.demo.svc.cluster.local. cluster=- ep= port=db-0",
    ];
    let mut lines = Vec::new();
    for _ in 0..200 {
        lines = server
            .log_lines()
            .into_iter()
            .filter_map(|l| l.strip_prefix("[INFO] ").map(str::to_owned))
            .filter(|l| l.starts_with("META ") && !l.contains(" db-0.east."))
            .collect();
        if lines.len() >= want.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(lines, want);
    assert!(server.stop());
}

/// A multicluster primary zone's AXFR lists the imports (A and SRV, headless ones with their
/// per-cluster names), not the cluster's Services.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multicluster_zone_transfers_its_imports() {
    let mut objects = objects();
    objects.push(json!({"apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": "local", "namespace": "demo"},
                        "spec": {"clusterIP": "10.96.0.5"}}));
    let fake = fake_with(&objects).await;
    let corefile = format!(
        "clusterset.local:0 cluster.local:0 {{\n bind 127.0.0.1\n transfer {{\n  to *\n }}\n kubernetes clusterset.local cluster.local {{\n  endpoint {}\n  multicluster clusterset.local\n }}\n}}\n",
        fake.url()
    );
    let running = support::start(&corefile, &support::temp_dir("multicluster-axfr")).await;
    for _ in 0..1500 {
        if support::zone(&running).is_synced() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let addr = running.dns_addrs()[0];
    let out = dig(addr, &["+nocookie", "AXFR", "clusterset.local"]).await;
    let recs = support::dig_records(&out);
    for want in [
        "web.demo.svc.clusterset.local. 5 IN A 10.9.0.1",
        "web.demo.svc.clusterset.local. 5 IN SRV 0 50 80 web.demo.svc.clusterset.local.",
        "db.demo.svc.clusterset.local. 5 IN A 10.2.0.1",
        "db.demo.svc.clusterset.local. 5 IN SRV 0 33 5432 db-0.west.db.demo.svc.clusterset.local.",
        "db-0.west.db.demo.svc.clusterset.local. 5 IN A 10.2.0.1",
    ] {
        assert!(recs.iter().any(|r| r == want), "no {want} in\n{out}");
    }
    assert!(!out.contains("local.demo.svc"), "{out}");
    assert_eq!(recs.iter().filter(|r| r.contains(" IN SOA ")).count(), 2, "{out}");
    running.stop().await.unwrap();
}

/// Without RBAC for ServiceImports (403), the watch fails as any other: the log names the
/// rule to add, and the zone does not sync (a would-be NXDOMAIN is SERVFAIL), unlike a
/// missing CRD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_imports_name_the_rbac_rule() {
    let fake = fake_with(&objects()).await;
    fake.forbid(Resource::ServiceImports);
    let dir = support::temp_dir("multicluster-rbac");
    let path = dir.join("Corefile");
    std::fs::write(
        &path,
        corefile(&fake.url(), "multicluster clusterset.local\n  startup_timeout 0s"),
    )
    .unwrap();
    let mut server = tokio::task::spawn_blocking(move || crate::runtime::cli::Server::start(&path))
        .await
        .unwrap();
    let addr = server.addr;
    let mut rbac = Vec::new();
    for _ in 0..500 {
        rbac = server
            .log_lines()
            .into_iter()
            .filter(|l| l.contains("RBAC: cannot"))
            .collect();
        if !rbac.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(rbac.len(), 1, "{:#?}", server.log_lines());
    assert!(
        rbac[0].contains("serviceimports.multicluster.x-k8s.io at the cluster scope: grant list/watch on serviceimports.multicluster.x-k8s.io"),
        "{}",
        rbac[0]
    );
    assert_eq!(
        records(addr, "A", "nosuch.demo.svc.cluster.local").await.0,
        "SERVFAIL"
    );
    fake.allow(Resource::ServiceImports);
    eventually(addr, "A", "web.demo.svc.clusterset.local", 40, |s, _| {
        s == "NOERROR"
    })
    .await;
    assert_eq!(
        records(addr, "A", "nosuch.demo.svc.cluster.local").await.0,
        "NXDOMAIN"
    );
    assert!(server.stop());
}
