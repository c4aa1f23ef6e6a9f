//! Real Corefiles, written by others: the examples of CoreDNS 1.14.7's plugin READMEs and the
//! Corefiles public repositories run with CoreDNS 1.12+, kept verbatim in `tests/corefiles/`
//! (see its README for the header each file starts with). Each one passes the real binary's
//! `--check`, then is served and asked with `dig` what its header says, and the answer is
//! checked against what the README (or the repository) describes.
//!
//! The only changes made to a file's text are its header's `replace:` lines (listening ports,
//! upstream addresses and file paths to ones on this machine), applied before both steps.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use cluster_dns::config::Config;
use cluster_dns::corefile::Corefile;

use crate::support;
use hickory_proto::op::ResponseCode;

use crate::support::upstream::{Mode, Scripted, free_port};

fn corefiles_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corefiles")
}

/// One `dig:` line of a header and what its output must (not) contain.
#[derive(Debug, Default)]
struct Ask {
    args: Vec<String>,
    expect: Vec<String>,
    expect_not: Vec<String>,
}

/// A collected Corefile: its header read, its text as it will run.
#[derive(Debug)]
struct Collected {
    name: String,
    source: String,
    text: String,
    asks: Vec<Ask>,
}

/// The upstream servers a collected Corefile's upstream addresses are replaced with.
struct Upstreams {
    /// `{upstream}`: answers A of every name (192.0.2.1, TTL 300), NXDOMAIN for `nx*` names.
    answers: Scripted,
    /// `{nxdomain}`, `{servfail}`, `{refused}`: that rcode to every question.
    nxdomain: Scripted,
    servfail: Scripted,
    refused: Scripted,
}

impl Upstreams {
    async fn start() -> Self {
        let with = |code| async move {
            let s = Scripted::start().await;
            s.set_mode(Mode::Rcode(code));
            s
        };
        Self {
            answers: Scripted::start().await,
            nxdomain: with(ResponseCode::NXDomain).await,
            servfail: with(ResponseCode::ServFail).await,
            refused: with(ResponseCode::Refused).await,
        }
    }
}

