//! `forward` upstreams written as hostnames, resolved at start with `resolver` (a scripted DNS
//! server on loopback that answers every name with 127.0.0.1, where the real upstream
//! listens), asked with the real `dig`; the start-up errors for a name that does not resolve
//! and a bad `resolver`; and the other options of CoreDNS 1.14.7: `tls://IP%NAME` beside plain
//! upstreams (cluster-dns's own `tls://` block as the DoT server), `max_age`, `max_idle_conns`,
//! `next_on_nodata`, `force_tcp` with `prefer_udp`, `max_concurrent 0`.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

use crate::support;
use crate::support::upstream::{Mode, Scripted};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostname_upstream_is_resolved_with_the_resolver_at_start() {
    let resolver = Scripted::start().await;
    resolver.set_address(Ipv4Addr::LOCALHOST);
    let upstream = Scripted::start().await;
    upstream.set_octet(9);
    let dir = support::temp_dir("fwd-hostname");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n forward . dns.example.internal:{port} {{\n  resolver 127.0.0.1:{rport}\n }}\n}}\n",
        port = upstream.addr.port(),
        rport = resolver.addr.port(),
    );
    let running = support::start(&corefile, &dir).await;
    // Resolved once, at start: an A and an AAAA question.
    assert_eq!(resolver.udp_queries(), 2);
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        support::dig(addr, &["+noall", "+comments", "+answer", "A", "www.example.com"])
    })
    .await
    .unwrap();
    assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
    assert_eq!(
        support::dig_records(&out),
        ["www.example.com. 300 IN A 192.0.2.9"]
    );
    assert_eq!(
        upstream.udp_queries(),
        1,
        "the question went to the resolved upstream"
    );
    assert_eq!(resolver.udp_queries(), 2, "nothing more is asked of the resolver");
    // The upstream is labelled by the address it resolved to.
    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let to = format!("to=\"{}\"", upstream.addr);
    assert_eq!(
        crate::support::sum(&m, "coredns_proxy_request_duration_seconds_count", &[&to]),
        1.0
    );
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostname_that_does_not_resolve_stops_start_up_with_its_line() {
    let resolver = Scripted::start().await;
    let dir = support::temp_dir("fwd-hostname-errors");
    let rport = resolver.addr.port();
    let check = |text: String| {
        let dir = dir.clone();
        async move {
            tokio::task::spawn_blocking(move || support::check_corefile(&dir, &text))
                .await
                .unwrap()
        }
    };
    // The scripted server answers `nx*` names NXDOMAIN.
    let e = check(format!(
        ".:53 {{\n forward . 127.0.0.9 nx.example.internal {{\n  resolver 127.0.0.1:{rport}\n }}\n}}\n"
    ))
    .await
    .unwrap_err();
    assert!(
        e.contains("Corefile:2") && e.contains("cannot resolve nx.example.internal"),
        "{e}"
    );
    // A resolver whose port is closed: refused at once, and said so.
    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let cport = closed.local_addr().unwrap().port();
    drop(closed);
    let e = check(format!(
        ".:53 {{\n forward . dns.example.internal {{\n  resolver 127.0.0.1:{cport}\n }}\n}}\n"
    ))
    .await
    .unwrap_err();
    assert!(
        e.contains("Corefile:2")
            && e.contains("dns.example.internal")
            && e.contains(&format!("127.0.0.1:{cport}")),
        "{e}"
    );
    for (text, want) in [
        (
            ".:53 {\n forward . dns.example.internal {\n  resolver\n }\n}\n",
            "Corefile:3",
        ),
        (
            ".:53 {\n forward . 127.0.0.1 {\n  resolver dns.google\n }\n}\n",
            "resolver must be an IP address or IP:port: 'dns.google'",
        ),
        (".:53 {\n forward . no..name\n}\n", "Corefile:2"),
        (
            ".:53 {\n forward . grpc://127.0.0.1\n}\n",
            "'grpc' is not supported",
        ),
    ] {
        let e = check(text.to_owned()).await.unwrap_err();
        assert!(e.contains(want), "{text}: {e}");
    }
    assert_eq!(resolver.udp_queries(), 2, "nx.example.internal: A and AAAA");
}

