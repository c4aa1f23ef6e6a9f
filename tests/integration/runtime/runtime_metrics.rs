//! `prometheus { runtime_metrics }` (issue 44): CoreDNS 1.14 takes the option, so a Corefile
//! with it starts here too, and `/metrics`, scraped over a real socket, has the runtime's
//! figures: `go_goroutines` (tokio's alive tasks), `go_threads`, `go_sched_gomaxprocs_threads`
//! (the runtime's workers) and `cluster_dns_runtime_*`. Without the option they are absent.

use crate::support;
use crate::support::scrape;

const RUNTIME: &[&str] = &[
    "go_goroutines",
    "go_threads",
    "go_sched_gomaxprocs_threads",
    "cluster_dns_runtime_global_queue_depth",
    "cluster_dns_runtime_worker_busy_seconds_total",
    "cluster_dns_runtime_worker_parks_total",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_metrics_exports_the_runtime_figures() {
    let dir = support::temp_dir("runtime-metrics");
    let corefile = ".:0 {\n bind 127.0.0.1\n prometheus 127.0.0.1:0 {\n  runtime_metrics\n }\n whoami\n}\n";
    support::check_corefile(&dir, corefile).expect("runtime_metrics is accepted");
    let running = support::start(corefile, &dir).await;
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    // A question first, so the runtime has done some work.
    let dns = running.dns_addrs()[0];
    let _ = support::udp(
        dns,
        &support::query("example.org.", hickory_proto::rr::RecordType::A),
    )
    .await;
    let got = scrape(metrics).await;
    let value = |name: &str| {
        *got.get(&format!("{name}{{}}"))
            .unwrap_or_else(|| panic!("no {name} in {got:#?}"))
    };
    for name in RUNTIME {
        value(name);
    }
    // This test's runtime has two workers, and the server's listeners are tasks on it.
    assert_eq!(value("go_sched_gomaxprocs_threads"), 2.0);
    assert!(value("go_goroutines") >= 1.0, "{got:#?}");
    assert!(value("go_threads") >= 2.0, "{got:#?}");
    assert!(
        value("cluster_dns_runtime_worker_busy_seconds_total") > 0.0,
        "{got:#?}"
    );
    // CoreDNS's core families are still there.
    assert!(got.keys().any(|k| k.starts_with("coredns_build_info")));
    running.stop().await.unwrap();
}

#[tokio::test]
async fn without_the_option_no_runtime_figures() {
    let dir = support::temp_dir("runtime-metrics-off");
    let corefile = ".:0 {\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n whoami\n}\n";
    let running = support::start(corefile, &dir).await;
    let got = scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    for name in RUNTIME {
        assert!(
            !got.keys().any(|k| k.starts_with(&format!("{name}{{"))),
            "{name} without runtime_metrics"
        );
    }
    running.stop().await.unwrap();
}
