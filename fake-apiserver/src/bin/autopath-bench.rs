//! `autopath-bench`: the autopath benchmarks of cluster-dns, run by `bench/autopath.sh`.
//!
//! 1. Pod index memory: cluster-dns with `pods verified` against the fake API server serving a
//!    synthetic cluster with no Pods, then the same cluster with N Pods (150,000 by default,
//!    written as a Deployment's pods are: labels, owner, node, container, conditions, podIPs);
//!    steady RSS 2 s after sync, and the difference.
//! 2. Lookups per second of the search-path mix a pod sends (kubelet's resolv.conf: `search
//!    ns-0.svc.cluster.local svc.cluster.local cluster.local`, `ndots:5`, A and AAAA per name),
//!    with `autopath @kubernetes` and without, through kubeadm's `forward` + `cache` to a local
//!    Unbound authoritative for the outside names. dnsperf (from the client pod's address,
//!    127.0.0.1) sends the queries each lookup costs: without autopath the whole walk, with it
//!    the first pair. Lookups/s = QPS x lookups / queries in the file. Server on CPU 0 (one
//!    worker), dnsperf on CPU 1; three alternating runs each, medians. The goal is judged on
//!    the pod mix ([`Mix::Pod`]); a mix of outside names only runs beside it. Each round also
//!    reports the CPU busy share of the server and of dnsperf (which side bounds it) and the
//!    server's CPU time per lookup, whose ratio does not depend on that side.
//!
//! With `--kubeadm-cache` both servers' `cache` is today's kubeadm block (`cache 30 { disable
//! success cluster.local; disable denial cluster.local }`) instead of a bare `cache 30`: the
//! cluster zone's answers then never come from the cache, and a walk's tries in it are answered
//! by `kubernetes` each time.
//!
//! Usage: `autopath-bench PATH/TO/cluster-dns UNBOUND_PORT [--pods N] [--duration S] [--repeats R]
//! [--kubeadm-cache]`

#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use fake_apiserver::bench::{
    Dns, Spawned, children_cpu_time, cpu_time, dnsperf, median, spawn_cluster_dns, status_kb, usize_arg,
};
use fake_apiserver::synthetic::{self, SyntheticCluster};
use fake_apiserver::{FakeApiServer, Options};
use serde_json::{Value, json};

const NXDOMAIN: u8 = 3;
const NOERROR: u8 = 0;

/// The synthetic cluster both parts serve (the pods are what part 1 measures).
fn cluster() -> SyntheticCluster {
    SyntheticCluster {
        services: 1_000,
        endpoints: 10_000,
        ..SyntheticCluster::default()
    }
}

/// Pod `n` as the API server returns a Deployment's pod (the fields a real list carries, so the
/// list and decode cost is realistic; the index keeps only its IP and namespace).
fn pod(n: usize, namespaces: usize) -> Value {
    let ns = format!("ns-{}", n % namespaces);
    let ip = synthetic::pod_ip(n).to_string();
    let app = format!("app-{}", n / 10);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{app}-7c9f8b6d5-{n:05x}"), "namespace": ns,
            "uid": format!("0c2b9f6e-0000-4000-8000-{n:012x}"),
            "labels": {"app": app, "pod-template-hash": "7c9f8b6d5"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-7c9f8b6d5"),
                                  "uid": "5d1b7f6e-0000-4000-8000-000000000000", "controller": true, "blockOwnerDeletion": true}],
            "creationTimestamp": "2026-11-01T10:00:00Z"
        },
        "spec": {
            "nodeName": format!("node-{}", n % 5000),
            "serviceAccountName": "default",
            "containers": [{"name": "app", "image": "registry.example/app:1.2.3",
                            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]
        },
        "status": {
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "hostIP": format!("192.168.{}.{}", (n % 5000) / 250, (n % 5000) % 250 + 1),
            "conditions": [
                {"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"}, {"type": "PodScheduled", "status": "True"}
            ],
            "startTime": "2026-11-01T10:00:01Z"
        }
    })
}

/// The client pod: 127.0.0.1 (dnsperf's address) in ns-0.
fn client_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "client", "namespace": "ns-0"},
           "status": {"phase": "Running", "podIP": "127.0.0.1"}})
}

