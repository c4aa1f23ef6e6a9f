//! `proxyproto`: PROXY protocol headers sent by hand over real loopback sockets (v2 over UDP,
//! v1 and v2 over TCP) before a DNS query, with `whoami` showing the client address the chain
//! saw and `acl` deciding on it; sources outside `allow` handled as CoreDNS's README says
//! (`ignore` by default, `reject`), `LOCAL` headers (health checks), real dnsdist health-checking
//! the server through `useProxyProtocol=true`, and the Corefile errors.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, UdpSocket};

use crate::support;

const SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// A version 2 PROXY header for IPv4 client `client` (`udp`: DGRAM, else STREAM).
fn v2(client: SocketAddr, udp: bool) -> Vec<u8> {
    let SocketAddr::V4(c) = client else {
        panic!("IPv4 only")
    };
    let mut h = SIGNATURE.to_vec();
    h.push(0x21);
    h.push(if udp { 0x12 } else { 0x11 });
    h.extend_from_slice(&12u16.to_be_bytes());
    h.extend_from_slice(&c.ip().octets());
    h.extend_from_slice(&[127, 0, 0, 1]);
    h.extend_from_slice(&c.port().to_be_bytes());
    h.extend_from_slice(&53u16.to_be_bytes());
    h
}

fn v1(client: SocketAddr) -> Vec<u8> {
    format!("PROXY TCP4 {} 127.0.0.1 {} 53\r\n", client.ip(), client.port()).into_bytes()
}

fn whoami_query() -> Vec<u8> {
    support::query("who.example.org.", RecordType::A)
        .to_bytes()
        .unwrap()
}

/// What `whoami` answered: the address and port records of the additional section.
fn seen(reply: &Message) -> Vec<String> {
    reply.additionals.iter().map(support::show).collect()
}

/// `header` and a query in one datagram from local address `from`; the reply, if any in 1 s.
async fn over_udp(server: SocketAddr, from: &str, header: &[u8]) -> Option<Message> {
    let sock = UdpSocket::bind(format!("{from}:0")).await.unwrap();
    let mut d = header.to_vec();
    d.extend_from_slice(&whoami_query());
    sock.send_to(&d, server).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let (n, _) = tokio::time::timeout(Duration::from_secs(1), sock.recv_from(&mut buf))
        .await
        .ok()?
        .unwrap();
    Some(Message::from_bytes(&buf[..n]).unwrap())
}