/// The test CA and a certificate for `dns.test` and 127.0.0.1 in `dir`, and cluster-dns serving
/// DNS over TLS with it: `www.example.org A 192.0.2.53`.
async fn dot_server(dir: &std::path::Path) -> cluster_dns::app::Running {
    let corefile = "tls://example.org:0 {\n bind 127.0.0.1\n tls cert.pem key.pem\n hosts {\n  192.0.2.53 www.example.org\n  ttl 60\n }\n}\n";
    dot_server_with(dir, corefile).await
}

/// Writes the test CA and certificate into `dir` and starts `corefile` (a `tls://` block).
async fn dot_server_with(dir: &std::path::Path, corefile: &str) -> cluster_dns::app::Running {
    let pki = fake_apiserver::tls::TestPki::new("forward-names test CA").unwrap();
    let server = pki.server(&["dns.test", "127.0.0.1"]).unwrap();
    std::fs::write(dir.join("ca.pem"), &pki.ca_pem).unwrap();
    std::fs::write(dir.join("cert.pem"), &server.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &server.key_pem).unwrap();
    support::start(corefile, dir).await
}

async fn dig_a(addr: SocketAddr, qtype: &'static str, name: &'static str) -> (String, Vec<String>) {
    tokio::task::spawn_blocking(move || {
        let out = support::dig(addr, &["+noall", "+comments", "+answer", qtype, name]);
        (support::dig_status(&out), support::dig_records(&out))
    })
    .await
    .unwrap()
}

/// A forwarding server with `lines` in its block, and metrics.
async fn forwarder(dir: &std::path::Path, lines: &str) -> (cluster_dns::app::Running, SocketAddr) {
    let corefile = format!(".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n{lines}\n}}\n");
    let running = support::start(&corefile, dir).await;
    let addr = running.dns_addrs()[0];
    (running, addr)
}

/// `tls://IP%NAME:PORT` beside a plain upstream, in order: the name after `%` is the one the
/// certificate must carry (a wrong one fails the TLS handshake, and the plain upstream
/// answers); `tls` options are taken with plain upstreams alone; `%NAME` with
/// `tls_servername` is refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_upstream_tls_names_beside_plain_upstreams() {
    let dir = support::temp_dir("fwd-tls-names");
    let dot = dot_server(&dir).await;
    let tls_port = dot.dns_addrs()[0].port();
    let plain = Scripted::start().await;
    for (name, want, plain_asked) in [("dns.test", "192.0.2.53", 0), ("other.test", "192.0.2.1", 1)] {
        let (running, addr) = forwarder(
            &dir,
            &format!(
                " forward . tls://127.0.0.1%{name}:{tls_port} {} {{\n  tls ca.pem\n  policy sequential\n  max_fails 0\n }}",
                plain.addr
            ),
        )
        .await;
        let before = plain.udp_queries();
        let (status, records) = dig_a(addr, "A", "www.example.org").await;
        assert_eq!(status, "NOERROR", "{name}");
        assert_eq!(records.len(), 1, "{name}: {records:?}");
        assert!(records[0].ends_with(want), "{name}: {records:?}");
        assert_eq!(plain.udp_queries() - before, plain_asked, "{name}");
        running.stop().await.unwrap();
    }
    // tls options with plain upstreams only: taken (CoreDNS does nothing with them either).
    let (running, addr) = forwarder(
        &dir,
        &format!(
            " forward . {} {{\n  tls ca.pem\n  tls_servername dns.test\n }}",
            plain.addr
        ),
    )
    .await;
    assert_eq!(
        dig_a(addr, "A", "www.example.com").await.1,
        ["www.example.com. 300 IN A 192.0.2.1"]
    );
    running.stop().await.unwrap();
    let e = support::check_corefile(
        &dir,
        ".:53 {\n forward . tls://127.0.0.1%dns.test {\n  tls_servername other.test\n }\n}\n",
    )
    .unwrap_err();
    assert!(e.contains("Corefile:2") && e.contains("TLS server names"), "{e}");
    dot.stop().await.unwrap();
}

