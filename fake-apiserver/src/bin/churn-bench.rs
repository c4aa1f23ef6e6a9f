//! `churn-bench`: saturation QPS of cluster-dns while the API server changes EndpointSlices,
//! against the same run with no zone change; run by `bench/churn.sh` (issue 15, churn).
//!
//! The fake API server serves a synthetic cluster (1,000 Services in 20 namespaces, one in four
//! headless, one EndpointSlice of 10 endpoints each). dnsperf asks a fixed mix of stable names
//! (ClusterIP A, headless A, SRV, the ClusterIPs' PTR, NXDOMAIN) while a thread makes `--rate`
//! API writes a second to 50 other headless Services' slices, in one of three modes:
//!
//! - `idle`: no writes;
//! - `control`: the same writes, changing a label only (watch events, no DNS change);
//! - `churn`: each write replaces one endpoint's address (a DNS change to that Service).
//!
//! The server runs twice, with the answer memo on and off (`CLUSTER_DNS_ANSWER_MEMO=off`).
//! Server on CPU 0 (one UDP worker, one tokio thread), dnsperf and the writer on CPU 1;
//! `--repeats` rounds of `--duration` seconds over the modes, medians.
//!
//! Usage: `churn-bench PATH/TO/cluster-dns [--rate N] [--duration S] [--repeats R]`

#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fake_apiserver::bench::{Dns, Spawned, dnsperf, median, spawn_cluster_dns_with, usize_arg};
use fake_apiserver::synthetic::{self, SyntheticCluster};
use fake_apiserver::{FakeApiServer, Options};
use serde_json::Value;

const NXDOMAIN: u8 = 3;
/// Headless Services whose slices the writer changes (not in the query mix).
const CHURNED: usize = 50;

fn cluster() -> SyntheticCluster {
    SyntheticCluster {
        services: 1_000,
        endpoints: 10_000,
        per_slice: 10,
        headless_every: 4,
        namespaces: 20,
    }
}

/// The churned Services: the last `CHURNED` headless ones.
fn churned(c: &SyntheticCluster) -> Vec<usize> {
    (0..c.services)
        .rev()
        .filter(|i| c.is_headless(*i))
        .take(CHURNED)
        .collect()
}

/// The query mix over Services outside the churned set.
fn mix(c: &SyntheticCluster) -> String {
    let skip = churned(c);
    let mut out = String::new();
    let stable: Vec<usize> = (0..c.services).filter(|i| !skip.contains(i)).collect();
    for (n, &i) in stable.iter().enumerate() {
        let name = format!(
            "{}.{}.svc.cluster.local",
            synthetic::service_name(i),
            synthetic::namespace_of(c, i)
        );
        let _ = writeln!(out, "{name} A");
        if n % 4 == 0 {
            let _ = writeln!(out, "_http._tcp.{name} SRV");
        }
        if !c.is_headless(i) && n % 4 == 1 {
            let o = synthetic::cluster_ip(i).octets();
            let _ = writeln!(out, "{}.{}.{}.{}.in-addr.arpa PTR", o[3], o[2], o[1], o[0]);
        }
        if n % 8 == 2 {
            let _ = writeln!(
                out,
                "nosuch-{n}.{}.svc.cluster.local A",
                synthetic::namespace_of(c, i)
            );
        }
    }
    out
}

/// The slice of Service `i` after write number `k`: `dns_change` moves one endpoint's address,
/// else only a label changes.
fn slice(c: &SyntheticCluster, i: usize, k: u64, dns_change: bool) -> Value {
    let ns = synthetic::namespace_of(c, i);
    let name = synthetic::service_name(i);
    let eps = (0..10)
        .map(|e| {
            let base = u32::from(synthetic::pod_ip(i * 10 + e));
            // Churned: the first endpoint moves to a fresh address in 10.200.0.0/16 each write.
            let ip = if dns_change && e == 0 {
                Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 200, 0, 0)) + (k % 60_000) as u32)
            } else {
                Ipv4Addr::from(base)
            };
            synthetic::endpoint(&name, i * 10 + e, ip, true, true)
        })
        .collect();
    let mut s = synthetic::slice(&ns, &name, 0, eps);
    s["metadata"]["labels"]["bench-write"] = Value::String(k.to_string());
    s
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Idle,
    Control,
    Churn,
}