/// `header` and a length-prefixed query on a connection from local address `from`; the
/// reply, or `None` when the server closed the connection without one.
async fn over_tcp(server: SocketAddr, from: &str, header: &[u8]) -> Option<Message> {
    let sock = TcpSocket::new_v4().unwrap();
    sock.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut s = sock.connect(server).await.unwrap();
    let q = whoami_query();
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(&(q.len() as u16).to_be_bytes());
    bytes.extend_from_slice(&q);
    s.write_all(&bytes).await.unwrap();
    let mut len = [0u8; 2];
    match tokio::time::timeout(Duration::from_secs(3), s.read_exact(&mut len)).await {
        Ok(Ok(_)) => {}
        Ok(Err(_)) => return None,
        Err(_) => panic!("neither a reply nor a close in 3 s"),
    }
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut buf).await.unwrap();
    Some(Message::from_bytes(&buf).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_from_an_allowed_source_is_the_client_the_chain_sees() {
    let dir = support::temp_dir("proxyproto-use");
    let running = support::start(
        ".:0 {\n bind 127.0.0.1\n proxyproto {\n  allow 127.0.0.1/32\n }\n whoami\n}\n",
        &dir,
    )
    .await;
    let addr = running.dns_addrs()[0];
    let client: SocketAddr = "192.0.2.7:12345".parse().unwrap();
    let r = over_udp(addr, "127.0.0.1", &v2(client, true))
        .await
        .expect("a UDP reply");
    assert_eq!(
        seen(&r),
        [
            "who.example.org. A 192.0.2.7",
            "_udp.who.example.org. SRV 0 0 12345 ."
        ]
    );
    let r = over_tcp(addr, "127.0.0.1", &v2("192.0.2.8:999".parse().unwrap(), false))
        .await
        .expect("a TCP reply");
    assert_eq!(
        seen(&r),
        [
            "who.example.org. A 192.0.2.8",
            "_tcp.who.example.org. SRV 0 0 999 ."
        ]
    );
    let r = over_tcp(addr, "127.0.0.1", &v1("192.0.2.9:4242".parse().unwrap()))
        .await
        .expect("a TCP reply");
    assert_eq!(
        seen(&r),
        [
            "who.example.org. A 192.0.2.9",
            "_tcp.who.example.org. SRV 0 0 4242 ."
        ]
    );
    // Without a header, the peer itself.
    let r = over_udp(addr, "127.0.0.1", &[]).await.expect("a UDP reply");
    assert_eq!(seen(&r)[0], "who.example.org. A 127.0.0.1");
    // From a source not allowed, the header is read and ignored (the default).
    let r = over_udp(addr, "127.0.0.2", &v2(client, true))
        .await
        .expect("a UDP reply");
    assert_eq!(seen(&r)[0], "who.example.org. A 127.0.0.2");
    let r = over_tcp(addr, "127.0.0.2", &v1(client))
        .await
        .expect("a TCP reply");
    assert_eq!(seen(&r)[0], "who.example.org. A 127.0.0.2");
    // A malformed header: the datagram is dropped, the connection closed.
    let mut bad = v2(client, true);
    bad[12] = 0x25;
    assert!(over_udp(addr, "127.0.0.1", &bad).await.is_none());
    assert!(over_tcp(addr, "127.0.0.1", &bad).await.is_none());
    // A stream header in a datagram is not a UDP client's: dropped, as CoreDNS does.
    assert!(over_udp(addr, "127.0.0.1", &v2(client, false)).await.is_none());
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_decides_on_the_address_of_the_header_and_reject_refuses_others() {
    let dir = support::temp_dir("proxyproto-acl");
    let running = support::start(
        ".:0 {\n bind 127.0.0.1\n proxyproto {\n  allow 127.0.0.1/32\n  default reject\n }\n acl {\n  block net 192.0.2.0/24\n }\n whoami\n}\n",
        &dir,
    )
    .await;
    let addr = running.dns_addrs()[0];
    let blocked: SocketAddr = "192.0.2.7:5353".parse().unwrap();
    let fine: SocketAddr = "198.51.100.7:5353".parse().unwrap();
    let r = over_udp(addr, "127.0.0.1", &v2(blocked, true))
        .await
        .expect("a reply");
    assert_eq!(r.metadata.response_code, ResponseCode::Refused);
    let r = over_tcp(addr, "127.0.0.1", &v1(blocked)).await.expect("a reply");
    assert_eq!(r.metadata.response_code, ResponseCode::Refused);
    let r = over_udp(addr, "127.0.0.1", &v2(fine, true))
        .await
        .expect("a reply");
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert_eq!(seen(&r)[0], "who.example.org. A 198.51.100.7");
    // From a source not allowed, with `default reject`, a header is refused: the datagram is
    // dropped and the connection closed; the same source without a header is answered.
    assert!(over_udp(addr, "127.0.0.2", &v2(fine, true)).await.is_none());
    assert!(over_tcp(addr, "127.0.0.2", &v2(fine, false)).await.is_none());
    let r = over_udp(addr, "127.0.0.2", &[]).await.expect("a reply");
    assert_eq!(seen(&r)[0], "who.example.org. A 127.0.0.2");
    let r = over_tcp(addr, "127.0.0.2", &[]).await.expect("a reply");
    assert_eq!(seen(&r)[0], "who.example.org. A 127.0.0.2");
    running.stop().await.unwrap();
}

/// `udp_session_tracking`: a header-only datagram (Cloudflare Spectrum's first) gives its
/// client to the headerless datagrams that follow from the same peer; other peers keep their
/// own address; at most `max_sessions` are remembered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_sessions_carry_the_client_of_a_header_only_datagram() {
    let dir = support::temp_dir("proxyproto-sessions");
    let running = support::start(
        ".:0 {\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n multisocket 1\n proxyproto {\n  udp_session_tracking 30s 2\n }\n whoami\n}\n",
        &dir,
    )
    .await;
    let addr = running.dns_addrs()[0];
    let spectrum = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    spectrum
        .send_to(&v2("192.0.2.7:12345".parse().unwrap(), true), addr)
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    assert!(
        tokio::time::timeout(Duration::from_millis(300), spectrum.recv_from(&mut buf))
            .await
            .is_err(),
        "a header-only datagram is not answered"
    );
    for _ in 0..2 {
        spectrum.send_to(&whoami_query(), addr).await.unwrap();
        let (n, _) = tokio::time::timeout(Duration::from_secs(2), spectrum.recv_from(&mut buf))
            .await
            .expect("a reply")
            .unwrap();
        let r = Message::from_bytes(&buf[..n]).unwrap();
        assert_eq!(
            seen(&r),
            [
                "who.example.org. A 192.0.2.7",
                "_udp.who.example.org. SRV 0 0 12345 ."
            ]
        );
    }
    // Another peer without a session is itself.
    let r = over_udp(addr, "127.0.0.1", &[]).await.expect("a reply");
    assert_eq!(seen(&r)[0], "who.example.org. A 127.0.0.1");
    // Three more sessions: at most two are kept.
    let mut others = Vec::new();
    for i in 1..=3u8 {
        let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let client = SocketAddr::from(([198, 51, 100, i], 53));
        s.send_to(&v2(client, true), addr).await.unwrap();
        others.push(s);
    }
    let metrics = running.http_addr("metrics").unwrap();
    let mut sessions = 0.0;
    for _ in 0..20 {
        let m = crate::support::scrape(metrics).await;
        sessions = crate::support::sum(&m, "cluster_dns_proxyproto_udp_sessions", &[]);
        if sessions == 2.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sessions, 2.0);
    let last = others.pop().unwrap();
    last.send_to(&whoami_query(), addr).await.unwrap();
    let (n, _) = tokio::time::timeout(Duration::from_secs(2), last.recv_from(&mut buf))
        .await
        .expect("a reply")
        .unwrap();
    let r = Message::from_bytes(&buf[..n]).unwrap();
    assert_eq!(seen(&r)[0], "who.example.org. A 198.51.100.3");
    running.stop().await.unwrap();
}

/// A version 2 `LOCAL` header as dnsdist's health checks send it (family `UNSPEC`, no
/// addresses).
const LOCAL: [u8; 16] = *b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00";

/// A `LOCAL` header (a proxy's own health check) is accepted over UDP and TCP, and the query
/// answered as from the proxy itself (PROXY protocol specification, section 2.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_header_is_answered_as_from_the_proxy() {
    let dir = support::temp_dir("proxyproto-local");
    let running = support::start(
        ".:0 {\n bind 127.0.0.1\n proxyproto {\n  allow 127.0.0.1/32\n }\n whoami\n}\n",
        &dir,
    )
    .await;
    let addr = running.dns_addrs()[0];
    let r = over_udp(addr, "127.0.0.1", &LOCAL)
        .await
        .expect("a UDP reply to a LOCAL header");
    assert_eq!(seen(&r)[0], "who.example.org. A 127.0.0.1");
    let r = over_tcp(addr, "127.0.0.1", &LOCAL)
        .await
        .expect("a TCP reply to a LOCAL header");
    assert_eq!(seen(&r)[0], "who.example.org. A 127.0.0.1");
    running.stop().await.unwrap();
}