/// `max_age`: a DNS-over-TLS connection in steady use is still replaced once it is that old
/// (`expire` alone would keep it, as it is never idle that long).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_age_closes_a_busy_tls_connection() {
    let dir = support::temp_dir("fwd-max-age");
    let dot = dot_server(&dir).await;
    let up = dot.dns_addrs()[0];
    let (running, addr) = forwarder(
        &dir,
        &format!(" forward . tls://{up} {{\n  tls ca.pem\n  tls_servername dns.test\n  expire 2s\n  max_age 2s\n }}"),
    )
    .await;
    for pause in [0, 900, 900, 900] {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        assert_eq!(dig_a(addr, "A", "www.example.org").await.0, "NOERROR");
    }
    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let to = format!("to=\"{up}\"");
    let count = |name: &str| crate::support::sum(&m, name, &[&to, "proto=\"tcp-tls\""]);
    // Opened at 0 s, reused at 0.9 s and 1.8 s, too old at 2.7 s: a new one.
    assert_eq!(count("coredns_proxy_conn_cache_misses_total"), 2.0);
    assert_eq!(count("coredns_proxy_conn_cache_hits_total"), 2.0);
    running.stop().await.unwrap();
    dot.stop().await.unwrap();
}

/// Sends six questions at once to `addr` and waits for their answers.
async fn burst(addr: SocketAddr) {
    let asks: Vec<_> = (0..6)
        .map(|i| {
            tokio::spawn(async move {
                let q = support::query(&format!("n{i}.example.com."), RecordType::A);
                support::udp(addr, &q).await.0
            })
        })
        .collect();
    for a in asks {
        assert_eq!(a.await.unwrap().metadata.response_code, ResponseCode::NoError);
    }
}

/// `max_idle_conns` over TLS: a burst at a slow DNS-over-TLS upstream (cluster-dns's `tls://`
/// block forwarding to a scripted server that waits 300 ms) opens one connection per question;
/// afterwards at most `max_idle_conns` are kept (without it, all six, under the pool's 16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_idle_conns_bounds_the_tls_connections_kept() {
    let dir = support::temp_dir("fwd-max-idle-tls");
    let slow = Scripted::start().await;
    slow.set_mode(Mode::Slow(Duration::from_millis(300)));
    let dot = dot_server_with(
        &dir,
        &format!(
            "tls://.:0 {{\n bind 127.0.0.1\n tls cert.pem key.pem\n forward . {}\n}}\n",
            slow.addr
        ),
    )
    .await;
    let up = dot.dns_addrs()[0];
    for (option, kept) in [("", 6.0), ("  max_idle_conns 2\n", 2.0)] {
        let (running, addr) = forwarder(
            &dir,
            &format!(" forward . tls://{up} {{\n  tls ca.pem\n  tls_servername dns.test\n{option} }}"),
        )
        .await;
        burst(addr).await;
        let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
        let to = format!("to=\"{up}\"");
        assert_eq!(
            crate::support::sum(
                &m,
                "coredns_proxy_conn_cache_misses_total",
                &[&to, "proto=\"tcp-tls\""]
            ),
            6.0,
            "{option:?}"
        );
        assert_eq!(
            crate::support::sum(&m, "cluster_dns_forward_tls_idle_connections", &[&to]),
            kept,
            "{option:?}"
        );
        running.stop().await.unwrap();
    }
    dot.stop().await.unwrap();
}

/// `max_idle_conns`: after a burst of questions at a slow upstream, the sockets kept idle for
/// reuse are bounded by it (without it, by the pool's own bound, above the burst).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_idle_conns_bounds_the_sockets_kept() {
    let dir = support::temp_dir("fwd-max-idle");
    let up = Scripted::start().await;
    up.set_mode(Mode::Slow(Duration::from_millis(300)));
    for (option, kept) in [("", 6.0), ("  max_idle_conns 2\n", 2.0)] {
        let (running, addr) = forwarder(&dir, &format!(" forward . {} {{\n{option} }}", up.addr)).await;
        burst(addr).await;
        let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
        let to = format!("to=\"{}\"", up.addr);
        assert_eq!(
            crate::support::sum(
                &m,
                "coredns_proxy_conn_cache_misses_total",
                &[&to, "proto=\"udp\""]
            ),
            6.0,
            "{option:?}"
        );
        assert_eq!(
            crate::support::sum(&m, "cluster_dns_forward_udp_idle_sockets", &[&to]),
            kept,
            "{option:?}"
        );
        running.stop().await.unwrap();
    }
}

