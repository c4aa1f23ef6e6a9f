//! The answer memo (`src/server/memo.rs`): a memoized response is the byte-for-byte response
//! the full path gives, a zone change is answered at once, `loadbalance` still shuffles, and
//! the blocks whose answers may change without a zone change do not memoize. Through the
//! handler's wire interface (the UDP path the workers call), then over real UDP sockets.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;

use cluster_dns::cluster::manifests;
use cluster_dns::proto::Transport;
use cluster_dns::server::DnsHandler;
use cluster_dns::testing::{
    FIXTURE_YAML, KUBEADM_BLOCK, handler_on_zone, handler_with_metrics, handler_with_zone, zone_from_yaml,
};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};

use crate::support;

const CLIENT: &str = "127.0.0.1:40000";

fn wire(name: &str, qtype: RecordType, id: u16, edns: Option<u16>) -> Vec<u8> {
    let mut msg = match edns {
        Some(p) => support::query_edns(name, qtype, p),
        None => support::query(name, qtype),
    };
    msg.metadata.id = id;
    msg.to_bytes().unwrap()
}

fn ask(h: &DnsHandler, bytes: &[u8]) -> Vec<u8> {
    let src: SocketAddr = CLIENT.parse().unwrap();
    h.answer_wire(bytes, src, Transport::Udp).expect("a response")
}

/// The questions the memo sees most: every answer kind of the fixture, in the client's case,
/// with and without EDNS, and one cut to 512 bytes.
const QUESTIONS: &[(&str, RecordType, Option<u16>)] = &[
    ("svc1.testns.svc.cluster.local.", RecordType::A, None),
    ("SVC1.TestNS.svc.Cluster.Local.", RecordType::A, Some(1232)),
    ("hdls.testns.svc.cluster.local.", RecordType::A, Some(1232)),
    ("hdls.testns.svc.cluster.local.", RecordType::AAAA, None),
    ("svc1.testns.svc.cluster.local.", RecordType::SRV, Some(1232)),
    ("_http._tcp.hdls.testns.svc.cluster.local.", RecordType::SRV, None),
    ("1.10.96.10.in-addr.arpa.", RecordType::PTR, None),
    ("nope.testns.svc.cluster.local.", RecordType::A, None),
    ("svc1.testns.svc.cluster.local.", RecordType::TXT, Some(1232)),
    ("cluster.local.", RecordType::SOA, None),
    ("dns-version.cluster.local.", RecordType::TXT, None),
];

#[test]
fn memoized_responses_are_the_full_paths_bytes() {
    // One zone under both: the SOA serial is the zone's last change in Unix seconds, so two
    // zones built a second apart differ in it (CI failed once on exactly that).
    let zone = zone_from_yaml(FIXTURE_YAML).unwrap();
    let memo = handler_on_zone(KUBEADM_BLOCK, &zone, true).unwrap();
    let plain = handler_on_zone(KUBEADM_BLOCK, &zone, false).unwrap();
    for (i, (name, qtype, edns)) in QUESTIONS.iter().enumerate() {
        let id = u16::try_from(i).unwrap();
        let want = ask(&plain, &wire(name, *qtype, id, *edns));
        let first = ask(&memo, &wire(name, *qtype, id, *edns));
        assert_eq!(first, want, "{name} {qtype}: first answer differs");
        for other_id in [0x1234, 0xFFFF] {
            let hit = ask(&memo, &wire(name, *qtype, other_id, *edns));
            assert_eq!(&hit[..2], &other_id.to_be_bytes(), "{name} {qtype}: id");
            assert_eq!(&hit[2..], &want[2..], "{name} {qtype}: memoized answer differs");
        }
    }
    assert_eq!(
        memo.router().memo.len(),
        QUESTIONS.len(),
        "every question memoized once"
    );
    assert!(plain.router().memo.is_empty());
}

