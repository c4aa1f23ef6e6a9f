//! `tls://` and `https://` server blocks: DNS over TLS (RFC 7858) and DNS over HTTPS (RFC 8484)
//! served with the `tls` directive, asked with the real `dig` (`+tls`, `+https`, `+https-get`)
//! verifying a certificate from a CA the test makes; the HTTP side's refusals over plain HTTP;
//! and the Corefile errors of `tls` and of mixed schemes on one port.

use std::net::SocketAddr;
use std::path::Path;

use base64::Engine;
use fake_apiserver::tls::TestPki;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support;

/// A block of `scheme` on a free loopback port answering from `hosts`, with `extra` lines.
fn corefile(scheme: &str, extra: &str) -> String {
    format!(
        "{scheme}://example.org:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n{extra} hosts {{\n  192.0.2.53 www.example.org\n  ttl 60\n }}\n}}\n"
    )
}

/// Writes the test CA and a server certificate for `dns.test` and 127.0.0.1 into `dir`.
fn certificates(dir: &Path) {
    let pki = TestPki::new("serve-tls test CA").unwrap();
    let server = pki.server(&["dns.test", "127.0.0.1"]).unwrap();
    std::fs::write(dir.join("ca.pem"), &pki.ca_pem).unwrap();
    std::fs::write(dir.join("cert.pem"), &server.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &server.key_pem).unwrap();
}

