//! What abusive TCP clients meet (issue 11, part 2): the message deadline, the idle timeout, the
//! connection limit with the longest-waiting connection closed for a new one, and the
//! descriptors left for the probes under `prlimit --nofile=1024`. Real sockets on loopback; the
//! limits are asserted through counts, answers and the metrics, never through elapsed time (the
//! timeouts below only keep a broken server from hanging the test).

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use cluster_dns::server::tcp::{self, TcpLimits};
use cluster_dns::server::{DnsHandler, Router, router_cell};
use cluster_dns::telemetry::DnsMetrics;
use cluster_dns::telemetry::tcp::TcpMetrics;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::runtime::cli::{self, Server};
use crate::support;
use crate::support::{http_get, parse_exposition};

/// The TCP transport alone, in process, over an empty router (every query REFUSED), with its
/// metrics in a registry of its own.
async fn serve_tcp(limits: TcpLimits) -> (SocketAddr, DnsMetrics, tokio::task::JoinHandle<()>) {
    serve_stream(limits, tcp::StreamProtocol::Tcp).await
}

/// [`serve_tcp`] speaking `protocol` (DNS over TCP, TLS or HTTPS).
async fn serve_stream(
    limits: TcpLimits,
    protocol: tcp::StreamProtocol,
) -> (SocketAddr, DnsMetrics, tokio::task::JoinHandle<()>) {
    let metrics = DnsMetrics::new().unwrap();
    let tcp_metrics = TcpMetrics::register(metrics.registry()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = TcpLimits {
        metrics: Some(tcp_metrics.listener("dns://test")),
        ..limits
    };
    let handler = DnsHandler::new(router_cell(Router::default()));
    let task = tokio::spawn(tcp::serve_protocol_until(
        listener,
        handler,
        limits,
        protocol,
        std::future::pending(),
    ));
    (addr, metrics, task)
}

/// A TCP series of `text` (0 when absent).
fn tcp_series(text: &str, name: &str, labels: &str) -> f64 {
    parse_exposition(text)
        .get(&format!("cluster_dns_tcp_connections_{name}{{{labels}}}"))
        .copied()
        .unwrap_or(0.0)
}

fn closed(text: &str, server: &str, reason: &str) -> f64 {
    tcp_series(
        text,
        "closed_total",
        &format!("reason=\"{reason}\",server=\"{server}\""),
    )
}

/// Waits for the server to close `s` (end of file or reset); panics if it stays open 30 s.
async fn closed_by_server(s: &mut TcpStream) {
    let mut buf = [0u8; 512];
    loop {
        match tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => continue,
            Err(_) => panic!("the server kept the connection open"),
        }
    }
}

/// True when the server closed `s` already (without waiting).
fn is_closed(s: &TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match s.try_read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

#[tokio::test]
async fn a_huge_length_prefix_with_a_few_bytes_is_closed_at_the_message_deadline() {
    // The idle timeout is far away: only the message deadline can close these.
    let (addr, metrics, _task) = serve_tcp(TcpLimits {
        message_deadline: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(600),
        ..TcpLimits::default()
    })
    .await;
    let mut conns = Vec::new();
    for _ in 0..50 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&[0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
            .await
            .unwrap();
        conns.push(s);
    }
    for s in &mut conns {
        closed_by_server(s).await;
    }
    let text = metrics.render();
    assert_eq!(closed(&text, "dns://test", "deadline"), 50.0, "{text}");
    assert_eq!(closed(&text, "dns://test", "idle"), 0.0);
    assert_eq!(closed(&text, "dns://test", "limit"), 0.0);
    // A whole query still gets its answer.
    let reply = support::tcp(addr, &support::query("example.org.", RecordType::A)).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::Refused);
}

