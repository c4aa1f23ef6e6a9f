//! `nodelocal-bench`: the API load and memory of cluster-dns on every node (issue 33), run by
//! `bench/nodelocal-api.sh`.
//!
//! For each node count N it serves a synthetic cluster from the fake API server (in this
//! process) and starts N real `cluster-dns` processes (the binary given as the first argument),
//! each one simulated node, then counts what the API server serves:
//! - `watch` mode: every agent runs kubeadm's Corefile (`kubernetes ... { pods insecure }`,
//!   `forward`, `cache`, `health`, `ready`, `prometheus`, ...) pointed at the fake. Counted: the
//!   requests, the watches open after every agent is ready, the bytes of the initial sync, of a
//!   churn of C changes (half new Services with a slice of 10 endpoints, half rewrites of an
//!   existing slice of 100 with one endpoint flipped, as the EndpointSlice controller writes
//!   them), and of an idle period (bookmarks); per resource, so the Services + EndpointSlices
//!   part (what kube-proxy watches on every node) can be read off.
//! - `forward` mode: one central `cluster-dns` with that Corefile, and N agents with only
//!   `forward` (over TCP) to it and `cache 5`: the agents' API requests (none) and memory.
//!
//! - `fabric` mode (issue 46): one central `cluster-dns` with that Corefile plus `transfer`
//!   (NOTIFY to every agent), and N agents with only `secondary` (the cluster zone transferred
//!   from the central server, AXFR then IXFR on NOTIFY) and `cache 30`: the agents' API
//!   requests (none), the time until every agent answers the last change of a churn, and
//!   memory.
//!
//! The RSS (`VmRSS`) of every agent is taken after sync and after the churn.
//!
//! Usage: `nodelocal-bench PATH/TO/cluster-dns [--nodes 1,10,50] [--services N] [--endpoints M]
//! [--churn C] [--idle SECONDS] [--mode watch|forward|fabric|both|all]` (`both`: watch and
//! forward; `all`: the three).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_apiserver::bench::{Dns, Spawned, spawn_cluster_dns, status_kb, usize_arg};
use fake_apiserver::synthetic::{self, SyntheticCluster};
use fake_apiserver::{FakeApiServer, Options, Resource};
use serde_json::Value;

const NXDOMAIN: u8 = 3;
const NOERROR: u8 = 0;

/// The lines every Corefile here starts with: loopback, and the probes on free ports.
const PROBES: &str = "    bind 127.0.0.1
    errors
    health 127.0.0.1:0 {
       lameduck 5s
    }
    ready 127.0.0.1:0
";

/// kubeadm's default Corefile (config/Corefile) on loopback with free ports, watching `url`.
fn kubeadm_corefile(url: &str) -> String {
    format!(
        ".:0 {{
{PROBES}    kubernetes cluster.local in-addr.arpa ip6.arpa {{
       endpoint {url}
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }}
    prometheus 127.0.0.1:0
    forward . /etc/resolv.conf {{
       max_concurrent 1000
    }}
    cache 30 {{
       disable success cluster.local
       disable denial cluster.local
    }}
    loop
    reload
    loadbalance
}}
"
    )
}

/// The forward-mode agent (deploy/node-local/prefer-same-node-forward.yaml's cluster block) on
/// loopback, forwarding to the central server at `central`.
fn forward_corefile(central: std::net::SocketAddr) -> String {
    format!(
        ".:0 {{
{PROBES}    prometheus 127.0.0.1:0
    forward . {central} {{
       force_tcp
    }}
    cache 5
    loop
    reload
}}
"
    )
}

/// The fabric-mode agent (deploy/node-local/prefer-same-node-fabric.yaml's cluster block) on
/// loopback, following the cluster zone from `central`, its snapshot in `snapshots`.
fn fabric_corefile(central: std::net::SocketAddr, snapshots: &Path) -> String {
    format!(
        "cluster.local:0 {{
{PROBES}    prometheus 127.0.0.1:0
    cache 30
    secondary {{
       transfer from {central}
       snapshot {}
    }}
    reload
}}
",
        snapshots.display()
    )
}

/// kubeadm's Corefile on `port` with the fabric mode's `transfer` block, NOTIFY going to
/// `agents`.
fn central_fabric_corefile(url: &str, port: u16, agents: &[std::net::SocketAddr]) -> String {
    let to: Vec<String> = agents.iter().map(ToString::to_string).collect();
    kubeadm_corefile(url)
        .replacen(".:0 {", &format!(".:{port} {{"), 1)
        .replacen(
            "    kubernetes cluster.local",
            &format!(
                "    transfer cluster.local {{\n       to * {}\n    }}\n    kubernetes cluster.local",
                to.join(" ")
            ),
            1,
        )
}

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// The kinds the fake serves.
const KINDS: usize = Resource::ALL.len();