#[test]
fn a_zone_change_is_answered_at_once() {
    let (h, zone) = handler_with_zone(KUBEADM_BLOCK, FIXTURE_YAML, true).unwrap();
    let q = wire("svc1.testns.svc.cluster.local.", RecordType::A, 7, None);
    let addrs = |bytes: &[u8]| -> Vec<String> {
        Message::from_bytes(bytes)
            .unwrap()
            .answers
            .iter()
            .map(support::show)
            .collect()
    };
    assert_eq!(
        addrs(&ask(&h, &q)),
        ["svc1.testns.svc.cluster.local. A 10.96.10.1"]
    );
    assert_eq!(
        addrs(&ask(&h, &q)),
        ["svc1.testns.svc.cluster.local. A 10.96.10.1"]
    );
    let moved = "apiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: testns}\n\
                 spec: {type: ClusterIP, clusterIP: 10.96.10.99, clusterIPs: [10.96.10.99]}\n";
    let mut report = manifests::LoadReport::default();
    manifests::load_str(moved, Path::new("moved.yaml"), &zone, &mut report).unwrap();
    assert_eq!(
        addrs(&ask(&h, &q)),
        ["svc1.testns.svc.cluster.local. A 10.96.10.99"]
    );
    // A name that did not exist, memoized as NXDOMAIN, exists once it is created.
    let new = wire("fresh.testns.svc.cluster.local.", RecordType::A, 8, None);
    for _ in 0..2 {
        let r = Message::from_bytes(&ask(&h, &new)).unwrap();
        assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    }
    let fresh = "apiVersion: v1\nkind: Service\nmetadata: {name: fresh, namespace: testns}\n\
                 spec: {type: ClusterIP, clusterIP: 10.96.10.98, clusterIPs: [10.96.10.98]}\n";
    manifests::load_str(fresh, Path::new("fresh.yaml"), &zone, &mut report).unwrap();
    assert_eq!(
        addrs(&ask(&h, &new)),
        ["fresh.testns.svc.cluster.local. A 10.96.10.98"]
    );
}

/// Endpoint churn leaves the memo of the names it does not touch: after `svc6` moves, `svc1`'s
/// answer, a PTR of another address and an NXDOMAIN are still memo hits, each byte for byte what
/// the full path gives now (the NXDOMAIN with the zone's new SOA serial); `svc6`'s own answer,
/// its PTR and the names of a namespace that appears are answered afresh.
#[test]
fn a_change_leaves_the_memo_of_names_it_does_not_touch() {
    let zone = zone_from_yaml(FIXTURE_YAML).unwrap();
    let memo = handler_on_zone(KUBEADM_BLOCK, &zone, true).unwrap();
    let plain = handler_on_zone(KUBEADM_BLOCK, &zone, false).unwrap();
    let untouched: &[(&str, RecordType)] = &[
        ("svc1.testns.svc.cluster.local.", RecordType::A),
        ("svc1.testns.svc.cluster.local.", RecordType::SRV),
        ("1.10.96.10.in-addr.arpa.", RecordType::PTR),
        ("nope.testns.svc.cluster.local.", RecordType::A),
        ("svc1.testns.svc.cluster.local.", RecordType::AAAA),
    ];
    let touched: &[(&str, RecordType)] = &[
        ("svc6.testns.svc.cluster.local.", RecordType::AAAA),
        ("_http._tcp.svc6.testns.svc.cluster.local.", RecordType::SRV),
    ];
    let all: Vec<_> = untouched.iter().chain(touched).collect();
    for (i, (name, qtype)) in all.iter().enumerate() {
        ask(&memo, &wire(name, *qtype, u16::try_from(i).unwrap(), None));
    }
    let cached = |name: &str, qtype: RecordType| {
        let mut out = Vec::new();
        memo.router()
            .memo
            .lookup(&wire(name, qtype, 99, None), &mut out)
            .map(|_| out)
    };
    for (name, qtype) in &all {
        assert!(cached(name, *qtype).is_some(), "{name} {qtype} memoized");
    }
    // The SOA serial is the Unix second of the last change: make sure it moves.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let moved = "apiVersion: v1\nkind: Service\nmetadata: {name: svc6, namespace: testns}\n\
                 spec: {type: ClusterIP, clusterIP: 'fd00:10:96::b', clusterIPs: ['fd00:10:96::b']}\n";
    let mut report = manifests::LoadReport::default();
    manifests::load_str(moved, Path::new("moved.yaml"), &zone, &mut report).unwrap();
    for (name, qtype) in untouched {
        let hit = cached(name, *qtype).unwrap_or_else(|| panic!("{name} {qtype}: memo entry dropped"));
        let want = ask(&plain, &wire(name, *qtype, 99, None));
        assert_eq!(
            hit, want,
            "{name} {qtype}: the memoized answer differs from the full path"
        );
    }
    for (name, qtype) in touched {
        assert!(cached(name, *qtype).is_none(), "{name} {qtype}: served stale");
        let fresh = ask(&memo, &wire(name, *qtype, 99, None));
        assert_eq!(
            fresh,
            ask(&plain, &wire(name, *qtype, 99, None)),
            "{name} {qtype}"
        );
    }
    let aaaa = Message::from_bytes(&ask(
        &memo,
        &wire("svc6.testns.svc.cluster.local.", RecordType::AAAA, 1, None),
    ))
    .unwrap();
    assert_eq!(
        aaaa.answers.iter().map(support::show).collect::<Vec<_>>(),
        ["svc6.testns.svc.cluster.local. AAAA fd00:10:96::b"]
    );
    // A namespace appearing changes what every name may answer (its structure).
    let ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: fresh-ns}\n";
    manifests::load_str(ns, Path::new("ns.yaml"), &zone, &mut report).unwrap();
    for (name, qtype) in untouched {
        assert!(
            cached(name, *qtype).is_none(),
            "{name} {qtype}: kept through a namespace change"
        );
    }
}

