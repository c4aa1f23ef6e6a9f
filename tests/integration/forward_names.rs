//! `forward` upstreams written as hostnames, resolved at start with `resolver` (a scripted DNS
//! server on loopback that answers every name with 127.0.0.1, where the real upstream
//! listens), asked with the real `dig`; the start-up errors for a name that does not resolve
//! and a bad `resolver`; and (with the TLS options) the per-upstream options of CoreDNS 1.14.7.

use std::net::Ipv4Addr;

use crate::support;
use crate::upstream::Scripted;

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
    let m = crate::dropin::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let to = format!("to=\"{}\"", upstream.addr);
    assert_eq!(
        crate::dropin::sum(&m, "coredns_proxy_request_duration_seconds_count", &[&to]),
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