/// `next_on_nodata`: NOERROR without answers from the first `forward` goes to the next one;
/// an answer does not. And options CoreDNS takes: `force_tcp` with `prefer_udp` (TCP wins),
/// `max_concurrent 0` (no limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_on_nodata_and_options_coredns_takes() {
    let dir = support::temp_dir("fwd-nodata");
    let first = Scripted::start().await;
    let second = Scripted::start().await;
    second.set_octet(2);
    let (running, addr) = forwarder(
        &dir,
        &format!(
            " forward . {} {{\n  next_on_nodata\n  force_tcp\n  prefer_udp\n  max_concurrent 0\n }}\n forward . {}",
            first.addr, second.addr
        ),
    )
    .await;
    // The scripted upstreams answer AAAA with NODATA (NOERROR, the SOA, no answer).
    let (status, records) = dig_a(addr, "AAAA", "www.example.com").await;
    assert_eq!((status.as_str(), records.len()), ("NOERROR", 0));
    assert_eq!((first.tcp_queries(), second.udp_queries()), (1, 1));
    let (_, records) = dig_a(addr, "A", "www.example.com").await;
    assert_eq!(records, ["www.example.com. 300 IN A 192.0.2.1"]);
    assert_eq!((first.tcp_queries(), second.udp_queries()), (2, 1));
    assert_eq!(first.udp_queries(), 0, "force_tcp wins over prefer_udp");
    running.stop().await.unwrap();
}

/// `health_check DURATION no_rec domain NAME`: once the upstream is down, the probe asks
/// `NAME IN NS` with RD clear (the upstream here is a bare socket that reads what it is sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_probe_asks_the_configured_domain_without_rd() {
    use hickory_proto::op::Message;
    use hickory_proto::serialize::binary::BinDecodable;
    let dir = support::temp_dir("fwd-hc-domain");
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let up = silent.local_addr().unwrap();
    let (running, addr) = forwarder(
        &dir,
        &format!(
            " forward . {up} {{\n  max_fails 1\n  read_timeout 200ms\n  health_check 100ms no_rec domain Example.ORG\n }}"
        ),
    )
    .await;
    assert_eq!(dig_a(addr, "A", "www.example.com").await.0, "SERVFAIL");
    let mut probe = None;
    let mut buf = vec![0u8; 4096];
    for _ in 0..40 {
        let Ok(Ok((n, _))) = tokio::time::timeout(Duration::from_secs(1), silent.recv_from(&mut buf)).await
        else {
            break;
        };
        let m = Message::from_bytes(&buf[..n]).unwrap();
        if m.queries[0].query_type() == RecordType::NS {
            probe = Some(m);
            break;
        }
    }
    let probe = probe.expect("a health probe within the wait");
    assert_eq!(probe.queries[0].name().to_ascii(), "example.org.");
    assert!(!probe.metadata.recursion_desired, "no_rec clears RD");
    running.stop().await.unwrap();
}

/// FROM as a CIDR off a label boundary: only the first reverse zone it expands to is
/// forwarded (CoreDNS's rule); `10.20.0.0/12` is `16.10.in-addr.arpa.`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cidr_from_forwards_its_first_reverse_zone() {
    let dir = support::temp_dir("fwd-cidr");
    let up = Scripted::start().await;
    let (running, addr) = forwarder(&dir, &format!(" forward 10.20.0.0/12 {}", up.addr)).await;
    let (status, _) = dig_a(addr, "PTR", "1.0.16.10.in-addr.arpa").await;
    assert_eq!((status.as_str(), up.udp_queries()), ("NOERROR", 1));
    let (status, _) = dig_a(addr, "PTR", "1.0.20.10.in-addr.arpa").await;
    assert_ne!(status, "NOERROR");
    assert_eq!(up.udp_queries(), 1, "outside the first zone: not forwarded");
    running.stop().await.unwrap();
}