/// Writes `rate` slices a second in `mode` until `stop`; how many it wrote.
fn writer(fake: Arc<FakeApiServer>, mode: Mode, rate: u64, stop: Arc<AtomicBool>, count: Arc<AtomicU64>) {
    if mode == Mode::Idle {
        return;
    }
    let c = cluster();
    let targets = churned(&c);
    let start = Instant::now();
    let mut k = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = start + Duration::from_secs_f64(k as f64 / rate as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let i = targets[(k as usize) % targets.len()];
        fake.apply(slice(&c, i, k, mode == Mode::Churn)).unwrap();
        k += 1;
        count.store(k, Ordering::Relaxed);
    }
}

fn start_dns(bin: &str, dir: &std::path::Path, url: &str, memo: bool) -> Spawned {
    let tag = if memo { "memo" } else { "nomemo" };
    let path = dir.join(format!("Corefile.{tag}"));
    std::fs::write(
        &path,
        format!(
            ".:0 {{\n bind 127.0.0.1\n errors\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  endpoint {url}\n  pods insecure\n  fallthrough in-addr.arpa ip6.arpa\n  ttl 30\n }}\n loadbalance\n}}\n"
        ),
    )
    .unwrap();
    let env: &[(&str, &str)] = if memo {
        &[("CLUSTER_DNS_UDP_WORKERS", "1"), ("TOKIO_WORKER_THREADS", "1")]
    } else {
        &[
            ("CLUSTER_DNS_UDP_WORKERS", "1"),
            ("TOKIO_WORKER_THREADS", "1"),
            ("CLUSTER_DNS_ANSWER_MEMO", "off"),
        ]
    };
    let spawned = spawn_cluster_dns_with(bin, &path, env).unwrap();
    let _ = Command::new("taskset")
        .args(["-a", "-p", "-c", "0"])
        .arg(spawned.child.id().to_string())
        .output();
    let mut dns = Dns::new(spawned.addr).unwrap();
    let t0 = Instant::now();
    while dns.query("nosuch.ns-0.svc.cluster.local").map(|r| r.0) != Some(NXDOMAIN) {
        assert!(t0.elapsed() < Duration::from_secs(120), "not synced after 120 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    spawned
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(bin) = args.get(1).cloned() else {
        eprintln!("usage: churn-bench PATH/TO/cluster-dns [--rate N] [--duration S] [--repeats R]");
        std::process::exit(2);
    };
    let rate = usize_arg(&args, "--rate", 100) as u64;
    let secs = usize_arg(&args, "--duration", 10);
    let repeats = usize_arg(&args, "--repeats", 3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = Arc::new(
        rt.block_on(FakeApiServer::start_with(Options {
            bookmark_interval: Duration::from_secs(60),
            ..Options::default()
        }))
        .unwrap(),
    );
    let c = cluster();
    fake.load(c.objects()).unwrap();
    let dir = std::env::temp_dir().join(format!("churn-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mix.txt");
    let text = mix(&c);
    std::fs::write(&file, &text).unwrap();
    println!(
        "cluster: {} Services in {} namespaces, {} endpoints; mix of {} stable questions; {rate} slice writes/s to {CHURNED} other headless Services",
        c.services,
        c.namespaces,
        c.endpoints,
        text.lines().count()
    );
    let modes = [Mode::Idle, Mode::Control, Mode::Churn];
    for memo in [true, false] {
        let mut s = start_dns(&bin, &dir, &fake.url(), memo);
        dnsperf(s.addr.port(), &file, 2);
        let mut results: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
        let mut writes = vec![0u64; modes.len()];
        for _ in 0..repeats {
            for (m, mode) in modes.iter().enumerate() {
                let stop = Arc::new(AtomicBool::new(false));
                let count = Arc::new(AtomicU64::new(0));
                let w = {
                    let (fake, stop, count, mode) = (fake.clone(), stop.clone(), count.clone(), *mode);
                    std::thread::spawn(move || writer(fake, mode, rate, stop, count))
                };
                results[m].push(dnsperf(s.addr.port(), &file, secs));
                stop.store(true, Ordering::Relaxed);
                w.join().unwrap();
                writes[m] += count.load(Ordering::Relaxed);
            }
        }
        let idle = median(results[0].clone());
        println!("\nanswer memo {}:", if memo { "on" } else { "off" });
        for (m, mode) in modes.iter().enumerate() {
            let q = median(results[m].clone());
            println!(
                "  {mode:?}: QPS median {q:.0} (runs {:?}), {:.0} writes/s, {:.3}x idle",
                results[m].iter().map(|v| v.round()).collect::<Vec<_>>(),
                writes[m] as f64 / (repeats * secs) as f64,
                q / idle
            );
        }
        let _ = s.child.kill();
        let _ = s.child.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
