//! `outage-bench`: how cluster-dns's API watches retry against a failing API server and how
//! fast the zone catches up after an outage, run by `bench/outage.sh`.
//!
//! It serves a small synthetic cluster from the fake API server (in this process), starts the
//! `cluster-dns` binary given as the first argument against it and measures:
//! 1. a first list that keeps failing: every list of Namespaces, Services and EndpointSlices
//!    answers HTTP 500 for `--fail-secs` seconds; the interval between the requests the fake
//!    sees, per watch, and the requests per minute; then the time from the fault clearing to
//!    the zone being synced (a would-be NXDOMAIN turns from SERVFAIL to NXDOMAIN);
//! 2. outages after the sync: the listener stops for each of `--outages` seconds (default
//!    10,30,60), a Service is created meanwhile, the listener restarts; the catch-up is the time
//!    from the restart to that Service being answered (polled every 1 ms), split into the wait
//!    for the first request the fake sees (the watch's next retry) and the rest.
//!
//! Usage: `outage-bench PATH/TO/cluster-dns [--fail-secs S] [--outages A,B,C]`

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use fake_apiserver::bench::{Dns, spawn_cluster_dns};
use fake_apiserver::synthetic::{self, SyntheticCluster};
use fake_apiserver::{FakeApiServer, Resource};

const NXDOMAIN: u8 = 3;
const NOERROR: u8 = 0;

fn value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// Polls `name` every 1 ms until its rcode is `want`; when it was seen.
fn wait_rcode(dns: &mut Dns, name: &str, want: u8, limit: Duration) -> Option<Instant> {
    dns.wait_rcode(name, want, Duration::from_millis(1), limit)
}

const WATCHES: [(&str, &str); 3] = [
    ("namespaces", "GET /api/v1/namespaces?"),
    ("services", "GET /api/v1/services?"),
    ("endpointslices", "GET /apis/discovery.k8s.io/v1/endpointslices?"),
];

const RESOURCES: [Resource; 3] = [Resource::Namespaces, Resource::Services, Resource::EndpointSlices];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(bin) = args.get(1).filter(|a| !a.starts_with("--")).cloned() else {
        eprintln!("usage: outage-bench PATH/TO/cluster-dns [--fail-secs S] [--outages A,B,C]");
        std::process::exit(2);
    };
    let fail_secs: u64 = value(&args, "--fail-secs")
        .and_then(|v| v.parse().ok())
        .unwrap_or(75);
    let outages: Vec<u64> = value(&args, "--outages")
        .unwrap_or("10,30,60")
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt.block_on(FakeApiServer::start()).unwrap();
    let cluster = SyntheticCluster {
        services: 100,
        endpoints: 1_000,
        ..SyntheticCluster::default()
    };
    fake.load(cluster.objects()).unwrap();
    for r in RESOURCES {
        fake.fail_resource(r, 500);
    }
    let dir = std::env::temp_dir().join(format!("outage-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corefile = dir.join("Corefile");
    std::fs::write(
        &corefile,
        format!(
            ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local {{\n endpoint {}\n }}\n}}\n",
            fake.url()
        ),
    )
    .unwrap();

    // 1. A first list that keeps failing.
    let t0 = Instant::now();
    let mut server = spawn_cluster_dns(&bin, &corefile).unwrap();
    let mut dns = Dns::new(server.addr).unwrap();
    std::thread::sleep(Duration::from_secs(fail_secs).saturating_sub(t0.elapsed()));
    let log = fake.requests_at();
    println!("## 1. First lists failing with HTTP 500 for {fail_secs} s");
    let mut total = 0;
    for (name, prefix) in WATCHES {
        let times: Vec<Instant> = log
            .iter()
            .filter(|(_, r)| r.starts_with(prefix))
            .map(|(t, _)| *t)
            .collect();
        total += times.len();
        let gaps: Vec<String> = times
            .windows(2)
            .map(|w| format!("{:.2}", (w[1] - w[0]).as_secs_f64()))
            .collect();
        println!(
            "{name}: {} requests; intervals (s): {}",
            times.len(),
            gaps.join(" ")
        );
    }
    println!(
        "all three watches: {total} requests in {fail_secs} s ({:.1} per minute)",
        total as f64 * 60.0 / fail_secs as f64
    );
    let cleared = Instant::now();
    for r in RESOURCES {
        fake.allow(r);
    }
    let synced = wait_rcode(
        &mut dns,
        "nosuch.ns-0.svc.cluster.local",
        NXDOMAIN,
        Duration::from_secs(60),
    )
    .expect("synced after the fault cleared");
    println!(
        "fault cleared -> zone synced: {} (the watches' next retries)",
        secs(synced - cleared)
    );

    // 2. Outages after the sync.
    println!("\n## 2. API outages after the sync (listener stopped, a Service created meanwhile)");
    for (i, outage) in outages.iter().enumerate() {
        let name = format!("late-{i}");
        let qname = format!("{name}.ns-1.svc.cluster.local");
        rt.block_on(fake.stop_listener());
        let ip = std::net::Ipv4Addr::new(10, 98, 0, u8::try_from(i + 1).unwrap());
        fake.create(synthetic::service("ns-1", &name, Some(ip))).unwrap();
        std::thread::sleep(Duration::from_secs(*outage));
        let before = fake.requests_at().len();
        let back = Instant::now();
        rt.block_on(fake.restart_listener()).unwrap();
        let seen = wait_rcode(&mut dns, &qname, NOERROR, Duration::from_secs(120)).expect("caught up");
        // The requests that came between the restart and the answer.
        let after: Vec<String> = fake.requests_at()[before..]
            .iter()
            .map(|(t, r)| {
                let path = r.split('?').next().unwrap_or(r);
                format!("{} {path}", secs(t.saturating_duration_since(back)))
            })
            .collect();
        let first = after.join(", ");
        println!(
            "outage {outage} s: caught up {} after the API returned; requests until then: {first}",
            secs(seen - back)
        );
    }
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(server.child.id().to_string())
        .status();
    let _ = server.child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
