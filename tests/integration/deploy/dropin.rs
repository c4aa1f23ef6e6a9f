//! The drop-in contract with CoreDNS's operators: kubeadm's Corefile served end to end (the
//! fake API server, Debian's unbound upstream), `/health`, `/ready` and `/metrics` as CoreDNS
//! serves them (the metrics text checked as Prometheus exposition format, each core metric
//! moved by real queries), SIGTERM's lameduck under a query loop with the real binary, and
//! Corefile reload through a ConfigMap-style symlink swap while queries run.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cluster_dns::app;
use cluster_dns::config::{Config, DEFAULT_DNS_PORT};
use fake_apiserver::FakeApiServer;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::runtime::cli::Server;
use crate::support::upstream::Unbound;
use crate::support::{self, fixture, http_get, parse_exposition, scrape, show, sum};

async fn ask(addr: SocketAddr, name: &str, qtype: RecordType) -> Message {
    support::udp(addr, &support::query(name, qtype)).await.0
}

/// A temporary directory holding a copy of the demo cluster (`demo-cluster.yaml`).
fn dir_with_demo_cluster(tag: &str) -> std::path::PathBuf {
    let dir = support::temp_dir(tag);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo-cluster.yaml"),
        dir.join("demo-cluster.yaml"),
    )
    .unwrap();
    dir
}

/// `config/Corefile` with only what a test machine needs changed, each change asserted to
/// apply (so a different Corefile fails here): loopback and free ports instead of :53, :8080,
/// :8181 and :9153, the fake API server's endpoint instead of the in-cluster service account,
/// and the test's upstream instead of the machine's /etc/resolv.conf.
pub(crate) fn kubeadm_corefile_for_test(api: &str, upstream: SocketAddr) -> String {
    let mut text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("config/Corefile")).unwrap();
    for (from, to) in [
        (".:53 {\n", ".:0 {\n    bind 127.0.0.1\n".to_owned()),
        ("    health {\n", "    health 127.0.0.1:0 {\n".to_owned()),
        ("    ready\n", "    ready 127.0.0.1:0\n".to_owned()),
        (
            "    prometheus :9153\n",
            "    prometheus 127.0.0.1:0\n".to_owned(),
        ),
        (
            "       pods insecure\n",
            format!("       endpoint {api}\n       pods insecure\n"),
        ),
        (
            "    forward . /etc/resolv.conf {\n",
            format!("    forward . {upstream} {{\n"),
        ),
    ] {
        assert!(text.contains(from), "config/Corefile no longer has {from:?}");
        text = text.replacen(from, &to, 1);
    }
    text
}

