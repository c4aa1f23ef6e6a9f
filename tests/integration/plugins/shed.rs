//! `shed` under a flood (CoreDNS 1.14's plugin): 4,000 UDP queries for names that must be
//! forwarded, to an upstream that never answers, on one socket. With `shed` the socket lets
//! 1,024 of them wait and drops the rest, counted in `coredns_shed_dropped_total{reason="query"}`,
//! while a question answered without I/O is still answered; without it, nothing is dropped
//! (the test's control, so it fails if `shed` does nothing).

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::BinEncodable;

use crate::support;
use crate::support::upstream::{Mode, Scripted};

const FLOOD: usize = 4000;

/// Sends `FLOOD` queries for distinct forwarded names from one client socket as fast as it can.
async fn flood(addr: SocketAddr) {
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for i in 0..FLOOD {
        let q = support::query(&format!("n{i}.flood.example."), RecordType::A)
            .to_bytes()
            .unwrap();
        let _ = sock.send_to(&q, addr).await;
        if i % 200 == 199 {
            // Stay within the socket's receive queue.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Query drops counted on the listener, after a flood, with or without `shed`; and the answer to
/// a question the chain answers without I/O, asked during the flood.
async fn flood_with(shed: bool) -> (f64, String) {
    let up = Scripted::start().await;
    up.set_mode(Mode::Drop);
    let dir = support::temp_dir("shed");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n multisocket 1\n{} prometheus 127.0.0.1:0\n template IN A local.example {{\n  answer \"{{{{ .Name }}}} 60 IN A 192.0.2.1\"\n }}\n forward . {} {{\n  max_concurrent 100000\n }}\n}}\n",
        if shed { " shed\n" } else { "" },
        up.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    flood(addr).await;
    let local =
        tokio::task::spawn_blocking(move || support::dig(addr, &["+tries=3", "+short", "local.example"]))
            .await
            .unwrap();
    // Every query has been read by now or dropped by the kernel; the worker counts as it reads.
    let mut dropped = 0.0;
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    for _ in 0..20 {
        let m = crate::support::scrape(metrics).await;
        let now = crate::support::sum(&m, "coredns_shed_dropped_total", &["reason=\"query\""]);
        if now == dropped && now > 0.0 {
            break;
        }
        dropped = now;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.stop().await.unwrap();
    (dropped, local.trim().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_forwarded_names_is_shed_past_the_depth_and_local_answers_go_on() {
    let (dropped, local) = flood_with(true).await;
    assert_eq!(local, "192.0.2.1", "answered during the flood");
    // 1,024 wait; the kernel may drop some of the rest before they are read.
    assert!(
        dropped >= 1000.0 && dropped <= (FLOOD - 1024) as f64,
        "{dropped} dropped"
    );
    let (dropped, local) = flood_with(false).await;
    assert_eq!(local, "192.0.2.1");
    assert_eq!(dropped, 0.0, "without shed nothing is dropped");
}

#[test]
fn shed_takes_no_arguments() {
    let dir = support::temp_dir("shed-check");
    let e = support::check_corefile(&dir, ".:53 {\n shed 10\n}\n").unwrap_err();
    assert!(e.contains("Corefile:2"), "{e}");
}

/// CoreDNS refuses `shed` outside plain DNS blocks at start: it disciplines UDP sockets, which
/// `tls://` and `https://` blocks do not have.
#[test]
fn shed_is_refused_in_tls_and_https_blocks() {
    let dir = support::temp_dir("shed-scheme");
    for key in ["tls://.:853", "https://.:443"] {
        let e = support::check_corefile(&dir, &format!("{key} {{\n whoami\n shed\n}}\n")).unwrap_err();
        assert!(
            e.contains("Corefile:3") && e.contains("plain DNS server blocks"),
            "{key}: {e}"
        );
    }
    support::check_corefile(&dir, ".:53 {\n whoami\n shed\n}\n").unwrap();
}
