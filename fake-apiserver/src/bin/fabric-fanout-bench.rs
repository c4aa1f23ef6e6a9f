//! `fabric-fanout-bench`: one central `cluster-dns` (kubeadm's Corefile against the fake API
//! server, plus the fabric mode's `transfer cluster.local { to * / notify transferred PORT }`)
//! and a generator that behaves as N secondaries (issue 46: "a generator that behaves as 5,000
//! secondaries: SOA checks, IXFR after each NOTIFY"), run by `bench/fabric-fanout.sh`.
//!
//! Each simulated secondary has its own loopback address (127.x.y.z), so the central server
//! learns it as it learns a node's agent: it asks an IXFR from the central serial once (the
//! answer, one SOA, says it is current, and the central server learns the address), then
//! waits for NOTIFY on UDP at that address, answers it, and asks, over one TCP connection from
//! that address, the SOA and an IXFR from the serial it holds, reading the whole response.
//! For each of C changes (one new Service, a second apart: the central server batches its
//! NOTIFYs once a second), the bench measures the central server's CPU time and the bytes its
//! answers to the secondaries took, and the time from the change in the API to each
//! secondary holding the new serial.
//!
//! Usage: `fabric-fanout-bench PATH/TO/cluster-dns [--agents 5000] [--changes 10]
//! [--services 1000] [--endpoints 10000] [--tcp-max N]` (`--tcp-max`: the central server's
//! TCP connection limit, `CLUSTER_DNS_TCP_MAX_CONNECTIONS`; its default is 1,000).

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fake_apiserver::bench::{cpu_time, skip_name, spawn_cluster_dns_with, status_kb, usize_arg};
use fake_apiserver::synthetic::{self, SyntheticCluster};
use fake_apiserver::{FakeApiServer, Options};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, UdpSocket};

/// The port every simulated secondary takes NOTIFY on (each at its own address).
const NOTIFY_PORT: u16 = 5399;
const ZONE: &str = "cluster.local";
const SOA: u16 = 6;
const IXFR: u16 = 251;

/// `name` in wire form.
fn wire_name(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for label in name.split('.').filter(|l| !l.is_empty()) {
        out.push(u8::try_from(label.len()).unwrap());
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out
}

/// A query for `qtype` of the zone; for IXFR, with an SOA of `serial` in the authority section.
fn query(id: u16, qtype: u16, serial: Option<u32>) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, u8::from(serial.is_some()), 0, 0]);
    m.extend_from_slice(&wire_name(ZONE));
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    if let Some(serial) = serial {
        m.extend_from_slice(&wire_name(ZONE));
        m.extend_from_slice(&SOA.to_be_bytes());
        m.extend_from_slice(&1u16.to_be_bytes());
        m.extend_from_slice(&0u32.to_be_bytes());
        m.extend_from_slice(&22u16.to_be_bytes());
        m.extend_from_slice(&[0, 0]); // mname and rname: the root
        m.extend_from_slice(&serial.to_be_bytes());
        m.extend_from_slice(&[0; 16]);
    }
    m
}

fn u16_at(m: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*m.get(at)?, *m.get(at + 1)?]))
}

/// The SOA serials of the answer section of message `m`, in order, as `Some(serial)`, with
/// `None` for each other record.
fn answers(m: &[u8]) -> Option<Vec<Option<u32>>> {
    let (qd, an) = (u16_at(m, 4)?, u16_at(m, 6)?);
    let mut at = 12;
    for _ in 0..qd {
        at = skip_name(m, at)? + 4;
    }
    let mut out = Vec::with_capacity(usize::from(an));
    for _ in 0..an {
        at = skip_name(m, at)?;
        let rtype = u16_at(m, at)?;
        let rdlen = usize::from(u16_at(m, at + 8)?);
        let rdata = at + 10;
        out.push(if rtype == SOA {
            let serial_at = skip_name(m, skip_name(m, rdata)?)?;
            Some(u32::from_be_bytes(
                m.get(serial_at..serial_at + 4)?.try_into().ok()?,
            ))
        } else {
            None
        });
        at = rdata + rdlen;
    }
    Some(out)
}

/// Asks for `qtype` (SOA, or IXFR from `held`) over `stream` and reads the whole response:
/// its answer records' SOA serials, and the bytes read.
async fn ask(
    stream: &mut tokio::net::TcpStream,
    id: u16,
    qtype: u16,
    held: Option<u32>,
) -> Option<(Vec<Option<u32>>, usize)> {
    let q = query(id, qtype, held);
    let mut framed = u16::try_from(q.len()).ok()?.to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    stream.write_all(&framed).await.ok()?;
    let (mut records, mut bytes) = (Vec::new(), 0);
    let mut buf = Vec::new();
    loop {
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await.ok()?;
        buf.resize(usize::from(u16::from_be_bytes(len)), 0);
        stream.read_exact(&mut buf).await.ok()?;
        bytes += 2 + buf.len();
        if buf.get(3).is_some_and(|rcode| rcode & 0x0F != 0) {
            return None;
        }
        records.extend(answers(&buf)?);
        let newest = (*records.first()?)?;
        let at_newest = records.iter().filter(|s| **s == Some(newest)).count();
        let incremental = records.get(1).is_some_and(Option::is_some);
        let done = qtype == SOA
            || (records.len() == 1 && held == Some(newest))
            || (!incremental && at_newest == 2)
            || (incremental && at_newest == 3);
        if done {
            return Some((records, bytes));
        }
    }
}