#[tokio::test]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let (addr, metrics, _task) = serve_tcp(TcpLimits {
        idle_timeout: Duration::from_millis(300),
        message_deadline: Duration::from_secs(600),
        ..TcpLimits::default()
    })
    .await;
    let mut conns = Vec::new();
    for _ in 0..20 {
        conns.push(TcpStream::connect(addr).await.unwrap());
    }
    // One asks a question first: answered, then idle like the others.
    let mut asking = TcpStream::connect(addr).await.unwrap();
    let q = support::query("example.org.", RecordType::A);
    let bytes = hickory_proto::serialize::binary::BinEncodable::to_bytes(&q).unwrap();
    let len = u16::try_from(bytes.len()).unwrap();
    asking.write_all(&len.to_be_bytes()).await.unwrap();
    asking.write_all(&bytes).await.unwrap();
    let mut lenb = [0u8; 2];
    asking.read_exact(&mut lenb).await.unwrap();
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(lenb))];
    asking.read_exact(&mut reply).await.unwrap();
    conns.push(asking);
    for s in &mut conns {
        closed_by_server(s).await;
    }
    let text = metrics.render();
    assert_eq!(closed(&text, "dns://test", "idle"), 21.0, "{text}");
    assert_eq!(closed(&text, "dns://test", "deadline"), 0.0);
    assert_eq!(tcp_series(&text, "open", "server=\"dns://test\""), 0.0);
}

/// Opens `n` connections to `addr` that each send a length prefix of 65,535 and `body` bytes
/// (none: idle), and keeps them.
async fn abusive(addr: SocketAddr, n: usize, body: usize) -> Vec<TcpStream> {
    let mut conns = Vec::with_capacity(n);
    let mut msg = vec![0xffu8, 0xff];
    msg.resize(2 + body, 0x41);
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).await.unwrap();
        if body > 0 {
            // The server may have closed it already (evicted): that is the point.
            let _ = s.write_all(&msg).await;
        }
        conns.push(s);
    }
    conns
}

fn demo_a(reply: &hickory_proto::op::Message) -> Vec<String> {
    reply
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn beyond_the_limit_the_longest_waiting_are_closed_counted_and_a_real_query_is_answered() {
    let mut cmd = cli::bin();
    cmd.env(tcp::MAX_CONNECTIONS_ENV, "50")
        .arg("-conf")
        .arg(cli::demo_on_free_port());
    let mut server = Server::start_cmd(cmd);
    let addr = server.addr;
    let metrics_addr = server.wait_http("/metrics");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // 200 connections holding partial 65,535-byte messages, against a limit of 50.
        let conns = abusive(addr, 200, 1000).await;
        let mut text = String::new();
        for _ in 0..500 {
            text = http_get(metrics_addr, "/metrics").await.1;
            if closed(&text, "dns://127.0.0.1:0", "limit") >= 150.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(closed(&text, "dns://127.0.0.1:0", "limit") >= 150.0, "{text}");
        // While the limit is full of them, a real client is answered.
        let reply = support::tcp(
            addr,
            &support::query("web.default.svc.cluster.local.", RecordType::A),
        )
        .await;
        assert_eq!(demo_a(&reply), ["10.96.100.10"]);
        let text = http_get(metrics_addr, "/metrics").await.1;
        let open = tcp_series(&text, "open", "server=\"dns://127.0.0.1:0\"");
        assert!(open <= 50.0, "{open} open\n{text}");
        assert_eq!(tcp_series(&text, "limit", "server=\"dns://127.0.0.1:0\""), 50.0);
        // The client sees them closed: at least the 150 beyond the limit, and the one evicted
        // for the real query.
        let mut seen = 0;
        for _ in 0..500 {
            seen = conns.iter().filter(|s| is_closed(s)).count();
            if seen >= 151 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(seen >= 151, "{seen} closed");
        drop(conns);
    });
    let warnings = server
        .log_lines()
        .iter()
        .filter(|l| l.contains("TCP connection limit reached"))
        .count();
    assert_eq!(warnings, 1, "logged once: {:#?}", server.log_lines());
    assert!(server.stop());
}

/// `prlimit` from util-linux (the test installs nothing: util-linux is essential on Debian).
fn prlimit_available() -> bool {
    Command::new("prlimit")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn under_a_1024_descriptor_limit_1100_idle_connections_leave_dns_and_probes_answering() {
    assert!(prlimit_available(), "prlimit (util-linux) is needed");
    // This test process holds the 1,100 connections itself.
    let _ = tcp::raise_nofile_limit();
    let mut cmd = Command::new("prlimit");
    cmd.env("RUST_LOG", "info")
        .arg("--nofile=1024:1024")
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_cluster-dns"))
        .arg("-conf")
        .arg(cli::demo_on_free_port());
    let mut server = Server::start_cmd(cmd);
    let addr = server.addr;
    let health = server.wait_http("/health");
    let ready = server.wait_http("/ready");
    let metrics_addr = server.wait_http("/metrics");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let conns = abusive(addr, 1100, 0).await;
        // Wait (bounded) until the server has taken every one of them from the accept queue:
        // open, or closed for the limit.
        let server_label = "server=\"dns://127.0.0.1:0\"";
        let mut taken = 0.0;
        for _ in 0..500 {
            let text = http_get(metrics_addr, "/metrics").await.1;
            taken = tcp_series(&text, "open", server_label) + closed(&text, "dns://127.0.0.1:0", "limit");
            if taken >= 1100.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(taken >= 1100.0, "the server took {taken} of 1,100 connections");
        let reply = support::tcp(
            addr,
            &support::query("web.default.svc.cluster.local.", RecordType::A),
        )
        .await;
        assert_eq!(demo_a(&reply), ["10.96.100.10"]);
        assert_eq!(http_get(health, "/health").await.0, 200);
        assert_eq!(http_get(ready, "/ready").await.0, 200);
        let text = http_get(metrics_addr, "/metrics").await.1;
        // 1,024 descriptors: a quarter stays free, 768 for TCP clients.
        assert_eq!(tcp_series(&text, "limit", "server=\"dns://127.0.0.1:0\""), 768.0);
        assert!(closed(&text, "dns://127.0.0.1:0", "limit") >= 1.0, "{text}");
        drop(conns);
    });
    let lines = server.log_lines();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("open file limit") && l.contains("soft=1024")),
        "{lines:#?}"
    );
    assert!(server.stop());
}

