//! `timeouts` over real sockets: `maxtcpqueries` answers that many queries on a connection and
//! then closes it (counted under `reason="max_queries"`), as `dig +keepopen` sees, and `idle`
//! closes a silent connection (the waits only bound a
//! broken server; nothing asserts elapsed time).

use std::time::Duration;

use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support;

/// Reads framed replies from `s` until the server closes it (at most 30 s).
async fn replies_until_closed(s: &mut TcpStream) -> Vec<Message> {
    let mut out = Vec::new();
    let read = async {
        loop {
            let mut len = [0u8; 2];
            if s.read_exact(&mut len).await.is_err() {
                return;
            }
            let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
            if s.read_exact(&mut buf).await.is_err() {
                return;
            }
            out.push(Message::from_bytes(&buf).unwrap());
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the server kept the connection open");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maxtcpqueries_closes_after_its_queries_and_idle_closes_silent_connections() {
    let dir = support::temp_dir("timeouts");
    let running = support::start(
        ".:0 {\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n timeouts {\n  idle 1s\n  maxtcpqueries 3\n }\n whoami\n}\n",
        &dir,
    )
    .await;
    let dns = running.dns_addrs()[0];

    // Five queries pipelined on one connection: three answers, then the server closes it.
    let mut s = TcpStream::connect(dns).await.unwrap();
    let mut bytes = Vec::new();
    for i in 0..5u16 {
        let mut q = support::query(&format!("q{i}.example."), RecordType::A);
        q.metadata.id = 100 + i;
        let wire = q.to_bytes().unwrap();
        bytes.extend_from_slice(&(wire.len() as u16).to_be_bytes());
        bytes.extend_from_slice(&wire);
    }
    s.write_all(&bytes).await.unwrap();
    let replies = replies_until_closed(&mut s).await;
    let mut ids: Vec<u16> = replies.iter().map(|m| m.metadata.id).collect();
    ids.sort();
    assert_eq!(ids, [100, 101, 102], "{replies:?}");

    // dig asking five names over one kept-open connection gets three answers, finds the
    // connection closed when it sends the fourth (dig does not send it again), and asks the
    // fifth on a new connection.
    let out = support::dig(
        dns,
        &[
            "+tcp",
            "+keepopen",
            "a.example.",
            "b.example.",
            "c.example.",
            "d.example.",
            "e.example.",
        ],
    );
    assert_eq!(out.matches("status: NOERROR").count(), 4, "{out}");
    // Closed after the third answer: dig reads the end of the stream, or a reset when its
    // fourth query reached the socket as it closed (the kernel resets a connection closed
    // with unread data).
    assert!(
        out.contains("end of file") || out.contains("connection reset"),
        "{out}"
    );
    assert!(!out.contains(";d.example."), "{out}");
    assert!(out.contains(";e.example."), "{out}");

    // A connection that sends nothing is closed at the idle timeout (1 s, not the default 10 s:
    // the wait below gives up at 8 s).
    let mut silent = TcpStream::connect(dns).await.unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(8), silent.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");

    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let closed = |reason: &str| {
        crate::support::sum(
            &m,
            "cluster_dns_tcp_connections_closed_total",
            &[&format!("reason=\"{reason}\"")],
        )
    };
    // Ours and dig's.
    assert_eq!(closed("max_queries"), 2.0, "{m:?}");
    assert!(closed("idle") >= 1.0, "{m:?}");
    running.stop().await.unwrap();
}

#[test]
fn check_reports_a_bad_timeout_at_its_line() {
    let dir = support::temp_dir("timeouts-check");
    let e = support::check_corefile(&dir, ".:53 {\n timeouts {\n  read 100ms\n }\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3: timeouts: read: '100ms' needs to be between 1 second and 24 hours"),
        "{e}"
    );
    support::check_corefile(&dir, ".:53 {\n timeouts {\n  maxtcpqueries -1\n }\n whoami\n}\n").unwrap();
}
