//! The soak test (issue 11): `cluster-dns` (release binary) watching the fake API server while
//! the API server churns Services and EndpointSlices and clients send a mix of queries at half
//! of the server's measured peak, for `--minutes N`. It samples the server's RSS every second
//! and checks every answer against the state the API server published:
//!
//! - stable Services (never changed): a ClusterIP's A, a headless Service's A set, SRV, the
//!   ClusterIP's PTR, and names that do not exist (NXDOMAIN) must be exactly right;
//! - churned headless Services (their slice's endpoints replaced, the Service deleted and
//!   created again): an answer must be a state the API server published, current at some
//!   moment between the query being sent minus the propagation allowance (2 s) and the reply.
//!
//! It reports queries sent, answered, unanswered (no reply in 2 s), wrong, and the RSS growth
//! from the first minute to the last, and exits 1 when a goal is missed (0 wrong, 0
//! unanswered, growth under 5%). Loopback only; it stops by itself.
//!
//! `soak --bin target/release/cluster-dns [--minutes 10] [--smoke]`

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_apiserver::FakeApiServer;
use fake_apiserver::bench::{skip_name, spawn_cluster_dns};
use serde_json::{Value, json};
use tokio::net::UdpSocket;

/// Stable ClusterIP Services, stable headless Services, churned headless Services.
const STABLE_CLUSTER_IP: usize = 400;
const STABLE_HEADLESS: usize = 100;
const CHURNED: usize = 50;
/// Endpoints of a stable headless Service.
const HEADLESS_ENDPOINTS: usize = 3;
/// Changes the API server makes a second.
const CHURN_PER_SECOND: u64 = 20;
/// How long a published state may still be answered after the next one was published.
const PROPAGATION: Duration = Duration::from_secs(2);
/// A query without a reply in this time is unanswered.
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// Concurrent clients.
const CLIENTS: usize = 32;

fn cluster_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 96, (i / 250) as u8, (i % 250 + 1) as u8)
}

fn stable_pod(i: usize, k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 130, (i / 60) as u8, ((i % 60) * 4 + k + 1) as u8)
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn service(name: &str, ip: Option<Ipv4Addr>) -> Value {
    let ip = ip.map_or_else(|| "None".to_owned(), |i| i.to_string());
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "soak"},
           "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})
}

fn slice(service: &str, ips: &[Ipv4Addr]) -> Value {
    let eps: Vec<Value> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}}))
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": format!("{service}-abcde"), "namespace": "soak",
                        "labels": {"kubernetes.io/service-name": service}},
           "addressType": "IPv4", "endpoints": eps,
           "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
}

/// An answer about a churned Service: its endpoint addresses, or `None` for NXDOMAIN.
type State = Option<BTreeSet<Ipv4Addr>>;

/// What the API server published for one churned Service, with when: whether the Service
/// exists, and its slice's addresses. The two are separate objects on separate watches, so
/// cluster-dns may combine any Service state with any slice state that were each current
/// within the window.
#[derive(Debug, Default)]
struct Published {
    service: Vec<(Instant, bool)>,
    slice: Vec<(Instant, BTreeSet<Ipv4Addr>)>,
}

/// True when one of `history`'s values equal to `want` was current at some moment in
/// `[from, to]` (each value is current from its time until the next one's).
fn current_within<T: PartialEq>(history: &[(Instant, T)], want: &T, from: Instant, to: Instant) -> bool {
    history.iter().enumerate().any(|(i, (start, v))| {
        let end = history.get(i + 1).map(|(s, _)| *s);
        v == want && *start <= to && end.is_none_or(|e| e >= from)
    })
}

/// What the API server published for each churned Service.
#[derive(Debug, Default)]
struct History {
    states: Vec<Mutex<Published>>,
}

impl History {
    /// True when `got` is what cluster-dns may answer for Service `k` at some moment in
    /// `[sent - PROPAGATION, received]`: NXDOMAIN while the Service did not exist, else its
    /// slice's addresses.
    fn allows(&self, k: usize, got: &State, sent: Instant, received: Instant) -> bool {
        let Some(p) = self.states.get(k) else {
            return false;
        };
        let p = p.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let from = sent.checked_sub(PROPAGATION).unwrap_or(sent);
        match got {
            None => current_within(&p.service, &false, from, received),
            Some(ips) => {
                current_within(&p.service, &true, from, received)
                    && current_within(&p.slice, ips, from, received)
            }
        }
    }

    fn publish_slice(&self, k: usize, ips: &[Ipv4Addr]) {
        if let Some(p) = self.states.get(k) {
            let mut p = p.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            p.slice.push((Instant::now(), ips.iter().copied().collect()));
        }
    }