#[tokio::test]
async fn a_client_that_does_not_read_its_answers_is_closed_at_the_deadline() {
    let (addr, metrics, _task) = serve_tcp(TcpLimits {
        message_deadline: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(600),
        ..TcpLimits::default()
    })
    .await;
    // A small receive window, and queries sent without ever reading the answers: the server's
    // writes stop, its answers stay in flight.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let stream = sock.connect(addr).await.unwrap();
    let (_rd, mut wr) = stream.into_split();
    let q = support::query("example.org.", RecordType::A);
    let bytes = hickory_proto::serialize::binary::BinEncodable::to_bytes(&q).unwrap();
    let mut framed = u16::try_from(bytes.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&bytes);
    let many: Vec<u8> = framed
        .iter()
        .copied()
        .cycle()
        .take(framed.len() * 200_000)
        .collect();
    // The server stops reading once its answers are stuck: this write never ends by itself.
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(&many).await;
    });
    let mut text = String::new();
    for _ in 0..1500 {
        text = metrics.render();
        if closed(&text, "dns://test", "deadline") >= 1.0
            && tcp_series(&text, "open", "server=\"dns://test\"") == 0.0
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(closed(&text, "dns://test", "deadline"), 1.0, "{text}");
    assert_eq!(tcp_series(&text, "open", "server=\"dns://test\""), 0.0, "{text}");
    writer.abort();
}

/// DNS over HTTPS connections meet the TCP listener's bounds: idle ones (with and without a
/// request answered) are closed at the idle timeout, and at the connection limit the one
/// waiting longest makes room.
#[tokio::test]
async fn dns_over_https_connections_are_bounded_like_tcp_ones() {
    let (addr, metrics, _task) = serve_stream(
        TcpLimits {
            idle_timeout: Duration::from_millis(300),
            message_deadline: Duration::from_secs(600),
            ..TcpLimits::default()
        },
        tcp::StreamProtocol::doh(None),
    )
    .await;
    let mut conns = Vec::new();
    for _ in 0..5 {
        conns.push(TcpStream::connect(addr).await.unwrap());
    }
    // One asks (keep-alive) and reads its answer, then idles like the others.
    let mut asking = TcpStream::connect(addr).await.unwrap();
    let q = support::query("example.org.", RecordType::A);
    let wire = hickory_proto::serialize::binary::BinEncodable::to_bytes(&q).unwrap();
    let mut post = format!(
        "POST /dns-query HTTP/1.1\r\nHost: t\r\nContent-Type: application/dns-message\r\nContent-Length: {}\r\n\r\n",
        wire.len()
    )
    .into_bytes();
    post.extend_from_slice(&wire);
    asking.write_all(&post).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&got).contains("\r\n\r\n") {
        let n = asking.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before answering");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    conns.push(asking);
    for s in &mut conns {
        closed_by_server(s).await;
    }
    let text = metrics.render();
    assert_eq!(closed(&text, "dns://test", "idle"), 6.0, "{text}");
    assert_eq!(tcp_series(&text, "open", "server=\"dns://test\""), 0.0);

    let (addr, metrics, _task) = serve_stream(
        TcpLimits {
            max_connections: 2,
            idle_timeout: Duration::from_secs(600),
            message_deadline: Duration::from_secs(600),
            ..TcpLimits::default()
        },
        tcp::StreamProtocol::doh(None),
    )
    .await;
    let mut first = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let _second = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let _third = TcpStream::connect(addr).await.unwrap();
    closed_by_server(&mut first).await;
    let text = metrics.render();
    assert_eq!(closed(&text, "dns://test", "limit"), 1.0, "{text}");
}

