//! `rollout-bench`: queries lost while cluster-dns replicas are replaced and reloaded, run by
//! `bench/rollout.sh` (issue 32).
//!
//! Three replicas of the `cluster-dns` binary (the first argument) serve the cluster of the fake
//! API server (in this process), each on its own loopback address, listed as the ready endpoints
//! of kube-dns's EndpointSlice. A client stands in for kube-proxy: it sends `--qps` queries a
//! second (UDP, 2 s timeout) to the endpoints the slice lists as ready, as it saw them
//! `--delay-ms` ago (the programming delay). A rolling restart, `--restarts` times: a new
//! replica starts on a new address; once `/ready` answers 200 its endpoint is added; then the
//! oldest replica gets SIGTERM and, as the EndpointSlice controller does for a terminating pod,
//! its endpoint is marked not ready; once it exits its endpoint is removed. Then `--reloads`
//! Corefile reloads (each replica's Corefile rewritten, `reload 2s 1s`) while `/ready` of every
//! replica is polled. It prints the lookups sent, answered, timed out and SERVFAIL, the
//! readiness failures, and the time from SIGTERM to exit per restart.
//!
//! `--mode follow` (default) gives each replica its `POD_IP`, so its drain follows its endpoint;
//! `--mode lameduck` gives none, so each answers for the whole lameduck, as CoreDNS does.
//!
//! `--removal-delay-ms` delays the endpoint's not-ready mark after SIGTERM (the EndpointSlice
//! controller's lag under load).
//!
//! Usage: `rollout-bench PATH/TO/cluster-dns [--restarts N] [--qps N] [--delay-ms N]
//! [--removal-delay-ms N] [--margin-ms N] [--lameduck-s N] [--reloads N] [--mode follow|lameduck]`

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_apiserver::FakeApiServer;
use fake_apiserver::bench::{Spawned, median, spawn_cluster_dns_with, usize_arg};
use serde_json::{Value, json};

const DNS_PORT: u16 = 5353;
const TIMEOUT: Duration = Duration::from_secs(2);

fn value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// The kube-dns EndpointSlice with `endpoints` (address, ready).
fn slice(endpoints: &[(Ipv4Addr, bool)]) -> Value {
    let eps: Vec<Value> = endpoints
        .iter()
        .map(|(ip, ready)| json!({"addresses": [ip.to_string()], "conditions": {"ready": ready}}))
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kube-dns-rollout", "namespace": "kube-system",
                     "labels": {"kubernetes.io/service-name": "kube-dns"}},
        "addressType": "IPv4", "endpoints": eps,
        "ports": [{"name": "dns", "port": DNS_PORT, "protocol": "UDP"}]})
}

/// What the client sends to: the ready endpoints as kube-proxy last programmed them.
#[derive(Default)]
struct Programmed {
    targets: Mutex<Vec<Ipv4Addr>>,
}

/// The slice as the API server holds it, and the client's view of it `delay` later.
struct Endpoints {
    fake: FakeApiServer,
    now: Mutex<Vec<(Ipv4Addr, bool)>>,
    programmed: Arc<Programmed>,
    delay: Duration,
}

impl Endpoints {
    fn set(&self, change: impl FnOnce(&mut Vec<(Ipv4Addr, bool)>)) {
        let mut now = self.now.lock().unwrap();
        change(&mut now);
        self.fake.update(slice(&now)).unwrap();
        let ready: Vec<Ipv4Addr> = now.iter().filter(|(_, r)| *r).map(|(ip, _)| *ip).collect();
        let programmed = self.programmed.clone();
        let delay = self.delay;
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            *programmed.targets.lock().unwrap() = ready;
        });
    }
}

#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    noerror: AtomicU64,
    servfail: AtomicU64,
    other: AtomicU64,
    timeouts: AtomicU64,
}

