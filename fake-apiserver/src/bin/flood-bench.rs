//! `flood-bench`: what one noisy client does to everyone else, run by `bench/flood.sh`
//! (issue 34).
//!
//! The `cluster-dns` binary (the first argument) serves the demo cluster (`config/
//! demo-cluster.yaml`, through `manifests`) under kubeadm's Corefile, forwarding the rest to an
//! upstream in this process that answers `ok*` and `cached*` names at once (A 192.0.2.1, TTL
//! 300), `nx*` names NXDOMAIN at once, `slow*` names after 200 ms, and never answers `silent*`
//! names. dnsperf processes are the clients, each from its own loopback address (`-a`). Each
//! case runs without `fairness` and with it (written bare), on a fresh server:
//!
//! - `quiet`: 127.0.0.2 asks 200 new `ok` names a second while 127.0.0.66 floods random
//!   `silent` names (issue 34's measurement), and the quiet client alone;
//! - `crowd`: 20 clients (127.0.0.10-29) send 2,000 QPS in all of cluster names and cached
//!   outside names while 127.0.0.66 floods random `nx` names as fast as dnsperf sends, and
//!   the 20 alone;
//! - `coalesce`: 127.0.0.3 asks 10 `slow` names again and again, 500 outstanding, without a
//!   cache: the most exchanges the upstream saw in flight at once for one name;
//! - `soak`: `--soak-seconds` (300) of the `silent` flood with `fairness`, RSS sampled every
//!   second: its peak, and whether the process stayed up.
//!
//! Usage: `flood-bench PATH/TO/cluster-dns [--seconds N] [--soak-seconds N] [--only CASE]`

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_apiserver::bench::{Spawned, spawn_cluster_dns, status_kb, usize_arg};

/// What the upstream saw.
#[derive(Default)]
struct Seen {
    queries: AtomicU64,
    silent: AtomicU64,
    /// Per question (name and type bytes): exchanges in flight now, and the most at once.
    in_flight: Mutex<HashMap<Vec<u8>, (u32, u32)>>,
}

/// The end of the question section of `q` (after QNAME, QTYPE, QCLASS), if well formed.
fn question_end(q: &[u8]) -> Option<usize> {
    let mut at = 12;
    loop {
        let len = usize::from(*q.get(at)?);
        if len == 0 {
            return Some(at + 5).filter(|e| *e <= q.len());
        }
        if len & 0xC0 != 0 {
            return None;
        }
        at += 1 + len;
    }
}

/// The reply to `q` (`None`: no reply), after how long.
fn reply(q: &[u8]) -> Option<(Vec<u8>, Duration)> {
    let end = question_end(q)?;
    let first = q.get(13..13 + usize::from(q[12]))?.to_ascii_lowercase();
    if first.starts_with(b"silent") {
        return None;
    }
    let qtype = u16::from_be_bytes([q[end - 4], q[end - 3]]);
    let mut r = q[..end].to_vec();
    // QR, RD as asked; RA; no AA; counts: one question, no additional (the OPT is dropped).
    r[2] = 0x80 | (q[2] & 0x01);
    r[3] = 0x80;
    r[10] = 0;
    r[11] = 0;
    let delay = if first.starts_with(b"slow") {
        Duration::from_millis(200)
    } else {
        Duration::ZERO
    };
    if first.starts_with(b"nx") {
        r[3] |= 3;
    } else if qtype == 1 {
        r[7] = 1;
        r.extend_from_slice(&[0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 1, 0x2C, 0, 4, 192, 0, 2, 1]);
    }
    Some((r, delay))
}