fn start_fake(rt: &tokio::runtime::Runtime, pods: usize) -> FakeApiServer {
    let fake = rt
        .block_on(FakeApiServer::start_with(Options {
            bookmark_interval: Duration::from_secs(60),
            ..Options::default()
        }))
        .unwrap();
    let c = cluster();
    fake.load(c.objects()).unwrap();
    fake.load((0..pods).map(|n| pod(n, c.namespaces))).unwrap();
    fake.load([client_pod()]).unwrap();
    fake
}

/// Starts cluster-dns with `corefile` text; waits for the zone to sync.
fn start_dns(bin: &str, dir: &std::path::Path, tag: &str, corefile: &str) -> (Spawned, Dns) {
    let path = dir.join(format!("Corefile.{tag}"));
    std::fs::write(&path, corefile).unwrap();
    let spawned = spawn_cluster_dns(bin, &path).unwrap();
    let mut dns = Dns::new(spawned.addr).unwrap();
    let t0 = Instant::now();
    while dns.query("nosuch.ns-0.svc.cluster.local").map(|r| r.0) != Some(NXDOMAIN) {
        assert!(t0.elapsed() < Duration::from_secs(300), "not synced after 300 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    (spawned, dns)
}

fn kubernetes_block(url: &str) -> String {
    format!(
        " kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  endpoint {url}\n  pods verified\n  fallthrough in-addr.arpa ip6.arpa\n  ttl 30\n }}\n"
    )
}

/// Resident KiB of the process's `[heap]` mapping (glibc's main arena; the runtime threads'
/// arenas are other anonymous mappings).
fn heap_kb(pid: u32) -> u64 {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut in_heap = false;
    for line in smaps.lines() {
        if line.contains(" [heap]") {
            in_heap = true;
        } else if in_heap && let Some(v) = line.strip_prefix("Rss:") {
            return v
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
        }
    }
    0
}

/// Part 1: steady RSS with no pods and with `pods`.
fn memory(bin: &str, dir: &std::path::Path, rt: &tokio::runtime::Runtime, pods: usize) {
    println!("\n## 1. Pod index memory (`pods verified`)");
    let mut rss = Vec::new();
    for n in [0, pods] {
        let fake = start_fake(rt, n);
        let corefile = format!(".:0 {{\n bind 127.0.0.1\n{}}}\n", kubernetes_block(&fake.url()));
        let (mut s, mut dns) = start_dns(bin, dir, &format!("mem{n}"), &corefile);
        if n > 0 {
            // The last pod is in the index.
            let last = synthetic::pod_ip(n - 1).to_string().replace('.', "-");
            let name = format!("{last}.ns-{}.pod.cluster.local", (n - 1) % cluster().namespaces);
            assert_eq!(dns.query(&name).map(|r| r.0), Some(NOERROR), "{name}");
        }
        std::thread::sleep(Duration::from_secs(2));
        let kb = status_kb(s.child.id(), "VmRSS:");
        let heap = heap_kb(s.child.id());
        println!(
            "{n} pods: steady RSS {:.1} MB (of it the main heap {:.1} MB, other anonymous {:.1} MB)",
            kb as f64 / 1024.0,
            heap as f64 / 1024.0,
            status_kb(s.child.id(), "RssAnon:").saturating_sub(heap) as f64 / 1024.0
        );
        rss.push(kb);
        let _ = s.child.kill();
        let _ = s.child.wait();
        drop(fake);
    }
    let added = rss[1].saturating_sub(rss[0]) as f64 / 1024.0;
    println!(
        "{pods} pods add {added:.1} MB ({:.0} bytes a pod); goal < 10 MB",
        added * 1024.0 * 1024.0 / pods.max(1) as f64
    );
}

/// The queries of one lookup of `name` from a pod of ns-0: the whole search walk (without
/// autopath) or its first pair (with).
fn lookup(out: &mut String, name: &str, walk: bool) -> usize {
    let search = ["ns-0.svc.cluster.local", "svc.cluster.local", "cluster.local"];
    let mut names: Vec<String> = search.iter().map(|s| format!("{name}.{s}")).collect();
    names.push(name.to_owned());
    // Stops where the walk finds the name: `exists(i)` is the first search index that answers.
    let found = if name.starts_with("outside") {
        3
    } else if name.contains('.') {
        1
    } else {
        0
    };
    let asked = if walk { found + 1 } else { 1 };
    for n in names.iter().take(asked) {
        let _ = writeln!(out, "{n} A\n{n} AAAA");
    }
    asked * 2
}

/// A mix of lookups a pod of ns-0 makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mix {
    /// Per 4 lookups, 2 of outside names, 1 of another namespace's Service, 1 of the pod's own
    /// namespace: the mix the goal is judged on.
    Pod,
    /// Outside names only: what autopath saves the most on (8 queries a lookup without it, 2
    /// with), shown beside the pod mix.
    Outside,
}

impl Mix {
    fn label(self) -> &'static str {
        match self {
            Mix::Pod => "the pod mix (2 outside : 1 other namespace : 1 own namespace)",
            Mix::Outside => "outside names only",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Mix::Pod => "pod",
            Mix::Outside => "outside",
        }
    }
}

