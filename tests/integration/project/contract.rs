//! Issue 42's contract over real sockets: every registered directive, in a block with the
//! stores of answers (the cache, with and without prefetch, and the UDP answer memo), answers a
//! client the same whether or not another client asked first. Two clients at distinct loopback
//! addresses, pods of two namespaces in the cluster zone, real `dig` (TSIG and AXFR included).
//!
//! For each directive a case writes it into the block in a way that makes it decide by who asks
//! where it can (`acl` allows one client, `transfer` sends to one, `template` answers the
//! client's address, `autopath` walks one pod's search path, `tsig` requires a key one client
//! has, `view` routes one client to another block): a store that kept one client's answer for
//! the other shows as a difference from what a fresh server gives that client. A directive
//! with no case fails the first test, so a new plugin cannot be added without one.

use std::net::SocketAddr;
use std::path::Path;

use cluster_dns::plugin::registry::PLUGINS;

use crate::support;

/// The two clients: pods of namespaces `a` and `b` in [`CLUSTER`].
const A: &str = "127.0.0.2";
const B: &str = "127.0.0.3";

/// The TSIG key client A signs with in the `tsig` case.
const KEY: &str = "hmac-sha256:mykey.:NoTCJU+DMqFWywaPyxSijrDEA/eC3nK0xi3AMEZuPVk=";

/// The cluster: a Service `web` in namespaces `a` and `b`, and one pod in each at the clients'
/// addresses (`pods verified`, `autopath @kubernetes`).
const CLUSTER: &str = r"apiVersion: v1
kind: Namespace
metadata:
  name: a
---
apiVersion: v1
kind: Namespace
metadata:
  name: b
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: a
spec:
  clusterIP: 10.96.0.10
  externalIPs: [192.0.2.100]
  ports:
  - name: http
    port: 80
    protocol: TCP
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: b
spec:
  clusterIP: 10.96.0.11
  ports:
  - name: http
    port: 80
    protocol: TCP
---
apiVersion: v1
kind: Pod
metadata:
  name: a1
  namespace: a
spec:
  containers: [{name: c, image: x}]
status:
  phase: Running
  podIP: 127.0.0.2
---
apiVersion: v1
kind: Pod
metadata:
  name: b1
  namespace: b
spec:
  containers: [{name: c, image: x}]
status:
  phase: Running
  podIP: 127.0.0.3
---
apiVersion: dns.cluster-dns.io/v1alpha1
kind: DNSPolicy
metadata:
  name: isolate
  namespace: a
spec:
  podSelector: {}
  visibleNamespaces: {names: []}
  external: {allow: ['*.example.org', example.net]}
";

const ZONE: &str = "$ORIGIN example.org.\n@ 3600 IN SOA ns.example.org. admin.example.org. 42 7200 3600 1209600 300\n@ 3600 IN NS ns\nns 3600 IN A 192.0.2.53\nwww 3600 IN A 192.0.2.80\nwww 3600 IN A 192.0.2.81\n";

/// What every case asks, as dig arguments: the `file` zone (an answer, a name error, a
/// transfer), the cluster zone, a name autopath walks for client A's pod, a name only the
/// case's plugin may answer, a CH question.
const ASKS: &[&[&str]] = &[
    &["www.example.org", "A"],
    &["nx.example.org", "A"],
    &["+tcp", "example.org", "AXFR"],
    &["+tcp", "example.org", "IXFR=41"],
    &["web.a.svc.cluster.local", "A"],
    &["www.example.org.a.svc.cluster.local", "A"],
    &["who.example.net", "A"],
    &["-c", "CH", "version.bind", "TXT"],
];

/// One directive's case: `lines` go into the block (`{dir}`: the test's folder, `{upstream}`:
/// an upstream answering every name); client A also passes `a_args` to dig; `asks` are asked
/// beside [`ASKS`].
struct Case {
    directive: &'static str,
    lines: &'static str,
    a_args: &'static [&'static str],
    asks: &'static [&'static [&'static str]],
}

const fn case(directive: &'static str, lines: &'static str) -> Case {
    Case {
        directive,
        lines,
        a_args: &[],
        asks: &[],
    }
}

