//! `deploy/monitoring/`: the alert rules pass Debian's `promtool` (`check rules`, and
//! `test rules` with a firing and a silent case for every alert), the PrometheusRule carries the
//! same groups as the plain rules file, every alert links its section of `runbook.md`, a real
//! scrape of the demo passes `promtool check metrics`, and every query of the Grafana dashboard
//! returns data from a real Prometheus (Debian's `prometheus`, on loopback, scraping every
//! second the binary serving the demo cluster from the fake API server, under load and churn),
//! under both job names.
//!
//! `promtool` and `prometheus` come from Debian's `prometheus` package, installed by test.sh.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fake_apiserver::FakeApiServer;
use hickory_proto::op::{Edns, ResponseCode};
use hickory_proto::rr::RecordType;
use serde_json::Value;

use crate::runtime::cli::{Server, demo_on_free_port};
use crate::support;
use crate::support::upstream::{Unbound, free_port};

fn monitoring() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/monitoring")
}

fn yaml(name: &str) -> Value {
    let text = std::fs::read_to_string(monitoring().join(name)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs a Debian tool from the `prometheus` package and returns its combined output, failing
/// the test with that output when it exits non-zero.
fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (apt-get install prometheus; test.sh does)"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn prometheus_rule_has_the_rules_files_groups() {
    let plain = yaml("prometheus-rules.yaml");
    let op = yaml("prometheusrule.yaml");
    assert_eq!(op["kind"], "PrometheusRule");
    assert_eq!(op["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(op["metadata"]["namespace"], "kube-system");
    assert_eq!(
        op["spec"]["groups"], plain["groups"],
        "prometheusrule.yaml differs from prometheus-rules.yaml: regenerate it (see its header)"
    );
}

/// Every alert links its own section of `runbook.md`: the `runbook_url` ends in
/// `runbook.md#<alert name in lower case>` (GitHub's anchor for a `## <alert name>` heading), and
/// that heading is in the runbook.
#[test]
fn every_alert_links_its_section_of_the_runbook() {
    let runbook = std::fs::read_to_string(monitoring().join("runbook.md")).unwrap();
    let headings: Vec<&str> = runbook.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    let plain = yaml("prometheus-rules.yaml");
    let mut alerts = Vec::new();
    for group in plain["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let alert = rule["alert"].as_str().unwrap();
            let url = rule["annotations"]["runbook_url"]
                .as_str()
                .unwrap_or_else(|| panic!("{alert} has no runbook_url"));
            let (base, anchor) = url
                .rsplit_once('#')
                .unwrap_or_else(|| panic!("{alert}: {url} has no anchor"));
            assert!(
                base.starts_with("https://") && base.ends_with("/deploy/monitoring/runbook.md"),
                "{alert}: {url} is not the runbook in deploy/monitoring"
            );
            assert_eq!(anchor, alert.to_lowercase(), "{alert}: {url}");
            assert!(
                headings.contains(&alert),
                "{alert} has no `## {alert}` section in runbook.md"
            );
            alerts.push(alert);
        }
    }
    // 15 alerts, two of them (the SERVFAIL shares) at two severities.
    assert_eq!(alerts.len(), 17, "{alerts:?}");
    // And no section is left for an alert that is gone.
    for h in headings {
        assert!(alerts.contains(&h), "runbook.md has a section for no alert: {h}");
    }
}

#[test]
fn service_monitor_scrapes_the_kube_dns_metrics_port() {
    let sm = yaml("servicemonitor.yaml");
    assert_eq!(sm["kind"], "ServiceMonitor");
    assert_eq!(sm["spec"]["selector"]["matchLabels"]["k8s-app"], "kube-dns");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    // The Service in cluster-dns.yaml has that label and a port of that name.
    let text = std::fs::read_to_string(monitoring().join("../cluster-dns.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let svc = docs
        .iter()
        .find(|d| d["kind"] == "Service" && d["metadata"]["name"] == "kube-dns")
        .expect("the kube-dns Service");
    assert_eq!(svc["metadata"]["labels"]["k8s-app"], "kube-dns");
    let ports = svc["spec"]["ports"].as_array().unwrap();
    assert!(
        ports.iter().any(|p| p["name"] == "metrics" && p["port"] == 9153),
        "{ports:?}"
    );
}

#[test]
fn promtool_checks_the_rules_and_every_alert_fires_in_a_rule_test() {
    let dir = monitoring();
    let out = run(Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(dir.join("prometheus-rules.yaml")));
    assert!(out.contains("SUCCESS"), "{out}");
    let out = run(Command::new("promtool")
        .arg("test")
        .arg("rules")
        .arg(dir.join("tests/rules-test.yaml")));
    assert!(out.contains("SUCCESS"), "{out}");

    // Every alert has a case where it fires and one where it stays silent.
    let rules = yaml("prometheus-rules.yaml");
    let tests = yaml("tests/rules-test.yaml");
    let cases: Vec<&Value> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
        .collect();
    for group in rules["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let Some(name) = rule["alert"].as_str() else {
                continue;
            };
            let of = |fires: bool| {
                cases.iter().any(|c| {
                    c["alertname"] == name
                        && c["exp_alerts"].as_array().is_some_and(|a| a.is_empty() != fires)
                })
            };
            assert!(of(true), "{name} never fires in tests/rules-test.yaml");
            assert!(of(false), "{name} is never shown silent in tests/rules-test.yaml");
        }
    }
}

/// Issue 45: the SERVFAIL shares warn before they page, as the CoreDNS mixin's alerts do: each
/// of CoreDNSErrorsHigh and CoreDNSForwardErrorsHigh is a warning over 1% and critical over 3%
/// (both for 10 minutes), in the plain rules file and so in the PrometheusRule; the rule tests
/// show 2% firing the warning alone and 10% firing both.
#[test]
fn servfail_alerts_warn_over_one_percent_and_page_over_three() {
    let rules = yaml("prometheus-rules.yaml");
    let op = yaml("prometheusrule.yaml");
    assert_eq!(op["spec"]["groups"], rules["groups"]);
    let all: Vec<&Value> = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    let tests = yaml("tests/rules-test.yaml");
    let cases: Vec<&Value> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
        .collect();
    for name in ["CoreDNSErrorsHigh", "CoreDNSForwardErrorsHigh"] {
        let mut levels: Vec<(&str, &str)> = all
            .iter()
            .filter(|r| r["alert"] == name)
            .map(|r| {
                assert_eq!(r["for"], "10m", "{name}");
                let expr = r["expr"].as_str().unwrap().trim_end();
                let threshold = expr.rsplit_once("> ").unwrap().1;
                (r["labels"]["severity"].as_str().unwrap(), threshold)
            })
            .collect();
        levels.sort_unstable();
        assert_eq!(levels, [("critical", "0.03"), ("warning", "0.01")], "{name}");
        let severities = |c: &&Value| -> Vec<String> {
            let mut s: Vec<String> = c["exp_alerts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["exp_labels"]["severity"].as_str().unwrap().to_owned())
                .collect();
            s.sort();
            s
        };
        let shown: Vec<Vec<String>> = cases
            .iter()
            .filter(|c| c["alertname"] == name)
            .map(severities)
            .collect();
        for want in [vec!["warning"], vec!["critical", "warning"]] {
            assert!(
                shown.iter().any(|s| s == &want),
                "{name}: no rule test where exactly {want:?} fire: {shown:?}"
            );
        }
    }
}

/// A blocking HTTP/1.0 GET on loopback: status and body.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_owned()))
}

/// Percent-encodes a query string value (RFC 3986 unreserved characters stay).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Debian's `prometheus` on a loopback port, scraping `target` every second as job `kube-dns`
/// (the job the ServiceMonitor gives the pods) and again as job `coredns` (kube-prometheus-stack's
/// job for cluster DNS). Killed on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(dir: &Path, target: SocketAddr) -> Self {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: kube-dns\n    static_configs:\n      - targets: ['{target}']\n  - job_name: coredns\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus runs (apt-get install prometheus; test.sh does)");
        let mut p = Self { child, addr };
        for _ in 0..100 {
            if matches!(get(addr, "/-/ready"), Ok((200, _))) {
                return p;
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("prometheus exited: {status}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("prometheus not ready on {addr}");
    }

    /// The result vector of an instant query.
    fn query(&self, expr: &str) -> Vec<Value> {
        let (status, body) = get(self.addr, &format!("/api/v1/query?query={}", encode(expr)))
            .unwrap_or_else(|e| panic!("query {expr}: {e}"));
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(status, 200, "query {expr}: {body}");
        assert_eq!(v["status"], "success", "query {expr}: {body}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

/// Queries the demo as a cluster's pods would, over UDP and TCP: names in the zone, NXDOMAINs,
/// a name forwarded to the upstream (cached after the first), an NXDOMAIN from the upstream, and
/// a query with the DO bit. Until `stop`, bounded to 2 minutes.
async fn load(addr: SocketAddr, stop: Arc<AtomicBool>) {
    for _ in 0..600 {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let (r, _) = support::udp(
            addr,
            &support::query("web.default.svc.cluster.local.", RecordType::A),
        )
        .await;
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        let (r, _) = support::udp(
            addr,
            &support::query("nope.default.svc.cluster.local.", RecordType::A),
        )
        .await;
        assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
        let r = support::tcp(
            addr,
            &support::query("_http._tcp.web.default.svc.cluster.local.", RecordType::SRV),
        )
        .await;
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        let (r, _) = support::udp(addr, &support::query("www.example.com.", RecordType::A)).await;
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        let r = support::tcp(addr, &support::query("missing.example.com.", RecordType::AAAA)).await;
        assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
        let mut q = support::query("web.default.svc.cluster.local.", RecordType::AAAA);
        let mut edns = Edns::new();
        edns.set_max_payload(1232).set_dnssec_ok(true);
        q.set_edns(edns);
        support::udp(addr, &q).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The objects of the demo cluster (config/demo-cluster.yaml).
fn demo_objects() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo-cluster.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// Changes the demo's EndpointSlice `web-5d8fz` as the endpoint slice controller would, once a
/// second until `stop` (bounded to 2 minutes): a new `last-change-trigger-time` each time, so
/// the zone's programming latency is observed.
async fn touch_a_slice(fake: FakeApiServer, stop: Arc<AtomicBool>) {
    let mut slice = demo_objects()
        .into_iter()
        .find(|o| o["kind"] == "EndpointSlice" && o["metadata"]["name"] == "web-5d8fz")
        .expect("the demo has EndpointSlice web-5d8fz");
    for _ in 0..120 {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        // Whole seconds, as the controller writes it (RFC 3339).
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let now = k8s_openapi::jiff::Timestamp::from_second(now)
            .unwrap()
            .to_string();
        slice["metadata"]["annotations"] =
            serde_json::json!({ "endpoints.kubernetes.io/last-change-trigger-time": now });
        fake.apply(&slice).unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The jobs cluster DNS is scraped under: this repository's ServiceMonitor's, and
/// kube-prometheus-stack's.
const JOBS: [&str; 2] = ["kube-dns", "coredns"];

/// Every `expr` of the dashboard's panels, with Grafana's variables as a user who picks `job`
/// sees them: all instances, and a rate interval of 4 scrapes.
fn dashboard_queries(job: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(monitoring().join("grafana-dashboard.json")).unwrap();
    let dash: Value = serde_json::from_str(&text).unwrap();
    let vars: Vec<&str> = dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(vars, ["datasource", "job", "instance"]);
    let jobs: Vec<&str> = dash["templating"]["list"][1]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert_eq!(jobs, JOBS, "the job picker offers both jobs");
    let mut out = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap();
            let expr = expr
                .replace("$__rate_interval", "4s")
                .replace("$job", job)
                .replace("$instance", ".+");
            assert!(!expr.contains('$'), "a variable left in {expr}");
            out.push((panel["title"].as_str().unwrap().to_owned(), expr));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_and_the_dashboard_against_the_demo_cluster_under_load_and_churn() {
    let dir = support::temp_dir("monitoring");
    let Some(ub) = Unbound::start(&dir).await else {
        panic!("unbound is not installed: run ./test.sh, which installs it");
    };
    // The demo cluster, served from the fake API server instead of the demo's manifests file,
    // so the Kubernetes panels have a watch to show: its first list fails once (a watch error),
    // and the load below changes an EndpointSlice (programming latency). Plus a cache and a
    // forward for names outside the cluster (kubeadm's Corefile has both), so the cache and
    // forward panels have something to show.
    let fake = FakeApiServer::start().await.unwrap();
    for o in demo_objects() {
        fake.create(o).unwrap();
    }
    fake.fail_next(1, 500);
    let corefile = demo_on_free_port();
    let text = std::fs::read_to_string(&corefile).unwrap();
    assert!(text.contains("manifests demo-cluster.yaml\n"), "{text}");
    let text = text.replace(
        "manifests demo-cluster.yaml\n",
        &format!("endpoint {}\n", fake.url()),
    );
    let (head, tail) = text.rsplit_once('}').unwrap();
    std::fs::write(
        &corefile,
        format!("{head}    cache 30\n    forward . {}\n}}{tail}", ub.addr),
    )
    .unwrap();
    let mut server = tokio::task::spawn_blocking(move || Server::start(&corefile))
        .await
        .unwrap();
    let metrics = server.wait_http("/metrics");
    let ready = server.wait_http("/ready");
    let dns = server.addr;
    // The first list failed once: the watch retries after its 1 s backoff, then the pod is
    // ready (bounded: 15 s).
    let synced = tokio::task::spawn_blocking(move || {
        let mut last = None;
        for _ in 0..150 {
            last = get(ready, "/ready").ok();
            if matches!(last, Some((200, _))) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(last)
    })
    .await
    .unwrap();
    assert!(synced.is_ok(), "/ready after 15 s: {synced:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let loader = tokio::spawn(load(dns, stop.clone()));
    let churn = tokio::spawn(touch_a_slice(fake, stop.clone()));
    let prom_dir = dir.clone();
    let prom = tokio::task::spawn_blocking(move || Prometheus::start(&prom_dir, metrics))
        .await
        .unwrap();

    let checks = tokio::task::spawn_blocking(move || {
        // A real scrape passes promtool's linter.
        let (status, scrape) = get(metrics, "/metrics").unwrap();
        assert_eq!(status, 200);
        let mut child = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("promtool runs (apt-get install prometheus; test.sh does)");
        child.stdin.take().unwrap().write_all(scrape.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "promtool check metrics: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        // Wait for a few scrapes of the demo under load (bounded: 20 s).
        let mut scrapes = 0.0;
        for _ in 0..200 {
            scrapes = prom
                .query("count_over_time(up{job=\"kube-dns\"}[1m])")
                .first()
                .and_then(|s| s["value"][1].as_str()?.parse::<f64>().ok())
                .unwrap_or(0.0);
            if scrapes >= 6.0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(scrapes >= 6.0, "prometheus scraped the demo {scrapes} times");
        let mut n = 0;
        for job in JOBS {
            let up = prom.query(&format!("up{{job=\"{job}\"}}"));
            assert_eq!(up[0]["value"][1], "1", "{job}: {up:?}");
            let queries = dashboard_queries(job);
            assert!(queries.len() == 49, "{} queries", queries.len());
            let empty: Vec<_> = queries
                .iter()
                .filter(|(_, expr)| prom.query(expr).is_empty())
                .collect();
            assert!(
                empty.is_empty(),
                "{job}: dashboard queries with no data: {empty:#?}"
            );
            // Not only present: the request rate under load is above zero.
            let total = prom.query(&queries[1].1);
            let rate: f64 = total[0]["value"][1].as_str().unwrap().parse().unwrap();
            assert!(rate > 0.0, "{job}: {}: {total:?}", queries[1].1);
            n += queries.len();
        }
        // Every alert's selector takes both jobs: the request counter, as each alert selects it.
        let rules = std::fs::read_to_string(monitoring().join("prometheus-rules.yaml")).unwrap();
        assert!(
            !rules.contains("job=\"kube-dns\""),
            "an alert selects only job kube-dns"
        );
        let both = prom.query("count by (job) (coredns_dns_requests_total{job=~\"kube-dns|coredns\"})");
        assert_eq!(both.len(), 2, "{both:?}");
        n
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    loader.await.unwrap();
    churn.await.unwrap();
    let n = checks.unwrap();
    eprintln!("{n} dashboard queries returned data");
    assert!(server.stop(), "the demo exits 0 on SIGTERM");
}