#[test]
fn proxyproto_corefile_examples_and_errors() {
    let dir = support::temp_dir("proxyproto-check");
    for text in [
        ". {\n proxyproto\n whoami\n}\n",
        ". {\n proxyproto {\n  allow 192.168.1.1/32 192.168.0.1/32\n }\n whoami\n}\n",
        ". {\n proxyproto {\n  allow 192.168.1.1/32\n  default reject\n }\n whoami\n}\n",
        ". {\n proxyproto {\n  allow 192.168.1.1/32\n  udp_session_tracking 28s\n }\n whoami\n}\n",
        ". {\n proxyproto {\n  allow 192.168.1.1/32\n  udp_session_tracking 28s 20000\n }\n whoami\n}\n",
    ] {
        support::check_corefile(&dir, text).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
    for (text, want) in [
        (". {\n proxyproto {\n  allow 192.168.1.1\n }\n}\n", "Corefile:3"),
        (". {\n proxyproto {\n  default sometimes\n }\n}\n", "Corefile:3"),
        (
            ". {\n proxyproto {\n  udp_session_tracking 28s 0\n }\n}\n",
            "Corefile:3",
        ),
        (". {\n proxyproto\n proxyproto\n}\n", "Corefile:3"),
    ] {
        let e = support::check_corefile(&dir, text).unwrap_err();
        assert!(e.contains(want), "{text}: {e}");
    }
}

/// Real dnsdist (Debian's package) in front of cluster-dns with `useProxyProtocol=true`: its
/// UDP health checks carry a `LOCAL` header, and the backend must be seen up (checked every
/// second; dnsdist answers SERVFAIL itself while it is down), and the queries it forwards carry
/// the client in a `PROXY` header. `./test.sh` installs dnsdist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dnsdist_health_checks_see_the_server_up() {
    const DNSDIST: &str = "/usr/bin/dnsdist";
    assert!(
        std::path::Path::new(DNSDIST).exists(),
        "dnsdist is not installed: ./test.sh installs it (apt-get install dnsdist)"
    );
    let dir = support::temp_dir("proxyproto-dnsdist");
    let running = support::start(
        ".:0 {\n bind 127.0.0.1\n proxyproto {\n  allow 127.0.0.1/32\n }\n whoami\n}\n",
        &dir,
    )
    .await;
    let backend = running.dns_addrs()[0];
    let front = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap()
    };
    std::fs::write(
        dir.join("dnsdist.conf"),
        format!(
            "setLocal(\"{front}\")\nsetVerboseHealthChecks(true)\nsetServFailWhenNoServer(true)\n\
             newServer({{address=\"{backend}\", useProxyProtocol=true, checkInterval=1, \
             checkName=\"health.example.org.\", maxCheckFailures=1, rise=1}})\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("dnsdist.log")).unwrap();
    let child = std::process::Command::new(DNSDIST)
        .args(["--supervised", "--disable-syslog", "-C"])
        .arg(dir.join("dnsdist.conf"))
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("dnsdist starts");
    // Killed however the test ends.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _dnsdist = Kill(child);
    let logs = || std::fs::read_to_string(dir.join("dnsdist.log")).unwrap_or_default();
    // A few health checks first (one a second): then every query must get through.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    for i in 0..5 {
        let q = support::query("who.example.org.", RecordType::A);
        let reply = support::udp_raw(front, &q.to_bytes().unwrap(), Duration::from_secs(2))
            .await
            .unwrap_or_else(|| panic!("dnsdist answered query {i}:\n{}", logs()));
        let r = Message::from_bytes(&reply).unwrap();
        assert_eq!(
            r.metadata.response_code,
            ResponseCode::NoError,
            "query {i}: the backend is down for dnsdist:\n{}",
            logs()
        );
        assert_eq!(seen(&r)[0], "who.example.org. A 127.0.0.1");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let logs = logs();
    assert!(!logs.contains("as 'down'"), "{logs}");
    running.stop().await.unwrap();
}

/// Which policy a peer gets under a block's `proxyproto` (`server::proxy::policy_for`).
#[test]
fn a_peer_gets_the_policy_its_block_says() {
    use cluster_dns::chain::{ProxyPolicy, ProxyProtocol};
    use cluster_dns::corefile::Cidr;
    use cluster_dns::server::proxy::policy_for;
    let cidr = |t: &str| Cidr::parse(t).unwrap();
    let all = ProxyProtocol::default();
    assert_eq!(policy_for(&all, "192.0.2.1".parse().unwrap()), ProxyPolicy::Use);
    let some = ProxyProtocol {
        allow: vec![cidr("192.168.1.1/32"), cidr("192.168.0.1/32")],
        ..ProxyProtocol::default()
    };
    assert_eq!(
        policy_for(&some, "192.168.1.1".parse().unwrap()),
        ProxyPolicy::Use
    );
    assert_eq!(
        policy_for(&some, "::ffff:192.168.0.1".parse().unwrap()),
        ProxyPolicy::Use
    );
    assert_eq!(
        policy_for(&some, "192.168.1.2".parse().unwrap()),
        ProxyPolicy::Ignore
    );
    let reject = ProxyProtocol {
        default: Some(ProxyPolicy::Reject),
        ..some.clone()
    };
    assert_eq!(
        policy_for(&reject, "10.0.0.1".parse().unwrap()),
        ProxyPolicy::Reject
    );
    let skip_all = ProxyProtocol {
        default: Some(ProxyPolicy::Skip),
        ..ProxyProtocol::default()
    };
    assert_eq!(
        policy_for(&skip_all, "10.0.0.1".parse().unwrap()),
        ProxyPolicy::Skip
    );
}