/// The Corefiles of CoreDNS 1.14.7's forward README (and its options, each used once) pass the
/// start-up check; the hostname example resolves through a scripted `resolver`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coredns_readme_examples_pass_the_check() {
    let resolver = Scripted::start().await;
    resolver.set_address(Ipv4Addr::LOCALHOST);
    let r = resolver.addr;
    let examples = [
        "example.org {\n    forward . 127.0.0.1:9005\n}\n".to_owned(),
        ". {\n    cache\n    forward lab.example.local 10.20.0.1\n    forward example.local 10.0.0.1\n    forward . /etc/resolv.conf\n}\n".to_owned(),
        ". {\n    forward . 10.0.0.10:53 10.0.0.11:1053 [2003::1]:53\n}\n".to_owned(),
        ". {\n    forward . 10.0.0.10:1234 {\n        except example.org\n    }\n}\n".to_owned(),
        ". {\n    forward . tls://9.9.9.9 {\n       tls_servername dns.quad9.net\n       health_check 5s\n    }\n    cache 30\n}\n".to_owned(),
        ". {\n    forward . https://9.9.9.9 {\n       tls_servername dns.quad9.net\n       health_check 5s\n    }\n    cache 30\n}\n".to_owned(),
        ". {\n    forward . tls://9.9.9.9 {\n       tls_servername dns.quad9.net\n       health_check 5s domain example.org\n    }\n    cache 30\n}\n".to_owned(),
        ". {\n    forward . tls://1.1.1.1 tls://1.0.0.1 {\n       tls_servername cloudflare-dns.com\n       health_check 5s\n    }\n    cache 30\n}\n".to_owned(),
        ". {\n    forward . 127.0.0.1:5301 127.0.0.1:5302\n}\n\n.:5301 {\n    forward . tls://8.8.8.8 tls://8.8.4.4 {\n        tls_servername dns.google\n    }\n}\n\n.:5302 {\n    forward . tls://1.1.1.1 tls://1.0.0.1 {\n        tls_servername cloudflare-dns.com\n    }\n}\n".to_owned(),
        ". {\n  forward . 1.2.3.4 {\n    next NXDOMAIN\n  }\n  forward . 5.6.7.8 {\n    next NXDOMAIN\n  }\n  forward . 9.0.1.2 {\n  }\n}\n".to_owned(),
        ". {\n  forward . 1.2.3.4 5.6.7.8 9.0.1.2 {\n     policy sequential\n     failover SERVFAIL REFUSED\n  }\n}\n".to_owned(),
        format!(". {{\n    forward . dns.example.local {{\n        resolver {r}\n    }}\n}}\n"),
        ". {\n    forward . tls://9.9.9.9%dns.quad9.net tls://[2620:fe::fe%dns.quad9.net]:853 10.0.0.1 {\n        max_idle_conns 10\n        expire 10s\n        max_age 30s\n        next_on_nodata\n        force_tcp\n        prefer_udp\n        max_concurrent 0\n    }\n}\n".to_owned(),
        ". {\n    forward . https://10.0.0.1 {\n        doh_method GET\n        tls\n    }\n}\n".to_owned(),
        ". {\n    forward 10.0.0.0/12 10.0.0.1\n}\n".to_owned(),
    ];
    let dir = support::temp_dir("fwd-readme");
    for text in examples {
        let d = dir.clone();
        let t = text.clone();
        let result = tokio::task::spawn_blocking(move || support::check_corefile(&d, &t))
            .await
            .unwrap();
        assert!(result.is_ok(), "{text}\n{result:?}");
    }
}

/// Plain DNS over TCP keeps its connections as DNS over TLS does: three questions to Debian's
/// `unbound` with `force_tcp` take one connection; and after a burst at a slow upstream at most
/// `max_idle_conns` are kept (six without it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_tcp_connections_are_reused_and_bounded() {
    let dir = support::temp_dir("fwd-tcp-pool");
    let ub = crate::support::upstream::Unbound::start(&dir)
        .await
        .expect("unbound is installed (test.sh installs it)");
    let (running, addr) = forwarder(&dir, &format!(" forward . {} {{\n  force_tcp\n }}", ub.addr)).await;
    for _ in 0..3 {
        let (status, records) = dig_a(addr, "A", "www.example.com").await;
        assert_eq!((status.as_str(), records.len()), ("NOERROR", 1));
    }
    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let to = format!("to=\"{}\"", ub.addr);
    let count = |name: &str| crate::support::sum(&m, name, &[&to, "proto=\"tcp\""]);
    assert_eq!(
        (
            count("coredns_proxy_conn_cache_misses_total"),
            count("coredns_proxy_conn_cache_hits_total")
        ),
        (1.0, 2.0)
    );
    running.stop().await.unwrap();
    let slow = Scripted::start().await;
    slow.set_mode(Mode::Slow(Duration::from_millis(300)));
    for (option, kept) in [("", 6.0), ("  max_idle_conns 2\n", 2.0)] {
        let (running, addr) = forwarder(
            &dir,
            &format!(" forward . {} {{\n  force_tcp\n{option} }}", slow.addr),
        )
        .await;
        burst(addr).await;
        let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
        let to = format!("to=\"{}\"", slow.addr);
        assert_eq!(
            crate::support::sum(&m, "cluster_dns_forward_tcp_idle_connections", &[&to]),
            kept,
            "{option:?}"
        );
        running.stop().await.unwrap();
    }
}
