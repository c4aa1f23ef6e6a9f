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
        let (at, port) = (format!("@{}", addr.ip()), addr.port().to_string());
        let ca = format!("+tls-ca={}", d.join("ca.pem").display());
        let wrong = support::run_dig(&[
            &at,
            "-p",
            &port,
            "+time=2",
            "+tries=1",
            "+tls",
            "+tls-hostname=other.test",
            &ca,
            "www.example.org",
        ]);
        let plain = support::run_dig(&[&at, "-p", &port, "+time=2", "+tries=1", "+tcp", "www.example.org"]);
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
    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics")).await;
    let asked = crate::support::sum(
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

/// HTTP/2 frames, as much of RFC 9113 as the stream-limit test needs: a frame's type, flags,
/// stream and payload.
mod h2_frames {
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    /// The RST_STREAM error code of a client that no longer wants the stream.
    pub const CANCEL: u32 = 0x8;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// The RST_STREAM error code of a stream the server would not open.
    pub const REFUSED_STREAM: u32 = 0x7;

    pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
        let mut out = vec![len[1], len[2], len[3], kind, flags];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// An HPACK string literal (no Huffman coding) with its 7-bit-prefix length.
    fn string(out: &mut Vec<u8>, s: &[u8]) {
        if s.len() < 127 {
            out.push(u8::try_from(s.len()).unwrap());
        } else {
            out.push(127);
            let mut rest = s.len() - 127;
            while rest >= 128 {
                out.push(u8::try_from(rest % 128).unwrap() | 0x80);
                rest /= 128;
            }
            out.push(u8::try_from(rest).unwrap());
        }
        out.extend_from_slice(s);
    }

    /// The header block of `GET path` to `authority` over https: the static table's
    /// `:method GET` (2) and `:scheme https` (7), then `:authority` (1) and `:path` (4) as
    /// literals without indexing.
    pub fn get(authority: &str, path: &str) -> Vec<u8> {
        let mut out = vec![0x82, 0x87, 0x01];
        string(&mut out, authority.as_bytes());
        out.push(0x04);
        string(&mut out, path.as_bytes());
        out
    }

    /// The header block of `POST /dns-query` to `authority` over https with a
    /// `application/dns-message` body of `length` bytes: `:method POST` (3) and `:scheme
    /// https` (7) from the static table, then literals without indexing, with the static
    /// table's names `:authority` (1), `:path` (4), `content-type` (31) and `content-length`
    /// (28).
    pub fn post(authority: &str, length: usize) -> Vec<u8> {
        let mut out = vec![0x83, 0x87, 0x01];
        string(&mut out, authority.as_bytes());
        out.push(0x04);
        string(&mut out, b"/dns-query");
        out.extend_from_slice(&[0x0f, 31 - 15]);
        string(&mut out, b"application/dns-message");
        out.extend_from_slice(&[0x0f, 28 - 15]);
        string(&mut out, length.to_string().as_bytes());
        out
    }
}

/// An HTTP/2 session over TLS (ALPN h2, the CA in `dir`) with the DoH listener at `addr`:
/// preface and empty SETTINGS sent, the server's SETTINGS read and acknowledged, and a PING
/// answered, so the server has the acknowledgement (its limit applies then). Gives the
/// server's SETTINGS_MAX_CONCURRENT_STREAMS.
async fn h2_session(
    addr: SocketAddr,
    dir: &Path,
) -> (
    tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    Option<u32>,
) {
    use h2_frames::*;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(dir.join("ca.pem")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = tokio_rustls::rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut s = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(ServerName::try_from("dns.test").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
    s.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
    let mut limit = None;
    loop {
        let (kind, flags, _, payload) = read_frame(&mut s).await;
        if kind == SETTINGS && flags & ACK == 0 {
            for setting in payload.chunks(6) {
                if u16::from_be_bytes([setting[0], setting[1]]) == MAX_CONCURRENT_STREAMS {
                    limit = Some(u32::from_be_bytes([
                        setting[2], setting[3], setting[4], setting[5],
                    ]));
                }
            }
            break;
        }
    }
    s.write_all(&frame(SETTINGS, ACK, 0, &[])).await.unwrap();
    s.write_all(&frame(PING, 0, 0, b"streams!")).await.unwrap();
    loop {
        let (kind, flags, _, _) = read_frame(&mut s).await;
        if kind == PING && flags & ACK != 0 {
            break;
        }
    }
    (s, limit)
}

/// A DoH request whose client resets its HTTP/2 stream before the body is whole stops
/// counting: `cluster_dns_doh_requests_in_flight` shows it while it is open and not after, and
/// the connection, with nothing in flight, is closed at the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doh_request_whose_stream_is_reset_stops_counting() {
    use cluster_dns::server::tcp::{self, TcpLimits};
    use cluster_dns::server::{DnsHandler, Router, router_cell};
    use cluster_dns::telemetry::DnsMetrics;
    use cluster_dns::telemetry::tcp::TcpMetrics;
    use h2_frames::*;
    use std::time::Duration;

    let dir = support::temp_dir("serve-doh-reset");
    certificates(&dir);
    let path = dir.join("Corefile");
    let cf = cluster_dns::corefile::Corefile::parse_str("https://.:0 {\n tls cert.pem key.pem\n}\n", &path)
        .unwrap();
    let config = cluster_dns::config::Config::from_corefile(&cf, &path, 53).unwrap();
    let tls = config.blocks[0]
        .settings
        .listener
        .tls
        .clone()
        .expect("the block's TLS configuration");
    let metrics = DnsMetrics::new().unwrap();
    let tcp_metrics = TcpMetrics::register(metrics.registry()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = TcpLimits {
        idle_timeout: Duration::from_millis(300),
        message_deadline: Duration::from_secs(600),
        metrics: Some(tcp_metrics.listener("dns://test")),
        ..TcpLimits::default()
    };
    let server = tokio::spawn(tcp::serve_protocol_until(
        listener,
        DnsHandler::new(router_cell(Router::default())),
        limits,
        tcp::StreamProtocol::doh(Some(&tls)),
        std::future::pending(),
    ));
    let in_flight = || {
        crate::support::parse_exposition(&metrics.render())
            .get("cluster_dns_doh_requests_in_flight{server=\"dns://test\"}")
            .copied()
            .unwrap_or(-1.0)
    };

    let (mut s, _) = h2_session(addr, &dir).await;
    // A POST whose 100-byte body never comes: the request waits for it.
    let patience = (200, Duration::from_millis(10));
    open_then_reset(
        &mut s,
        frame(HEADERS, END_HEADERS, 1, &post("dns.test", 100)),
        in_flight,
        patience,
    )
    .await;
    // Nothing in flight: the idle timeout closes the connection. HTTP/2's graceful close is a
    // GOAWAY and a PING; as a real client, acknowledge the PING, then the server ends it.
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut goaway = false;
    loop {
        let read = tokio::time::timeout_at(until, try_read_frame(&mut s)).await;
        let Some((kind, flags, _, payload)) =
            read.unwrap_or_else(|_| panic!("the connection stayed open past the idle timeout"))
        else {
            break;
        };
        match (kind, flags & ACK) {
            (GOAWAY, _) => goaway = true,
            (PING, 0) => s.write_all(&frame(PING, ACK, 0, &payload)).await.unwrap(),
            _ => {}
        }
    }
    assert!(goaway, "closed without a GOAWAY");
    server.abort();
}

/// A DoH request waiting for its upstream when the client resets its stream is counted out
/// too: HTTP/2 drops the request's future then, and the count must not depend on the future
/// running to its end (it stayed counted before, so the connection never idled out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doh_request_waiting_upstream_whose_stream_is_reset_stops_counting() {
    use h2_frames::*;
    use std::time::Duration;

    let (dir, _upstream, running) = doh_forwarding_to_a_dropping_upstream("serve-doh-reset-upstream").await;
    let addr = running.dns_addrs()[0];
    let in_flight = || {
        crate::support::parse_exposition(&running.metrics().render())
            .iter()
            .filter(|(k, _)| k.starts_with("cluster_dns_doh_requests_in_flight{"))
            .map(|(_, v)| *v)
            .sum::<f64>()
    };
    // Longer than forward's whole try of the upstream: a request that was left to run would
    // be done by then; only one counted and dropped stays counted.
    let patience = (300, Duration::from_millis(100));

    let (mut s, _) = h2_session(addr, &dir).await;
    open_then_reset(
        &mut s,
        frame(HEADERS, END_HEADERS | END_STREAM, 1, &slow_get()),
        in_flight,
        patience,
    )
    .await;
    running.stop().await.unwrap();
}

/// An `https://` listener with the test certificates in a new directory named after `tag`,
/// forwarding to an upstream that drops every query (until told otherwise).
async fn doh_forwarding_to_a_dropping_upstream(
    tag: &str,
) -> (
    std::path::PathBuf,
    crate::support::upstream::Scripted,
    cluster_dns::app::Running,
) {
    let dir = support::temp_dir(tag);
    certificates(&dir);
    let upstream = crate::support::upstream::Scripted::start().await;
    upstream.set_mode(crate::support::upstream::Mode::Drop);
    let cf = format!(
        "https://.:0 {{\n bind 127.0.0.1\n tls cert.pem key.pem\n forward . {}\n}}\n",
        upstream.addr
    );
    let running = support::start(&cf, &dir).await;
    (dir, upstream, running)
}

/// The HTTP/2 header block of a DoH GET for `slow.example.net.` A.
fn slow_get() -> Vec<u8> {
    let wire = hickory_proto::serialize::binary::BinEncodable::to_bytes(&support::query(
        "slow.example.net.",
        hickory_proto::rr::RecordType::A,
    ))
    .unwrap();
    let path = format!(
        "/dns-query?dns={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&wire)
    );
    h2_frames::get("dns.test", &path)
}

/// Opens stream 1 with `headers`, waits until `in_flight` (the DoH request gauge) counts one
/// request, resets the stream (CANCEL), and waits until it counts none; each wait looks
/// `patience.0` times, `patience.1` apart.
async fn open_then_reset<S: tokio::io::AsyncWrite + Unpin>(
    s: &mut S,
    headers: Vec<u8>,
    in_flight: impl Fn() -> f64,
    patience: (u32, std::time::Duration),
) {
    use h2_frames::*;
    let wait_for = |want: f64| {
        let in_flight = &in_flight;
        async move {
            for _ in 0..patience.0 {
                if in_flight() == want {
                    return;
                }
                tokio::time::sleep(patience.1).await;
            }
            panic!("requests in flight: {}, not {want}", in_flight());
        }
    };
    s.write_all(&headers).await.unwrap();
    wait_for(1.0).await;
    s.write_all(&frame(RST_STREAM, 0, 1, &CANCEL.to_be_bytes()))
        .await
        .unwrap();
    wait_for(0.0).await;
}

/// Reads one HTTP/2 frame: (type, flags, stream, payload).
async fn read_frame<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> (u8, u8, u32, Vec<u8>) {
    try_read_frame(s).await.expect("an HTTP/2 frame")
}

/// [`read_frame`], or `None` when the connection ends (or fails) first.
async fn try_read_frame<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> Option<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    s.read_exact(&mut head).await.ok()?;
    let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).await.ok()?;
    Some((head[3], head[4], stream, payload))
}