fn kib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0
}

/// Bytes served so far per resource, in [`Resource::ALL`]'s order: namespaces, services,
/// endpointslices, pods, then the kinds no agent here watches (serviceimports, nodes).
fn served(fake: &FakeApiServer) -> [u64; KINDS] {
    Resource::ALL.map(|r| fake.served_bytes(r))
}

fn minus(a: [u64; KINDS], b: [u64; KINDS]) -> [u64; KINDS] {
    std::array::from_fn(|i| a[i] - b[i])
}

/// One table row: the bytes of a phase in all, per node, and per node split into what
/// kube-proxy watches too (Services + EndpointSlices) and the rest (Namespaces, Pods).
fn describe(label: &str, bytes: [u64; KINDS], nodes: usize) {
    let n = nodes.max(1) as u64;
    let total: u64 = bytes.iter().sum();
    println!(
        "| {label} | {:.1} KiB | {:.1} KiB | {:.1} KiB | {:.1} KiB |",
        kib(total),
        kib(total / n),
        kib((bytes[1] + bytes[2]) / n),
        kib((bytes[0] + bytes[3]) / n),
    );
}

/// min / median / max / sum of the agents' VmRSS, in MiB.
fn rss_line(what: &str, pids: &[u32]) {
    let mut kb: Vec<u64> = pids.iter().map(|p| status_kb(*p, "VmRSS:")).collect();
    kb.sort_unstable();
    if kb.is_empty() {
        return;
    }
    println!(
        "RSS of the agents {what}: min {:.1} MiB, median {:.1} MiB, max {:.1} MiB, sum {:.1} MiB over {}",
        mib(kb[0]),
        mib(kb[kb.len() / 2]),
        mib(kb[kb.len() - 1]),
        mib(kb.iter().sum()),
        kb.len()
    );
}

/// Starts `n` agents with the Corefile `corefile(i)` written under `dir`.
fn start_agents(bin: &str, dir: &Path, n: usize, corefile: impl Fn(usize) -> String) -> Vec<Spawned> {
    (0..n)
        .map(|i| {
            let path: PathBuf = dir.join(format!("Corefile.{i}"));
            std::fs::write(&path, corefile(i)).unwrap();
            spawn_cluster_dns(bin, &path).unwrap_or_else(|e| panic!("agent {i}: {e}"))
        })
        .collect()
}

/// Waits (up to 120 s each) until every agent answers `name` with `want`.
fn wait_all(agents: &[Spawned], name: &str, want: u8) {
    for (i, a) in agents.iter().enumerate() {
        let mut dns = Dns::new(a.addr).unwrap();
        dns.wait_rcode(name, want, Duration::from_millis(2), Duration::from_secs(120))
            .unwrap_or_else(|| panic!("agent {i}: {name} never answered rcode {want}"));
    }
}

fn stop(agents: Vec<Spawned>) {
    for mut a in agents {
        let _ = a.child.kill();
        let _ = a.child.wait();
    }
}

/// Applies `changes` changes: even ones a new Service `churn-K` in ns-0 with a slice of 10
/// endpoints, odd ones a rewrite of an existing slice with one endpoint's readiness flipped.
/// Returns the name of the last new Service.
fn churn(fake: &FakeApiServer, cluster: &SyntheticCluster, round: usize, changes: usize) -> Option<String> {
    let mut last = None;
    for k in 0..changes {
        if k % 2 == 0 {
            let name = format!("churn-{round}-{k}");
            let ip = std::net::Ipv4Addr::new(
                10,
                99,
                u8::try_from(k / 250).unwrap_or(0),
                u8::try_from(k % 250 + 1).unwrap_or(1),
            );
            fake.create(synthetic::service("ns-0", &name, Some(ip))).unwrap();
            let eps = (0..10)
                .map(|e| {
                    let ip = std::net::Ipv4Addr::new(
                        10,
                        98,
                        u8::try_from(k / 25).unwrap_or(0),
                        u8::try_from((k % 25) * 10 + e + 1).unwrap_or(1),
                    );
                    synthetic::endpoint(&name, e, ip, false, true)
                })
                .collect();
            fake.create(synthetic::slice("ns-0", &name, 0, eps)).unwrap();
            last = Some(name);
        } else {
            let j = (k * 7919) % cluster.slice_count().max(1);
            let owner = cluster.slice_owner(j);
            let ns = synthetic::namespace_of(cluster, owner);
            let slice_name = format!("{}-{j:05}", synthetic::service_name(owner));
            let Some(mut slice) = fake.get(Resource::EndpointSlices, &ns, &slice_name) else {
                continue;
            };
            if let Some(ep) = slice["endpoints"].get_mut(0) {
                let ready = ep["conditions"]["ready"].as_bool().unwrap_or(true);
                ep["conditions"]["ready"] = Value::Bool(!ready);
                ep["conditions"]["serving"] = Value::Bool(!ready);
            }
            fake.update(slice).unwrap();
        }
    }
    last
}