/// The query file of `which` (the whole walks when `walk`), its lookups and its queries.
fn mix(which: Mix, walk: bool) -> (String, usize, usize) {
    let c = cluster();
    let mut out = String::new();
    let (mut lookups, mut queries) = (0, 0);
    for i in 0..2000 {
        let name = match (which, i % 4) {
            (Mix::Outside, _) | (Mix::Pod, 0 | 1) => format!("outside{}.example.net", i % 500),
            (Mix::Pod, 2) => {
                let j = (i * 7) % c.services;
                let j = if j.is_multiple_of(c.namespaces) { j + 1 } else { j };
                format!(
                    "{}.{}",
                    synthetic::service_name(j),
                    synthetic::namespace_of(&c, j)
                )
            }
            (Mix::Pod, _) => synthetic::service_name((i * 100) % c.services),
        };
        queries += lookup(&mut out, &name, walk);
        lookups += 1;
    }
    (out, lookups, queries)
}

/// What one round of dnsperf against one server measured.
#[derive(Clone, Copy)]
struct Round {
    lookups_per_s: f64,
    /// The server's CPU busy share (CPU time over wall time, %): near 100 the server bounds
    /// the round, below it the load generator does.
    server_busy: f64,
    /// dnsperf's own busy share (it runs alone on CPU 1, %): near 100 it is the bound.
    dnsperf_busy: f64,
    /// The server's CPU time per lookup answered (µs): what a lookup costs the server whichever
    /// side bounds the round.
    cpu_per_lookup: f64,
}