    fn publish_service(&self, k: usize, exists: bool) {
        if let Some(p) = self.states.get(k) {
            let mut p = p.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            p.service.push((Instant::now(), exists));
        }
    }
}

/// One question and what decides whether its answer is right.
#[derive(Debug, Clone)]
enum Check {
    /// Exactly these A records.
    A(String, BTreeSet<Ipv4Addr>),
    /// NOERROR with this many records of the asked type.
    Count(String, u16, u16),
    /// NXDOMAIN.
    NxDomain(String),
    /// Churned Service `k`'s A set, or NXDOMAIN while deleted, per the history.
    Churned(String, usize),
}

fn question(i: u64) -> Check {
    let i = i as usize;
    match i % 6 {
        0 | 1 => {
            let s = (i / 6) % STABLE_CLUSTER_IP;
            Check::A(
                format!("c{s}.soak.svc.cluster.local."),
                BTreeSet::from([cluster_ip(s)]),
            )
        }
        2 => {
            let s = (i / 6) % STABLE_HEADLESS;
            let ips = (0..HEADLESS_ENDPOINTS).map(|k| stable_pod(s, k)).collect();
            Check::A(format!("h{s}.soak.svc.cluster.local."), ips)
        }
        3 => match (i / 6) % 3 {
            0 => Check::Count(
                format!(
                    "_http._tcp.c{}.soak.svc.cluster.local.",
                    (i / 18) % STABLE_CLUSTER_IP
                ),
                33,
                1,
            ),
            1 => {
                let ip = cluster_ip((i / 18) % STABLE_CLUSTER_IP).octets();
                Check::Count(
                    format!("{}.{}.{}.{}.in-addr.arpa.", ip[3], ip[2], ip[1], ip[0]),
                    12,
                    1,
                )
            }
            _ => Check::NxDomain(format!("nosuch{}.soak.svc.cluster.local.", i % 1000)),
        },
        _ => {
            let k = (i / 6) % CHURNED;
            Check::Churned(format!("x{k}.soak.svc.cluster.local."), k)
        }
    }
}

fn qtype_of(c: &Check) -> u16 {
    match c {
        Check::Count(_, t, _) => *t,
        _ => 1,
    }
}

fn name_of(c: &Check) -> &str {
    match c {
        Check::A(n, _) | Check::Count(n, _, _) | Check::NxDomain(n) | Check::Churned(n, _) => n,
    }
}

fn encode(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&[0, 1]);
    q
}

/// The reply's rcode, the answer records of `qtype`, and the A addresses among them.
fn parse(m: &[u8], qtype: u16) -> Option<(u8, u16, BTreeSet<Ipv4Addr>)> {
    let rcode = m.get(3)? & 0x0f;
    let ancount = u16::from_be_bytes([*m.get(6)?, *m.get(7)?]);
    let mut at = skip_name(m, 12)? + 4;
    let (mut count, mut a) = (0u16, BTreeSet::new());
    for _ in 0..ancount {
        at = skip_name(m, at)?;
        let t = u16::from_be_bytes([*m.get(at)?, *m.get(at + 1)?]);
        let len = usize::from(u16::from_be_bytes([*m.get(at + 8)?, *m.get(at + 9)?]));
        let rdata = m.get(at + 10..at + 10 + len)?;
        if t == qtype {
            count += 1;
        }
        if t == 1 && len == 4 {
            a.insert(Ipv4Addr::new(rdata[0], rdata[1], rdata[2], rdata[3]));
        }
        at += 10 + len;
    }
    Some((rcode, count, a))
}

#[derive(Debug, Default)]
struct Counts {
    sent: AtomicU64,
    answered: AtomicU64,
    unanswered: AtomicU64,
    wrong: AtomicU64,
}

