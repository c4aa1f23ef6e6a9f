//! Micro-benchmarks of the query hot path, for catching regressions (issue 6):
//!
//! ```sh
//! cargo bench --bench hot_path            # every case, ~1.5 s each
//! cargo bench --bench hot_path -- answer  # only the cases whose name contains "answer"
//! ```
//!
//! Cases: parsing a query (`Message::from_bytes`), the whole answer path on wire bytes as a UDP
//! worker takes it (`DnsHandler::answer_inline`: the memo, then parse, route, lookup, encode
//! into a buffer the caller reuses, the clock read once) against the conformance fixture
//! behind the kubeadm stanza for a ClusterIP A, a headless A, an SRV, a PTR and an NXDOMAIN with
//! the answer memo off, the same questions answered from the memo (`memo hit ...`), the
//! ClusterIP A through `DnsHandler::answer_wire` as earlier sessions measured it, and
//! encoding a 20-record answer. Each case warms up, then runs 5 rounds of ~0.3 s and prints the
//! median ns/op (and the fastest round). No timing is asserted: numbers are for comparison on
//! one machine. Without `--bench` (as `cargo test --benches` runs it) every case runs a few
//! iterations only, to check the answers, so the file cannot rot.
//!
//! `--iters N` runs each case exactly N times, untimed: counted by valgrind
//! (`valgrind --tool=cachegrind --cache-sim=no`, "I refs"), two runs (N and 2N) give the
//! instructions per answer as their difference over N, a figure that a shared machine's noise
//! does not move. A filter ending in `$` names one case exactly (`"answer SRV$"`).

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use cluster_dns::proto::Transport;
use cluster_dns::server::DnsHandler;
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::BinDecodable;

const ROUNDS: usize = 5;
const ROUND_TIME: Duration = Duration::from_millis(300);
const WARMUP: Duration = Duration::from_millis(200);

fn query_bytes(name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new(0x1234, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).expect("name"), qtype));
    m.to_vec().expect("encode query")
}

/// Runs `f` in batches until `time` has passed; returns (iterations, elapsed).
fn run_for(time: Duration, f: &mut dyn FnMut()) -> (u64, Duration) {
    let start = Instant::now();
    let mut iters = 0u64;
    let mut batch = 16u64;
    loop {
        for _ in 0..batch {
            f();
        }
        iters += batch;
        let elapsed = start.elapsed();
        if elapsed >= time {
            return (iters, elapsed);
        }
        if elapsed < time / 8 {
            batch *= 2;
        }
    }
}

/// How a case runs: timed rounds (`--bench`), a fixed count untimed (`--iters N`), or a few
/// iterations as a check.
#[derive(Clone, Copy)]
enum Mode {
    Timed,
    Iterations(u64),
    Check,
}

fn bench(name: &str, mode: Mode, filter: Option<&str>, f: &mut dyn FnMut()) {
    // A filter ending in `$` names one case exactly.
    let wanted = |f: &str| match f.strip_suffix('$') {
        Some(exact) => name == exact,
        None => name.contains(f),
    };
    if filter.is_some_and(|f| !wanted(f)) {
        return;
    }
    match mode {
        Mode::Timed => {}
        Mode::Check => {
            for _ in 0..3 {
                f();
            }
            println!("{name:<28} ok");
            return;
        }
        Mode::Iterations(n) => {
            for _ in 0..n {
                f();
            }
            println!("{name:<28} {n} iterations");
            return;
        }
    }
    run_for(WARMUP, f);
    let mut per_op: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let (iters, elapsed) = run_for(ROUND_TIME, f);
            elapsed.as_nanos() as f64 / iters as f64
        })
        .collect();
    per_op.sort_by(f64::total_cmp);
    let median = per_op[ROUNDS / 2];
    println!(
        "{name:<28} {median:>9.0} ns/op  (fastest round {:.0}, {:.0}k op/s)",
        per_op[0],
        1e6 / median
    );
}

/// A namespace `bench` holding the headless service `wide` with `n` ready endpoints (port http
/// 8080/TCP, no hostnames), as `bench/gen.py` writes the srv mix's headless services.
fn wide_headless_yaml(n: u8) -> String {
    let mut y = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bench\n---\n\
         apiVersion: v1\nkind: Service\nmetadata:\n  name: wide\n  namespace: bench\n\
         spec:\n  clusterIP: None\n  ports:\n  - {name: http, port: 8080, protocol: TCP}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: wide-abcde\n\
         \x20 namespace: bench\n  labels:\n    kubernetes.io/service-name: wide\n\
         addressType: IPv4\nports:\n- {name: http, port: 8080, protocol: TCP}\nendpoints:\n",
    );
    for i in 0..n {
        y.push_str(&format!(
            "- addresses: [10.244.7.{i}]\n  conditions: {{ready: true}}\n"
        ));
    }
    y
}