/// Sends `qps` queries a second to the programmed targets until `stop`; counts the outcomes.
fn load(
    qps: u64,
    programmed: Arc<Programmed>,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let sock = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let outstanding: Arc<Mutex<HashMap<u16, Instant>>> = Arc::default();
    let query = |id: u16| {
        let mut q = Vec::with_capacity(64);
        q.extend_from_slice(&id.to_be_bytes());
        q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
        for label in ["web", "default", "svc", "cluster", "local"] {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        q
    };
    let sender = {
        let (sock, outstanding, counts, stop) =
            (sock.clone(), outstanding.clone(), counts.clone(), stop.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut n: u64 = 0;
            let mut id: u16 = 0;
            while !stop.load(Ordering::Relaxed) {
                let due = started + Duration::from_secs_f64(n as f64 / qps as f64);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                n += 1;
                let targets = programmed.targets.lock().unwrap().clone();
                if targets.is_empty() {
                    continue;
                }
                let target = targets[(n as usize) % targets.len()];
                id = id.wrapping_add(1);
                outstanding.lock().unwrap().insert(id, Instant::now());
                counts.sent.fetch_add(1, Ordering::Relaxed);
                let _ = sock.send_to(&query(id), SocketAddr::from((target, DNS_PORT)));
            }
        })
    };
    let receiver = {
        let (outstanding, stop) = (outstanding.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 1500];
            let mut swept = Instant::now();
            loop {
                if let Ok((n, _)) = sock.recv_from(&mut buf)
                    && n >= 12
                {
                    let id = u16::from_be_bytes([buf[0], buf[1]]);
                    if outstanding.lock().unwrap().remove(&id).is_some() {
                        match buf[3] & 0x0f {
                            0 => counts.noerror.fetch_add(1, Ordering::Relaxed),
                            2 => counts.servfail.fetch_add(1, Ordering::Relaxed),
                            _ => counts.other.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                }
                if swept.elapsed() >= Duration::from_millis(100) {
                    swept = Instant::now();
                    let mut out = outstanding.lock().unwrap();
                    let before = out.len();
                    out.retain(|_, sent| sent.elapsed() < TIMEOUT);
                    counts
                        .timeouts
                        .fetch_add((before - out.len()) as u64, Ordering::Relaxed);
                    if stop.load(Ordering::Relaxed) && out.is_empty() {
                        return;
                    }
                }
            }
        })
    };
    vec![sender, receiver]
}

/// One replica: its process, address and files.
struct Replica {
    ip: Ipv4Addr,
    spawned: Spawned,
    corefile: PathBuf,
    ready: SocketAddr,
    text: String,
}

fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

struct Settings {
    bin: String,
    url: String,
    dir: PathBuf,
    lameduck_s: u64,
    margin_ms: u64,
    follow: bool,
}