/// What the simulated secondaries share with the bench.
struct Shared {
    /// The serial each holds.
    serials: Vec<AtomicU32>,
    /// When each last took a new serial (micros since `start`).
    taken_at: Vec<AtomicU64>,
    /// Bytes of the central server's answers read, and NOTIFYs taken.
    bytes: AtomicU64,
    notifies: AtomicUsize,
    registered: AtomicUsize,
    start: Instant,
}

/// The `i`-th secondary's address: 127.(1 + i / 62500).(i / 250 % 250 + 1).(i % 250 + 1).
fn address(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(
        127,
        u8::try_from(1 + i / 62_500).unwrap(),
        u8::try_from(i / 250 % 250 + 1).unwrap(),
        u8::try_from(i % 250 + 1).unwrap(),
    )
}

async fn connect(ip: Ipv4Addr, central: SocketAddr) -> Option<tokio::net::TcpStream> {
    let sock = TcpSocket::new_v4().ok()?;
    sock.bind(SocketAddr::new(IpAddr::V4(ip), 0)).ok()?;
    sock.connect(central).await.ok()
}

/// One simulated secondary: registers by an IXFR from `serial`, then follows NOTIFY.
async fn secondary(i: usize, central: SocketAddr, serial: u32, shared: Arc<Shared>) {
    let ip = address(i);
    let udp = UdpSocket::bind((ip, NOTIFY_PORT)).await.unwrap();
    shared.serials[i].store(serial, Ordering::Relaxed);
    let mut registered = false;
    for _ in 0..20 {
        if let Some(mut s) = connect(ip, central).await
            && let Some((_, bytes)) = ask(&mut s, 1, IXFR, Some(serial)).await
        {
            shared.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
            registered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if !registered {
        eprintln!("secondary {i} ({ip}) could not register");
        return;
    }
    shared.registered.fetch_add(1, Ordering::Relaxed);
    let mut buf = [0u8; 512];
    loop {
        let Ok((n, from)) = udp.recv_from(&mut buf).await else {
            return;
        };
        // The NOTIFY's answer: its header with QR set, the question.
        let mut reply = buf[..n].to_vec();
        if reply.len() < 12 {
            continue;
        }
        reply[2] |= 0x80;
        let _ = udp.send_to(&reply, from).await;
        shared.notifies.fetch_add(1, Ordering::Relaxed);
        let held = shared.serials[i].load(Ordering::Relaxed);
        let Some(mut s) = connect(ip, central).await else {
            continue;
        };
        let Some((soa, b1)) = ask(&mut s, 2, SOA, None).await else {
            continue;
        };
        shared.bytes.fetch_add(b1 as u64, Ordering::Relaxed);
        if soa.first().copied().flatten() == Some(held) {
            continue;
        }
        if let Some((records, b2)) = ask(&mut s, 3, IXFR, Some(held)).await {
            shared.bytes.fetch_add(b2 as u64, Ordering::Relaxed);
            if let Some(Some(newest)) = records.first() {
                shared.serials[i].store(*newest, Ordering::Relaxed);
                let micros = u64::try_from(shared.start.elapsed().as_micros()).unwrap_or(u64::MAX);
                shared.taken_at[i].store(micros, Ordering::Relaxed);
            }
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[allow(clippy::too_many_lines)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(bin) = args.get(1).filter(|a| !a.starts_with("--")).cloned() else {
        eprintln!(
            "usage: fabric-fanout-bench PATH/TO/cluster-dns [--agents 5000] [--changes 10] [--services 1000] [--endpoints 10000]"
        );
        std::process::exit(2);
    };
    let agents = usize_arg(&args, "--agents", 5_000);
    let changes = usize_arg(&args, "--changes", 10);
    let cluster = SyntheticCluster {
        services: usize_arg(&args, "--services", 1_000),
        endpoints: usize_arg(&args, "--endpoints", 10_000),
        ..SyntheticCluster::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let fake = rt
        .block_on(FakeApiServer::start_with(Options {
            bookmark_interval: Duration::from_secs(60),
            ..Options::default()
        }))
        .unwrap();
    fake.load(cluster.objects()).unwrap();
    let dir = std::env::temp_dir().join(format!("fabric-fanout-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corefile = dir.join("Corefile");
    std::fs::write(
        &corefile,
        format!(
            ".:0 {{
    bind 127.0.0.1
    errors
    ready 127.0.0.1:0
    transfer cluster.local {{
       to *
       notify transferred {NOTIFY_PORT}
    }}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
       endpoint {}
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }}
    cache 30
}}
",
            fake.url()
        ),
    )
    .unwrap();
    let tcp_max = usize_arg(&args, "--tcp-max", 0).to_string();
    let env: &[(&str, &str)] = if tcp_max == "0" {
        &[]
    } else {
        &[("CLUSTER_DNS_TCP_MAX_CONNECTIONS", tcp_max.as_str())]
    };
    let mut central = spawn_cluster_dns_with(&bin, &corefile, env).unwrap();
    let pid = central.child.id();
    let addr = central.addr;
    // The central serial, once the zone is built.
    let serial = rt.block_on(async {
        for _ in 0..300 {
            if let Some(mut s) = connect(Ipv4Addr::LOCALHOST, addr).await
                && let Some((soa, _)) = ask(&mut s, 9, SOA, None).await
                && let Some(Some(serial)) = soa.first()
            {
                return *serial;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the central server never answered its SOA");
    });
    println!(
        "cluster: {} Services, {} endpoints; {agents} simulated secondaries; {changes} changes (one new Service each, a second apart)",
        cluster.services, cluster.endpoints
    );
    let shared = Arc::new(Shared {
        serials: (0..agents).map(|_| AtomicU32::new(0)).collect(),
        taken_at: (0..agents).map(|_| AtomicU64::new(0)).collect(),
        bytes: AtomicU64::new(0),
        notifies: AtomicUsize::new(0),
        registered: AtomicUsize::new(0),
        start: Instant::now(),
    });
    let t = Instant::now();
    for i in 0..agents {
        rt.spawn(secondary(i, addr, serial, shared.clone()));
    }
    while shared.registered.load(Ordering::Relaxed) < agents && t.elapsed() < Duration::from_secs(300) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let registered = shared.registered.load(Ordering::Relaxed);
    println!(
        "registered: {registered} of {agents} in {:.1} s (an IXFR each, answered 'current'); central RSS {:.1} MiB",
        t.elapsed().as_secs_f64(),
        status_kb(pid, "VmRSS:") as f64 / 1024.0
    );
    std::thread::sleep(Duration::from_secs(2));
    let mut delays = Vec::new();
    let mut cpu_per_change = Vec::new();
    let mut bytes_per_change = Vec::new();
    let mut missed = 0;
    for c in 0..changes {
        let (cpu0, bytes0) = (cpu_time(pid), shared.bytes.load(Ordering::Relaxed));
        let before: Vec<u32> = shared.serials.iter().map(|s| s.load(Ordering::Relaxed)).collect();
        let changed_at = shared.start.elapsed();
        let ip = Ipv4Addr::new(
            10,
            97,
            u8::try_from(c / 250).unwrap(),
            u8::try_from(c % 250 + 1).unwrap(),
        );
        fake.create(synthetic::service("ns-0", &format!("fanout-{c}"), Some(ip)))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let moved = |i: usize| shared.serials[i].load(Ordering::Relaxed) != before[i];
        while Instant::now() < deadline && !(0..registered).all(moved) {
            std::thread::sleep(Duration::from_millis(20));
        }
        // Let the last transfers' bytes and the central server's CPU settle.
        std::thread::sleep(Duration::from_millis(500));
        for i in 0..registered {
            if moved(i) {
                let at = Duration::from_micros(shared.taken_at[i].load(Ordering::Relaxed));
                delays.push(at.saturating_sub(changed_at).as_secs_f64());
            } else {
                missed += 1;
            }
        }
        cpu_per_change.push((cpu_time(pid) - cpu0).as_secs_f64());
        bytes_per_change.push((shared.bytes.load(Ordering::Relaxed) - bytes0) as f64);
        std::thread::sleep(Duration::from_millis(700));
    }
    delays.sort_by(f64::total_cmp);
    cpu_per_change.sort_by(f64::total_cmp);
    bytes_per_change.sort_by(f64::total_cmp);
    let watches = fake.open_watches();
    println!(
        "\n| secondaries | API watches open | change to new serial on every secondary: p50 / p99 / max | missed | central CPU per change (median) | bytes to secondaries per change (median) | per secondary | NOTIFYs taken | central RSS after |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    if delays.is_empty() {
        println!("| {registered} | {watches} | (none) | {missed} | | | | | |");
    } else {
        let bytes = percentile(&bytes_per_change, 0.5);
        println!(
            "| {registered} | {watches} | {:.2} / {:.2} / {:.2} s | {missed} | {:.0} ms | {:.1} MiB | {:.0} B | {} | {:.1} MiB |",
            percentile(&delays, 0.5),
            percentile(&delays, 0.99),
            delays[delays.len() - 1],
            percentile(&cpu_per_change, 0.5) * 1000.0,
            bytes / 1024.0 / 1024.0,
            bytes / registered.max(1) as f64,
            shared.notifies.load(Ordering::Relaxed),
            status_kb(pid, "VmRSS:") as f64 / 1024.0,
        );
    }
    let _ = central.child.kill();
    let _ = central.child.wait();
    drop(central.log);
    let _ = std::fs::remove_dir_all(&dir);
}