/// Every registered directive's case. `view` has a block of its own ([`view_corefile`]); `bind`,
/// `kubernetes`, `file` and `cache` are in every block.
const CASES: &[Case] = &[
    case("root", "root {dir}"),
    case("metadata", "metadata"),
    case("cancel", "cancel 2s"),
    case("tls", "tls {dir}/cert.pem {dir}/key.pem"),
    case("timeouts", "timeouts {\n  read 5s\n }"),
    case("multisocket", "multisocket 2"),
    case("quic", "quic {\n  max_streams 10\n }"),
    case("https3", "https3 {\n  max_streams 10\n }"),
    case("proxyproto", "proxyproto {\n  allow 127.0.0.9/32\n }"),
    case("reload", "reload 2s"),
    case("nsid", "nsid contract"),
    case("bufsize", "bufsize 1000"),
    case("bind", ""),
    case("debug", "debug"),
    case("ready", "ready 127.0.0.1:0"),
    case("health", "health 127.0.0.1:0"),
    case("pprof", "pprof 127.0.0.1:0"),
    case("shed", "shed"),
    case(
        "rrl",
        "rrl example.org {\n  responses-per-second 1\n  ipv4-prefix-length 32\n }",
    ),
    case("prometheus", "prometheus 127.0.0.1:0"),
    case("errors", "errors"),
    case("log", "log"),
    case("dnstap", "dnstap unix://{dir}/dnstap.sock"),
    case("fairness", "fairness {\n  questions 1 2\n  slip 0\n }"),
    case("local", "local"),
    case("dns64", "dns64 64:ff9b::/96"),
    case("any", "any"),
    case("chaos", "chaos contract-1 alice bob carol"),
    case("loadbalance", "loadbalance"),
    Case {
        directive: "tsig",
        lines: "tsig {\n  secret mykey. NoTCJU+DMqFWywaPyxSijrDEA/eC3nK0xi3AMEZuPVk=\n  require all\n }",
        a_args: &["-y", KEY],
        asks: &[],
    },
    case("cache", ""),
    case("rewrite", "rewrite name exact alias.example.org www.example.org"),
    case("autopath", "autopath @kubernetes"),
    case("acl", "acl example.org {\n  allow net 127.0.0.2/32\n  block\n }"),
    // Client A's pod may see only its own namespace and few outside names; B sees all.
    Case {
        directive: "dnspolicy",
        lines: "dnspolicy {\n  unmapped deny\n }\n forward . {upstream}",
        a_args: &[],
        asks: &[
            &["web.b.svc.cluster.local", "A"],
            &["10.0.96.10.in-addr.arpa", "PTR"],
            &["who.example.com", "A"],
            &["www.example.org.b.svc.cluster.local", "A"],
        ],
    },
    case("header", "header {\n  response set ra\n }"),
    case("minimal", "minimal"),
    case(
        "template",
        "template IN A example.net {\n  answer \"{{ .Name }} 60 IN A {{ .Remote }}\"\n }",
    ),
    case("transfer", "transfer example.org {\n  to 127.0.0.2\n }"),
    case("hosts", "hosts {\n  192.0.2.9 h.example.net\n  fallthrough\n }"),
    Case {
        directive: "k8s_external",
        lines: "k8s_external example.com",
        a_args: &[],
        asks: &[&["web.a.example.com", "A"]],
    },
    case("kubernetes", ""),
    case("file", ""),
    // A primary that is never there: the zone answers SERVFAIL, for every client alike.
    case(
        "secondary",
        "secondary secondary.example {\n  transfer from 127.0.0.1:9\n }",
    ),
    case("loop", "loop\n forward . {upstream}"),
    case("noaaaa", "noaaaa always"),
    case("forward", "forward . {upstream}"),
    case("whoami", "whoami"),
    case("view", ""),
];

#[test]
fn every_registered_directive_has_a_case() {
    for e in PLUGINS {
        assert!(
            CASES.iter().any(|c| c.directive == e.name),
            "directive '{}' has no case in tests/integration/project/contract.rs: say how it may decide by who asks",
            e.name
        );
    }
    for c in CASES {
        assert!(
            PLUGINS.iter().any(|e| e.name == c.directive),
            "case '{}' names no registered directive",
            c.directive
        );
    }
}

/// The block of a case with `store` (the cache's line and options).
fn corefile(case: &Case, store: &str, dir: &Path, upstream: SocketAddr) -> String {
    let lines = case
        .lines
        .replace("{dir}", &dir.display().to_string())
        .replace("{upstream}", &upstream.to_string());
    format!(
        ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local {{\n  manifests cluster.yaml\n  pods verified\n }}\n file db.example.org example.org\n {lines}\n {store}\n}}\n"
    )
}