/// Reads `file`, applying its `replace:` lines with `{port}` (the DNS port), the
/// [`Upstreams`]' placeholders, `{files}` (this folder), `{fixture}` (the conformance
/// cluster manifests) and `{free}` (a new free port each time); `\n` in a replacement is a
/// line break.
fn load(file: &str, port: u16, up: &Upstreams) -> Collected {
    let path = corefiles_dir().join(file);
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut source = String::new();
    let mut replaces = Vec::new();
    let mut asks: Vec<Ask> = Vec::new();
    for line in raw.lines().take_while(|l| l.starts_with('#')) {
        let line = line.trim_start_matches('#').trim();
        let (key, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.trim();
        match key {
            "source" => {
                if !source.is_empty() {
                    source.push(' ');
                }
                source.push_str(value);
            }
            "replace" => {
                let (old, new) = value
                    .split_once(" => ")
                    .unwrap_or_else(|| panic!("{file}: replace: OLD => NEW"));
                replaces.push((old.to_owned(), new.replace("\\n", "\n")));
            }
            "dig" => asks.push(Ask {
                args: value.split_whitespace().map(str::to_owned).collect(),
                ..Ask::default()
            }),
            "expect" => asks
                .last_mut()
                .unwrap_or_else(|| panic!("{file}: expect before dig"))
                .expect
                .push(support::single_spaced(value)),
            "expect-not" => asks
                .last_mut()
                .unwrap_or_else(|| panic!("{file}: expect-not before dig"))
                .expect_not
                .push(support::single_spaced(value)),
            _ => {}
        }
    }
    assert!(!source.is_empty(), "{file}: no source: line");
    assert!(!asks.is_empty(), "{file}: no dig: line");
    // The header is the file's leading comment lines: they stay out of what runs, so a
    // replacement never rewrites the header's own lines.
    let mut text: String = raw
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    for (old, new) in &replaces {
        assert!(text.contains(old.as_str()), "{file}: '{old}' is not in the text");
        let mut new = new
            .replace("{port}", &port.to_string())
            .replace("{upstream}", &up.answers.addr.to_string())
            .replace("{nxdomain}", &up.nxdomain.addr.to_string())
            .replace("{servfail}", &up.servfail.addr.to_string())
            .replace("{refused}", &up.refused.addr.to_string())
            .replace("{files}", &corefiles_dir().display().to_string())
            .replace(
                "{fixture}",
                &support::data_dir()
                    .join("conformance-fixture.yaml")
                    .display()
                    .to_string(),
            );
        while new.contains("{free}") {
            new = new.replacen("{free}", &free_port().to_string(), 1);
        }
        text = text.replace(old.as_str(), &new);
    }
    Collected {
        name: file.to_owned(),
        source,
        text,
        asks,
    }
}

/// `--check` with the real binary, then served, then each `dig:` asked and checked.
async fn run(file: &str) {
    let upstreams = Upstreams::start().await;
    let port = free_port();
    let c = load(file, port, &upstreams);
    let dir = support::temp_dir("corefiles");
    let path = dir.join("Corefile");
    std::fs::write(&path, &c.text).unwrap();

    let check = std::process::Command::new(env!("CARGO_BIN_EXE_cluster-dns"))
        .args(["--check", "-dns.port", &port.to_string(), "-conf"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{} ({}): --check failed: {}\n{}",
        c.name,
        c.source,
        String::from_utf8_lossy(&check.stderr),
        c.text
    );

    let cf = Corefile::parse_str(&c.text, &path).unwrap();
    let config = Config::from_corefile(&cf, &path, port).unwrap();
    let running = cluster_dns::app::start_with_port(&config, port)
        .await
        .unwrap_or_else(|e| panic!("{}: start: {e}\n{}", c.name, c.text));
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let asks = std::mem::take(&mut { c.asks });
    let name = c.name.clone();
    tokio::task::spawn_blocking(move || {
        for ask in asks {
            let args: Vec<&str> = ask.args.iter().map(String::as_str).collect();
            let out = support::dig(addr, &args);
            let lines: Vec<String> = out.lines().map(support::single_spaced).collect();
            for want in &ask.expect {
                assert!(
                    lines.iter().any(|l| l.contains(want.as_str())),
                    "{name}: dig {args:?}: no line with '{want}':\n{out}"
                );
            }
            for not in &ask.expect_not {
                assert!(
                    !lines.iter().any(|l| l.contains(not.as_str())),
                    "{name}: dig {args:?}: a line has '{not}':\n{out}"
                );
            }
        }
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
}

/// The collected files, each run by one test below: none is left out.
const TESTED: &[&str] = &[
    "cache-readme-forward.Corefile",
    "cache-readme-ttl10.Corefile",
    "cancel-readme.Corefile",
    "errors-readme-show-first.Corefile",
    "file-readme-origin.Corefile",
    "file-readme-transfer.Corefile",
    "forward-readme-except.Corefile",
    "forward-readme-failover.Corefile",
    "forward-readme-next.Corefile",
    "forward-readme-stub-domains.Corefile",
    "header-readme.Corefile",
    "hosts-readme-inline.Corefile",
    "hosts-readme-wildcard.Corefile",
    "kubernetes-readme-multicluster.Corefile",
    "kubernetes-readme-pods-verified.Corefile",
    "kubernetes-readme-stub-domains.Corefile",
    "loadbalance-readme-prefer.Corefile",
    "loadbalance-readme-weighted.Corefile",
    "local-readme.Corefile",
    "multisocket-readme-default.Corefile",
    "multisocket-readme.Corefile",
    "nixos-view-failfast.Corefile",
    "rewrite-readme-edns0-local.Corefile",
    "timeouts-readme-1053.Corefile",
    "timeouts-readme-maxtcpqueries.Corefile",
    "tsig-readme-require-all.Corefile",
    "tsig-readme-transfer.Corefile",
    "whoami-readme.Corefile",
];

#[test]
fn every_collected_corefile_has_its_test() {
    let mut found: Vec<String> = std::fs::read_dir(corefiles_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".Corefile"))
        .collect();
    found.sort();
    let mut tested: Vec<String> = TESTED.iter().map(|s| (*s).to_owned()).collect();
    tested.sort();
    assert_eq!(found, tested, "tests/corefiles and corefiles::TESTED differ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_readme_forward() {
    run("cache-readme-forward.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_readme_ttl10() {
    run("cache-readme-ttl10.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_readme() {
    run("cancel-readme.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_readme_show_first() {
    run("errors-readme-show-first.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_readme_origin() {
    run("file-readme-origin.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_readme_transfer() {
    run("file-readme-transfer.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_readme_except() {
    run("forward-readme-except.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_readme_failover() {
    run("forward-readme-failover.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_readme_next() {
    run("forward-readme-next.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_readme_stub_domains() {
    run("forward-readme-stub-domains.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_readme() {
    run("header-readme.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_readme_stub_domains() {
    run("kubernetes-readme-stub-domains.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadbalance_readme_prefer() {
    run("loadbalance-readme-prefer.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_readme() {
    run("local-readme.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multisocket_readme_default() {
    run("multisocket-readme-default.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multisocket_readme() {
    run("multisocket-readme.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nixos_view_failfast() {
    run("nixos-view-failfast.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_readme_1053() {
    run("timeouts-readme-1053.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_readme_maxtcpqueries() {
    run("timeouts-readme-maxtcpqueries.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_readme_inline() {
    run("hosts-readme-inline.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_readme_wildcard() {
    run("hosts-readme-wildcard.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_readme_pods_verified() {
    run("kubernetes-readme-pods-verified.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_readme_multicluster() {
    run("kubernetes-readme-multicluster.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whoami_readme() {
    run("whoami-readme.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadbalance_readme_weighted() {
    run("loadbalance-readme-weighted.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewrite_readme_edns0_local() {
    run("rewrite-readme-edns0-local.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tsig_readme_require_all() {
    run("tsig-readme-require-all.Corefile").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tsig_readme_transfer() {
    run("tsig-readme-transfer.Corefile").await;
}