fn start_replica(s: &Settings, ip: Ipv4Addr) -> Replica {
    let ready_port = {
        let l = std::net::TcpListener::bind((ip, 0)).unwrap();
        l.local_addr().unwrap().port()
    };
    let text = format!(
        ".:{DNS_PORT} {{\n bind {ip}\n health {ip}:0 {{\n  lameduck {}s\n  propagation_margin {}ms\n }}\n ready {ip}:{ready_port}\n reload 2s 1s\n kubernetes cluster.local {{\n  endpoint {}\n }}\n}}\n",
        s.lameduck_s, s.margin_ms, s.url
    );
    let corefile = s.dir.join(format!("Corefile.{ip}"));
    std::fs::write(&corefile, &text).unwrap();
    let ip_text = ip.to_string();
    let env: Vec<(&str, &str)> = if s.follow {
        vec![("POD_IP", ip_text.as_str())]
    } else {
        Vec::new()
    };
    let spawned = spawn_cluster_dns_with(&s.bin, &corefile, &env).unwrap();
    let ready = SocketAddr::from((ip, ready_port));
    let started = Instant::now();
    while http_status(ready, "/ready") != Some(200) {
        assert!(started.elapsed() < Duration::from_secs(30), "{ip} never ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    Replica {
        ip,
        spawned,
        corefile,
        ready,
        text,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(bin) = args.get(1).filter(|a| !a.starts_with("--")).cloned() else {
        eprintln!(
            "usage: rollout-bench PATH/TO/cluster-dns [--restarts N] [--qps N] [--delay-ms N] [--margin-ms N] [--lameduck-s N] [--reloads N] [--mode follow|lameduck]"
        );
        std::process::exit(2);
    };
    let restarts = usize_arg(&args, "--restarts", 30);
    let qps = usize_arg(&args, "--qps", 2000) as u64;
    let delay = Duration::from_millis(usize_arg(&args, "--delay-ms", 500) as u64);
    let reloads = usize_arg(&args, "--reloads", 50);
    let follow = value(&args, "--mode") != Some("lameduck");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fake = rt.block_on(FakeApiServer::start()).unwrap();
    let settings = Settings {
        bin,
        url: fake.url(),
        dir: std::env::temp_dir().join(format!("rollout-bench-{}", std::process::id())),
        lameduck_s: usize_arg(&args, "--lameduck-s", 30) as u64,
        margin_ms: usize_arg(&args, "--margin-ms", 1000) as u64,
        follow,
    };
    std::fs::create_dir_all(&settings.dir).unwrap();
    fake.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}))
        .unwrap();
    fake.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}))
        .unwrap();
    fake.create(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system"},
        "spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}}))
        .unwrap();
    fake.create(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"clusterIP": "10.96.100.10", "ports": [{"name": "http", "port": 80}]}}))
        .unwrap();
    fake.create(slice(&[])).unwrap();
    let endpoints = Arc::new(Endpoints {
        fake,
        now: Mutex::new(Vec::new()),
        programmed: Arc::default(),
        delay,
    });
    let removal_delay = Duration::from_millis(usize_arg(&args, "--removal-delay-ms", 0) as u64);

    let mut next_ip = 10u8;
    let mut fresh_ip = || {
        next_ip = next_ip.wrapping_add(1);
        Ipv4Addr::new(127, 0, 3, next_ip)
    };
    let mut replicas: Vec<Replica> = (0..3).map(|_| start_replica(&settings, fresh_ip())).collect();
    endpoints.set(|e| e.extend(replicas.iter().map(|r| (r.ip, true))));
    std::thread::sleep(delay + Duration::from_millis(200));

    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let threads = load(qps, endpoints.programmed.clone(), counts.clone(), stop.clone());
    let started = Instant::now();
    let mut shutdowns = Vec::new();
    for _ in 0..restarts {
        let new = start_replica(&settings, fresh_ip());
        let new_ip = new.ip;
        replicas.push(new);
        endpoints.set(|e| e.push((new_ip, true)));
        std::thread::sleep(delay);
        let mut old = replicas.remove(0);
        let term = Instant::now();
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(old.spawned.child.id().to_string())
            .status();
        // The EndpointSlice controller marks the terminating pod's endpoint not ready, after
        // `--removal-delay-ms` (its lag under load).
        let old_ip = old.ip;
        let controller = {
            let endpoints = endpoints.clone();
            std::thread::spawn(move || {
                std::thread::sleep(removal_delay);
                endpoints.set(|e| {
                    for (ip, ready) in e.iter_mut() {
                        if *ip == old_ip {
                            *ready = false;
                        }
                    }
                });
            })
        };
        let _ = old.spawned.child.wait();
        shutdowns.push(term.elapsed().as_secs_f64());
        controller.join().unwrap();
        endpoints.set(|e| e.retain(|(ip, _)| *ip != old.ip));
    }
    let restart_secs = started.elapsed().as_secs_f64();
    let after_restarts = (
        counts.sent.load(Ordering::Relaxed),
        counts.timeouts.load(Ordering::Relaxed),
        counts.servfail.load(Ordering::Relaxed),
    );

    // Reloads under load, with every replica's /ready polled.
    let not_ready = Arc::new(AtomicU64::new(0));
    let polls = Arc::new(AtomicU64::new(0));
    let polling = Arc::new(AtomicBool::new(true));
    let poller = {
        let addrs: Vec<SocketAddr> = replicas.iter().map(|r| r.ready).collect();
        let (not_ready, polls, polling) = (not_ready.clone(), polls.clone(), polling.clone());
        std::thread::spawn(move || {
            while polling.load(Ordering::Relaxed) {
                for a in &addrs {
                    polls.fetch_add(1, Ordering::Relaxed);
                    if http_status(*a, "/ready") != Some(200) {
                        not_ready.fetch_add(1, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let mut applied = 0;
    for k in 0..reloads {
        for r in &mut replicas {
            std::fs::write(&r.corefile, format!("# reload {k}\n{}", r.text)).unwrap();
        }
        // `reload 2s 1s` checks every 2 s (with up to 1 s of jitter): wait for every replica to
        // apply it.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut pending: Vec<usize> = (0..replicas.len()).collect();
        while !pending.is_empty() && Instant::now() < deadline {
            pending.retain(|&i| {
                let mut seen = false;
                while let Ok(line) = replicas[i].spawned.log.try_recv() {
                    seen |= line.contains("new configuration applied");
                }
                !seen
            });
            std::thread::sleep(Duration::from_millis(20));
        }
        applied += replicas.len() - pending.len();
    }
    polling.store(false, Ordering::Relaxed);
    poller.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    for mut r in replicas {
        let _ = r.spawned.child.kill();
        let _ = r.spawned.child.wait();
    }
    let _ = std::fs::remove_dir_all(&settings.dir);

    let mode = if follow {
        "follow (POD_IP set)"
    } else {
        "lameduck (no POD_IP)"
    };
    println!(
        "mode: {mode}; {qps} QPS, endpoint removal after {} ms, programming delay {} ms, margin {} ms, lameduck {} s",
        removal_delay.as_millis(),
        delay.as_millis(),
        settings.margin_ms,
        settings.lameduck_s
    );
    println!(
        "restarts: {restarts} in {restart_secs:.1} s; lookups {}, timeouts {}, SERVFAIL {}",
        after_restarts.0, after_restarts.1, after_restarts.2
    );
    let mut sorted = shutdowns.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "SIGTERM to exit: median {:.2} s, max {:.2} s",
        median(shutdowns),
        sorted.last().copied().unwrap_or_default()
    );
    println!(
        "reloads: {reloads} per replica ({applied} applied of {}); /ready polls {}, not 200: {}",
        reloads * 3,
        polls.load(Ordering::Relaxed),
        not_ready.load(Ordering::Relaxed)
    );
    println!(
        "all: lookups {}, answered NOERROR {}, SERVFAIL {}, other {}, timeouts {}",
        counts.sent.load(Ordering::Relaxed),
        counts.noerror.load(Ordering::Relaxed),
        counts.servfail.load(Ordering::Relaxed),
        counts.other.load(Ordering::Relaxed),
        counts.timeouts.load(Ordering::Relaxed)
    );
}
