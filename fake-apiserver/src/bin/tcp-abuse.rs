//! `tcp-abuse`: the abusive-TCP-client benchmark of cluster-dns, run by `bench/tcp-abuse.sh`.
//!
//! Opens `--conns` TCP connections to a running cluster-dns (loopback only), at most
//! `--concurrency` open at once, `--rate` opened a second; each sends a length prefix of 65,535 (`\xff\xff`) and `--body`
//! bytes (0: an idle connection that sends nothing), then waits until the server closes it or
//! `--hold` seconds pass. Meanwhile it asks `--name` over UDP and over TCP (a new connection
//! each time) every 50 ms and counts the answers, and samples the server's RSS (`VmRSS` of
//! `--pid`) every 100 ms. After the last connection is gone it waits `--settle` seconds and
//! samples RSS again. Everything is bounded: it stops by itself.
//!
//! Prints `key=value` lines: rss_before_kib, rss_peak_kib, rss_end_kib (when the last
//! connection closed), rss_after_kib (after settling), connections opened / refused / closed by
//! the server / held to the end, probes sent and answered per transport.

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::Semaphore;

#[derive(Debug)]
struct Args {
    addr: SocketAddr,
    conns: usize,
    body: usize,
    concurrency: usize,
    rate: u32,
    hold: Duration,
    settle: Duration,
    name: String,
    pid: u32,
}

fn usage() -> ! {
    eprintln!(
        "usage: tcp-abuse --addr 127.0.0.1:PORT --pid SERVER_PID [--conns 20000] [--body 65000] \
         [--concurrency 8000] [--rate 4000] [--hold 15] [--settle 5] [--name web.default.svc.cluster.local.]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        addr: "127.0.0.1:1053".parse().unwrap(),
        conns: 20_000,
        body: 65_000,
        concurrency: 8_000,
        rate: 4_000,
        hold: Duration::from_secs(15),
        settle: Duration::from_secs(5),
        name: "web.default.svc.cluster.local.".into(),
        pid: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| usage());
        let num = || v.parse::<usize>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--addr" => a.addr = v.parse().unwrap_or_else(|_| usage()),
            "--conns" => a.conns = num().min(100_000),
            "--body" => a.body = num().min(65_535),
            "--concurrency" => a.concurrency = num().clamp(1, 60_000),
            "--rate" => a.rate = u32::try_from(num()).unwrap_or(u32::MAX).clamp(1, 1_000_000),
            "--hold" => a.hold = Duration::from_secs(num().min(120) as u64),
            "--settle" => a.settle = Duration::from_secs(num().min(120) as u64),
            "--name" => a.name = v,
            "--pid" => a.pid = v.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let loopback = match a.addr.ip() {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => ip.is_loopback(),
    };
    if !loopback || a.pid == 0 {
        usage();
    }
    a
}

/// `VmRSS` of `pid` in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A recursive A query for `name` with `id`.
fn query(name: &str, id: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        q.push(u8::try_from(label.len()).unwrap());
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// An answer to `id` with NOERROR and at least one answer record.
fn answered(reply: &[u8], id: u16) -> bool {
    reply.len() >= 12
        && reply[..2] == id.to_be_bytes()
        && reply[3] & 0x0f == 0
        && u16::from_be_bytes([reply[6], reply[7]]) > 0
}

async fn probe_udp(addr: SocketAddr, name: &str, id: u16) -> bool {
    let Ok(sock) = UdpSocket::bind("127.0.0.1:0").await else {
        return false;
    };
    if sock.send_to(&query(name, id), addr).await.is_err() {
        return false;
    }
    let mut buf = [0u8; 1500];
    matches!(
        tokio::time::timeout(Duration::from_secs(1), sock.recv(&mut buf)).await,
        Ok(Ok(n)) if answered(&buf[..n], id)
    )
}

async fn probe_tcp(addr: SocketAddr, name: &str, id: u16) -> bool {
    let exchange = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let q = query(name, id);
        let mut framed = u16::try_from(q.len()).ok()?.to_be_bytes().to_vec();
        framed.extend_from_slice(&q);
        s.write_all(&framed).await.ok()?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len).await.ok()?;
        let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut reply).await.ok()?;
        Some(answered(&reply, id))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), exchange).await,
        Ok(Some(true))
    )
}

#[derive(Debug, Default)]
struct Counts {
    opened: AtomicU64,
    refused: AtomicU64,
    closed_by_server: AtomicU64,
    held: AtomicU64,
    udp_sent: AtomicU64,
    udp_answered: AtomicU64,
    tcp_sent: AtomicU64,
    tcp_answered: AtomicU64,
}

