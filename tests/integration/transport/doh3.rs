//! `https3://` server blocks: DNS over HTTPS over HTTP/3, asked by an HTTP/3 client no one here
//! wrote (PyPI's aioquic, through `tests/data/doh3_client.py`, installed by test.sh), verifying
//! the server's certificate against the test CA: POST and GET answered with
//! `application/dns-message` and a `cache-control` of the least TTL, the HTTP refusals, the
//! `https3` directive's bound, and the Corefile errors.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RData;
use hickory_proto::serialize::binary::BinDecodable;
use serde_json::Value;

use crate::support;
use crate::support::upstream::free_port;

/// Runs the aioquic client against `addr` with `requests`; one JSON object per request.
fn client(addr: SocketAddr, dir: &Path, requests: &[&str]) -> Vec<Value> {
    let out = std::process::Command::new("python3")
        .arg(support::data_dir().join("doh3_client.py"))
        .args([
            &addr.ip().to_string(),
            &addr.port().to_string(),
            &dir.join("ca.pem").display().to_string(),
            "dns.test",
        ])
        .args(requests)
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named 'aioquic'"),
        "pip install aioquic==1.7.2 (test.sh does)"
    );
    assert!(out.status.success(), "the DoH3 client failed: {stderr}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn dns(reply: &Value) -> Message {
    let hex = reply["body_hex"].as_str().unwrap();
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    Message::from_bytes(&bytes).unwrap()
}

fn addresses(m: &Message) -> Vec<String> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_over_http3_answers_a_real_http3_client() {
    let dir = support::temp_dir("doh3");
    crate::transport::doq::certificates(&dir);
    let port = free_port();
    let corefile = format!(
        "https3://.:{port} {{\n bind 127.0.0.1\n tls cert.pem key.pem\n https3 {{\n  max_streams 50\n }}\n kubernetes cluster.local {{\n  manifests {}\n }}\n hosts {{\n  192.0.2.53 www.example.org\n  ttl 60\n  fallthrough\n }}\n}}\n",
        support::data_dir().join("conformance-fixture.yaml").display()
    );
    let running = support::start(&corefile, &dir).await;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let dir2 = dir.clone();
    let replies = tokio::task::spawn_blocking(move || {
        client(
            addr,
            &dir2,
            &[
                "POST:/dns-query:www.example.org",
                "GET:/dns-query:www.example.org",
                "POST:/dns-query:svc1.testns.svc.cluster.local",
                "GET:/dns-query:nothere.testns.svc.cluster.local",
                "GET:/other:www.example.org",
                "PUT:/dns-query:www.example.org",
                "POST:/dns-query::text/plain",
                "GET:/dns-query?dns=!!!",
            ],
        )
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    assert_eq!(replies.len(), 8, "{replies:?}");
    for r in &replies[..4] {
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["headers"]["content-type"], "application/dns-message", "{r}");
    }
    for r in &replies[..2] {
        let m = dns(r);
        assert_eq!(m.metadata.id, 0);
        assert_eq!(addresses(&m), ["192.0.2.53"], "{r}");
        assert_eq!(r["headers"]["cache-control"], "max-age=60", "{r}");
    }
    assert_eq!(addresses(&dns(&replies[2])), ["10.96.10.1"], "{}", replies[2]);
    assert_eq!(dns(&replies[3]).metadata.response_code, ResponseCode::NXDomain);
    let statuses: Vec<i64> = replies[4..]
        .iter()
        .map(|r| r["status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, [404, 405, 415, 400], "{replies:?}");
}

#[test]
fn https3_blocks_need_tls_and_take_the_https3_directive() {
    let dir = support::temp_dir("doh3-check");
    crate::transport::doq::certificates(&dir);
    let check = |text: &str| support::check_corefile(&dir, text);
    assert!(
        check("https3://.:443 {\n tls cert.pem key.pem\n https3 {\n  max_streams 0\n }\n whoami\n}\n")
            .is_ok()
    );
    let e = check("https3://.:443 {\n whoami\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:1") && e.contains("https3:// server block needs a 'tls"),
        "{e}"
    );
    let e =
        check("https3://.:443 {\n tls cert.pem key.pem\n https3 {\n  max_streams many\n }\n}\n").unwrap_err();
    assert!(e.contains("Corefile:4") && e.contains("max_streams"), "{e}");
    // One UDP port: an https3:// and a quic:// block cannot share it; an https:// one can.
    let e = check("quic://.:8443 {\n tls cert.pem key.pem\n}\nhttps3://.:8443 {\n tls cert.pem key.pem\n}\n")
        .unwrap_err();
    assert!(e.contains("8443"), "{e}");
    assert!(
        check("https://.:8443 {\n tls cert.pem key.pem\n}\nhttps3://.:8443 {\n tls cert.pem key.pem\n}\n")
            .is_ok()
    );
}

/// The series `name` of the https3 listener on 127.0.0.1:`port`.
async fn quic_gauge(metrics: SocketAddr, name: &str, port: u16) -> f64 {
    let m = support::scrape(metrics).await;
    let label = format!("server=\"https3://127.0.0.1:{port}\"");
    support::sum(&m, name, &[&label])
}

/// An `https3://` listener keeps at most CoreDNS's 200 connections, as `quic://` does: the
/// 201st is refused before its handshake, and the connections open, the limit and the
/// refusals are counted under the listener's label; closed connections leave the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https3_refuses_connections_over_its_cap_of_200_and_counts_them() {
    let dir = support::temp_dir("doh3-cap");
    crate::transport::doq::certificates(&dir);
    let port = free_port();
    let corefile = format!(
        "https3://.:{port} {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n tls cert.pem key.pem\n whoami\n}}\n"
    );
    let running = support::start(&corefile, &dir).await;
    let metrics = running.http_addr("metrics").unwrap();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let endpoint = crate::transport::doq::client_bound(&dir, b"h3", true, "127.0.0.1:0".parse().unwrap());
    let mut open = Vec::new();
    for i in 0..200 {
        let conn = crate::transport::doq::connect(&endpoint, addr)
            .await
            .unwrap_or_else(|e| panic!("connection {i} refused: {e}"));
        open.push(conn);
    }
    assert!(
        crate::transport::doq::connect(&endpoint, addr).await.is_err(),
        "a 201st connection was admitted"
    );
    let open_now = "cluster_dns_quic_connections_open";
    assert_eq!(quic_gauge(metrics, open_now, port).await, 200.0);
    assert_eq!(
        quic_gauge(metrics, "cluster_dns_quic_connections_limit", port).await,
        200.0
    );
    assert_eq!(
        quic_gauge(metrics, "cluster_dns_quic_connections_refused_total", port).await,
        1.0
    );
    for conn in open.drain(..) {
        conn.close(quinn::VarInt::from_u32(0x100), b"");
    }
    let mut now = -1.0;
    for _ in 0..50 {
        now = quic_gauge(metrics, open_now, port).await;
        if now == 0.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(now, 0.0, "closed connections are still counted open");
    running.stop().await.unwrap();
}