/// A headless service with `n` ready IPv4 endpoints.
fn headless(n: u8) -> String {
    let mut y = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: lb}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {name: many, namespace: lb}\n\
         spec: {clusterIP: None, clusterIPs: [None]}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {name: many-1, namespace: lb, labels: {kubernetes.io/service-name: many}}\n\
         addressType: IPv4\nendpoints:\n",
    );
    for i in 1..=n {
        y.push_str(&format!(
            "- addresses: [10.1.0.{i}]\n  conditions: {{ready: true}}\n"
        ));
    }
    y
}

#[test]
fn loadbalance_still_shuffles_memoized_answers() {
    let block = ".:53 {\n loadbalance\n kubernetes cluster.local\n}\n";
    let (h, _) = handler_with_zone(block, &headless(8), true).unwrap();
    let q = wire("many.lb.svc.cluster.local.", RecordType::A, 1, None);
    let mut orders = BTreeSet::new();
    for _ in 0..40 {
        let r = Message::from_bytes(&ask(&h, &q)).unwrap();
        let ips: Vec<String> = r
            .answers
            .iter()
            .map(|r| match &r.data {
                RData::A(a) => a.0.to_string(),
                other => panic!("not an A record: {other:?}"),
            })
            .collect();
        let mut sorted = ips.clone();
        sorted.sort();
        let want: Vec<String> = (1..=8).map(|i| format!("10.1.0.{i}")).collect();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        assert_eq!(sorted, want_sorted, "every address, once");
        orders.insert(ips);
    }
    assert_eq!(h.router().memo.len(), 1, "the answer was memoized");
    assert!(
        orders.len() > 10,
        "40 answers came in only {} orders",
        orders.len()
    );
}

#[test]
fn blocks_whose_answers_change_without_the_zone_do_not_memoize() {
    let dir = support::temp_dir("memo-hosts");
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, "10.9.9.9 pinned.testns.svc.cluster.local\n").unwrap();
    let with_hosts = format!(
        ".:53 {{\n hosts {} {{\n  fallthrough\n }}\n kubernetes cluster.local\n}}\n",
        hosts.display()
    );
    for block in [with_hosts.as_str()] {
        let (h, _) = handler_with_zone(block, FIXTURE_YAML, true).unwrap();
        for id in 0..3 {
            ask(
                &h,
                &wire("svc1.testns.svc.cluster.local.", RecordType::A, id, None),
            );
        }
        assert!(h.router().memo.is_empty(), "memoized under {block}");
    }
}