/// The upstream: one socket, one thread receiving; delayed replies from a timer thread.
fn upstream(seen: Arc<Seen>) -> SocketAddr {
    let sock = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    let addr = sock.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>, SocketAddr, Vec<u8>)>();
    let (s2, seen2) = (sock.clone(), seen.clone());
    std::thread::spawn(move || {
        // Replies due later, sent in order (every delay is the same).
        while let Ok((due, bytes, to, key)) = rx.recv() {
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            // Out of flight before the reply leaves: the next exchange of the name may start
            // as soon as the reply arrives.
            if let Some(e) = seen2.in_flight.lock().unwrap().get_mut(&key) {
                e.0 = e.0.saturating_sub(1);
            }
            let _ = s2.send_to(&bytes, to);
        }
    });
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                return;
            };
            seen.queries.fetch_add(1, Ordering::Relaxed);
            let q = &buf[..n];
            let Some((r, delay)) = reply(q) else {
                seen.silent.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            if delay.is_zero() {
                let _ = sock.send_to(&r, from);
                continue;
            }
            let key = q[12..question_end(q).unwrap_or(12)].to_ascii_lowercase();
            {
                let mut m = seen.in_flight.lock().unwrap();
                let e = m.entry(key.clone()).or_default();
                e.0 += 1;
                e.1 = e.1.max(e.0);
            }
            let _ = tx.send((Instant::now() + delay, r, from, key));
        }
    });
    addr
}

/// dnsperf's summary.
#[derive(Debug, Default, Clone, Copy)]
struct Perf {
    sent: f64,
    /// Replies of any rcode.
    completed: f64,
    /// NOERROR and NXDOMAIN replies: answers (REFUSED and SERVFAIL are failures).
    answered: f64,
    latency_ms: f64,
}