#[tokio::main]
async fn main() {
    let args = Arc::new(parse_args());
    let counts = Arc::new(Counts::default());
    let rss_before = rss_kib(args.pid).unwrap_or(0);
    let peak = Arc::new(AtomicU64::new(rss_before));
    let stop = Arc::new(AtomicBool::new(false));

    let sampler = {
        let (peak, stop, pid) = (peak.clone(), stop.clone(), args.pid);
        tokio::spawn(async move {
            while !stop.load(Ordering::Acquire) {
                if let Some(r) = rss_kib(pid) {
                    peak.fetch_max(r, Ordering::AcqRel);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    // The probes run while the abusive connections do, and stop with the last of them.
    let abusing = Arc::new(AtomicBool::new(true));
    let prober = {
        let (args, counts, stop) = (args.clone(), counts.clone(), abusing.clone());
        tokio::spawn(async move {
            let mut id: u16 = 1;
            let mut probes = tokio::task::JoinSet::new();
            while stop.load(Ordering::Acquire) {
                for tcp in [false, true] {
                    id = id.wrapping_add(1);
                    let (args, counts, id) = (args.clone(), counts.clone(), id);
                    probes.spawn(async move {
                        if tcp {
                            counts.tcp_sent.fetch_add(1, Ordering::Relaxed);
                            if probe_tcp(args.addr, &args.name, id).await {
                                counts.tcp_answered.fetch_add(1, Ordering::Relaxed);
                            }
                        } else {
                            counts.udp_sent.fetch_add(1, Ordering::Relaxed);
                            if probe_udp(args.addr, &args.name, id).await {
                                counts.udp_answered.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                }
                while probes.try_join_next().is_some() {}
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            while probes.join_next().await.is_some() {}
        })
    };

    let permits = Arc::new(Semaphore::new(args.concurrency));
    let mut payload = vec![0xffu8, 0xff];
    payload.resize(2 + args.body, b'A');
    let payload: Arc<[u8]> = payload.into();
    let mut conns = tokio::task::JoinSet::new();
    let started = std::time::Instant::now();
    // Connections are opened at `--rate` a second: faster, the kernel's accept queue overflows
    // and drops handshakes the client already counts as connected, so they never reach the
    // server.
    let mut pace = tokio::time::interval(Duration::from_secs(1) / args.rate);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    for _ in 0..args.conns {
        pace.tick().await;
        let permit = permits.clone().acquire_owned().await.unwrap();
        let (args, counts, payload) = (args.clone(), counts.clone(), payload.clone());
        conns.spawn(async move {
            let _permit = permit;
            let Ok(Ok(mut s)) =
                tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(args.addr)).await
            else {
                counts.refused.fetch_add(1, Ordering::Relaxed);
                return;
            };
            counts.opened.fetch_add(1, Ordering::Relaxed);
            let session = async {
                if args.body > 0 {
                    s.write_all(&payload).await?;
                }
                let mut buf = [0u8; 256];
                loop {
                    if s.read(&mut buf).await? == 0 {
                        return Ok::<(), std::io::Error>(());
                    }
                }
            };
            match tokio::time::timeout(args.hold, session).await {
                Ok(_) => counts.closed_by_server.fetch_add(1, Ordering::Relaxed),
                Err(_) => counts.held.fetch_add(1, Ordering::Relaxed),
            };
        });
        while conns.try_join_next().is_some() {}
    }
    let opened_in = started.elapsed();
    while conns.join_next().await.is_some() {}
    let rss_end = rss_kib(args.pid).unwrap_or(0);
    let abuse_for = started.elapsed();
    abusing.store(false, Ordering::Release);
    let _ = prober.await;
    tokio::time::sleep(args.settle).await;
    stop.store(true, Ordering::Release);
    let _ = sampler.await;
    let rss_after = rss_kib(args.pid).unwrap_or(0);

    let c = &counts;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    println!(
        "conns={} body={} concurrency={}",
        args.conns, args.body, args.concurrency
    );
    println!(
        "opening_s={:.1} abuse_s={:.1}",
        opened_in.as_secs_f64(),
        abuse_for.as_secs_f64()
    );
    println!(
        "opened={} refused={} closed_by_server={} held_to_end={}",
        get(&c.opened),
        get(&c.refused),
        get(&c.closed_by_server),
        get(&c.held)
    );
    println!(
        "rss_before_kib={rss_before} rss_peak_kib={} rss_end_kib={rss_end} rss_after_kib={rss_after}",
        peak.load(Ordering::Acquire)
    );
    println!(
        "udp_sent={} udp_answered={} tcp_sent={} tcp_answered={}",
        get(&c.udp_sent),
        get(&c.udp_answered),
        get(&c.tcp_sent),
        get(&c.tcp_answered)
    );
}