fn count_requests(fake: &FakeApiServer) -> (usize, usize) {
    let reqs = fake.requests();
    let watches = reqs
        .iter()
        .filter(|r| r.contains("watch=true") || r.contains("watch=1"))
        .count();
    (reqs.len() - watches, watches)
}

#[allow(clippy::too_many_lines)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(bin) = args.get(1).filter(|a| !a.starts_with("--")).cloned() else {
        eprintln!(
            "usage: nodelocal-bench PATH/TO/cluster-dns [--nodes 1,10,50] [--services N] [--endpoints M] [--churn C] [--idle S] [--mode watch|forward|fabric|both|all]"
        );
        std::process::exit(2);
    };
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let nodes: Vec<usize> = opt("--nodes")
        .unwrap_or_else(|| "1,10,50".to_owned())
        .split(',')
        .map(|n| n.trim().parse().expect("--nodes takes numbers"))
        .collect();
    let cluster = SyntheticCluster {
        services: usize_arg(&args, "--services", 1_000),
        endpoints: usize_arg(&args, "--endpoints", 10_000),
        ..SyntheticCluster::default()
    };
    let changes = usize_arg(&args, "--churn", 100);
    let idle = Duration::from_secs(u64::try_from(usize_arg(&args, "--idle", 10)).unwrap_or(10));
    let mode = opt("--mode").unwrap_or_else(|| "both".to_owned());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let dir = std::env::temp_dir().join(format!("nodelocal-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "cluster: {} Services ({} headless) in {} namespaces, {} endpoints in {} EndpointSlices of {}; churn {} changes; idle {} s; bookmarks every 60 s",
        cluster.services,
        (0..cluster.services).filter(|i| cluster.is_headless(*i)).count(),
        cluster.namespaces,
        cluster.endpoints,
        cluster.slice_count(),
        cluster.per_slice,
        changes,
        idle.as_secs()
    );

    // A fresh API server for each run, so no stream of an earlier run is counted.
    let new_fake = || {
        let fake = rt
            .block_on(FakeApiServer::start_with(Options {
                bookmark_interval: Duration::from_secs(60),
                ..Options::default()
            }))
            .unwrap();
        fake.load(cluster.objects()).unwrap();
        fake
    };
    for &n in &nodes {
        if mode == "watch" || mode == "both" || mode == "all" {
            let fake = new_fake();
            let url = fake.url();
            println!(
                "\n## watch mode, {n} node(s): every agent runs kubeadm's Corefile against the API server"
            );
            let t = Instant::now();
            let agents = start_agents(&bin, &dir, n, |_| kubeadm_corefile(&url));
            wait_all(&agents, "nosuch.ns-0.svc.cluster.local", NXDOMAIN);
            wait_all(&agents, "svc-1.ns-1.svc.cluster.local", NOERROR);
            let synced = t.elapsed();
            std::thread::sleep(Duration::from_secs(2));
            let pids: Vec<u32> = agents.iter().map(|a| a.child.id()).collect();
            let sync = served(&fake);
            let (lists, watches) = count_requests(&fake);
            println!(
                "all {n} ready after {:.1} s; requests: {lists} others (version, lists), {watches} watch requests; watches open: {} ({:.1} per node)",
                synced.as_secs_f64(),
                fake.open_watches(),
                fake.open_watches() as f64 / n as f64
            );
            rss_line("after sync", &pids);
            println!(
                "| phase | served, all nodes | per node | per node: Services + EndpointSlices (kube-proxy's objects) | per node: Namespaces + Pods |"
            );
            println!("| --- | ---: | ---: | ---: | ---: |");
            describe("initial sync", sync, n);
            let before = served(&fake);
            let t = Instant::now();
            if let Some(last) = churn(&fake, &cluster, 0, changes) {
                wait_all(&agents, &format!("{last}.ns-0.svc.cluster.local"), NOERROR);
            }
            let churned = t.elapsed();
            std::thread::sleep(Duration::from_secs(1));
            let churn_bytes = minus(served(&fake), before);
            describe(&format!("churn of {changes} changes"), churn_bytes, n);
            let before = served(&fake);
            std::thread::sleep(idle);
            describe(
                &format!("idle {} s", idle.as_secs()),
                minus(served(&fake), before),
                n,
            );
            println!(
                "churn seen by every agent after {:.2} s; watches open after: {}",
                churned.as_secs_f64(),
                fake.open_watches()
            );
            rss_line("after the churn", &pids);
            stop(agents);
        }

        if mode == "forward" || mode == "both" || mode == "all" {
            println!(
                "\n## forward mode, {n} node(s): one central server watches, the agents only forward to it"
            );
            let fake = new_fake();
            let url = fake.url();
            let central_core = dir.join("Corefile.central");
            std::fs::write(&central_core, kubeadm_corefile(&url)).unwrap();
            let before = served(&fake);
            let (lists0, watches0) = count_requests(&fake);
            let central = spawn_cluster_dns(&bin, &central_core).unwrap();
            wait_all(
                std::slice::from_ref(&central),
                "svc-1.ns-1.svc.cluster.local",
                NOERROR,
            );
            std::thread::sleep(Duration::from_secs(1));
            let central_bytes = minus(served(&fake), before);
            let central_watches = fake.open_watches();
            let (lists1, watches1) = count_requests(&fake);
            let agents = start_agents(&bin, &dir, n, |_| forward_corefile(central.addr));
            wait_all(&agents, "svc-1.ns-1.svc.cluster.local", NOERROR);
            wait_all(&agents, "nosuch.ns-0.svc.cluster.local", NXDOMAIN);
            std::thread::sleep(Duration::from_secs(2));
            let pids: Vec<u32> = agents.iter().map(|a| a.child.id()).collect();
            let (lists2, watches2) = count_requests(&fake);
            println!(
                "central: {} other requests (version, lists), {} watch requests, {} watches open, {:.1} KiB at sync; the {n} agents: {} other requests, {} watch requests, {} more watches open",
                lists1 - lists0,
                watches1 - watches0,
                central_watches,
                kib(central_bytes.iter().sum()),
                lists2 - lists1,
                watches2 - watches1,
                fake.open_watches() - central_watches
            );
            let before = served(&fake);
            let (lists3, watches3) = count_requests(&fake);
            if let Some(last) = churn(&fake, &cluster, 1, changes) {
                wait_all(&agents, &format!("{last}.ns-0.svc.cluster.local"), NOERROR);
            }
            let (lists4, watches4) = count_requests(&fake);
            println!(
                "churn of {changes} changes: {:.1} KiB served in all (the central server's watches), {} new requests",
                kib(minus(served(&fake), before).iter().sum()),
                (lists4 + watches4) - (lists3 + watches3)
            );
            rss_line("(forward only) after sync and the churn", &pids);
            println!(
                "RSS of the central server: {:.1} MiB",
                mib(status_kb(central.child.id(), "VmRSS:"))
            );
            stop(agents);
            stop(vec![central]);
        }

        if mode == "fabric" || mode == "all" {
            println!(
                "\n## fabric mode, {n} node(s): one central server watches, the agents follow the cluster zone by IXFR and NOTIFY"
            );
            let fake = new_fake();
            let url = fake.url();
            // The agents first (they retry until the central server is up), so the central
            // server's `to` can name them.
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let central_addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let t = Instant::now();
            let agents = start_agents(&bin, &dir, n, |i| {
                fabric_corefile(central_addr, &dir.join(format!("snapshots-{i}")))
            });
            let addrs: Vec<std::net::SocketAddr> = agents.iter().map(|a| a.addr).collect();
            let central_core = dir.join("Corefile.central-fabric");
            std::fs::write(&central_core, central_fabric_corefile(&url, port, &addrs)).unwrap();
            let central = spawn_cluster_dns(&bin, &central_core).unwrap();
            wait_all(&agents, "svc-1.ns-1.svc.cluster.local", NOERROR);
            wait_all(&agents, "nosuch.ns-0.svc.cluster.local", NXDOMAIN);
            let synced = t.elapsed();
            std::thread::sleep(Duration::from_secs(2));
            let pids: Vec<u32> = agents.iter().map(|a| a.child.id()).collect();
            let (lists, watches) = count_requests(&fake);
            println!(
                "all {n} agents hold the zone {:.1} s after they started (their first tries back off until the central server is up); API requests in all: {lists} others (version, lists), {watches} watch requests; watches open: {} (the central server's)",
                synced.as_secs_f64(),
                fake.open_watches()
            );
            rss_line("(fabric) after sync", &pids);
            let t = Instant::now();
            let (lists0, watches0) = count_requests(&fake);
            if let Some(last) = churn(&fake, &cluster, 2, changes) {
                wait_all(&agents, &format!("{last}.ns-0.svc.cluster.local"), NOERROR);
            }
            let churned = t.elapsed();
            let (lists1, watches1) = count_requests(&fake);
            println!(
                "churn of {changes} changes: its last new Service answered by every agent after {:.2} s; {} new API requests",
                churned.as_secs_f64(),
                (lists1 + watches1) - (lists0 + watches0)
            );
            std::thread::sleep(Duration::from_secs(1));
            rss_line("(fabric) after the churn", &pids);
            println!(
                "RSS of the central server: {:.1} MiB",
                mib(status_kb(central.child.id(), "VmRSS:"))
            );
            stop(agents);
            stop(vec![central]);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