/// One client: asks questions in turn (paced to `per_client` a second when given) until `stop`.
async fn client(
    server: SocketAddr,
    seed: u64,
    per_client: Option<f64>,
    history: Arc<History>,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    wrong_log: Arc<Mutex<Vec<String>>>,
) {
    let Ok(sock) = UdpSocket::bind("127.0.0.1:0").await else {
        return;
    };
    if sock.connect(server).await.is_err() {
        return;
    }
    let mut tick = per_client.map(|r| {
        let mut t = tokio::time::interval(Duration::from_secs_f64(1.0 / r));
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    let mut n = seed;
    let mut id: u16 = (seed as u16).wrapping_mul(977);
    let mut buf = vec![0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        if let Some(t) = &mut tick {
            t.tick().await;
        }
        n = n.wrapping_add(CLIENTS as u64);
        id = id.wrapping_add(1);
        let check = question(n);
        let qtype = qtype_of(&check);
        let req = encode(id, name_of(&check), qtype);
        let sent = Instant::now();
        counts.sent.fetch_add(1, Ordering::Relaxed);
        if sock.send(&req).await.is_err() {
            counts.unanswered.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let reply = loop {
            match tokio::time::timeout_at((sent + REPLY_TIMEOUT).into(), sock.recv(&mut buf)).await {
                Ok(Ok(len)) if len >= 12 && buf[..2] == id.to_be_bytes() => break Some(len),
                Ok(Ok(_)) => continue,
                _ => break None,
            }
        };
        let Some(len) = reply else {
            counts.unanswered.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let received = Instant::now();
        counts.answered.fetch_add(1, Ordering::Relaxed);
        let ok = match (parse(&buf[..len], qtype), &check) {
            (None, _) => false,
            (Some((rcode, _, a)), Check::A(_, want)) => rcode == 0 && a == *want,
            (Some((rcode, count, _)), Check::Count(_, _, want)) => rcode == 0 && count == *want,
            (Some((rcode, _, _)), Check::NxDomain(_)) => rcode == 3,
            (Some((rcode, _, a)), Check::Churned(_, k)) => {
                let got = match rcode {
                    0 if !a.is_empty() => Some(a),
                    3 => None,
                    _ => Some(BTreeSet::new()),
                };
                history.allows(*k, &got, sent, received)
            }
        };
        if !ok {
            counts.wrong.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut log) = wrong_log.lock()
                && log.len() < 20
            {
                log.push(format!(
                    "{} type {qtype}: {:?}",
                    name_of(&check),
                    parse(&buf[..len], qtype)
                ));
            }
        }
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn arg(args: &[String], flag: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// Runs the clients for `secs` seconds (paced to `rate` a second in all, or as fast as they
/// can), returning the counts.
async fn load(
    server: SocketAddr,
    rate: Option<f64>,
    secs: u64,
    history: &Arc<History>,
) -> (Arc<Counts>, Vec<String>) {
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let wrong = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        tasks.push(tokio::spawn(client(
            server,
            c as u64,
            rate.map(|r| r / CLIENTS as f64),
            history.clone(),
            counts.clone(),
            stop.clone(),
            wrong.clone(),
        )));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let wrong = wrong.lock().map(|w| w.clone()).unwrap_or_default();
    (counts, wrong)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bin = arg(&args, "--bin").unwrap_or_else(|| "target/release/cluster-dns".to_owned());
    let smoke = args.iter().any(|a| a == "--smoke");
    let minutes: u64 = arg(&args, "--minutes")
        .and_then(|m| m.parse().ok())
        .unwrap_or(if smoke { 1 } else { 10 });
    let secs = if smoke { 20 } else { minutes * 60 };

    // The API server and its churn run on a runtime of their own, so the clients' load (which
    // saturates the main runtime) cannot delay the watch events they send.
    let (api_tx, api_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("API server runtime");
        let fake = Arc::new(rt.block_on(FakeApiServer::start()).expect("fake API server"));
        let _ = api_tx.send((fake, rt.handle().clone()));
        // Keep the runtime until the process ends.
        rt.block_on(std::future::pending::<()>());
    });
    let (fake, api_rt) = api_rx.recv().expect("the API server started");
    fake.create(namespace("soak")).expect("namespace");
    for i in 0..STABLE_CLUSTER_IP {
        fake.create(service(&format!("c{i}"), Some(cluster_ip(i))))
            .expect("service");
        fake.create(slice(&format!("c{i}"), &[stable_pod(400 + i % 200, 0)]))
            .expect("slice");
    }
    for i in 0..STABLE_HEADLESS {
        let ips: Vec<Ipv4Addr> = (0..HEADLESS_ENDPOINTS).map(|k| stable_pod(i, k)).collect();
        fake.create(service(&format!("h{i}"), None)).expect("service");
        fake.create(slice(&format!("h{i}"), &ips)).expect("slice");
    }
    let history = Arc::new(History {
        states: (0..CHURNED).map(|_| Mutex::new(Published::default())).collect(),
    });
    let churn_pool = |k: usize, step: u64| -> Vec<Ipv4Addr> {
        let n = 1 + (step as usize + k) % 3;
        (0..n)
            .map(|j| Ipv4Addr::new(10, 140, k as u8, ((step as usize * 3 + j) % 250 + 1) as u8))
            .collect()
    };
    for k in 0..CHURNED {
        let ips = churn_pool(k, 0);
        history.publish_service(k, true);
        history.publish_slice(k, &ips);
        fake.create(service(&format!("x{k}"), None)).expect("service");
        fake.create(slice(&format!("x{k}"), &ips)).expect("slice");
    }

    let dir = std::env::temp_dir().join(format!("cluster-dns-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let corefile = dir.join("Corefile");
    std::fs::write(
        &corefile,
        format!(
            ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local in-addr.arpa {{\n  endpoint {}\n }}\n}}\n",
            fake.url()
        ),
    )
    .expect("Corefile");
    let mut spawned = spawn_cluster_dns(&bin, &corefile).expect("cluster-dns starts");
    let pid = spawned.child.id();
    let server = spawned.addr;
    // Wait for the zone: the last churned Service answers.
    let started = Instant::now();
    let mut probe = fake_apiserver::bench::Dns::new(server).expect("client");
    probe
        .wait_rcode(
            &format!("x{}.soak.svc.cluster.local.", CHURNED - 1),
            0,
            Duration::from_millis(50),
            Duration::from_secs(30),
        )
        .expect("the zone synced");
    println!(
        "soak: cluster-dns pid {pid} on {server}, synced after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Peak: the clients unpaced for 5 s (no churn yet).
    let (peak_counts, _) = load(server, None, 5, &history).await;
    let peak = peak_counts.answered.load(Ordering::Relaxed) as f64 / 5.0;
    let rate = peak / 2.0;
    println!(
        "soak: peak {peak:.0} answers/s; soaking at {rate:.0} queries/s for {secs} s with {CHURN_PER_SECOND} API changes/s"
    );

    // Churn, RSS sampling and the load, together.
    let stop = Arc::new(AtomicBool::new(false));
    let changes = Arc::new(AtomicU64::new(0));
    let churn = {
        let (fake, history, stop, changes) = (fake.clone(), history.clone(), stop.clone(), changes.clone());
        api_rt.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(1000 / CHURN_PER_SECOND));
            let mut step = 0u64;
            let mut deleted = [false; CHURNED];
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                step += 1;
                let k = (step as usize * 7) % CHURNED;
                let name = format!("x{k}");
                // Each change is recorded before the API server makes it.
                if step.is_multiple_of(10) && !deleted[k] {
                    // The Service goes away (its slice stays, as the controller is slower).
                    history.publish_service(k, false);
                    let _ = fake.delete(fake_apiserver::Resource::Services, "soak", &name);
                    deleted[k] = true;
                } else {
                    let ips = churn_pool(k, step);
                    history.publish_slice(k, &ips);
                    let _ = fake.apply(slice(&name, &ips));
                    if deleted[k] {
                        history.publish_service(k, true);
                        let _ = fake.apply(service(&name, None));
                        deleted[k] = false;
                    }
                }
                changes.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let rss = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                if let Some(r) = rss_kib(pid) {
                    samples.push(r);
                }
            }
            samples
        })
    };
    let (counts, wrong) = load(server, Some(rate), secs, &history).await;
    stop.store(true, Ordering::Relaxed);
    let _ = churn.await;
    let samples = rss.await.unwrap_or_default();
    let _ = spawned.child.kill();
    let _ = spawned.child.wait();
    let _ = std::fs::remove_dir_all(&dir);

    let window = samples.len().clamp(1, 60);
    let mean = |s: &[u64]| s.iter().sum::<u64>() as f64 / s.len().max(1) as f64 / 1024.0;
    let first = mean(&samples[..window.min(samples.len())]);
    let last = mean(&samples[samples.len().saturating_sub(window)..]);
    let peak_rss = samples.iter().max().copied().unwrap_or(0) as f64 / 1024.0;
    let growth = if first > 0.0 {
        (last - first) / first * 100.0
    } else {
        0.0
    };
    let sent = counts.sent.load(Ordering::Relaxed);
    let answered = counts.answered.load(Ordering::Relaxed);
    let unanswered = counts.unanswered.load(Ordering::Relaxed);
    let wrong_n = counts.wrong.load(Ordering::Relaxed);
    println!("| duration | {secs} s |");
    println!("| rate asked (half of peak {peak:.0}/s) | {rate:.0}/s |");
    println!("| API changes | {} |", changes.load(Ordering::Relaxed));
    println!("| queries sent | {sent} |");
    println!("| answered | {answered} |");
    println!("| unanswered (no reply in 2 s) | {unanswered} |");
    println!("| wrong answers | {wrong_n} |");
    println!("| RSS first minute (mean) | {first:.1} MiB |");
    println!("| RSS last minute (mean) | {last:.1} MiB |");
    println!("| RSS peak | {peak_rss:.1} MiB |");
    println!("| RSS growth | {growth:+.2} % |");
    for w in &wrong {
        println!("wrong: {w}");
    }
    let ok = wrong_n == 0 && unanswered == 0 && growth < 5.0;
    println!("soak: {}", if ok { "goals met" } else { "GOALS MISSED" });
    std::process::exit(if ok { 0 } else { 1 });
}
