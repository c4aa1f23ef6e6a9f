//! `watch-bench`: the watch-path benchmarks of cluster-dns, run by `bench/watch.sh`.
//!
//! It serves a synthetic cluster from the fake API server (in this process), starts the
//! `cluster-dns` binary given as the first argument against it (`endpoint http://127.0.0.1:PORT`)
//! and measures, over real UDP DNS queries on loopback:
//! 1. time from start to ready: until a would-be NXDOMAIN name turns from SERVFAIL to NXDOMAIN;
//!    and the peak RSS of the sync (`VmHWM` in `/proc/PID/status`);
//! 2. the relist after a compaction (every watch gets 410 Gone and relists): the peak RSS during
//!    it (the high-water mark is reset through `/proc/PID/clear_refs` first) against the steady
//!    RSS before it;
//! 3. programming latency: time from the fake API server emitting a change to the new answer
//!    being served (polled every 0.2 ms), p50/p99 over 1,000 new Services, and 100 readiness
//!    flips each of the first and the last endpoint of a 1,000-endpoint headless Service.
//!
//! Usage: `watch-bench PATH/TO/cluster-dns [--services N] [--endpoints M] [--per-slice K] [--changes C]
//! [--lists streaming|pages]`: with `pages` the fake refuses streaming lists (422, as an API
//! server with the WatchList feature gate off), so cluster-dns lists in pages.

#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fake_apiserver::bench::{Dns, Spawned, spawn_cluster_dns, status_kb, usize_arg};
use fake_apiserver::synthetic::{self, SyntheticCluster};
use fake_apiserver::{FakeApiServer, Options, StreamingLists};
use serde_json::Value;

const NXDOMAIN: u8 = 3;
const SERVFAIL: u8 = 2;
const NOERROR: u8 = 0;

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Waits until `name`'s rcode is `want`, polling every 0.2 ms; returns when it was seen.
fn wait_rcode(dns: &mut Dns, name: &str, want: u8, limit: Duration) -> Option<Instant> {
    dns.wait_rcode(name, want, Duration::from_micros(200), limit)
}