/// Part 2: lookups per second with and without autopath.
fn throughput(
    bin: &str,
    dir: &std::path::Path,
    rt: &tokio::runtime::Runtime,
    upstream: u16,
    secs: usize,
    repeats: usize,
    cache: &str,
) {
    println!("\n## 2. Lookups per second of the search-path mix");
    println!("cache block: {}", cache.replace('\n', " "));
    let fake = start_fake(rt, 0);
    let mut servers = Vec::new();
    for (tag, autopath) in [("with", " autopath @kubernetes\n"), ("without", "")] {
        let corefile = format!(
            ".:0 {{\n bind 127.0.0.1\n errors\n{autopath}{} forward . 127.0.0.1:{upstream}\n {cache}\n}}\n",
            kubernetes_block(&fake.url())
        );
        let (s, _) = start_dns(bin, dir, tag, &corefile);
        let _ = Command::new("taskset")
            .args(["-a", "-p", "-c", "0"])
            .arg(s.child.id().to_string())
            .output();
        servers.push((tag, s));
    }
    // (mix, server index, query file, lookups per query), both servers for each mix.
    let mut runs = Vec::new();
    for which in [Mix::Pod, Mix::Outside] {
        for (i, (tag, s)) in servers.iter().enumerate() {
            let (text, lookups, queries) = mix(which, *tag == "without");
            let file = dir.join(format!("mix-{}-{tag}.txt", which.tag()));
            std::fs::write(&file, text).unwrap();
            println!(
                "{}, {tag} autopath: {lookups} lookups cost {queries} queries ({:.2} a lookup)",
                which.label(),
                queries as f64 / lookups as f64
            );
            // Warm the cache and the zone's answers.
            dnsperf(s.addr.port(), &file, 2);
            runs.push((which, i, file, lookups as f64 / queries as f64));
        }
    }
    // What each round of each run measured, in the order of `runs`.
    let mut rounds: Vec<Vec<Round>> = vec![Vec::new(); runs.len()];
    for _ in 0..repeats {
        for (k, (_, i, file, per_query)) in runs.iter().enumerate() {
            let server = &servers[*i].1;
            let (cpu, client, wall) = (cpu_time(server.child.id()), children_cpu_time(), Instant::now());
            let lookups_per_s = dnsperf(server.addr.port(), file, secs) * per_query;
            let used = cpu_time(server.child.id()).saturating_sub(cpu).as_secs_f64();
            let client = children_cpu_time().saturating_sub(client).as_secs_f64();
            let wall = wall.elapsed().as_secs_f64();
            rounds[k].push(Round {
                lookups_per_s,
                server_busy: 100.0 * used / wall,
                dnsperf_busy: 100.0 * client / wall,
                cpu_per_lookup: 1e6 * used / (lookups_per_s * secs as f64).max(1.0),
            });
        }
    }
    for which in [Mix::Pod, Mix::Outside] {
        println!("\n{}:", which.label());
        // (lookups/s, server CPU a lookup, lookups a query) of the run with autopath, then without.
        let mut medians = Vec::new();
        for (k, (_, i, _, per_query)) in runs.iter().enumerate().filter(|(_, r)| r.0 == which) {
            let of = |field: fn(&Round) -> f64| median(rounds[k].iter().map(field).collect());
            let (m, cost) = (of(|r| r.lookups_per_s), of(|r| r.cpu_per_lookup));
            println!(
                "{} autopath: lookups/s median {m:.0} (runs {:?}; QPS median {:.0}; CPU busy medians: server {:.0}%, dnsperf {:.0}%; server CPU a lookup median {cost:.1} us)",
                servers[*i].0,
                rounds[k]
                    .iter()
                    .map(|r| r.lookups_per_s.round())
                    .collect::<Vec<_>>(),
                m / per_query,
                of(|r| r.server_busy),
                of(|r| r.dnsperf_busy)
            );
            medians.push((m, cost, *per_query));
        }
        let goal = if which == Mix::Pod { " (goal >= 3x)" } else { "" };
        // A walked question costs the server at least what a plain one does (the same packet in
        // and out, plus the walk), so neither ratio can pass the cut in queries when both
        // rounds are bound alike.
        let ((with, with_cost, with_per_query), (without, without_cost, without_per_query)) =
            (medians[0], medians[1]);
        println!(
            "ratio with/without: {:.2}x{goal}; by the server's CPU a lookup: {:.2}x; queries a lookup cut {:.2}x",
            with / without,
            without_cost / with_cost,
            with_per_query / without_per_query
        );
    }
    for (_, mut s) in servers {
        let _ = s.child.kill();
        let _ = s.child.wait();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(bin), Some(upstream)) = (
        args.get(1).cloned(),
        args.get(2).and_then(|p| p.parse::<u16>().ok()),
    ) else {
        eprintln!(
            "usage: autopath-bench PATH/TO/cluster-dns UNBOUND_PORT [--pods N] [--duration S] [--repeats R] [--kubeadm-cache]"
        );
        std::process::exit(2);
    };
    let pods = usize_arg(&args, "--pods", 150_000);
    let secs = usize_arg(&args, "--duration", 10);
    let repeats = usize_arg(&args, "--repeats", 3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("autopath-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = cluster();
    println!(
        "cluster: {} Services in {} namespaces, {} endpoints; client pod 127.0.0.1 in ns-0",
        c.services, c.namespaces, c.endpoints
    );
    // `--repeats 0`: the memory part only.
    if repeats > 0 {
        let cache = if args.iter().any(|a| a == "--kubeadm-cache") {
            "cache 30 {\n  disable success cluster.local\n  disable denial cluster.local\n }"
        } else {
            "cache 30"
        };
        throughput(&bin, &dir, &rt, upstream, secs, repeats, cache);
    }
    memory(&bin, &dir, &rt, pods);
}
