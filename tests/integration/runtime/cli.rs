//! The real binary: flags, `--check` on good and broken Corefiles, and the demo cluster served
//! and queried with the real `dig`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::BinEncodable;

use crate::support;

pub(crate) fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cluster-dns"));
    c.env("RUST_LOG", "info");
    c
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A running `cluster-dns` with its DNS address, read from its log, and its log lines so far.
/// (Also used by the watch tests.)
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: SocketAddr,
    log: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Server {
    pub(crate) fn start(corefile: &Path) -> Self {
        let mut cmd = bin();
        cmd.arg("-conf").arg(corefile);
        Self::start_cmd(cmd)
    }

    /// Starts `cmd` (the binary with its flags, possibly under a wrapper such as `prlimit`).
    pub(crate) fn start_cmd(mut cmd: Command) -> Self {
        let mut child = cmd
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("binary starts");
        let stderr = child.stderr.take().expect("stderr");
        let stdout = child.stdout.take().expect("stdout");
        // Both streams feed one line channel: logs on stderr, `log` plugin lines on stdout.
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx2.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = Vec::new();
        let addr = loop {
            let line = match rx.recv_timeout(Duration::from_secs(30)) {
                Ok(l) => l,
                Err(_) => {
                    let _ = child.kill();
                    panic!("server did not report its address; log: {seen:#?}");
                }
            };
            seen.push(line.clone());
            if let Some(rest) = line.split("addr=").nth(1)
                && line.contains("serving DNS")
            {
                break rest.split_whitespace().next().unwrap().parse().expect("addr");
            }
        };
        Self {
            child,
            addr,
            log: rx,
            seen,
        }
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops with SIGTERM and returns the exit status's success.
    pub(crate) fn stop(mut self) -> bool {
        self.signal_term();
        if self.wait_exit(Duration::from_secs(5)) {
            return true;
        }
        let _ = self.child.kill();
        false
    }

    /// The address of the HTTP listener serving `path`, from its "serving HTTP" log line.
    pub(crate) fn wait_http(&mut self, path: &str) -> SocketAddr {
        let find = |seen: &[String]| {
            seen.iter().find_map(|line| {
                let rest = line.split("addr=").nth(1)?;
                (line.contains("serving HTTP") && line.contains(path))
                    .then(|| rest.split_whitespace().next()?.parse().ok())
                    .flatten()
            })
        };
        for _ in 0..300 {
            if let Some(a) = find(&self.log_lines()) {
                return a;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no HTTP listener for {path}; log: {:#?}", self.seen);
    }

    /// Sends SIGTERM.
    pub(crate) fn signal_term(&self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
    }

    /// Waits up to `limit` for the process to exit; true when it exited with status 0.
    pub(crate) fn wait_exit(&mut self, limit: Duration) -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// True while the process has not exited.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub(crate) fn log_lines(&mut self) -> Vec<String> {
        while let Ok(l) = self.log.try_recv() {
            self.seen.push(l);
        }
        self.seen.clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The revision the binary was built from, as `coredns_build_info` must name it: CoreDNS's
/// short git commit. Built from this git checkout (no `CLUSTER_DNS_REVISION` override), it is
/// what `git rev-parse --short=12 HEAD` says now (build.rs reruns when HEAD moves).
fn build_revision() -> String {
    let revision = env!("CLUSTER_DNS_BUILD_REVISION");
    if env!("CLUSTER_DNS_BUILD_REVISION_FROM") == "git" {
        let out = Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(repo())
            .output()
            .expect("git runs (it did when the binary was built)");
        let head = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert_eq!(revision, head, "the binary's revision is not HEAD's");
        assert_eq!(revision.len(), 12, "{revision}");
    }
    revision.to_owned()
}

/// The demo config with its port set to 0 (a free port), next to a copy of the demo cluster.
pub(crate) fn demo_on_free_port() -> PathBuf {
    let dir = support::temp_dir("demo");
    let corefile = std::fs::read_to_string(repo().join("config/Corefile.demo")).unwrap();
    assert!(corefile.contains(".:1053"), "the demo serves port 1053");
    let mut corefile = corefile.replace(".:1053", ".:0");
    for port in ["18080", "18181", "19153"] {
        assert!(
            corefile.contains(&format!("127.0.0.1:{port}\n")),
            "the demo serves HTTP on {port}"
        );
        corefile = corefile.replace(&format!("127.0.0.1:{port}\n"), "127.0.0.1:0\n");
    }
    std::fs::write(dir.join("Corefile"), corefile).unwrap();
    std::fs::copy(
        repo().join("config/demo-cluster.yaml"),
        dir.join("demo-cluster.yaml"),
    )
    .unwrap();
    dir.join("Corefile")
}

#[test]
fn dig_answers_the_demo_cluster() {
    let mut server = Server::start(&demo_on_free_port());
    let a = server.addr;
    // The probes and metrics the README's quick start curls.
    let (health, ready, metrics) = (
        server.wait_http("/health"),
        server.wait_http("/ready"),
        server.wait_http("/metrics"),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use crate::support::http_get;
        assert_eq!(http_get(health, "/health").await, (200, "OK".to_owned()));
        assert_eq!(http_get(ready, "/ready").await, (200, "OK".to_owned()));
        let text = http_get(metrics, "/metrics").await.1;
        let info = text
            .lines()
            .find(|l| l.starts_with("coredns_build_info{"))
            .unwrap_or_else(|| panic!("no coredns_build_info in {text}"));
        assert!(
            info.contains(&format!("revision=\"{}\"", build_revision())),
            "{info}"
        );
    });

    let out = support::dig(a, &["+short", "web.default.svc.cluster.local"]);
    assert_eq!(out.trim(), "10.96.100.10");
    let counted = rt.block_on(crate::support::http_get(metrics, "/metrics")).1;
    assert!(
        counted.contains("coredns_dns_requests_total{family=\"1\",proto=\"udp\",server=\"dns://127.0.0.1:0\",type=\"A\",view=\"\",zone=\".\"} 1"),
        "{counted}"
    );

    let full = support::dig(a, &["web.default.svc.cluster.local"]);
    assert!(
        full.contains("status: NOERROR") && full.contains("flags: qr aa rd;"),
        "{full}"
    );
    assert!(full.contains("udp: 1232"), "{full}");

    let srv = support::dig(a, &["+tcp", "SRV", "_http._tcp.web.default.svc.cluster.local"]);
    assert!(
        srv.contains(
            "_http._tcp.web.default.svc.cluster.local. 30 IN\tSRV 0 100 80 web.default.svc.cluster.local."
        ),
        "{srv}"
    );
    assert!(
        srv.contains("web.default.svc.cluster.local. 30 IN\tA\t10.96.100.10"),
        "{srv}"
    );

    let mut headless: Vec<String> = support::dig(a, &["+short", "web-pods.default.svc.cluster.local"])
        .lines()
        .map(str::to_owned)
        .collect();
    headless.sort();
    assert_eq!(headless, ["10.244.1.21", "10.244.2.22", "10.244.3.23"]);

    assert_eq!(
        support::dig(a, &["+short", "db-1.db.default.svc.cluster.local"]).trim(),
        "10.244.2.31"
    );
    let nx = support::dig(a, &["db-2.db.default.svc.cluster.local"]);
    assert!(
        nx.contains("status: NXDOMAIN")
            && nx.contains("IN\tSOA\tns.dns.cluster.local. hostmaster.cluster.local."),
        "{nx}"
    );
    assert_eq!(
        support::dig(a, &["+short", "CNAME", "docs.default.svc.cluster.local"]).trim(),
        "kubernetes.io."
    );
    assert_eq!(
        support::dig(a, &["+short", "-x", "10.96.100.10"]).trim(),
        "web.default.svc.cluster.local."
    );
    assert_eq!(
        support::dig(a, &["+short", "TXT", "dns-version.cluster.local"]).trim(),
        "\"1.1.0\""
    );
    assert_eq!(
        support::dig(a, &["+short", "10-244-1-21.default.pod.cluster.local"]).trim(),
        "10.244.1.21"
    );
    // +notcp and +tcp agree (the e2e probes use both).
    assert_eq!(
        support::dig(a, &["+short", "+notcp", "kube-dns.kube-system.svc.cluster.local"]),
        support::dig(a, &["+short", "+tcp", "kube-dns.kube-system.svc.cluster.local"])
    );
    assert!(server.stop(), "SIGTERM exits 0");
}

/// Why [`support::run_dig`] asks again. A server on port 0 shares its UDP port among its
/// workers (`SO_REUSEPORT`), in the kernel's ephemeral range, from which dig picks its source
/// port at random, binding it with `SO_REUSEPORT` too. When the pick is the server's port,
/// dig's socket (connected to the server) outranks the server's and dig reads its own query.
/// Forced here with `-b 0.0.0.0#PORT`; from any other port the same question is answered.
#[test]
fn dig_reads_its_own_query_when_its_port_is_the_servers() {
    let server = Server::start(&demo_on_free_port());
    let a = server.addr;
    let name = "web.default.svc.cluster.local";
    let own_port = Command::new("dig")
        .args([format!("@{}", a.ip()), "-p".into(), a.port().to_string()])
        .args(["-b".into(), format!("0.0.0.0#{}", a.port())])
        .args(["+time=2", "+tries=1", "+short", name])
        .output()
        .expect("dig is installed (apt-get install bind9-dnsutils)");
    assert_eq!(
        String::from_utf8_lossy(&own_port.stdout).trim(),
        support::DIG_READ_A_QUERY
    );
    assert_eq!(support::dig(a, &["+short", name]).trim(), "10.96.100.10");
    assert!(server.stop(), "SIGTERM exits 0");
}

#[test]
fn a_malformed_object_is_skipped_and_named_while_the_rest_serves() {
    let dir = support::temp_dir("badobj");
    std::fs::write(
        dir.join("cluster.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: broken, namespace: a}\nspec: {clusterIP: 10.0.0.999}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: good, namespace: a}\nspec: {clusterIP: 10.0.0.7}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Corefile"),
        ".:0 {\n bind 127.0.0.1\n kubernetes cluster.local {\n  manifests cluster.yaml\n }\n}\n",
    )
    .unwrap();
    let mut server = Server::start(&dir.join("Corefile"));
    assert_eq!(
        support::dig(server.addr, &["+short", "good.a.svc.cluster.local"]).trim(),
        "10.0.0.7"
    );
    let log = server.log_lines().join("\n");
    assert!(
        log.contains("a/broken") && log.contains("10.0.0.999") && log.contains("skipped"),
        "{log}"
    );
    assert!(support::dig(server.addr, &["broken.a.svc.cluster.local"]).contains("NXDOMAIN"));
    assert!(server.stop());
}

#[test]
fn version_and_help() {
    let out = bin().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("cluster-dns-"));
    let out = bin().arg("-version").output().unwrap();
    assert!(out.status.success());
    let out = bin().arg("--help").output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("-conf"));
    let out = bin().arg("--bogus").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown flag '--bogus'"));
}

#[test]
fn check_accepts_the_shipped_configs() {
    for conf in ["config/Corefile.demo", "config/Corefile"] {
        let out = bin()
            .args(["--check", "-conf"])
            .arg(repo().join(conf))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{conf}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn check_rejects_each_kind_of_corefile_mistake() {
    let cases: &[(&str, &str, &str)] = &[
        ("unclosed block", ".:53 {\n kubernetes cluster.local\n", "line 1"),
        ("unexpected brace", ".:53 {\n}\n}\n", "Corefile:3"),
        ("unknown directive", ".:53 {\n  frobnicate\n}\n", "Corefile:2"),
        (
            "not yet implemented",
            ".:53 {\n  dnssec example.org\n}\n",
            "Corefile:2",
        ),
        (
            "a plugin CoreDNS removed: proxy, replaced by forward",
            ".:53 {\n  proxy . 10.0.0.2\n}\n",
            "Corefile:2: proxy: the proxy plugin was removed from CoreDNS in 1.5.0; use 'forward'",
        ),
        (
            "a plugin CoreDNS removed: federation",
            ".:53 {\n  kubernetes cluster.local\n  federation cluster.local {\n    prod prod.example.com\n  }\n}\n",
            "Corefile:3: federation: the federation plugin left CoreDNS in 1.7.0",
        ),
        (
            "unknown kubernetes property",
            ".:53 {\n kubernetes cluster.local {\n  frob 1\n }\n}\n",
            "Corefile:3",
        ),
        (
            "bad ttl",
            ".:53 {\n kubernetes cluster.local {\n  ttl 9999\n }\n}\n",
            "Corefile:3",
        ),
        (
            "bad pods mode",
            ".:53 {\n kubernetes cluster.local {\n  pods sometimes\n }\n}\n",
            "Corefile:3",
        ),
        ("bad port", ".:99999 {\n}\n", "Corefile:1"),
        (
            "rewrite rcode without its name",
            ".:53 {\n  rewrite rcode servfail refused\n}\n",
            "Corefile:2",
        ),
        (
            "bad lameduck",
            ".:53 {\n  health {\n    lameduck soon\n  }\n}\n",
            "Corefile:3",
        ),
        ("bad reload interval", ".:53 {\n  reload 1s\n}\n", "Corefile:2"),
        (
            "bad hosts line",
            ".:53 {\n  hosts {\n    10.0.0.1\n  }\n}\n",
            "Corefile:3",
        ),
        ("bad bind", ".:53 {\n bind not-an-ip\n}\n", "Corefile:2"),
        (
            "unterminated quote",
            ".:53 {\n kubernetes \"cluster.local\n}\n",
            "Corefile:2",
        ),
        (
            "import of a missing file",
            ".:53 {\n import nothing-here.conf\n}\n",
            "Corefile:2",
        ),
    ];
    for (what, text, at) in cases {
        let dir = support::temp_dir("bad");
        std::fs::write(dir.join("Corefile"), text).unwrap();
        let out = bin()
            .args(["--check", "-conf"])
            .arg(dir.join("Corefile"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: accepted");
        assert!(err.contains(at), "{what}: error does not point at {at}: {err}");
    }
    let out = bin()
        .args(["--check", "-conf", "/nonexistent/Corefile"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/Corefile"));
}

/// `--check` opens the files the Corefile names that start-up would open later (the
/// kubernetes plugin's kubeconfig, client TLS files and manifests) and names each missing one
/// at its file:line; with them present it passes. A missing hosts file is a warning only.
#[test]
fn check_opens_the_files_the_corefile_names() {
    let dir = support::temp_dir("check-files");
    let text = ".:53 {\n kubernetes cluster.local {\n  kubeconfig /nonexistent/kubeconfig\n }\n}\n\
                cluster.local:5353 {\n kubernetes cluster.local {\n  endpoint https://10.0.0.1:6443\n  tls client.crt client.key ca.crt\n }\n}\n\
                example.org:5354 {\n kubernetes example.org {\n  manifests here.yaml gone.yaml\n }\n}\n\
                example.net:5355 {\n hosts example.hosts\n}\n";
    std::fs::write(dir.join("Corefile"), text).unwrap();
    std::fs::write(
        dir.join("here.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.key"), "").unwrap();
    let check = || {
        bin()
            .args(["--check", "-conf"])
            .arg(dir.join("Corefile"))
            .output()
            .unwrap()
    };
    // A hosts file is not needed to start (it is read once it appears): a warning only.
    let hosts_warning = format!(
        "cluster-dns: warning: {}:18: hosts: cannot open {}: No such file or directory (os error 2)",
        dir.join("Corefile").display(),
        dir.join("example.hosts").display()
    );
    let out = check();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "accepted: {err}");
    let lines: Vec<&str> = err.lines().collect();
    let corefile = dir.join("Corefile");
    let at = |line: u32, what: &str, file: String| {
        format!(
            "cluster-dns: {}:{line}: kubernetes: {what}: cannot open {file}: No such file or directory (os error 2)",
            corefile.display()
        )
    };
    assert_eq!(
        lines,
        [
            at(3, "kubeconfig", "/nonexistent/kubeconfig".to_owned()),
            at(9, "tls", dir.join("client.crt").display().to_string()),
            at(9, "tls", dir.join("ca.crt").display().to_string()),
            at(14, "manifests", dir.join("gone.yaml").display().to_string()),
            hosts_warning.clone(),
        ],
        "{err}"
    );
    for f in ["client.crt", "ca.crt", "gone.yaml"] {
        std::fs::write(dir.join(f), "").unwrap();
    }
    std::fs::write(
        dir.join("Corefile"),
        text.replace(
            "/nonexistent/kubeconfig",
            &dir.join("client.key").display().to_string(),
        ),
    )
    .unwrap();
    let out = check();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert_eq!(err.lines().collect::<Vec<_>>(), [hosts_warning], "{err}");
}

/// kubeadm's Corefile outside a pod stops at start-up with an error that names the way out.
#[test]
fn kubeadm_corefile_outside_a_cluster_says_what_to_add() {
    let out = bin()
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .arg("-conf")
        .arg(repo().join("config/Corefile"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("in-cluster configuration is not available")
            && err.contains("add `endpoint URL` or `kubeconfig PATH`"),
        "{err}"
    );
}

/// The binary run with `--log-format FORMAT` on a Corefile whose only upstream refuses: one
/// question outside the cluster (answered SERVFAIL, which `errors` logs), then SIGTERM. Its
/// stdout (where its log lines go, as CoreDNS's).
fn log_of_a_failed_forward(format: &str) -> String {
    log_of_failed_forwards(format, "errors", &["outside.example."], Duration::ZERO)
}

/// As [`log_of_a_failed_forward`], with `errors` written as `errors` (a directive and its block)
/// and one answered question for each of `names`; SIGTERM `linger` after the last answer.
fn log_of_failed_forwards(format: &str, errors: &str, names: &[&str], linger: Duration) -> String {
    let dir = support::temp_dir("log-format");
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        dir.join("Corefile"),
        format!(".:{port} {{\n bind 127.0.0.1\n {errors}\n forward . 127.0.0.1:9\n}}\n"),
    )
    .unwrap();
    let stdout = std::fs::File::create(dir.join("stdout")).unwrap();
    let mut cmd = bin();
    if !format.is_empty() {
        cmd.args(["--log-format", format]);
    }
    let mut child = cmd
        .arg("-conf")
        .arg(dir.join("Corefile"))
        .env_remove("RUST_LOG")
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut answered = 0;
    for name in names {
        let query = support::query(name, RecordType::A).to_bytes().unwrap();
        for _ in 0..50 {
            socket.send_to(&query, ("127.0.0.1", port)).unwrap();
            let mut buf = [0u8; 512];
            if socket.recv_from(&mut buf).is_ok() {
                answered += 1;
                break;
            }
        }
    }
    std::thread::sleep(linger);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    let log = std::fs::read_to_string(dir.join("stdout")).unwrap();
    assert_eq!(answered, names.len(), "not all answered; log:\n{log}");
    log
}

/// `consolidate ... show_first` (CoreDNS 1.12+): the first failure of the period is logged at
/// once at the rule's level, the rest only counted in the summary, which counts them all.
#[test]
fn errors_consolidate_show_first_logs_the_first_and_the_count() {
    let log = log_of_failed_forwards(
        "coredns",
        "errors {\n  consolidate 5s \"no upstream\" warning show_first\n }",
        &["one.example.", "two.example.", "three.example."],
        Duration::from_millis(5500),
    );
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("plugin/errors:")).collect();
    assert!(
        errors.len() == 2
            && errors[0].starts_with("[WARNING] plugin/errors: 2 one.example. A: no upstream")
            && errors[1] == "[WARNING] plugin/errors: 3 errors like 'no upstream' occurred in last 5s",
        "{log}"
    );
}

/// `--log-format coredns` writes CoreDNS's lines, so a log alert written for CoreDNS's
/// `[ERROR] plugin/errors: ...` matches cluster-dns's; `json` writes one object a line.
#[test]
fn log_formats_coredns_and_json() {
    // CoreDNS's format is the default.
    let log = log_of_a_failed_forward("");
    assert!(
        log.lines()
            .any(|l| l.starts_with("[ERROR] plugin/errors: 2 outside.example. A: no upstream answered")),
        "{log}"
    );
    assert!(log.lines().all(|l| l.starts_with('[')), "{log}");
    assert!(
        log.lines()
            .any(|l| l.starts_with("[INFO] serving DNS over UDP and TCP")),
        "{log}"
    );

    let log = log_of_a_failed_forward("json");
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for l in &lines {
        for key in ["time", "level", "target", "message"] {
            assert!(l.get(key).is_some(), "no {key} in {l}");
        }
    }
    let error = lines
        .iter()
        .find(|l| l["plugin"] == "errors")
        .unwrap_or_else(|| panic!("no errors line in {log}"));
    assert_eq!(error["level"], "error");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("2 outside.example. A: "),
        "{error}"
    );
}

/// CoreDNS's `-version`: `CoreDNS-1.14.7\nlinux/amd64, go1.24.1, COMMIT`, here with the Rust
/// compiler in Go's place.
#[test]
fn version_prints_as_coredns_does() {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    for flag in ["-version", "--version"] {
        let out = bin().arg(flag).output().unwrap();
        assert!(out.status.success(), "{flag}");
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{flag}: {text}");
        assert_eq!(lines[0], format!("cluster-dns-{}", env!("CARGO_PKG_VERSION")));
        let parts: Vec<&str> = lines[1].split(", ").collect();
        assert_eq!(parts.len(), 3, "{text}");
        assert_eq!(parts[0], format!("{}/{arch}", std::env::consts::OS));
        let rustc = parts[1]
            .strip_prefix("rustc 1.")
            .unwrap_or_else(|| panic!("{text}"));
        assert!(rustc.split('.').all(|n| n.parse::<u32>().is_ok()), "{text}");
        assert_eq!(parts[2], build_revision());
    }
}

/// CoreDNS's `-plugins`: the server type, the Caddyfile loaders and every directive of the
/// registry, as `dns.NAME` in name order.
#[test]
fn plugins_lists_the_registry_as_coredns_does() {
    let out = bin().arg("-plugins").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let names: std::collections::BTreeSet<&str> = cluster_dns::plugin::registry::PLUGINS
        .iter()
        .map(|e| e.name)
        .collect();
    let mut want =
        "Server types:\n  dns\n\nCaddyfile loaders:\n  flag\n  default\n\nOther plugins:\n".to_owned();
    for name in &names {
        want.push_str(&format!("  dns.{name}\n"));
    }
    assert_eq!(text, want);
    assert!(text.contains("  dns.kubernetes\n  dns.loadbalance\n"), "{text}");
}

/// `-p PORT` (CoreDNS's short form of `-dns.port`), `-quiet` and `-pidfile PATH`: the process
/// id is written once it serves and removed when it stops.
#[test]
fn p_quiet_and_pidfile_flags() {
    let dir = support::temp_dir("cli-pidfile");
    let corefile = dir.join("Corefile");
    std::fs::write(&corefile, ". {\n    bind 127.0.0.1\n    whoami\n}\n").unwrap();
    let pidfile = dir.join("run/cluster-dns.pid");
    std::fs::create_dir_all(pidfile.parent().unwrap()).unwrap();
    let mut cmd = bin();
    cmd.arg("-conf")
        .arg(&corefile)
        .args(["-p", "0", "-quiet", "-pidfile"])
        .arg(&pidfile);
    let server = Server::start_cmd(cmd);
    assert_ne!(server.addr.port(), 53, "-p 0 is a free port");
    assert!(support::dig(server.addr, &["whoami.example"]).contains("status: NOERROR"));
    let mut text = String::new();
    for _ in 0..100 {
        text = std::fs::read_to_string(&pidfile).unwrap_or_default();
        if !text.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(text, format!("{}\n", server.pid()));
    assert!(server.stop());
    assert!(!pidfile.exists(), "the pidfile is removed on exit");
}

/// `--log-format json` covers the `log` plugin's query lines too: every line on stdout is one
/// JSON object, the query's with CoreDNS's common log fields as keys; by default the query line
/// is CoreDNS's `[INFO] ` line.
#[test]
fn json_logs_cover_the_query_log() {
    let log = log_of_failed_forwards("json", "log", &["outside.example."], Duration::ZERO);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let query = lines
        .iter()
        .find(|l| l["plugin"] == "log")
        .unwrap_or_else(|| panic!("no query line in {log}"));
    assert_eq!(query["name"], "outside.example.", "{query}");
    assert_eq!(query["type"], "A");
    assert_eq!(query["rcode"], "SERVFAIL");
    assert_eq!(query["proto"], "udp");
    assert!(
        query["message"]
            .as_str()
            .unwrap()
            .contains("\"A IN outside.example. udp"),
        "{query}"
    );
    let log = log_of_failed_forwards("", "log", &["outside.example."], Duration::ZERO);
    assert!(
        log.lines()
            .any(|l| l.starts_with("[INFO] 127.0.0.1:") && l.contains("\"A IN outside.example. udp")),
        "{log}"
    );
    assert!(log.lines().all(|l| l.starts_with('[')), "{log}");
}

/// A SIGTERM that comes as soon as the server says it serves is a clean shutdown (exit 0), not
/// the default action (exit 143): the handlers are installed before the listeners start. Before,
/// they were installed after, and about one such stop in three exited 143.
#[test]
fn a_sigterm_right_after_start_is_a_clean_shutdown() {
    let dir = support::temp_dir("early-sigterm");
    let corefile = dir.join("Corefile");
    std::fs::write(&corefile, ".:0 {\n bind 127.0.0.1\n whoami\n}\n").unwrap();
    for round in 0..6 {
        let server = Server::start(&corefile);
        assert!(server.stop(), "round {round}: not a clean exit");
    }
}
