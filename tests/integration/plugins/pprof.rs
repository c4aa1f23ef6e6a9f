//! `pprof`: `/debug/pprof/profile?seconds=2` taken from the real server while it answers
//! queries is a gzipped pprof protobuf that `go tool pprof -top` reads and that holds samples
//! of the server's own functions; a second profile asked meanwhile is refused (one at a time);
//! Go's runtime profiles answer 404 saying why; the README's Corefiles pass `--check` and a
//! wrong argument fails at its line.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::BinEncodable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support;

/// `GET path` over HTTP/1.0: the status and the body's bytes.
async fn get(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut all))
        .await
        .expect("the response in time")
        .unwrap();
    let at = all.windows(4).position(|w| w == b"\r\n\r\n").expect("a header");
    let head = String::from_utf8_lossy(&all[..at]).to_string();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, all[at + 4..].to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_profile_taken_under_load_is_read_by_go_tool_pprof() {
    let dir = support::temp_dir("pprof");
    let running = support::start(".:0 {\n bind 127.0.0.1\n pprof 127.0.0.1:0\n whoami\n}\n", &dir).await;
    let addr = running.dns_addrs()[0];
    let http = running.http_addr("/debug/pprof").expect("the pprof listener");

    // Queries until the profile is back (the first profile of a process starts only once the
    // profiler has read the binary's symbols, seconds in a debug build), 4 clients with 32 in
    // flight each, so the server's threads stay busy: the profiling timer (ITIMER_PROF) fires
    // on the kernel's ticks, and a thread that runs in short bursts between idle periods is
    // seldom running at one.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..4 {
        let stop = stop.clone();
        load.push(tokio::spawn(async move {
            let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let q = support::query("load.example.", RecordType::A).to_bytes().unwrap();
            let mut buf = vec![0; 1024];
            // Bounded: the profile is back within 60 s or the test fails.
            let until = Instant::now() + Duration::from_secs(60);
            let mut answered = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < until {
                for _ in 0..32 {
                    sock.send_to(&q, addr).await.unwrap();
                }
                for _ in 0..32 {
                    match tokio::time::timeout(Duration::from_millis(200), sock.recv_from(&mut buf)).await {
                        Ok(_) => answered += 1,
                        Err(_) => break,
                    }
                }
            }
            answered
        }));
    }
    let profile = tokio::spawn(async move { get(http, "/debug/pprof/profile?seconds=2").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, body) = get(http, "/debug/pprof/profile?seconds=1").await;
    assert_eq!(status, 500, "one profile at a time");
    assert!(String::from_utf8_lossy(&body).contains("already being taken"));
    let (status, body) = profile.await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut answered = 0;
    for l in load {
        answered += l.await.unwrap();
    }
    assert!(answered > 100, "the server answered during the profile");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(&body[..2], &[0x1f, 0x8b], "gzipped, as Go serves it");

    let file = dir.join("cpu.pb.gz");
    std::fs::write(&file, &body).unwrap();
    let out = std::process::Command::new("go")
        .args(["tool", "pprof", "-top"])
        .arg(&file)
        .env("PPROF_TMPDIR", &dir)
        .env("HOME", &dir)
        .output()
        .expect("go (the Go toolchain) runs");
    let top = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{top}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(top.contains("flat%"), "{top}");
    let rows = top
        .lines()
        .skip_while(|l| !l.contains("flat%"))
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .count();
    assert!(rows > 0, "samples in the profile:\n{top}");
    let first = top
        .lines()
        .skip_while(|l| !l.contains("flat%"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        !first.contains("backtrace") && !first.contains("pprof::"),
        "the profiler's own frames are not the leaf: {first}"
    );
    // Shown with --nocapture.
    eprintln!("{}", top.lines().take(14).collect::<Vec<_>>().join("\n"));
    assert!(
        top.contains("cluster_dns::"),
        "the server's own functions:\n{top}"
    );

    // The profiler is free again.
    let (status, _) = get(http, "/debug/pprof/profile?seconds=1").await;
    assert_eq!(status, 200);
    drop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_runtime_profiles_answer_404_and_the_index_lists_what_is_there() {
    let dir = support::temp_dir("pprof-404");
    let running = support::start(
        ".:0 {\n bind 127.0.0.1\n pprof 127.0.0.1:0 {\n  block\n }\n whoami\n}\n",
        &dir,
    )
    .await;
    let http = running.http_addr("/debug/pprof").expect("the pprof listener");
    let (status, body) = get(http, "/debug/pprof/").await;
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("/debug/pprof/profile?seconds=N"));
    for name in [
        "heap",
        "goroutine",
        "allocs",
        "block",
        "mutex",
        "threadcreate",
        "trace",
    ] {
        let (status, body) = get(http, &format!("/debug/pprof/{name}")).await;
        assert_eq!(status, 404, "{name}");
        assert!(
            String::from_utf8_lossy(&body).contains("not a Go program"),
            "{name}"
        );
    }
    let (status, body) = get(http, "/debug/pprof/cmdline").await;
    assert_eq!(status, 200);
    assert!(!body.is_empty());
    let (status, body) = get(http, "/debug/pprof/profile?seconds=999").await;
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("exceeds"));
    drop(running);
}

#[test]
fn readme_examples_pass_check_and_bad_lines_fail_at_their_line() {
    let dir = support::temp_dir("pprof-check");
    for example in [
        "pprof",
        "pprof 10.9.8.7:6060",
        "pprof :6060 {\n  block\n }",
        "pprof {\n  block 10\n }",
    ] {
        let text = format!(". {{\n {example}\n whoami\n}}\n");
        support::check_corefile(&dir, &text).unwrap_or_else(|e| panic!("{example}: {e}"));
    }
    for (line, want) in [
        ("pprof example.com:6060", "is not an address"),
        ("pprof {\n  block x\n }", "invalid integer value"),
        ("pprof :1 :2", "unexpected argument"),
        ("pprof\n pprof", "only once"),
    ] {
        let text = format!(". {{\n whoami\n {line}\n}}\n");
        let err = support::check_corefile(&dir, &text).unwrap_err();
        assert!(
            err.contains("Corefile:3") || err.contains("Corefile:4"),
            "{line}: {err}"
        );
        assert!(err.contains(want), "{line}: {err}");
    }
}