/// A DNS-over-TLS client that never finishes its handshake is closed at the message deadline.
#[tokio::test]
async fn a_tls_handshake_that_never_ends_is_closed_at_the_deadline() {
    let dir = support::temp_dir("tls-handshake");
    let pki = fake_apiserver::tls::TestPki::new("handshake CA").unwrap();
    let id = pki.server(&["127.0.0.1"]).unwrap();
    std::fs::write(dir.join("cert.pem"), &id.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &id.key_pem).unwrap();
    let path = dir.join("Corefile");
    let cf =
        cluster_dns::corefile::Corefile::parse_str("tls://.:0 {\n tls cert.pem key.pem\n}\n", &path).unwrap();
    let config = cluster_dns::config::Config::from_corefile(&cf, &path, 53).unwrap();
    let tls = config.blocks[0]
        .settings
        .listener
        .tls
        .clone()
        .expect("the block's TLS configuration");
    let (addr, metrics, _task) = serve_stream(
        TcpLimits {
            message_deadline: Duration::from_millis(300),
            idle_timeout: Duration::from_secs(600),
            ..TcpLimits::default()
        },
        tcp::StreamProtocol::dot(&tls),
    )
    .await;
    let mut conns = Vec::new();
    for _ in 0..10 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        // The first bytes of a TLS record header, and nothing more.
        s.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
        conns.push(s);
    }
    for s in &mut conns {
        closed_by_server(s).await;
    }
    let text = metrics.render();
    assert_eq!(closed(&text, "dns://test", "deadline"), 10.0, "{text}");
    assert_eq!(tcp_series(&text, "open", "server=\"dns://test\""), 0.0);
}

/// A DNS-over-HTTPS body beyond its first 512 bytes comes out of the listener's buffer budget:
/// with the budget spent the request is refused (503) and counted as a buffer close, while a
/// small query on the same listener is still answered.
#[tokio::test]
async fn dns_over_https_bodies_come_out_of_the_buffer_budget() {
    let (addr, metrics, _task) = serve_stream(
        TcpLimits {
            buffer_budget: 1_000,
            ..TcpLimits::default()
        },
        tcp::StreamProtocol::doh(None),
    )
    .await;
    let post = |body: &[u8]| {
        let mut req = format!(
            "POST /dns-query HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/dns-message\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        req
    };
    let status = |reply: &[u8]| {
        String::from_utf8_lossy(reply)
            .split(' ')
            .nth(1)
            .unwrap_or("")
            .to_owned()
    };
    let exchange = |req: Vec<u8>| async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&req).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap();
        out
    };
    let big = exchange(post(&[0u8; 4_000])).await;
    assert_eq!(status(&big), "503", "{}", String::from_utf8_lossy(&big));
    let text = metrics.render();
    assert_eq!(closed(&text, "dns://test", "buffer"), 1.0, "{text}");
    let q = support::query("example.org.", RecordType::A);
    let wire = hickory_proto::serialize::binary::BinEncodable::to_bytes(&q).unwrap();
    let small = exchange(post(&wire)).await;
    assert_eq!(status(&small), "200", "{}", String::from_utf8_lossy(&small));
}