/// Starts dnsperf from `from` against `server`, over `data`.
fn dnsperf(from: &str, server: SocketAddr, data: &Path, secs: usize, extra: &[&str]) -> Child {
    Command::new("dnsperf")
        .args([
            "-a",
            from,
            "-s",
            &server.ip().to_string(),
            "-p",
            &server.port().to_string(),
        ])
        .arg("-d")
        .arg(data)
        .args(["-l", &secs.to_string()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("dnsperf runs (apt-get install dnsperf)")
}

fn perf_of(child: Child) -> Perf {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let num = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // `Response codes:       NOERROR 837 (85.06%), SERVFAIL 3 (0.30%)`
    let codes = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Response codes:"))
        .unwrap_or_default();
    let count = |rcode: &str| {
        codes
            .split(',')
            .filter_map(|c| {
                c.split_whitespace()
                    .collect::<Vec<_>>()
                    .get(..2)
                    .map(|v| (v[0].to_owned(), v[1].to_owned()))
            })
            .find(|(k, _)| k == rcode)
            .and_then(|(_, v)| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Perf {
        sent: num("Queries sent:"),
        completed: num("Queries completed:"),
        answered: count("NOERROR") + count("NXDOMAIN"),
        latency_ms: num("Average Latency (s):") * 1000.0,
    }
}

fn write_lines(path: &Path, lines: impl Iterator<Item = String>) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
}

/// A pseudo-random label (xorshift), so every flood name is new.
fn random_labels(seed: u64, n: usize, prefix: &str) -> impl Iterator<Item = String> {
    let mut x = seed | 1;
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        format!("{prefix}{x:016x}.bench.example. A")
    })
}

struct Bench {
    bin: String,
    dir: PathBuf,
    demo: PathBuf,
    secs: usize,
}

impl Bench {
    fn serve(&self, upstream: SocketAddr, fairness: bool, cache: bool) -> Spawned {
        let corefile = self.dir.join("Corefile");
        let fair = if fairness { "    fairness\n" } else { "" };
        let cache = if cache {
            "    cache 30 {\n       disable success cluster.local\n       disable denial cluster.local\n    }\n"
        } else {
            ""
        };
        std::fs::write(
            &corefile,
            format!(
                ".:0 {{\n    bind 127.0.0.1\n    errors\n{fair}    kubernetes cluster.local in-addr.arpa ip6.arpa {{\n       manifests {}\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }}\n    forward . {upstream} {{\n       max_concurrent 1000\n    }}\n{cache}    loadbalance\n}}\n",
                self.demo.display()
            ),
        )
        .unwrap();
        spawn_cluster_dns(&self.bin, &corefile).unwrap()
    }

    fn data(&self, name: &str, lines: impl Iterator<Item = String>) -> PathBuf {
        let p = self.dir.join(name);
        write_lines(&p, lines);
        p
    }

    /// The quiet client's new names under the silent flood, or alone.
    fn quiet(&self, fairness: bool, flood: bool, round: u64) -> Perf {
        let seen = Arc::new(Seen::default());
        let up = upstream(seen.clone());
        let mut s = self.serve(up, fairness, true);
        let quiet = self.data(
            "quiet.txt",
            (0..200 * self.secs).map(|i| format!("ok{round}-{i}.bench.example. A")),
        );
        let noisy = self.data("silent.txt", random_labels(round + 7, 200_000, "silent"));
        let flooder = flood.then(|| {
            dnsperf(
                "127.0.0.66",
                s.addr,
                &noisy,
                self.secs + 1,
                &["-q", "5000", "-t", "2"],
            )
        });
        std::thread::sleep(Duration::from_millis(500));
        let p = perf_of(dnsperf(
            "127.0.0.2",
            s.addr,
            &quiet,
            self.secs,
            &["-Q", "200", "-n", "1", "-t", "2"],
        ));
        if let Some(f) = flooder {
            let f = perf_of(f);
            println!(
                "    flooder: {:.0} sent, {:.0} replies; upstream saw {} questions ({} of them never answered)",
                f.sent,
                f.completed,
                seen.queries.load(Ordering::Relaxed),
                seen.silent.load(Ordering::Relaxed)
            );
        }
        let _ = s.child.kill();
        let _ = s.child.wait();
        p
    }

    /// The 20 clients' cluster and cached names, under the nx flood or alone.
    fn crowd(&self, fairness: bool, flood: bool, round: u64) -> Perf {
        let seen = Arc::new(Seen::default());
        let up = upstream(seen.clone());
        let mut s = self.serve(up, fairness, true);
        let names = [
            "web.default.svc.cluster.local. A",
            "_http._tcp.web.default.svc.cluster.local. SRV",
            "kubernetes.default.svc.cluster.local. A",
            "kube-dns.kube-system.svc.cluster.local. A",
            "nosuch.default.svc.cluster.local. A",
        ];
        let mixed = self.data(
            "crowd.txt",
            (0..100).map(|i| {
                if i % 2 == 0 {
                    names[(i / 2) % names.len()].to_owned()
                } else {
                    format!("cached{}.bench.example. A", i % 20)
                }
            }),
        );
        // Warm the cache with the outside names.
        let warm = perf_of(dnsperf("127.0.0.9", s.addr, &mixed, 2, &["-n", "1"]));
        assert!(warm.completed > 0.0, "the warm-up got answers");
        let noisy = self.data("nx.txt", random_labels(round + 11, 500_000, "nx"));
        let flooder = flood.then(|| {
            dnsperf(
                "127.0.0.66",
                s.addr,
                &noisy,
                self.secs + 1,
                &["-q", "500", "-t", "1"],
            )
        });
        std::thread::sleep(Duration::from_millis(500));
        let crowd: Vec<Child> = (10..30)
            .map(|i| {
                dnsperf(
                    &format!("127.0.0.{i}"),
                    s.addr,
                    &mixed,
                    self.secs,
                    &["-Q", "100", "-t", "2"],
                )
            })
            .collect();
        let mut all = Perf::default();
        let mut weighted = 0.0;
        for c in crowd {
            let p = perf_of(c);
            all.sent += p.sent;
            all.completed += p.completed;
            all.answered += p.answered;
            weighted += p.latency_ms * p.completed;
        }
        all.latency_ms = weighted / all.completed.max(1.0);
        if let Some(f) = flooder {
            let f = perf_of(f);
            println!(
                "    flooder: {:.0} sent ({:.0}/s), {:.0} replies ({:.0} answers); upstream saw {} questions",
                f.sent,
                f.sent / self.secs as f64,
                f.completed,
                f.answered,
                seen.queries.load(Ordering::Relaxed)
            );
        }
        let _ = s.child.kill();
        let _ = s.child.wait();
        all
    }

    /// The most upstream exchanges in flight at once for one name, asking 10 slow names.
    fn coalesce(&self) -> (u32, u64, Perf) {
        let seen = Arc::new(Seen::default());
        let up = upstream(seen.clone());
        let mut s = self.serve(up, false, false);
        let slow = self.data("slow.txt", (0..10).map(|i| format!("slow{i}.bench.example. A")));
        let p = perf_of(dnsperf(
            "127.0.0.3",
            s.addr,
            &slow,
            self.secs,
            &["-q", "500", "-t", "2"],
        ));
        let most = seen
            .in_flight
            .lock()
            .unwrap()
            .values()
            .map(|e| e.1)
            .max()
            .unwrap_or(0);
        let _ = s.child.kill();
        let _ = s.child.wait();
        (most, seen.queries.load(Ordering::Relaxed), p)
    }

    /// Peak RSS (kB) and whether the server stayed up through `secs` of the silent flood.
    fn soak(&self, secs: usize, fairness: bool) -> (u64, bool, Perf) {
        let seen = Arc::new(Seen::default());
        let up = upstream(seen.clone());
        let mut s = self.serve(up, fairness, true);
        let noisy = self.data("soak.txt", random_labels(99, 1_000_000, "silent"));
        let pid = s.child.id();
        let flooder = dnsperf("127.0.0.66", s.addr, &noisy, secs, &["-q", "10000", "-t", "2"]);
        let mut peak = 0;
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(secs as u64) {
            peak = peak.max(status_kb(pid, "VmRSS:"));
            std::thread::sleep(Duration::from_secs(1));
        }
        let f = perf_of(flooder);
        let alive = s.child.try_wait().unwrap().is_none();
        let _ = s.child.kill();
        let _ = s.child.wait();
        (peak, alive, f)
    }
}

/// The share of questions answered (NOERROR or NXDOMAIN), in percent.
fn pct(p: Perf) -> f64 {
    100.0 * p.answered / p.sent.max(1.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bin = args
        .get(1)
        .cloned()
        .expect("usage: flood-bench PATH/TO/cluster-dns [--seconds N]");
    let secs = usize_arg(&args, "--seconds", 20);
    let soak = usize_arg(&args, "--soak-seconds", 300);
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let dir = std::env::temp_dir().join(format!("flood-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let b = Bench {
        bin,
        dir,
        demo: root.join("config/demo-cluster.yaml").canonicalize().unwrap(),
        secs,
    };
    let run = |case: &str| only.as_deref().is_none_or(|o| o == case);
    if run("quiet") {
        println!(
            "quiet: 127.0.0.2 asks 200 new outside names/s for {secs} s; 127.0.0.66 floods names the upstream never answers"
        );
        let alone = b.quiet(false, false, 1);
        println!(
            "  alone:                  {:.2}% answered, mean {:.2} ms",
            pct(alone),
            alone.latency_ms
        );
        for (fair, label) in [
            (false, "flood, no fairness:    "),
            (true, "flood, fairness:       "),
        ] {
            let p = b.quiet(fair, true, 2 + u64::from(fair));
            println!(
                "  {label} {:.2}% answered ({:.0} of {:.0}), mean {:.2} ms",
                pct(p),
                p.answered,
                p.sent,
                p.latency_ms
            );
        }
    }
    if run("crowd") {
        println!(
            "crowd: 20 clients, 2,000 QPS in all of cluster and cached names, {secs} s; 127.0.0.66 floods new NXDOMAIN names as fast as dnsperf sends (500 outstanding)"
        );
        for (fair, flood, label) in [
            (false, false, "no flood:              "),
            (false, true, "flood, no fairness:    "),
            (true, true, "flood, fairness:       "),
        ] {
            let p = b.crowd(fair, flood, 5 + u64::from(fair));
            println!(
                "  {label} {:.3}% answered ({:.0} of {:.0}), mean {:.3} ms",
                pct(p),
                p.answered,
                p.sent,
                p.latency_ms
            );
        }
    }
    if run("coalesce") {
        let (most, queries, p) = b.coalesce();
        println!(
            "coalesce: 10 names answered after 200 ms, 500 outstanding for {secs} s: {:.0} questions answered, {queries} upstream exchanges, at most {most} in flight at once for one name",
            p.answered
        );
    }
    if run("soak") {
        for fair in [false, true] {
            let (peak, alive, f) = b.soak(soak, fair);
            println!(
                "soak ({} fairness): {soak} s of never-answered names, {:.0} sent ({:.0}/s): peak RSS {:.1} MiB, {}",
                if fair { "with" } else { "without" },
                f.sent,
                f.sent / soak as f64,
                peak as f64 / 1024.0,
                if alive {
                    "still up"
                } else {
                    "NOT running at the end"
                }
            );
        }
    }
}
