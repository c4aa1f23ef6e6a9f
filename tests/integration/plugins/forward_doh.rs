//! `forward` to DNS-over-HTTPS upstreams (RFC 8484, HTTP/2 over TLS), asked with the real `dig`:
//! against cluster-dns's own `https://` server block and against Debian's `unbound` serving
//! DoH, with `doh_method POST` (the default) and `GET`, certificates from a CA the test makes
//! (`tls CA`, `tls_servername`); a connection reused for the next question, and shared by a
//! burst; an upstream that accepts connections but never answers, passed over for the next one.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use fake_apiserver::tls::TestPki;

use crate::support;
use crate::support::upstream::free_port;

/// Writes the test CA and a server certificate for `dns.test` and 127.0.0.1 into a new dir.
fn certificates(tag: &str) -> PathBuf {
    let dir = support::temp_dir(tag);
    let pki = TestPki::new(&format!("{tag} test CA")).unwrap();
    let server = pki.server(&["dns.test", "127.0.0.1"]).unwrap();
    std::fs::write(dir.join("ca.pem"), &pki.ca_pem).unwrap();
    std::fs::write(dir.join("cert.pem"), &server.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &server.key_pem).unwrap();
    dir
}

/// cluster-dns serving `https://` on a free loopback port: `www.example.org A 192.0.2.53`.
async fn doh_server(dir: &Path) -> cluster_dns::app::Running {
    // www0..www7 for the burst test: distinct questions (identical ones would share one exchange).
    let burst: String = (0..8)
        .map(|i| format!("  192.0.2.{} www{i}.example.org\n", 60 + i))
        .collect();
    let corefile = format!(
        "https://example.org:0 {{\n bind 127.0.0.1\n tls cert.pem key.pem\n hosts {{\n  192.0.2.53 www.example.org\n{burst}  ttl 60\n }}\n}}\n"
    );
    support::start(&corefile, dir).await
}

/// A forwarding server with `forward . TO... { options }` and metrics.
async fn forwarder(dir: &Path, to: &str, options: &str) -> (cluster_dns::app::Running, SocketAddr) {
    let corefile =
        format!(".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n forward . {to} {{\n{options}\n }}\n}}\n");
    let running = support::start(&corefile, dir).await;
    let addr = running.dns_addrs()[0];
    (running, addr)
}

async fn dig_a(addr: SocketAddr, name: &'static str) -> (String, Vec<String>) {
    tokio::task::spawn_blocking(move || {
        let out = support::dig(addr, &["+noall", "+comments", "+answer", "A", name]);
        (support::dig_status(&out), support::dig_records(&out))
    })
    .await
    .unwrap()
}

async fn https_conns(running: &cluster_dns::app::Running, up: SocketAddr) -> (f64, f64) {
    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let to = format!("to=\"{up}\"");
    let count = |name: &str| crate::support::sum(&m, name, &[&to, "proto=\"https\""]);
    (
        count("coredns_proxy_conn_cache_misses_total"),
        count("coredns_proxy_conn_cache_hits_total"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_over_https_to_cluster_dns_with_post_and_get() {
    let dir = certificates("fwd-doh");
    let server = doh_server(&dir).await;
    let up = server.dns_addrs()[0];
    for options in [
        "  tls ca.pem\n",
        "  tls ca.pem\n  doh_method POST\n  tls_servername dns.test\n",
        "  tls ca.pem\n  doh_method GET\n",
    ] {
        let (running, addr) = forwarder(&dir, &format!("https://{up}"), options).await;
        for name in ["www.example.org", "www.example.org"] {
            let (status, records) = dig_a(addr, name).await;
            assert_eq!(status, "NOERROR", "{options:?}");
            assert_eq!(records, ["www.example.org. 60 IN A 192.0.2.53"], "{options:?}");
        }
        let (status, _) = dig_a(addr, "nothere.example.org").await;
        assert_eq!(status, "NXDOMAIN", "{options:?}");
        // One HTTP/2 connection carried the three questions.
        assert_eq!(https_conns(&running, up).await, (1.0, 2.0), "{options:?}");
        running.stop().await.unwrap();
    }
    // A name the certificate does not carry: the TLS handshake fails, the client gets SERVFAIL.
    let (running, addr) = forwarder(
        &dir,
        &format!("https://{up}"),
        "  tls ca.pem\n  tls_servername other.test\n  max_fails 0\n",
    )
    .await;
    assert_eq!(dig_a(addr, "www.example.org").await.0, "SERVFAIL");
    running.stop().await.unwrap();
    server.stop().await.unwrap();
}

/// A burst of questions at once opens one HTTP/2 connection, which carries them all; the
/// connections kept stay within the bound (`cluster_dns_forward_https_idle_connections`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_shares_one_https_connection() {
    let dir = certificates("fwd-doh-burst");
    let server = doh_server(&dir).await;
    let up = server.dns_addrs()[0];
    let (running, addr) = forwarder(
        &dir,
        &format!("https://{up}"),
        "  tls ca.pem\n  max_idle_conns 1\n",
    )
    .await;
    let asks: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(async move {
                let q = support::query(&format!("www{i}.example.org."), hickory_proto::rr::RecordType::A);
                support::udp(addr, &q).await.0
            })
        })
        .collect();
    for a in asks {
        assert_eq!(a.await.unwrap().answers.len(), 1);
    }
    assert_eq!(https_conns(&running, up).await, (1.0, 7.0));
    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let kept = crate::support::sum(
        &m,
        "cluster_dns_forward_https_idle_connections",
        &[&format!("to=\"{up}\"")],
    );
    assert_eq!(kept, 1.0);
    running.stop().await.unwrap();
    server.stop().await.unwrap();
}