/// The kubeadm Corefile end to end: cluster names from the fake API server, other names from
/// unbound, the three HTTP endpoints, and every core metric moved by the queries made.
#[tokio::test]
async fn kubeadm_corefile_end_to_end_with_probes_and_metrics() {
    let dir = support::temp_dir("kubeadm");
    let ub = Unbound::start(&dir)
        .await
        .expect("unbound is not installed: run ./test.sh, which installs it");
    let fake = FakeApiServer::start().await.unwrap();
    // Hold the first lists back so /ready is seen 503 before the sync.
    fake.stall(true);
    fake.load(fixture()).unwrap();
    let corefile = kubeadm_corefile_for_test(&fake.url(), ub.addr);
    let running = support::start(&corefile, &dir).await;
    let dns = running.dns_addrs()[0];
    let health = running.http_addr("health").expect("/health listener");
    let ready = running.http_addr("ready").expect("/ready listener");
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    assert_eq!(http_get(health, "/health").await, (200, "OK".to_owned()));
    let (status, body) = http_get(ready, "/ready").await;
    assert_eq!(status, 503, "ready before the API lists are in: {body}");
    assert!(body.contains("kubernetes"), "{body}");
    fake.stall(false);
    let mut became_ready = false;
    for _ in 0..300 {
        if http_get(ready, "/ready").await == (200, "OK".to_owned()) {
            became_ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(became_ready, "/ready never turned 200");
    // Health is never tied to the API server.
    fake.stop_listener().await;
    assert_eq!(http_get(health, "/health").await.0, 200);
    fake.restart_listener().await.unwrap();

    let before = scrape(metrics).await;
    let m = ask(dns, "kubernetes.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(
        m.answers.iter().map(show).collect::<Vec<_>>(),
        ["kubernetes.default.svc.cluster.local. A 10.96.0.1"]
    );
    assert!(m.metadata.authoritative);
    let m = ask(dns, "nope.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    let m = ask(dns, "www.example.com.", RecordType::A).await;
    assert_eq!(
        m.answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::A(a) => Some(a.0.to_string()),
                _ => None,
            })
            .collect::<Vec<_>>(),
        ["192.0.2.10"],
        "forwarded to unbound"
    );
    assert!(!m.metadata.authoritative);
    // The same external name again: from the cache.
    let _ = ask(dns, "www.example.com.", RecordType::A).await;
    let tcp = support::tcp(
        dns,
        &support::query("kube-dns.kube-system.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(tcp.answers.len(), 1);
    let after = scrape(metrics).await;

    let delta = |name: &str, labels: &[&str]| sum(&after, name, labels) - sum(&before, name, labels);
    let server = "server=\"dns://127.0.0.1:0\"";
    assert_eq!(
        delta(
            "coredns_dns_requests_total",
            &[
                server,
                "proto=\"udp\"",
                "type=\"A\"",
                "zone=\".\"",
                "family=\"1\""
            ]
        ),
        4.0
    );
    assert_eq!(
        delta("coredns_dns_requests_total", &[server, "proto=\"tcp\""]),
        1.0
    );
    assert_eq!(delta("coredns_dns_responses_total", &["rcode=\"NXDOMAIN\""]), 1.0);
    assert_eq!(delta("coredns_dns_responses_total", &["rcode=\"NOERROR\""]), 4.0);
    assert_eq!(
        delta("coredns_dns_request_duration_seconds_count", &[server]),
        5.0
    );
    assert_eq!(
        delta("coredns_dns_request_size_bytes_count", &["proto=\"udp\""]),
        4.0
    );
    assert_eq!(
        delta("coredns_dns_response_size_bytes_count", &["proto=\"tcp\""]),
        1.0
    );
    assert!(delta("coredns_dns_response_size_bytes_sum", &["proto=\"udp\""]) > 4.0 * 40.0);
    assert_eq!(delta("coredns_panics_total", &[]), 0.0);
    assert_eq!(sum(&after, "coredns_build_info", &["version=\""]), 1.0);
    for plugin in [
        "errors",
        "health",
        "ready",
        "kubernetes",
        "prometheus",
        "forward",
        "cache",
        "loop",
        "reload",
        "loadbalance",
    ] {
        assert_eq!(
            sum(
                &after,
                "coredns_plugin_enabled",
                &[&format!("name=\"{plugin}\""), server]
            ),
            1.0,
            "coredns_plugin_enabled for {plugin}"
        );
    }
    // Labels only from fixed sets: no query name or client address anywhere.
    let (_, text) = http_get(metrics, "/metrics").await;
    for leak in ["kubernetes.default", "www.example.com", "kube-dns", "nope."] {
        assert!(
            !text
                .lines()
                .filter(|l| !l.starts_with('#'))
                .any(|l| l.contains(leak)),
            "{leak} in a label"
        );
    }
    // A PTR answer keeps its Service's name with the zone entry: the kept-names gauge shows
    // the bytes, under its bound.
    let m = ask(dns, "1.0.96.10.in-addr.arpa.", RecordType::PTR).await;
    assert_eq!(
        m.answers.iter().map(show).collect::<Vec<_>>(),
        ["1.0.96.10.in-addr.arpa. PTR kubernetes.default.svc.cluster.local."]
    );
    let kept = scrape(metrics).await;
    let kept_bytes = sum(&kept, "cluster_dns_kubernetes_kept_names_bytes", &[]);
    let kept_limit = sum(&kept, "cluster_dns_kubernetes_kept_names_limit_bytes", &[]);
    assert!(kept_bytes > 0.0 && kept_bytes < 4096.0, "{kept_bytes}");
    assert_eq!(kept_limit, f64::from(8u32 << 20));
    // The plugins' own metrics moved too.
    assert_eq!(
        delta("coredns_cache_hits_total", &[server, "type=\"success\""]),
        1.0
    );
    assert!(delta("coredns_cache_misses_total", &[server]) >= 1.0);
    assert!(sum(&after, "coredns_cache_entries", &[server, "type=\"success\""]) >= 1.0);
    let to = format!("to=\"{}\"", ub.addr);
    assert!(
        delta(
            "coredns_proxy_request_duration_seconds_count",
            &[&to, "rcode=\"NOERROR\""]
        ) >= 1.0
    );
    // Each exchange takes a UDP socket from the upstream's pool (a hit) or opens one (a miss).
    assert!(
        delta("coredns_proxy_conn_cache_misses_total", &[&to, "proto=\"udp\""])
            + delta("coredns_proxy_conn_cache_hits_total", &[&to, "proto=\"udp\""])
            >= 1.0
    );
    for family in [
        "coredns_forward_max_concurrent_rejects_total",
        "coredns_forward_healthcheck_broken_total",
        "coredns_reload_failed_total",
    ] {
        assert!(
            after.keys().any(|k| k.starts_with(family)),
            "{family} is exported"
        );
    }
    // The running Corefile's SHA-512, and the process metrics the dashboards' CPU and memory
    // panels read.
    let sha = sha512_hex(corefile.as_bytes());
    assert_eq!(
        sum(
            &after,
            "coredns_reload_version_info",
            &["hash=\"sha512\"", &format!("value=\"{sha}\"")]
        ),
        1.0
    );
    assert!(sum(&after, "process_resident_memory_bytes", &[]) > 1e6);
    assert!(after.keys().any(|k| k.starts_with("process_cpu_seconds_total")));
    // A change of an EndpointSlice after the sync is timed from its trigger annotation.
    let mut slice = fake
        .get(fake_apiserver::Resource::EndpointSlices, "default", "kubernetes")
        .expect("the fixture's kubernetes slice");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (days, secs) = (now / 86_400, now % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let stamp = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    );
    slice["metadata"]["annotations"] =
        serde_json::json!({ "endpoints.kubernetes.io/last-change-trigger-time": stamp });
    slice["endpoints"][0]["addresses"] = serde_json::json!(["10.0.0.99"]);
    fake.update(&slice).unwrap();
    let mut programmed = 0.0;
    for _ in 0..200 {
        programmed = sum(
            &scrape(metrics).await,
            "coredns_kubernetes_dns_programming_duration_seconds_count",
            &["service_kind=\"cluster_ip\""],
        );
        if programmed >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(programmed, 1.0, "programming duration observed once");
    // /health probes itself once a second, as CoreDNS's does.
    let mut probes = 0.0;
    for _ in 0..100 {
        probes = sum(
            &scrape(metrics).await,
            "coredns_health_request_duration_seconds_count",
            &[],
        );
        if probes >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(probes >= 1.0, "no /health self-probe recorded");
    assert_eq!(
        sum(
            &scrape(metrics).await,
            "coredns_health_request_failures_total",
            &[]
        ),
        0.0
    );
    running.stop().await.unwrap();
}

/// One query on an open TCP connection; panics unless it is answered.
async fn query_on(conn: &mut tokio::net::TcpStream) {
    let q = support::query("web.default.svc.cluster.local.", RecordType::A);
    let bytes = q.to_bytes().unwrap();
    conn.write_all(&u16::try_from(bytes.len()).unwrap().to_be_bytes())
        .await
        .unwrap();
    conn.write_all(&bytes).await.unwrap();
    let mut len = [0u8; 2];
    conn.read_exact(&mut len).await.unwrap();
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    conn.read_exact(&mut reply).await.unwrap();
    let m = Message::from_bytes(&reply).unwrap();
    assert_eq!((m.metadata.id, m.answers.len()), (q.metadata.id, 1));
}

/// A client querying in a loop through SIGTERM sees no failed query: `/ready` turns 503 at
/// once, UDP and TCP keep answering through the lameduck, then the process exits 0.
#[test]
fn sigterm_lameduck_loses_no_query() {
    let dir = dir_with_demo_cluster("lameduck");
    let corefile = dir.join("Corefile");
    std::fs::write(
        &corefile,
        ".:0 {\n bind 127.0.0.1\n health 127.0.0.1:0 {\n  lameduck 3s\n }\n ready 127.0.0.1:0\n kubernetes cluster.local in-addr.arpa ip6.arpa {\n  manifests demo-cluster.yaml\n }\n}\n",
    )
    .unwrap();
    let mut server = Server::start(&corefile);
    let dns = server.addr;
    let ready = server.wait_http("/ready");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(http_get(ready, "/ready").await, (200, "OK".to_owned()));
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        // Four clients querying back to back, each from its own socket.
        let loops: Vec<_> = (0..4)
            .map(|_| {
                let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
                tokio::spawn(async move {
                    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
                    let mut buf = vec![0u8; 4096];
                    while !stop.load(Ordering::Relaxed) {
                        let q = support::query("web.default.svc.cluster.local.", RecordType::A);
                        sock.send_to(&q.to_bytes().unwrap(), dns).await.unwrap();
                        let answered = match tokio::time::timeout(
                            Duration::from_secs(1),
                            sock.recv_from(&mut buf),
                        )
                        .await
                        {
                            Ok(Ok((n, _))) => Message::from_bytes(&buf[..n])
                                .is_ok_and(|m| m.metadata.id == q.metadata.id && m.answers.len() == 1),
                            _ => false,
                        };
                        if answered { &ok } else { &failed }.fetch_add(1, Ordering::Relaxed);
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        // A TCP connection opened before the signal keeps being served on after it.
        let mut conn = tokio::net::TcpStream::connect(dns).await.unwrap();
        query_on(&mut conn).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let term_at = Instant::now();
        server.signal_term();
        let mut turned = None;
        for _ in 0..250 {
            if http_get(ready, "/ready").await.0 == 503 {
                turned = Some(term_at.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let turned = turned.expect("/ready never turned 503 after SIGTERM");
        // /ready turned first: DNS is still answering (checked below, on the open TCP
        // connection and by the clients) after /ready said 503.
        let answered_before = ok.load(Ordering::Relaxed);
        // TCP keeps working during the lameduck too.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let tcp = support::tcp(
            dns,
            &support::query("web.default.svc.cluster.local.", RecordType::A),
        )
        .await;
        assert_eq!(tcp.answers.len(), 1);
        query_on(&mut conn).await;
        assert!(
            ok.load(Ordering::Relaxed) > answered_before,
            "DNS kept answering after /ready turned 503"
        );
        // Query until a second before the lameduck ends.
        tokio::time::sleep_until((term_at + Duration::from_secs(2)).into()).await;
        stop.store(true, Ordering::Relaxed);
        for l in loops {
            l.await.unwrap();
        }
        eprintln!(
            "lameduck: /ready 503 after {turned:?}; {} queries answered, {} failed",
            ok.load(Ordering::Relaxed),
            failed.load(Ordering::Relaxed)
        );
        assert_eq!(
            failed.load(Ordering::Relaxed),
            0,
            "failed queries through SIGTERM"
        );
        assert!(
            ok.load(Ordering::Relaxed) > 20,
            "too few queries answered: {}",
            ok.load(Ordering::Relaxed)
        );
    });
    assert!(
        server.wait_exit(Duration::from_secs(10)),
        "exit status 0 after the lameduck"
    );
}

/// Reload through a ConfigMap-style `..data` symlink swap while queries run: a changed
/// Corefile is applied without a failed query; a broken one is refused, counted in
/// `coredns_reload_failed_total`, and the last good one keeps serving.
#[tokio::test]
async fn reload_applies_a_changed_corefile_and_refuses_a_broken_one() {
    let dir = dir_with_demo_cluster("reload");
    let version = |n: u32, body: &str| {
        let v = dir.join(format!("v{n}"));
        std::fs::create_dir_all(&v).unwrap();
        std::fs::write(v.join("Corefile"), body).unwrap();
    };
    let good = |ttl: u32| {
        format!(
            ".:0 {{\n bind 127.0.0.1\n reload 2s 1s\n prometheus 127.0.0.1:0\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  manifests demo-cluster.yaml\n  ttl {ttl}\n }}\n}}\n"
        )
    };
    version(1, &good(30));
    version(2, &good(7));
    version(
        3,
        ".:0 {\n bind 127.0.0.1\n reload 2s 1s\n kubernetes cluster.local {\n  frobnicate\n }\n}\n",
    );
    std::os::unix::fs::symlink("v1", dir.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/Corefile", dir.join("Corefile")).unwrap();
    let swap_to = |n: u32| {
        let tmp = dir.join("..data_tmp");
        std::os::unix::fs::symlink(format!("v{n}"), &tmp).unwrap();
        std::fs::rename(&tmp, dir.join("..data")).unwrap();
    };
    let config = Config::load(&dir.join("Corefile"), DEFAULT_DNS_PORT).unwrap();
    let running = app::start(&config).await.unwrap();
    let dns = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicUsize::new(0));
    let last_ttl = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let loop_task = {
        let (stop, failed, last_ttl, answered) =
            (stop.clone(), failed.clone(), last_ttl.clone(), answered.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let q = support::query("web.default.svc.cluster.local.", RecordType::A);
                match support::udp_raw(dns, &q.to_bytes().unwrap(), Duration::from_secs(1)).await {
                    Some(raw) => match Message::from_bytes(&raw) {
                        Ok(m) if m.answers.len() == 1 => {
                            last_ttl.store(m.answers[0].ttl as usize, Ordering::Relaxed);
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    None => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let wait_until = |what: &'static str, f: Box<dyn Fn() -> bool + Send>| async move {
        for _ in 0..400 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{what} did not happen within 20 s");
    };
    {
        let t = last_ttl.clone();
        wait_until("first answers", Box::new(move || t.load(Ordering::Relaxed) == 30)).await;
    }
    swap_to(2);
    {
        let t = last_ttl.clone();
        wait_until(
            "the reload to ttl 7",
            Box::new(move || t.load(Ordering::Relaxed) == 7),
        )
        .await;
    }
    let v2 = sha512_hex(good(7).as_bytes());
    let mut versioned = false;
    for _ in 0..100 {
        let m = scrape(metrics).await;
        if sum(&m, "coredns_reload_version_info", &[&format!("value=\"{v2}\"")]) == 1.0 {
            assert_eq!(
                sum(&m, "coredns_reload_version_info", &[]),
                1.0,
                "one version series"
            );
            versioned = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        versioned,
        "coredns_reload_version_info names the reloaded Corefile"
    );
    swap_to(3);
    let mut refused = false;
    for _ in 0..400 {
        if sum(&scrape(metrics).await, "coredns_reload_failed_total", &[]) >= 1.0 {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused, "the broken Corefile was not counted as a failed reload");
    let before = answered.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    loop_task.await.unwrap();
    assert!(
        answered.load(Ordering::Relaxed) > before,
        "still answering after the refused reload"
    );
    assert_eq!(
        last_ttl.load(Ordering::Relaxed),
        7,
        "the last good Corefile keeps serving"
    );
    eprintln!(
        "reload: {} queries answered through two reloads (one refused), {} failed",
        answered.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    assert_eq!(failed.load(Ordering::Relaxed), 0, "failed queries during reloads");
    running.stop().await.unwrap();
}

fn sha512_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha512::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The exposition parser itself rejects what is not exposition format.
#[test]
fn exposition_parser_is_strict() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",y=\"q\\\"\"} 3\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 0.5\nh_count 1\n";
    let m = parse_exposition(good);
    assert_eq!(m["a_total{x=\"1\",y=\"q\"\"}"], 3.0);
    assert_eq!(m["h_count{}"], 1.0);
    for bad in [
        "a_total 1\n",
        "# TYPE a counter\na{x=1} 1\n",
        "# TYPE a counter\na one\n",
        "# TYPE 1a counter\n",
    ] {
        assert!(
            std::panic::catch_unwind(|| parse_exposition(bad)).is_err(),
            "{bad:?} accepted"
        );
    }
}

/// The additions operators make to kubeadm's Corefile: `hosts` (inline and a file, with
/// `fallthrough`), `rewrite name` with `answer auto`, a stub domain as an extra server block,
/// and `import`, served together with the cluster zone and the upstream.
#[tokio::test]
async fn common_user_additions_work_together() {
    let dir = dir_with_demo_cluster("additions");
    let ub = Unbound::start(&dir)
        .await
        .expect("unbound is not installed: run ./test.sh, which installs it");
    let stub = crate::support::upstream::Scripted::start().await;
    stub.set_octet(77);
    std::fs::write(
        dir.join("extra.hosts"),
        "# site hosts\n10.9.9.9 filed.example.org\nnot-an-ip bad.line\n",
    )
    .unwrap();
    std::fs::write(dir.join("common.conf"), "loadbalance\nerrors\n").unwrap();
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n import common.conf\n hosts extra.hosts {{\n  10.1.2.3 legacy.example.org\n  fallthrough\n }}\n rewrite name suffix .corp.internal. .svc.cluster.local. answer auto\n rewrite name exact old-web.default.svc.cluster.local. web.default.svc.cluster.local.\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  manifests demo-cluster.yaml\n  fallthrough in-addr.arpa ip6.arpa\n }}\n forward . {}\n cache 30\n}}\nexample.com:0 {{\n bind 127.0.0.1\n forward . {}\n}}\n",
        ub.addr, stub.addr
    );
    let running = support::start(&corefile, &dir).await;
    let dns = running.dns_addrs()[0];
    let answers = |m: &Message| m.answers.iter().map(show).collect::<Vec<_>>();

    let m = ask(dns, "legacy.example.org.", RecordType::A).await;
    assert_eq!(answers(&m), ["legacy.example.org. A 10.1.2.3"]);
    assert!(m.metadata.authoritative);
    let m = ask(dns, "filed.example.org.", RecordType::A).await;
    assert_eq!(answers(&m), ["filed.example.org. A 10.9.9.9"]);
    // In hosts for another type: NODATA, not passed on.
    let m = ask(dns, "legacy.example.org.", RecordType::AAAA).await;
    assert_eq!(
        (m.metadata.response_code, m.answers.len()),
        (ResponseCode::NoError, 0)
    );
    // Not in hosts: fallthrough to the cluster zone, then upstream.
    let m = ask(dns, "web.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&m), ["web.default.svc.cluster.local. A 10.96.100.10"]);
    let m = ask(dns, "www.example.org.", RecordType::A).await;
    assert_eq!(
        m.metadata.response_code,
        ResponseCode::NXDomain,
        "unbound's NXDOMAIN"
    );

    // rewrite: the client sees its own name in the answer.
    let m = ask(dns, "web.default.corp.internal.", RecordType::A).await;
    assert_eq!(answers(&m), ["web.default.corp.internal. A 10.96.100.10"]);
    assert_eq!(m.queries[0].name().to_string(), "web.default.corp.internal.");
    let m = ask(dns, "old-web.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&m), ["old-web.default.svc.cluster.local. A 10.96.100.10"]);

    // The stub domain's block answers example.com from its own upstream; the rest of the world
    // still goes to the main block's.
    let m = ask(dns, "www.example.com.", RecordType::A).await;
    assert_eq!(answers(&m), ["www.example.com. A 192.0.2.77"]);
    assert!(stub.udp_queries() >= 1);
    let m = ask(dns, "8.8.8.8.in-addr.arpa.", RecordType::PTR).await;
    assert_eq!(answers(&m), ["8.8.8.8.in-addr.arpa. PTR dns.google."]);
    running.stop().await.unwrap();
}

/// The binary serving the demo cluster with `plugins` (Corefile lines) and `forward` to a
/// loopback port nobody listens on (the upstream refuses at once), and a runtime to query it.
fn demo_forwarding_to_a_closed_port(tag: &str, plugins: &str) -> (Server, tokio::runtime::Runtime) {
    let dir = dir_with_demo_cluster(tag);
    let dead = crate::support::upstream::free_port();
    let corefile = dir.join("Corefile");
    std::fs::write(
        &corefile,
        format!(
            ".:0 {{\n bind 127.0.0.1\n{plugins} kubernetes cluster.local {{\n  manifests demo-cluster.yaml\n }}\n forward . 127.0.0.1:{dead}\n}}\n"
        ),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    (Server::start(&corefile), rt)
}

/// `log` writes CoreDNS's common log format on stdout; `errors` logs a failure the chain
/// produced (no upstream answered) with its rcode, name and type.
#[test]
fn log_and_errors_lines() {
    let (mut server, rt) = demo_forwarding_to_a_closed_port("log", " log\n errors\n");
    let dns = server.addr;
    rt.block_on(async {
        let m = ask(dns, "web.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(m.answers.len(), 1);
        let m = ask(dns, "nothing.example.", RecordType::MX).await;
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    });
    let mut lines = Vec::new();
    for _ in 0..100 {
        lines = server.log_lines();
        if lines.iter().any(|l| l.contains("plugin/errors: "))
            && lines
                .iter()
                .filter(|l| l.starts_with("[INFO] 127.0.0.1:"))
                .count()
                >= 2
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let query_line = lines
        .iter()
        .find(|l| l.contains("\"A IN web.default.svc.cluster.local. udp "))
        .unwrap_or_else(|| panic!("no query log line in {lines:#?}"));
    // `[INFO] 127.0.0.1:PORT - ID "A IN name udp SIZE false 512" NOERROR qr,aa,rd SIZE 0.000123s`
    let words: Vec<&str> = query_line.split_whitespace().collect();
    assert_eq!(words[0], "[INFO]");
    assert!(
        words[1].starts_with("127.0.0.1:") && words[2] == "-",
        "{query_line}"
    );
    assert!(words[3].parse::<u16>().is_ok(), "{query_line}");
    assert_eq!(
        &words[4..10],
        [
            "\"A",
            "IN",
            "web.default.svc.cluster.local.",
            "udp",
            words[8],
            "false"
        ]
    );
    assert_eq!(words[10], "512\"");
    assert_eq!(&words[11..13], ["NOERROR", "qr,aa,rd"]);
    assert!(
        words[13].parse::<usize>().is_ok() && words[14].ends_with('s'),
        "{query_line}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("\"MX IN nothing.example. udp ") && l.contains(" SERVFAIL ")),
        "{lines:#?}"
    );
    let error_line = lines
        .iter()
        .find(|l| l.contains("plugin/errors: "))
        .unwrap_or_else(|| panic!("no errors line in {lines:#?}"));
    assert!(
        error_line.contains("2 nothing.example. MX: no upstream answered"),
        "{error_line}"
    );
    assert!(server.stop());
}

/// `errors` logs what happened: a question whose upstream refused is logged once, with the
/// refused reason (the connected UDP socket hears the ICMP error; no timeout was waited for), and
/// the same question answered again from the cache's stored SERVFAIL asks no upstream and is
/// not logged. Before, each cache hit logged "no upstream answered in time".
#[test]
fn errors_logs_upstream_failures_not_cached_servfails() {
    let (mut server, rt) = demo_forwarding_to_a_closed_port("errors-cache", " errors\n cache 30\n");
    let dns = server.addr;
    rt.block_on(async {
        for _ in 0..3 {
            let m = ask(dns, "nothing.example.", RecordType::MX).await;
            assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        }
        // A question that is answered, after the three: once its log line could be there, so
        // could any line of the three before it.
        let m = ask(dns, "web.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(m.answers.len(), 1);
    });
    let errors_now = |server: &mut Server| -> Vec<String> {
        server
            .log_lines()
            .into_iter()
            .filter(|l| l.contains("plugin/errors: "))
            .collect()
    };
    for _ in 0..40 {
        if !errors_now(&mut server).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Give a late second line the chance to show up.
    std::thread::sleep(Duration::from_millis(200));
    let errors = errors_now(&mut server);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains("2 nothing.example. MX: no upstream answered: each refused"),
        "{}",
        errors[0]
    );
    assert!(server.stop());
}

/// `coredns_dns_responses_total{plugin}` names the plugin that wrote each reply, as CoreDNS's
/// recorder does: `hosts` for a hosts answer, `forward` for an upstream's, `cache` for a cache
/// hit, `kubernetes` for the cluster zone, empty for a failure the chain produced. Before the
/// plugin contract every authoritative reply was labelled `kubernetes` and cache hits kept the
/// label of what they had cached.
#[tokio::test]
async fn responses_are_labelled_with_the_plugin_that_wrote_them() {
    let up = crate::support::upstream::Scripted::start().await;
    let dir = dir_with_demo_cluster("labels");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n cache 30\n hosts {{\n  192.0.2.44 printer.lan\n  fallthrough\n }}\n kubernetes cluster.local {{\n  manifests demo-cluster.yaml\n }}\n forward . {}\n}}\n",
        up.addr
    );
    let running = support::start(&corefile, &dir).await;
    let dns = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    let m = ask(dns, "printer.lan.", RecordType::A).await;
    assert_eq!(m.answers.len(), 1);
    for _ in 0..3 {
        let m = ask(dns, "www.example.com.", RecordType::A).await;
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    }
    let m = ask(dns, "web.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(m.answers.len(), 1);
    let got = scrape(metrics).await;
    let responses = |plugin: &str| {
        sum(
            &got,
            "coredns_dns_responses_total",
            &[&format!("plugin=\"{plugin}\""), "rcode=\"NOERROR\""],
        )
    };
    // The first printer.lan answer is written by hosts, then cached by nothing else.
    assert_eq!(responses("hosts"), 1.0, "{got:#?}");
    assert_eq!(responses("forward"), 1.0, "{got:#?}");
    assert_eq!(responses("cache"), 2.0, "{got:#?}");
    assert_eq!(responses("kubernetes"), 1.0, "{got:#?}");
    running.stop().await.unwrap();
}
