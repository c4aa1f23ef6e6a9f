//! `forward` over DNS over TLS (RFC 7858) to Debian's `unbound` serving TLS with a certificate
//! from a throwaway CA the test makes: `tls CA` and `tls_servername`, the IP as the name when
//! none is given, a name the certificate does not carry (SERVFAIL), and a Corefile error for a
//! missing file.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use fake_apiserver::tls::TestPki;

use crate::support;
use crate::support::upstream::free_port;

/// unbound answering `www.example.com A 192.0.2.10` over TLS only.
struct DotUnbound {
    addr: SocketAddr,
    child: Child,
}

impl Drop for DotUnbound {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl DotUnbound {
    /// A fresh test dir holding `ca.pem`, a CA made for the test, and unbound serving a
    /// certificate from it for `dns.test` and 127.0.0.1.
    fn with_test_ca(tag: &str) -> (PathBuf, Self) {
        let dir = support::temp_dir(tag);
        let pki = TestPki::new(&format!("{tag} test CA")).unwrap();
        let server = pki.server(&["dns.test", "127.0.0.1"]).unwrap();
        std::fs::write(dir.join("ca.pem"), &pki.ca_pem).unwrap();
        let ub = Self::start(&dir, &server.cert_pem, &server.key_pem);
        (dir, ub)
    }

    fn start(dir: &Path, cert: &str, key: &str) -> Self {
        let port = free_port();
        std::fs::write(dir.join("server.pem"), cert).unwrap();
        std::fs::write(dir.join("server.key"), key).unwrap();
        let mut conf = crate::support::upstream::unbound_server_conf(dir, port);
        conf.push_str(&format!(
            "  tls-port: {port}\n  tls-service-key: \"{d}/server.key\"\n  tls-service-pem: \"{d}/server.pem\"\n  incoming-num-tcp: 100\n  local-data: \"www.example.com. 300 IN A 192.0.2.10\"\nremote-control:\n  control-enable: no\n",
            d = dir.display()
        ));
        let child = crate::support::upstream::spawn_unbound(dir, &conf)
            .expect("unbound is installed (test.sh installs it)");
        let addr: SocketAddr = (Ipv4Addr::LOCALHOST, port).into();
        // Owned before the wait, so a panic below still stops it (Drop).
        let ub = Self { addr, child };
        // Listening once a TCP connection is accepted (bounded wait).
        for _ in 0..100 {
            if std::net::TcpStream::connect(addr).is_ok() {
                return ub;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("unbound did not listen on {addr}");
    }
}

fn answer(addr: SocketAddr, name: &str) -> (String, Vec<String>) {
    let out = support::dig(addr, &["+noall", "+comments", "+answer", "A", name]);
    (support::dig_status(&out), support::dig_records(&out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_over_tls_verifies_the_upstream_and_answers() {
    let (dir, ub) = DotUnbound::with_test_ca("dot");
    let up = ub.addr;
    for (options, ok) in [
        ("  tls ca.pem\n  tls_servername dns.test\n", true),
        // No tls_servername: the certificate must carry the upstream's IP, which it does.
        ("  tls ca.pem\n", true),
        ("  tls ca.pem\n  tls_servername other.test\n", false),
        // The system's roots do not know the test CA.
        ("  tls_servername dns.test\n", false),
    ] {
        let corefile = format!(
            ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n forward . tls://{up} {{\n{options}  max_fails 0\n }}\n}}\n"
        );
        let running = support::start(&corefile, &dir).await;
        let addr = running.dns_addrs()[0];
        let (first, second) = tokio::task::spawn_blocking(move || {
            (answer(addr, "www.example.com"), answer(addr, "www.example.com"))
        })
        .await
        .unwrap();
        if ok {
            for got in [&first, &second] {
                assert_eq!(got.0, "NOERROR", "{options:?}");
                assert_eq!(got.1, ["www.example.com. 300 IN A 192.0.2.10"], "{options:?}");
            }
            // The second question reused the first one's connection.
            let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
            let to = format!("to=\"{up}\"");
            let tls = "proto=\"tcp-tls\"";
            let count = |name: &str| crate::support::sum(&m, name, &[&to, tls]);
            assert_eq!(count("coredns_proxy_conn_cache_misses_total"), 1.0, "{options:?}");
            assert_eq!(count("coredns_proxy_conn_cache_hits_total"), 1.0, "{options:?}");
        } else {
            assert_eq!(first.0, "SERVFAIL", "{options:?}: {first:?}");
        }
        running.stop().await.unwrap();
    }
}

#[test]
fn tls_options_are_checked_when_the_corefile_is_read() {
    let dir = support::temp_dir("dot-config");
    let check = |text: &str| support::check_corefile(&dir, text);
    let e = check(".:53 {\n forward . tls://127.0.0.1 {\n  tls missing-ca.pem\n }\n}\n").unwrap_err();
    assert!(e.contains("Corefile:3") && e.contains("cannot read"), "{e}");
    std::fs::write(dir.join("junk.pem"), "not a certificate").unwrap();
    let e = check(".:53 {\n forward . tls://127.0.0.1 {\n  tls junk.pem\n }\n}\n").unwrap_err();
    assert!(e.contains("Corefile:3") && e.contains("no certificate"), "{e}");
    // Taken as CoreDNS 1.14.7 takes them: tls:// and plain upstreams mixed, and TLS options
    // with plain upstreams only (unused).
    check(".:53 {\n forward . tls://127.0.0.1 127.0.0.2\n}\n").unwrap();
    check(".:53 {\n forward . 127.0.0.1 {\n  tls_servername dns.test\n }\n}\n").unwrap();
    assert!(
        check(".:53 {\n forward . tls://127.0.0.1 tls://[::1]:8853 {\n  tls_servername dns.test\n }\n}\n")
            .is_ok()
    );
}

/// A burst of questions opens connections to the upstream; once they are answered at most 16
/// stay idle for reuse (`cluster_dns_forward_tls_idle_connections`), the rest are closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_leaves_at_most_sixteen_idle_connections() {
    let (dir, ub) = DotUnbound::with_test_ca("dot-burst");
    let up = ub.addr;
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n forward . tls://{up} {{\n  tls ca.pem\n  tls_servername dns.test\n  max_fails 0\n }}\n}}\n"
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    // 40 different names: identical questions in flight would share one exchange.
    let mut asks = Vec::new();
    for i in 0..40 {
        asks.push(tokio::spawn(async move {
            support::udp(
                addr,
                &support::query(&format!("q{i}.example.com."), hickory_proto::rr::RecordType::A),
            )
            .await
            .0
        }));
    }
    for a in asks {
        let reply = a.await.unwrap();
        // unbound's zone has no such names: its NXDOMAIN came over TLS.
        assert_eq!(
            reply.metadata.response_code,
            hickory_proto::op::ResponseCode::NXDomain,
            "{reply:?}"
        );
    }
    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let to = format!("to=\"{up}\"");
    let idle = crate::support::sum(&m, "cluster_dns_forward_tls_idle_connections", &[&to]);
    let tls = "proto=\"tcp-tls\"";
    let opened = crate::support::sum(&m, "coredns_proxy_conn_cache_misses_total", &[&to, tls]);
    let reused = crate::support::sum(&m, "coredns_proxy_conn_cache_hits_total", &[&to, tls]);
    assert_eq!(opened + reused, 40.0, "one exchange a question");
    assert!((1.0..=16.0).contains(&idle), "idle {idle}, opened {opened}");
    if opened > 16.0 {
        assert_eq!(idle, 16.0, "more were opened than kept: the pool is full");
    }
    running.stop().await.unwrap();
    drop(ub);
}