/// A DNS-over-HTTPS connection answers at most 32 requests at once (HTTP/2 streams): the
/// server says so in its SETTINGS, and a client that opens more anyway gets the extra streams
/// refused (RST_STREAM REFUSED_STREAM) while the first 32 are answered, after which the
/// connection takes new requests again. The requests are forwarded to an upstream that drops
/// them until the refusals are in, so all 32 stay open meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_over_https_answers_at_most_32_streams_at_once() {
    use h2_frames::*;

    let (dir, upstream, running) = doh_forwarding_to_a_dropping_upstream("serve-doh-streams").await;
    let addr = running.dns_addrs()[0];

    let (mut s, limit) = h2_session(addr, &dir).await;
    assert_eq!(limit, Some(32), "the server's SETTINGS_MAX_CONCURRENT_STREAMS");

    let block = slow_get();
    let streams: Vec<u32> = (0..40).map(|i| 2 * i + 1).collect();
    let mut burst = Vec::new();
    for &id in &streams {
        burst.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &block));
    }
    s.write_all(&burst).await.unwrap();

    // Within the forward timeout (2 s): the streams past the 32nd are refused, none answered.
    let mut refused = Vec::new();
    let mut answered = Vec::new();
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while answered.len() + refused.len() < streams.len() {
        let (kind, _, stream, payload) = tokio::time::timeout_at(until, read_frame(&mut s))
            .await
            .unwrap_or_else(|_| panic!("refused {refused:?}, answered {answered:?} after 10 s"));
        match kind {
            RST_STREAM => {
                assert_eq!(
                    u32::from_be_bytes(payload[..4].try_into().unwrap()),
                    REFUSED_STREAM,
                    "stream {stream}"
                );
                assert!(answered.is_empty(), "a refusal after an answer: {answered:?}");
                refused.push(stream);
                if refused.len() == streams.len() - 32 {
                    // The forward's retries of the 32 are answered now.
                    upstream.set_mode(crate::support::upstream::Mode::Answer);
                }
            }
            HEADERS if !answered.contains(&stream) => answered.push(stream),
            GOAWAY => panic!("the server ended the connection"),
            _ => {}
        }
    }
    refused.sort_unstable();
    answered.sort_unstable();
    assert_eq!(refused, streams[32..], "the streams past the limit");
    assert_eq!(answered, streams[..32], "the streams within it");

    // Room again: a new stream is answered.
    s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, 81, &block))
        .await
        .unwrap();
    loop {
        let (kind, _, stream, _) = tokio::time::timeout_at(until, read_frame(&mut s))
            .await
            .expect("an answer to the stream opened after the others");
        assert_ne!(kind, RST_STREAM, "stream {stream} refused");
        if kind == HEADERS && stream == 81 {
            break;
        }
    }
    running.stop().await.unwrap();
}