/// `view`: client A is routed to a block of its own on the same port, whose `hosts` answers
/// `who.example.net` (the other block has no answer for it).
fn view_corefile(store: &str, port: u16) -> String {
    let base = format!(
        " bind 127.0.0.1\n kubernetes cluster.local {{\n  manifests cluster.yaml\n  pods verified\n }}\n file db.example.org example.org\n {store}\n"
    );
    format!(
        ".:{port} {{\n view a {{\n  expr client_ip() == '{A}'\n }}\n hosts {{\n  192.0.2.77 who.example.net\n  fallthrough\n }}\n{base}}}\n.:{port} {{\n{base}}}\n"
    )
}

/// dig's answer to `ask` from `from`, as what a client can tell apart: the rcode, the AA and
/// TC flags, each section's records as a sorted set without TTLs (a cache counts them down),
/// or how the exchange failed (no reply within 3 s: a loaded machine still answers within it).
/// whoami's port (dig's own, new each run) is left out.
fn ask(server: SocketAddr, from: &str, extra: &[&str], ask: &[&str]) -> String {
    let (at, port) = (format!("@{}", server.ip()), server.port().to_string());
    let mut args = vec![
        at.as_str(),
        "-p",
        &port,
        "-b",
        from,
        "+nocookie",
        "+time=3",
        "+tries=1",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(ask);
    let out = crate::support::run_dig(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("Transfer failed") {
        return "transfer failed".to_owned();
    }
    if !out.status.success() || text.contains("timed out") || text.contains("no servers could be reached") {
        return "no reply".to_owned();
    }
    let mut shown = Vec::new();
    if let Some(status) = text.split("status: ").nth(1).and_then(|s| s.split(',').next()) {
        shown.push(status.to_owned());
    }
    if let Some(flags) = text.split(";; flags:").nth(1).and_then(|s| s.split(';').next()) {
        let kept: Vec<&str> = flags
            .split_whitespace()
            .filter(|f| ["aa", "tc"].contains(f))
            .collect();
        shown.push(format!("flags {}", kept.join(" ")));
    }
    let mut section = "records".to_owned();
    let mut records: Vec<String> = Vec::new();
    let flush = |section: &str, records: &mut Vec<String>, shown: &mut Vec<String>| {
        records.sort();
        if !records.is_empty() {
            shown.push(format!("{section}: {}", records.join(" | ")));
        }
        records.clear();
    };
    for line in text.lines() {
        if let Some(name) = line.strip_prefix(";; ").and_then(|l| l.strip_suffix(" SECTION:")) {
            flush(&section, &mut records, &mut shown);
            name.clone_into(&mut section);
            continue;
        }
        if line.starts_with(';') || line.trim().is_empty() {
            continue;
        }
        let mut fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() > 2 {
            fields.remove(1);
        }
        if fields.contains(&"SRV") && fields.len() == 7 {
            fields[5] = "PORT";
        }
        // A TSIG record's time and MAC are new in every reply: whether it is signed, and by
        // which key, is what tells clients apart.
        if fields.get(2) == Some(&"TSIG") {
            fields.truncate(3);
        }
        // The cluster zone's serial is its start time: each fresh server has its own.
        if fields.get(2) == Some(&"SOA") && fields.len() == 10 {
            fields[5] = "SERIAL";
        }
        records.push(fields.join(" "));
    }
    flush(&section, &mut records, &mut shown);
    shown.join("; ")
}

/// One run of a case: a fresh server; for each question (questions side by side), `first`
/// asks it, then the other client; their answers, in the order of `asks`.
async fn run(
    corefile: &str,
    dir: &Path,
    first: &'static str,
    case: &Case,
    asks: &[&[&str]],
) -> [Vec<String>; 2] {
    let running = support::start(corefile, dir).await;
    let server = running.dns_addrs()[0];
    let second = if first == A { B } else { A };
    let extra = |who: &str| if who == A { case.a_args } else { &[] };
    let pairs: Vec<(String, String)> = std::thread::scope(|s| {
        let threads: Vec<_> = asks
            .iter()
            .map(|q| {
                s.spawn(move || {
                    let one = ask(server, first, extra(first), q);
                    (one, ask(server, second, extra(second), q))
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    running.stop().await.unwrap();
    pairs.into_iter().unzip::<_, _, Vec<_>, Vec<_>>().into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_store_gives_one_clients_answer_to_another() {
    let dir = support::temp_dir("contract");
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).unwrap();
    std::fs::write(dir.join("db.example.org"), ZONE).unwrap();
    let pki = fake_apiserver::tls::TestPki::new("contract test CA").unwrap();
    let cert = pki.server(&["127.0.0.1"]).unwrap();
    std::fs::write(dir.join("cert.pem"), &cert.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &cert.key_pem).unwrap();
    let upstream = crate::support::upstream::Scripted::start().await;
    let stores = ["cache 30", "cache 30 {\n  prefetch 1 10s 100%\n }"];
    let mut differences = Vec::new();
    // Which cases showed the two clients different answers: the cases that make a plugin
    // decide by who asks must (or the test proves nothing about them).
    let mut decided = Vec::new();
    for store in stores {
        for case in CASES {
            let text = if case.directive == "view" {
                view_corefile(store, crate::support::upstream::free_port())
            } else {
                corefile(case, store, &dir, upstream.addr)
            };
            let asks: Vec<&[&str]> = ASKS.iter().chain(case.asks).copied().collect();
            // A then B, and B then A, each on a fresh server: what a client gets second
            // must be what it gets first.
            let [a_first, b_second] = run(&text, &dir, A, case, &asks).await;
            let [b_first, a_second] = run(&text, &dir, B, case, &asks).await;
            for (i, q) in asks.iter().enumerate() {
                for (who, alone, after) in [(B, &b_first, &b_second), (A, &a_first, &a_second)] {
                    if alone[i] != after[i] && !rate_limited(case, &alone[i], &after[i]) {
                        differences.push(format!(
                            "{} with `{store}`: {q:?} from {who}: alone {:?}, after the other client {:?}",
                            case.directive, alone[i], after[i]
                        ));
                    }
                }
                if a_first[i] != b_first[i] && !decided.contains(&case.directive) {
                    decided.push(case.directive);
                }
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    for d in [
        "acl", "transfer", "template", "autopath", "tsig", "view", "whoami",
    ] {
        assert!(
            decided.contains(&d),
            "the {d} case did not make the two clients' answers differ"
        );
    }
}

/// `rrl` and `fairness` limit each client's rate: a client may be limited on its own second
/// ask whichever client came first. Any other difference still counts.
fn rate_limited(case: &Case, alone: &str, after: &str) -> bool {
    ["rrl", "fairness"].contains(&case.directive)
        && [alone, after].iter().any(|s| {
            s.contains("REFUSED") || *s == "no reply" || s.contains("flags tc") || s.contains("flags aa tc")
        })
}

/// A question that carries what a plugin read of its client (`rewrite edns0 local
/// {client_ip}`, `rewrite edns0 subnet`) reaches the upstream once for each client: the cache
/// keys on the EDNS options a question carries, so one client's answer for its own data is
/// never given to another, and each client's is kept for itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_carrying_client_data_is_kept_per_client() {
    let upstream = crate::support::upstream::Scripted::start().await;
    let dir = support::temp_dir("contract-options");
    for rule in [
        "rewrite edns0 local set 0xffee {client_ip}",
        "rewrite edns0 subnet set 32 128",
    ] {
        let corefile = format!(
            ".:0 {{\n bind 127.0.0.1\n {rule}\n cache 30\n forward . {}\n}}\n",
            upstream.addr
        );
        let running = support::start(&corefile, &dir).await;
        let server = running.dns_addrs()[0];
        let seen_before = upstream.options().len();
        let answers = tokio::task::spawn_blocking(move || {
            [A, B, A, B].map(|who| ask(server, who, &[], &["www.example.com", "A"]))
        })
        .await
        .unwrap();
        for a in &answers {
            assert!(a.starts_with("NOERROR"), "{rule}: {a}");
        }
        let seen = upstream.options();
        let seen = &seen[seen_before..];
        // The option the rule adds carries the client's address in its last four bytes.
        let clients: Vec<[u8; 4]> = seen
            .iter()
            .filter_map(|opts| {
                let (_, data) = opts.iter().find(|(code, _)| *code == 0xffee || *code == 8)?;
                data.get(data.len().checked_sub(4)?..)?.try_into().ok()
            })
            .collect();
        assert_eq!(
            clients,
            [[127, 0, 0, 2], [127, 0, 0, 3]],
            "{rule}: the upstream saw {seen:?}"
        );
        running.stop().await.unwrap();
    }
}