/// The cache's exported counters, attached to the cache of `h`'s first block.
/// A cache hit is memoized for as long as the cache holds the entry: each replay is the
/// bytes the cache itself gives at that moment (TTLs counted down, asked over TCP, which never
/// replays), it is counted as a cache hit, a zone change does not end it (the cache would not
/// either) and the entry's expiry does. Paused time: the seconds are exact.
#[tokio::test(start_paused = true)]
async fn a_cache_hit_is_replayed_with_the_caches_ttls_until_it_expires() {
    let block = ".:53 {\n cache 30\n kubernetes cluster.local {\n  ttl 20\n }\n}\n";
    let (h, zone, metrics) = handler_with_metrics(block, FIXTURE_YAML, true).unwrap();
    let router = h.router();
    let src: SocketAddr = CLIENT.parse().unwrap();
    let name = "svc1.testns.svc.cluster.local.";
    let udp = async |id: u16| {
        let bytes = wire(name, RecordType::A, id, Some(1232));
        h.answer_wire_async(&bytes, src, Transport::Udp).await.unwrap()
    };
    let tcp = async |id: u16| {
        let bytes = wire(name, RecordType::A, id, Some(1232));
        h.answer_wire_async(&bytes, src, Transport::Tcp).await.unwrap()
    };
    let ttl = |bytes: &[u8]| Message::from_bytes(bytes).unwrap().answers[0].ttl;

    udp(1).await; // the cache's miss: the kubernetes answer, stored
    assert_eq!(router.memo.len(), 0, "a miss is not the cache's to time");
    assert_eq!(ttl(&udp(2).await), 20); // its first hit, memoized
    assert_eq!(router.memo.len(), 1, "the hit was not memoized");
    tokio::time::advance(std::time::Duration::from_millis(7_300)).await;
    // A zone change elsewhere: the cache keeps its entry, and so does the memo.
    zone.delete_service("testns", "hdls");
    let (replayed, cached) = (udp(3).await, tcp(3).await);
    assert_eq!(ttl(&replayed), 13);
    assert_eq!(replayed, cached, "the replay is not the cache's answer");
    tokio::time::advance(std::time::Duration::from_millis(12_700)).await;
    // 20 s: the entry expired; the full path asks the zone again and stores it anew.
    assert_eq!(ttl(&udp(4).await), 20);
    let text = metrics.render();
    for line in [
        "coredns_cache_requests_total{server=\"dns://:53\",view=\"\",zones=\".\"} 5",
        "coredns_cache_hits_total{server=\"dns://:53\",type=\"success\",view=\"\",zones=\".\"} 3",
        "coredns_cache_misses_total{server=\"dns://:53\",view=\"\",zones=\".\"} 2",
    ] {
        assert!(text.contains(line), "{line} not in:\n{text}");
    }
}

#[test]
fn a_pass_through_cache_counts_memoized_questions() {
    // kubeadm's newer form: the cache never stores cluster answers, but counts them.
    let block = ".:53 {\n cache 30 {\n  disable success cluster.local\n  disable denial cluster.local\n }\n kubernetes cluster.local\n}\n";
    let (h, _, metrics) = handler_with_metrics(block, FIXTURE_YAML, true).unwrap();
    let router = h.router();
    for id in 0..5 {
        ask(
            &h,
            &wire("svc1.testns.svc.cluster.local.", RecordType::A, id, None),
        );
    }
    assert_eq!(router.memo.len(), 1);
    let text = metrics.render();
    assert!(
        text.contains("coredns_cache_misses_total{server=\"dns://:53\",view=\"\",zones=\".\"} 5"),
        "every question counted, memoized or not:\n{text}"
    );
}

fn fixture_corefile(plugins: &str) -> String {
    format!(
        ".:0 {{\n bind 127.0.0.1\n{plugins} kubernetes cluster.local in-addr.arpa {{\n  manifests {}\n }}\n}}\n",
        support::data_dir().join("conformance-fixture.yaml").display()
    )
}

/// Over real UDP sockets: the same question asked again gets the same answer with its own ID
/// (the memo has it from the second time on).
#[tokio::test]
async fn memoized_answers_over_udp() {
    let running = support::start(&fixture_corefile(""), &support::temp_dir("memo-udp")).await;
    let addr = running.dns_addrs()[0];
    let mut seen = Vec::new();
    for _ in 0..4 {
        let q = support::query("hdls.testns.svc.cluster.local.", RecordType::A);
        let (r, _) = support::udp(addr, &q).await;
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        let mut ips: Vec<String> = r.answers.iter().map(support::show).collect();
        ips.sort();
        assert!(!ips.is_empty());
        seen.push(ips);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "answers differ: {seen:?}");
    assert_eq!(running.memoized(), 1);
    running.stop().await.unwrap();
}

/// `log` writes every question: its blocks answer every query in full.
#[tokio::test]
async fn a_block_with_log_does_not_memoize() {
    let running = support::start(&fixture_corefile(" log\n"), &support::temp_dir("memo-log")).await;
    let addr = running.dns_addrs()[0];
    for _ in 0..3 {
        let q = support::query("svc1.testns.svc.cluster.local.", RecordType::A);
        let (r, _) = support::udp(addr, &q).await;
        assert_eq!(r.answers.len(), 1);
    }
    assert_eq!(running.memoized(), 0);
    running.stop().await.unwrap();
}

/// A plugin whose answer depends on the client's address (as autopath, acl and view do):
/// `whoami.cluster.local. A` is answered with the client's own IPv4 address; other names go on.
/// For `whoami` it declares `replay` as the test says (the plugin contract's default is never);
/// for the names it passes on, that they may be replayed.
#[derive(Debug)]
struct WhoAmI(cluster_dns::chain::Replay);