/// 2,000 namespaces with a Service and a pod each, and five DNSPolicies in each (10,000): the
/// client 127.0.0.1 is the pod of `n0`, which all five cover (`bench/dnspolicy-instructions.sh`
/// builds the same world).
fn policy_world_yaml() -> String {
    let mut y = String::new();
    for i in 0..2000 {
        let ip = if i == 0 {
            "127.0.0.1".to_owned()
        } else {
            format!("10.244.{}.{}", i / 250, i % 250 + 1)
        };
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: n{i}, labels: {{group: g{}}}}}\n\
             ---\napiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: n{i}}}\n\
             spec: {{clusterIP: 10.96.{}.{}, ports: [{{name: http, port: 80}}]}}\n\
             ---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: n{i}, labels: {{app: web}}}}\n\
             spec: {{containers: [{{name: c, image: x}}]}}\nstatus: {{phase: Running, podIP: {ip}}}\n",
            i % 10,
            i / 250,
            i % 250 + 1
        ));
        for k in 0..5 {
            let selector = if k % 2 == 1 {
                "{matchLabels: {app: web}}"
            } else {
                "{}"
            };
            let names: Vec<String> = (1..4).map(|j| format!("n{}", (i + j) % 2000)).collect();
            y.push_str(&format!(
                "---\napiVersion: dns.cluster-dns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {{name: p{k}, namespace: n{i}}}\n\
                 spec: {{podSelector: {selector}, visibleNamespaces: {{names: [{}], selector: {{matchLabels: {{group: g{k}}}}}}}, \
                 external: {{allow: ['*.example.org', '*.team{k}.example.com']}}}}\n",
                names.join(", ")
            ));
        }
    }
    y
}

/// Tenant DNS policy's cost (issue 42): the policy world's block with and without `dnspolicy`,
/// the full path and the memo, a visible Service and an allowed outside name (`template`).
fn policy_cases(mode: Mode, filter: Option<&str>, src: SocketAddr, out: &mut Vec<u8>) {
    if filter.is_some_and(|f| !f.contains("policy")) {
        return;
    }
    let yaml = policy_world_yaml();
    let block = |policy: &str| {
        format!(
            ".:53 {{\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  pods verified\n  fallthrough in-addr.arpa ip6.arpa\n }}\n{policy} template IN A example.org {{\n  answer \"{{{{ .Name }}}} 60 IN A 192.0.2.1\"\n }}\n}}\n"
        )
    };
    let zone = cluster_dns::testing::zone_from_yaml(&yaml).expect("policy world");
    let questions = [
        (
            "cluster A",
            query_bytes("web.n1.svc.cluster.local.", RecordType::A),
        ),
        ("outside A", query_bytes("www.example.org.", RecordType::A)),
    ];
    for (label, policy) in [
        ("with dnspolicy", " dnspolicy {\n  unmapped allow\n }\n"),
        ("without dnspolicy", ""),
    ] {
        for memo in [false, true] {
            let h =
                cluster_dns::testing::handler_on_zone(&block(policy), &zone, memo).expect("policy handler");
            for (what, q) in &questions {
                check(&h, src, q, ResponseCode::NoError, 1);
                let path = if memo { "memo hit" } else { "answer" };
                bench(
                    &format!("policy {path} {what} {label}"),
                    mode,
                    filter,
                    &mut || {
                        black_box(h.answer_inline(black_box(q), src, out, Instant::now()));
                    },
                );
            }
        }
    }
}

/// Checks the handler's reply to `q` once, so a case measures the answer it claims to.
fn check(h: &DnsHandler, src: SocketAddr, q: &[u8], rcode: ResponseCode, min_answers: usize) {
    let reply = h.answer_wire(q, src, Transport::Udp).expect("a reply");
    // What the cases time: the UDP worker's way gives the same bytes.
    let mut out = Vec::new();
    assert!(matches!(
        h.answer_inline(q, src, &mut out, Instant::now()),
        Some(Some(_))
    ));
    assert_eq!(out, reply);
    let m = Message::from_bytes(&reply).expect("reply parses");
    assert_eq!(m.metadata.response_code, rcode, "{m}");
    assert!(m.answers.len() >= min_answers, "{m}");
}