/// unbound serving DNS over HTTPS only, answering `www.example.com A 192.0.2.10`.
struct DohUnbound {
    addr: SocketAddr,
    child: Child,
}

impl Drop for DohUnbound {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl DohUnbound {
    fn start(dir: &Path) -> Self {
        let port = free_port();
        let mut conf = crate::support::upstream::unbound_server_conf(dir, port);
        conf.push_str(&format!(
            "  https-port: {port}\n  tls-service-key: \"{d}/key.pem\"\n  tls-service-pem: \"{d}/cert.pem\"\n  incoming-num-tcp: 100\n  local-data: \"www.example.com. 300 IN A 192.0.2.10\"\nremote-control:\n  control-enable: no\n",
            d = dir.display()
        ));
        let child = crate::support::upstream::spawn_unbound(dir, &conf)
            .expect("unbound is installed (test.sh installs it)");
        let addr: SocketAddr = (Ipv4Addr::LOCALHOST, port).into();
        let ub = Self { addr, child };
        for _ in 0..100 {
            if std::net::TcpStream::connect(addr).is_ok() {
                return ub;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("unbound did not listen on {addr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwards_over_https_to_unbound_with_post_and_get() {
    let dir = certificates("fwd-doh-unbound");
    let ub = DohUnbound::start(&dir);
    let up = ub.addr;
    for method in ["POST", "GET"] {
        let (running, addr) = forwarder(
            &dir,
            &format!("https://{up}"),
            &format!("  tls ca.pem\n  tls_servername dns.test\n  doh_method {method}\n"),
        )
        .await;
        for _ in 0..2 {
            let (status, records) = dig_a(addr, "www.example.com").await;
            assert_eq!(status, "NOERROR", "{method}");
            assert_eq!(records, ["www.example.com. 300 IN A 192.0.2.10"], "{method}");
        }
        assert_eq!(https_conns(&running, up).await, (1.0, 1.0), "{method}");
        running.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doh_upstream_that_does_not_answer_is_passed_over() {
    let dir = certificates("fwd-doh-failover");
    let server = doh_server(&dir).await;
    let good = server.dns_addrs()[0];
    // Accepts TCP connections and never says a word (no TLS handshake, no HTTP).
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = silent.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
            if held.len() > 64 {
                held.remove(0);
            }
        }
    });
    let (running, addr) = forwarder(
        &dir,
        &format!("https://{dead} https://{good}"),
        "  tls ca.pem\n  policy sequential\n  read_timeout 500ms\n",
    )
    .await;
    let t = Instant::now();
    let (status, records) = dig_a(addr, "www.example.org").await;
    assert_eq!(status, "NOERROR");
    assert_eq!(records, ["www.example.org. 60 IN A 192.0.2.53"]);
    assert!(t.elapsed() < Duration::from_millis(1900), "{:?}", t.elapsed());
    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let answered = |to: SocketAddr| {
        crate::support::sum(
            &m,
            "coredns_proxy_request_duration_seconds_count",
            &[&format!("to=\"{to}\"")],
        )
    };
    assert_eq!((answered(dead), answered(good)), (0.0, 1.0));
    running.stop().await.unwrap();
    server.stop().await.unwrap();
    hold.abort();
}

#[test]
fn doh_options_are_checked_when_the_corefile_is_read() {
    let dir = support::temp_dir("fwd-doh-config");
    let check = |text: &str| support::check_corefile(&dir, text);
    let e = check(".:53 {\n forward . https://127.0.0.1 {\n  doh_method PUT\n }\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3") && e.contains("either POST or GET"),
        "{e}"
    );
    let e = check(".:53 {\n forward . https://127.0.0.1 {\n  tls missing.pem\n }\n}\n").unwrap_err();
    assert!(e.contains("Corefile:3") && e.contains("cannot read"), "{e}");
    check(".:53 {\n forward . https://127.0.0.1/resolve https://[::1]:8443 {\n  doh_method GET\n }\n}\n")
        .unwrap();
}