fn is_whoami(q: &cluster_dns::proto::Question) -> bool {
    let me = hickory_proto::rr::Name::from_ascii("whoami.cluster.local.").unwrap();
    me.eq_case(&q.name.to_lowercase())
}

impl cluster_dns::chain::Plugin for WhoAmI {
    fn name(&self) -> &'static str {
        "whoami"
    }

    fn replay(&self, q: &cluster_dns::proto::Question) -> cluster_dns::chain::Replay {
        if is_whoami(q) {
            self.0
        } else {
            cluster_dns::chain::Replay::Same
        }
    }

    fn serve<'a>(
        &'a self,
        q: &'a cluster_dns::proto::Question,
        next: cluster_dns::chain::Next<'a>,
    ) -> cluster_dns::chain::ReplyFuture<'a> {
        Box::pin(async move {
            if !is_whoami(q) {
                return next.serve(q).await;
            }
            let std::net::IpAddr::V4(ip) = q.client.ip() else {
                return next.serve(q).await;
            };
            let record = hickory_proto::rr::Record::from_rdata(
                q.name.clone(),
                5,
                RData::A(hickory_proto::rr::rdata::A(ip)),
            );
            cluster_dns::proto::Reply::Authoritative(cluster_dns::proto::Answer {
                rcode: ResponseCode::NoError,
                answers: vec![record].into(),
                authority: Vec::new(),
                additional: Vec::new(),
                chase_target: None,
                flags: cluster_dns::proto::FlagEdit::KEEP,
            })
        })
    }
}

/// The fixture's kubeadm block with `plugin` first in its chain, memo on.
fn with_first_plugin(plugin: WhoAmI) -> DnsHandler {
    use std::sync::Arc;
    let (base, _) = handler_with_zone(KUBEADM_BLOCK, FIXTURE_YAML, true).unwrap();
    let router = base.router();
    let mut block = router.blocks[0].clone();
    let mut plugins: Vec<Arc<dyn cluster_dns::chain::Plugin>> = vec![Arc::new(plugin)];
    plugins.extend(block.chain.plugins().iter().cloned());
    block.chain = cluster_dns::chain::Chain::new(plugins);
    let router = cluster_dns::server::Router::new(vec![block]);
    DnsHandler::new(cluster_dns::server::router_cell(router))
}

/// Each client's A records for `whoami`, asking with the same request bytes from each address.
fn whoami_from(h: &DnsHandler, clients: &[&str]) -> Vec<Vec<String>> {
    let q = wire("whoami.cluster.local.", RecordType::A, 7, None);
    clients
        .iter()
        .map(|c| {
            let src: SocketAddr = c.parse().unwrap();
            let out = h.answer_wire(&q, src, Transport::Udp).expect("a response");
            Message::from_bytes(&out)
                .unwrap()
                .answers
                .iter()
                .map(|r| r.data.to_string())
                .collect()
        })
        .collect()
}

/// The memo never sends one client's answer to another when a plugin's answer depends on the
/// client: it declares nothing (the contract's default), so the memo keeps nothing for it, and
/// every client gets its own address. The cluster zone's answers are memoized as before. The
/// same plugin declaring itself replayable (the mistake the default guards against) does get
/// the first client's answer replayed to the others: the test can tell.
#[test]
fn a_client_dependent_plugin_is_never_replayed_to_another_client() {
    let clients = ["127.0.0.11:5000", "127.0.0.12:5000", "127.0.0.13:5000"];
    let h = with_first_plugin(WhoAmI(cluster_dns::chain::Replay::Never));
    for _ in 0..3 {
        assert_eq!(
            whoami_from(&h, &clients),
            [["127.0.0.11"], ["127.0.0.12"], ["127.0.0.13"]]
        );
    }
    assert_eq!(h.router().memo.len(), 0, "a client-dependent answer was memoized");
    ask(
        &h,
        &wire("svc1.testns.svc.cluster.local.", RecordType::A, 1, None),
    );
    assert_eq!(h.router().memo.len(), 1, "cluster answers are still memoized");

    let wrong = with_first_plugin(WhoAmI(cluster_dns::chain::Replay::Same));
    assert_eq!(
        whoami_from(&wrong, &clients),
        [["127.0.0.11"], ["127.0.0.11"], ["127.0.0.11"]],
        "a plugin that declares itself replayable is replayed"
    );
}