/// The 1,000-endpoint headless Service's slice `j` (10 slices of 100), with endpoint `k`
/// ready or not.
fn big_slice(j: usize, not_ready: Option<usize>) -> Value {
    let eps = (0..100)
        .map(|k| {
            let n = j * 100 + k;
            let ip = std::net::Ipv4Addr::new(
                10,
                250,
                u8::try_from(n / 250).unwrap(),
                u8::try_from(n % 250 + 1).unwrap(),
            );
            let mut ep = synthetic::endpoint("big", n, ip, true, not_ready != Some(k));
            ep["hostname"] = Value::String(format!("big-{n}"));
            ep
        })
        .collect();
    synthetic::slice("ns-0", "big", j, eps)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(bin) = args.get(1).filter(|a| !a.starts_with("--")).cloned() else {
        eprintln!(
            "usage: watch-bench PATH/TO/cluster-dns [--services N] [--endpoints M] [--per-slice K] [--changes C] [--lists streaming|pages]"
        );
        std::process::exit(2);
    };
    let cluster = SyntheticCluster {
        services: usize_arg(&args, "--services", 10_000),
        endpoints: usize_arg(&args, "--endpoints", 150_000),
        per_slice: usize_arg(&args, "--per-slice", 100),
        ..SyntheticCluster::default()
    };
    let changes = usize_arg(&args, "--changes", 1_000);
    let streaming_lists = match args
        .iter()
        .position(|a| a == "--lists")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
    {
        None | Some("streaming") => StreamingLists::Offered,
        Some("pages") => StreamingLists::Rejected,
        Some(other) => {
            eprintln!("watch-bench: --lists takes streaming or pages, not {other}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(FakeApiServer::start_with(Options {
            bookmark_interval: Duration::from_secs(60),
            streaming_lists,
            ..Options::default()
        }))
        .unwrap();
    let n = fake.load(cluster.objects()).unwrap();
    fake.load((0..10).map(|j| big_slice(j, None))).unwrap();
    fake.load([synthetic::service("ns-0", "big", None)]).unwrap();
    println!(
        "lists: {}",
        if streaming_lists == StreamingLists::Offered {
            "streaming (sendInitialEvents, the WatchList API)"
        } else {
            "in pages (the fake refuses streaming lists with 422)"
        }
    );
    let headless = (0..cluster.services).filter(|i| cluster.is_headless(*i)).count();
    println!(
        "cluster: {} Services ({} headless) in {} namespaces, {} endpoints in {} EndpointSlices of {}, plus a headless Service of 1,000 endpoints ({} objects)",
        cluster.services,
        headless,
        cluster.namespaces,
        cluster.endpoints,
        cluster.slice_count(),
        cluster.per_slice,
        n + 11
    );

    let dir = std::env::temp_dir().join(format!("watch-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corefile = dir.join("Corefile");
    std::fs::write(
        &corefile,
        format!(
            ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n endpoint {}\n pods insecure\n ttl 30\n }}\n}}\n",
            fake.url()
        ),
    )
    .unwrap();

    // 1. Start to ready.
    let t0 = Instant::now();
    let Spawned {
        mut child,
        log: rx,
        addr,
    } = spawn_cluster_dns(&bin, &corefile).unwrap();
    let pid = child.id();
    let bound = t0.elapsed();
    let mut dns = Dns::new(addr).unwrap();
    let probe = "nosuch.ns-0.svc.cluster.local";
    let mut saw_servfail = false;
    let ready = loop {
        match dns.query(probe) {
            Some((NXDOMAIN, _)) => break t0.elapsed(),
            Some((SERVFAIL, _)) => saw_servfail = true,
            _ => {}
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "not ready after 120 s");
        std::thread::sleep(Duration::from_millis(1));
    };
    let sync_peak = status_kb(pid, "VmHWM:");
    assert_eq!(
        dns.query("svc-1.ns-1.svc.cluster.local").map(|r| r.0),
        Some(NOERROR)
    );
    std::thread::sleep(Duration::from_secs(2));
    let steady = status_kb(pid, "VmRSS:");
    println!("\n## 1. Initial sync");
    println!(
        "bound (answering) after {}; SERVFAIL seen before sync: {saw_servfail}",
        ms(bound)
    );
    println!("ready (SERVFAIL -> NXDOMAIN) after {}", ms(ready));
    println!("peak RSS (VmHWM) during start and sync: {:.1} MB", mb(sync_peak));
    println!("steady RSS 2 s after sync: {:.1} MB", mb(steady));

    // 2. Relist after a 410.
    let reset = std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
    let drain = |rx: &mpsc::Receiver<String>| while rx.try_recv().is_ok() {};
    drain(&rx);
    let t = Instant::now();
    fake.compact();
    let mut relisted = 0;
    while relisted < 3 {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("relist finishes");
        if line.contains("relist applied") {
            relisted += 1;
        }
    }
    let relist_time = t.elapsed();
    let relist_peak = status_kb(pid, "VmHWM:");
    println!("\n## 2. Relist after 410 Gone (all three watches)");
    println!(
        "relist done in {}; peak RSS during relist: {:.1} MB (high-water mark reset before: {reset}); steady before: {:.1} MB; ratio {:.2}",
        ms(relist_time),
        mb(relist_peak),
        mb(steady),
        relist_peak as f64 / steady as f64
    );
    assert_eq!(
        dns.query("svc-1.ns-1.svc.cluster.local").map(|r| r.0),
        Some(NOERROR)
    );
    std::thread::sleep(Duration::from_secs(1));

    // 3. Programming latency.
    let mut lat = Vec::with_capacity(changes);
    for i in 0..changes {
        let name = format!("lat-{i}");
        let ip = std::net::Ipv4Addr::new(
            10,
            99,
            u8::try_from(i / 250).unwrap_or(0),
            u8::try_from(i % 250 + 1).unwrap(),
        );
        let svc = synthetic::service("ns-1", &name, Some(ip));
        let qname = format!("{name}.ns-1.svc.cluster.local");
        let t = Instant::now();
        fake.create(svc).unwrap();
        let seen = wait_rcode(&mut dns, &qname, NOERROR, Duration::from_secs(10)).expect("change served");
        lat.push(seen - t);
    }
    lat.sort();
    println!("\n## 3. Programming latency (API server emits -> answer served, polled every 0.2 ms)");
    println!(
        "{} new ClusterIP Services: p50 {}  p99 {}  max {}",
        lat.len(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
        ms(*lat.last().unwrap())
    );
    for (label, slice_no, k) in [("first", 0usize, 0usize), ("last", 9, 99)] {
        let host = format!("big-{}.big.ns-0.svc.cluster.local", slice_no * 100 + k);
        let mut lat = Vec::new();
        for round in 0..100 {
            let not_ready = round % 2 == 0;
            let slice = big_slice(slice_no, not_ready.then_some(k));
            let t = Instant::now();
            fake.update(slice).unwrap();
            let want = if not_ready { NXDOMAIN } else { NOERROR };
            let seen = wait_rcode(&mut dns, &host, want, Duration::from_secs(10)).expect("flip served");
            lat.push(seen - t);
        }
        lat.sort();
        println!(
            "{label} endpoint of the 1,000-endpoint headless Service, 100 readiness flips: p50 {}  p99 {}  max {}",
            ms(percentile(&lat, 0.5)),
            ms(percentile(&lat, 0.99)),
            ms(*lat.last().unwrap())
        );
    }
    let final_rss = status_kb(pid, "VmRSS:");
    println!("\nRSS at the end: {:.1} MB", mb(final_rss));
    let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