fn main() {
    cluster_dns::cluster::heap::fix_mmap_threshold();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let iters = args
        .iter()
        .position(|a| a == "--iters")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse::<u64>().ok());
    let mode = match iters {
        Some(n) => Mode::Iterations(n),
        None if args.iter().any(|a| a == "--bench") => Mode::Timed,
        None => Mode::Check,
    };
    let filter = args
        .iter()
        .enumerate()
        .find(|(i, a)| !a.starts_with('-') && (*i == 0 || args[i - 1] != "--iters"))
        .map(|(_, a)| a.as_str());

    // The full answer path (memo off), and the same handler with the answer memo on.
    let (handler, _) = cluster_dns::testing::handler_with_zone(
        cluster_dns::testing::KUBEADM_BLOCK,
        cluster_dns::testing::FIXTURE_YAML,
        false,
    )
    .expect("fixture handler");
    let memoized = cluster_dns::testing::fixture_handler().expect("fixture handler");
    // The srv mix's large answer (bench/gen.py): a headless service of 20 ready endpoints
    // without hostnames, asked without EDNS: 7 SRV records fit in 512 bytes (targets are not
    // compressed, RFC 2782), the rest is built and cut (TC).
    let (wide, _) = cluster_dns::testing::handler_with_zone(
        cluster_dns::testing::KUBEADM_BLOCK,
        &wide_headless_yaml(20),
        false,
    )
    .expect("wide headless handler");
    let src: SocketAddr = "127.0.0.1:5353".parse().expect("addr");

    let clusterip = query_bytes("svc1.testns.svc.cluster.local.", RecordType::A);
    bench("parse query", mode, filter, &mut || {
        black_box(Message::from_bytes(black_box(&clusterip)).expect("parse"));
    });

    let cases = [
        ("answer A clusterip", clusterip.clone(), ResponseCode::NoError, 1),
        (
            "answer A headless",
            query_bytes("hdls.testns.svc.cluster.local.", RecordType::A),
            ResponseCode::NoError,
            2,
        ),
        (
            "answer SRV",
            query_bytes("_http._tcp.svc1.testns.svc.cluster.local.", RecordType::SRV),
            ResponseCode::NoError,
            1,
        ),
        (
            "answer SRV headless",
            query_bytes("_http._tcp.hdls.testns.svc.cluster.local.", RecordType::SRV),
            ResponseCode::NoError,
            2,
        ),
        (
            "answer PTR",
            query_bytes("1.10.96.10.in-addr.arpa.", RecordType::PTR),
            ResponseCode::NoError,
            1,
        ),
        (
            "answer NXDOMAIN search miss",
            query_bytes("api.example.com.testns.svc.cluster.local.", RecordType::A),
            ResponseCode::NXDomain,
            0,
        ),
    ];
    let wide_srv = query_bytes("_http._tcp.wide.bench.svc.cluster.local.", RecordType::SRV);
    check(&wide, src, &wide_srv, ResponseCode::NoError, 7);
    // The reply buffer a UDP worker reuses for each datagram.
    let mut out = Vec::with_capacity(4096);
    bench("answer SRV headless 20", mode, filter, &mut || {
        black_box(wide.answer_inline(black_box(&wide_srv), src, &mut out, Instant::now()));
    });
    // The a-headless mix's large answer: one A record per endpoint, all 20 fit.
    let wide_a = query_bytes("wide.bench.svc.cluster.local.", RecordType::A);
    check(&wide, src, &wide_a, ResponseCode::NoError, 20);
    bench("answer A headless 20", mode, filter, &mut || {
        black_box(wide.answer_inline(black_box(&wide_a), src, &mut out, Instant::now()));
    });
    // The measure of the earlier sessions: through `answer_wire` (a blocking executor and a
    // fresh reply buffer per answer, which no server path pays), kept for comparison.
    bench("answer_wire A clusterip", mode, filter, &mut || {
        black_box(handler.answer_wire(black_box(&clusterip), src, Transport::Udp));
    });
    for (name, q, rcode, answers) in &cases {
        check(&handler, src, q, *rcode, *answers);
        bench(name, mode, filter, &mut || {
            black_box(handler.answer_inline(black_box(q), src, &mut out, Instant::now()));
        });
    }
    for (name, q, rcode, answers) in &cases {
        // The first answer fills the memo; the bench measures hits.
        check(&memoized, src, q, *rcode, *answers);
        assert!(!memoized.router().memo.is_empty());
        let hit = name.replacen("answer", "memo hit", 1);
        bench(&hit, mode, filter, &mut || {
            black_box(memoized.answer_inline(black_box(q), src, &mut out, Instant::now()));
        });
    }

    policy_cases(mode, filter, src, &mut out);

    let owner = Name::from_ascii("big.testns.svc.cluster.local.").expect("name");
    let mut big = Message::new(0x1234, MessageType::Response, OpCode::Query);
    big.metadata.authoritative = true;
    big.add_query(Query::query(owner.clone(), RecordType::A));
    for i in 0..20u8 {
        big.add_answer(Record::from_rdata(
            owner.clone(),
            30,
            RData::A(A(Ipv4Addr::new(10, 244, 1, i))),
        ));
    }
    bench("encode 20-record answer", mode, filter, &mut || {
        black_box(black_box(&big).to_vec().expect("encode"));
    });
}