/// dig's status and records for `name` A, with `how` (`+tls`, `+https`, ...) and the CA.
fn ask(addr: SocketAddr, dir: &Path, how: &[&str], name: &str) -> (String, Vec<String>) {
    let ca = format!("+tls-ca={}", dir.join("ca.pem").display());
    let mut args = vec!["+noall", "+comments", "+answer", ca.as_str()];
    args.extend_from_slice(how);
    args.extend_from_slice(&["A", name]);
    let out = support::dig(addr, &args);
    (support::dig_status(&out), support::dig_records(&out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_over_tls_answers_dig_with_a_verified_certificate() {
    let dir = support::temp_dir("serve-dot");
    certificates(&dir);
    let running = support::start(&corefile("tls", " tls cert.pem key.pem\n"), &dir).await;
    let addr = running.dns_addrs()[0];
    let d = dir.clone();
    let (good, missing, wrong_name, plain) = tokio::task::spawn_blocking(move || {
        let wrong = std::process::Command::new("dig")
            .args([format!("@{}", addr.ip()), "-p".into(), addr.port().to_string()])
            .args(["+time=2", "+tries=1", "+tls", "+tls-hostname=other.test"])
            .arg(format!("+tls-ca={}", d.join("ca.pem").display()))
            .arg("www.example.org")
            .output()
            .unwrap();
        let plain = std::process::Command::new("dig")
            .args([format!("@{}", addr.ip()), "-p".into(), addr.port().to_string()])
            .args(["+time=2", "+tries=1", "+tcp", "www.example.org"])
            .output()
            .unwrap();
        (
            ask(addr, &d, &["+tls", "+tls-hostname=dns.test"], "www.example.org"),
            ask(addr, &d, &["+tls"], "nothere.example.org"),
            String::from_utf8_lossy(&wrong.stdout).into_owned(),
            String::from_utf8_lossy(&plain.stdout).into_owned(),
        )
    })
    .await
    .unwrap();
    assert_eq!(good.0, "NOERROR");
    assert_eq!(good.1, ["www.example.org. 60 IN A 192.0.2.53"]);
    assert_eq!(missing.0, "NXDOMAIN");
    // dig refuses a certificate that does not name the server it asked for.
    assert!(!wrong_name.contains("192.0.2.53"), "{wrong_name}");
    // A DNS-over-TLS port does not speak plain TCP.
    assert!(!plain.contains("192.0.2.53"), "{plain}");
    // The questions are counted under CoreDNS's label for the listener.
    let m = crate::dropin::scrape(running.http_addr("metrics").expect("/metrics")).await;
    let asked = crate::dropin::sum(
        &m,
        "coredns_dns_requests_total",
        &["server=\"tls://127.0.0.1:0\""],
    );
    assert_eq!(asked, 2.0, "{m:?}");
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_over_https_answers_dig_post_and_get() {
    let dir = support::temp_dir("serve-doh");
    certificates(&dir);
    let running = support::start(&corefile("https", " tls cert.pem key.pem\n"), &dir).await;
    let addr = running.dns_addrs()[0];
    let d = dir.clone();
    let (post, get, nx) = tokio::task::spawn_blocking(move || {
        (
            ask(addr, &d, &["+https"], "www.example.org"),
            ask(addr, &d, &["+https-get"], "www.example.org"),
            ask(addr, &d, &["+https"], "nothere.example.org"),
        )
    })
    .await
    .unwrap();
    for got in [&post, &get] {
        assert_eq!(got.0, "NOERROR");
        assert_eq!(got.1, ["www.example.org. 60 IN A 192.0.2.53"]);
    }
    assert_eq!(nx.0, "NXDOMAIN");
    running.stop().await.unwrap();
}

/// One HTTP/1.1 request on a fresh connection: the status code, the headers and the body.
async fn http(addr: SocketAddr, request: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .expect("the server closes the connection")
        .unwrap();
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, head, out[split + 4..].to_vec())
}

/// Without a `tls` directive an `https://` block speaks plain HTTP (for a proxy that
/// terminates TLS, as CoreDNS allows): what it answers and what it refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_over_plain_http_answers_and_refuses_what_it_should() {
    let dir = support::temp_dir("serve-doh-plain");
    let running = support::start(&corefile("https", ""), &dir).await;
    let addr = running.dns_addrs()[0];
    let mut q = support::query("www.example.org.", hickory_proto::rr::RecordType::A);
    q.metadata.id = 0;
    let wire = hickory_proto::serialize::binary::BinEncodable::to_bytes(&q).unwrap();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&wire);
    let close = "Host: dns.test\r\nConnection: close\r\n";
    let (code, head, body) = http(
        addr,
        format!("GET /dns-query?dns={b64} HTTP/1.1\r\n{close}\r\n").as_bytes(),
    )
    .await;
    assert_eq!(code, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/dns-message"),
        "{head}"
    );
    assert!(
        head.contains("max-age=60"),
        "the freshness is the answer's TTL: {head}"
    );
    let reply =
        <hickory_proto::op::Message as hickory_proto::serialize::binary::BinDecodable>::from_bytes(&body)
            .unwrap();
    assert_eq!(reply.answers.len(), 1);
    assert_eq!(support::show(&reply.answers[0]), "www.example.org. A 192.0.2.53");
    let mut post = format!(
        "POST /dns-query HTTP/1.1\r\n{close}Content-Type: application/dns-message\r\nContent-Length: {}\r\n\r\n",
        wire.len()
    )
    .into_bytes();
    post.extend_from_slice(&wire);
    assert_eq!(http(addr, &post).await.0, 200);
    for (request, want) in [
        (format!("GET /other?dns={b64} HTTP/1.1\r\n{close}\r\n"), 404),
        (format!("GET /dns-query HTTP/1.1\r\n{close}\r\n"), 400),
        (format!("GET /dns-query?dns=!!! HTTP/1.1\r\n{close}\r\n"), 400),
        (
            format!("PUT /dns-query HTTP/1.1\r\n{close}Content-Length: 0\r\n\r\n"),
            405,
        ),
        (
            format!(
                "POST /dns-query HTTP/1.1\r\n{close}Content-Type: text/plain\r\nContent-Length: 0\r\n\r\n"
            ),
            415,
        ),
        (
            format!(
                "POST /dns-query HTTP/1.1\r\n{close}Content-Type: application/dns-message\r\nContent-Length: 70000\r\n\r\n{}",
                "x".repeat(70_000)
            ),
            413,
        ),
    ] {
        let (code, head, _) = http(addr, request.as_bytes()).await;
        assert_eq!(code, want, "{}: {head}", request.lines().next().unwrap_or(""));
    }
    running.stop().await.unwrap();
}

#[test]
fn tls_and_scheme_errors_name_the_line() {
    let dir = support::temp_dir("serve-tls-config");
    certificates(&dir);
    let check = |text: &str| support::check_corefile(&dir, text);
    assert!(
        check("tls://.:853 {\n tls cert.pem key.pem ca.pem {\n  client_auth require_and_verify\n }\n}\n")
            .is_ok()
    );
    assert!(check("https://.:443 {\n tls cert.pem key.pem\n}\n").is_ok());
    let e = check("tls://. {\n tls missing.pem key.pem\n}\n").unwrap_err();
    assert!(e.contains("Corefile:2") && e.contains("cannot read"), "{e}");
    let e = check("tls://. {\n tls cert.pem\n}\n").unwrap_err();
    assert!(e.contains("Corefile:2") && e.contains("CERT KEY"), "{e}");
    let e = check("tls://. {\n tls key.pem cert.pem\n}\n").unwrap_err();
    assert!(e.contains("Corefile:2"), "{e}");
    let e = check("tls://. {\n tls cert.pem key.pem {\n  client_auth sometimes\n }\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3") && e.contains("unknown policy 'sometimes'"),
        "{e}"
    );
    let e = check(".:853 {\n log\n}\ntls://.:853 {\n tls cert.pem key.pem\n}\n").unwrap_err();
    assert!(e.contains("Corefile:4") && e.contains("port 853"), "{e}");
    let e = check("tls://example.org https://example.org:853 {\n tls cert.pem key.pem\n}\n").unwrap_err();
    assert!(e.contains("Corefile:1") && e.contains("port 853"), "{e}");
}
