//! `rrl` over real UDP from distinct loopback source addresses (127.0.0.x, each its own
//! account with `ipv4-prefix-length 32`): a client over its allowance gets truncated empty
//! replies at the slip ratio and silence otherwise, while another client is answered in full
//! and TCP is never limited; the table stays within `max-table-size` whatever the number of
//! sources; `report-only` answers everything and counts; bad options are refused at their
//! line; and the amplification a limited source gets is measured (at most 1.0x).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use tokio::net::UdpSocket;

use crate::support;

fn corefile(options: &str, hosts: &str) -> String {
    format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n rrl example.org {{\n  ipv4-prefix-length 32\n{options} }}\n hosts {{\n{hosts} }}\n}}\n"
    )
}

const HOSTS: &str = "  192.0.2.1 www.example.org\n  192.0.2.2 other.example.net\n";

/// What a burst from one source got back.
#[derive(Debug, Default)]
struct Got {
    /// Replies in full (TC=0), by query id.
    full: usize,
    /// Truncated replies (TC=1), all with empty sections.
    slipped: usize,
    /// Bytes sent and received by the source.
    sent: usize,
    received: usize,
}

/// Sends `count` copies of a question (`payload`: EDNS size, 0 for none) from `from` to `dns`
/// as fast as the socket takes them, while a second task reads every reply, until 1 s passes
/// with none.
async fn burst(dns: SocketAddr, from: &str, name: &str, count: usize, payload: u16) -> Got {
    let sock = Arc::new(UdpSocket::bind((from, 0)).await.expect("bind a loopback source"));
    let reader = {
        let sock = sock.clone();
        tokio::spawn(async move {
            let mut got = Got::default();
            let mut buf = vec![0u8; 65535];
            let mut ids = HashMap::new();
            while let Ok(Ok((n, _))) =
                tokio::time::timeout(Duration::from_secs(1), sock.recv_from(&mut buf)).await
            {
                got.received += n;
                let m = Message::from_bytes(&buf[..n]).expect("a reply parses");
                *ids.entry(m.metadata.id).or_insert(0) += 1;
                if m.metadata.truncation {
                    assert!(
                        m.answers.is_empty() && m.authorities.is_empty(),
                        "a slip is empty: {m:?}"
                    );
                    got.slipped += 1;
                } else {
                    assert!(!m.answers.is_empty(), "a full answer: {m:?}");
                    got.full += 1;
                }
            }
            assert!(ids.values().all(|&n| n == 1), "one reply per query at most");
            got
        })
    };
    let mut sent = 0;
    for i in 0..count {
        let mut q = if payload > 0 {
            support::query_edns(name, RecordType::A, payload)
        } else {
            support::query(name, RecordType::A)
        };
        q.metadata.id = u16::try_from(i).unwrap();
        let bytes = q.to_bytes().unwrap();
        sock.send_to(&bytes, dns).await.unwrap();
        sent += bytes.len();
        if i % 32 == 31 {
            tokio::task::yield_now().await;
        }
    }
    let mut got = reader.await.unwrap();
    got.sent = sent;
    got
}

/// The sum of the series of `name` whose labels contain every one of `labels`.
fn metric(scrape: &BTreeMap<String, f64>, name: &str, labels: &[&str]) -> f64 {
    scrape
        .iter()
        .filter(|(k, _)| {
            (k.as_str() == name || k.starts_with(&format!("{name}{{")))
                && labels.iter().all(|l| k.contains(l))
        })
        .map(|(_, v)| v)
        .sum()
}

/// `cluster_dns_rrl_responses_total` of `category` (any when empty) and `action`.
fn limited(scrape: &BTreeMap<String, f64>, category: &str, action: &str) -> f64 {
    let category = format!("category=\"{category}\"");
    let action = format!("action=\"{action}\"");
    let mut labels = vec![action.as_str()];
    if category != "category=\"\"" {
        labels.push(category.as_str());
    }
    metric(scrape, "cluster_dns_rrl_responses_total", &labels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_over_its_rate_gets_slips_and_silence_while_others_are_answered() {
    let options = "  responses-per-second 2\n  window 60\n  slip-ratio 2\n";
    let running = support::start(&corefile(options, HOSTS), &support::temp_dir("rrl")).await;
    let dns = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics listener");

    let noisy = burst(dns, "127.0.0.2", "www.example.org.", 40, 0).await;
    let m = crate::support::scrape(metrics).await;
    let slipped = limited(&m, "responses", "slipped");
    let dropped = limited(&m, "responses", "dropped");
    let over = slipped + dropped;
    assert!(noisy.full >= 2, "its allowance is answered: {noisy:?}");
    assert!(
        over >= 20.0,
        "most of a 40-question burst at 2/s is limited: {noisy:?} {over}"
    );
    assert_eq!(
        noisy.full as f64,
        40.0 - over,
        "every question not limited is answered in full"
    );
    assert_eq!(noisy.slipped as f64, slipped, "every slip counted arrived");
    assert_eq!(
        slipped,
        (over / 2.0).floor(),
        "every 2nd limited answer slips, the rest is silence"
    );

    // Another source has its own account: answered in full.
    let quiet = burst(dns, "127.0.0.3", "www.example.org.", 2, 0).await;
    assert_eq!((quiet.full, quiet.slipped), (2, 0), "{quiet:?}");
    // TCP is never limited, not even for the limited source's name.
    for _ in 0..5 {
        let r = support::tcp(dns, &support::query("www.example.org.", RecordType::A)).await;
        assert_eq!(r.answers.len(), 1);
        assert!(!r.metadata.truncation);
    }
    // Outside its zones nothing is limited.
    let outside = burst(dns, "127.0.0.2", "other.example.net.", 10, 0).await;
    assert_eq!(outside.slipped, 0);
    let m2 = crate::support::scrape(metrics).await;
    assert_eq!(limited(&m2, "", "slipped"), slipped);
    // Two accounts: (127.0.0.2, responses, www A) and (127.0.0.3, ...); none outside its zones.
    assert_eq!(metric(&m2, "cluster_dns_rrl_table_entries", &[]), 2.0);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_stays_within_its_bound_whatever_the_number_of_sources() {
    let options = "  responses-per-second 5\n  max-table-size 50\n";
    let running = support::start(&corefile(options, HOSTS), &support::temp_dir("rrl-table")).await;
    let dns = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    let mut peak = 0.0f64;
    for i in 0..200u32 {
        let from = format!("127.0.{}.{}", 10 + i / 250, 1 + i % 250);
        let got = burst_one(dns, &from).await;
        assert!(
            got,
            "{from} is answered in full (one question, under its allowance)"
        );
        if i % 25 == 24 {
            let m = crate::support::scrape(metrics).await;
            peak = peak.max(metric(&m, "cluster_dns_rrl_table_entries", &[]));
        }
    }
    let m = crate::support::scrape(metrics).await;
    assert!(peak <= 50.0, "the gauge never exceeds max-table-size: {peak}");
    // The gauge is the table's length after each debit: the table holds 50 accounts.
    assert_eq!(metric(&m, "cluster_dns_rrl_table_entries", &[]), 50.0);
    assert_eq!(metric(&m, "cluster_dns_rrl_table_evictions_total", &[]), 150.0);
    running.stop().await.unwrap();
}

/// One question from `from`: true when it was answered in full.
async fn burst_one(dns: SocketAddr, from: &str) -> bool {
    let sock = UdpSocket::bind((from, 0)).await.expect("bind a loopback source");
    let q = support::query("www.example.org.", RecordType::A);
    sock.send_to(&q.to_bytes().unwrap(), dns).await.unwrap();
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(Duration::from_secs(3), sock.recv_from(&mut buf)).await {
        Ok(Ok((n, _))) => {
            let m = Message::from_bytes(&buf[..n]).unwrap();
            !m.metadata.truncation && m.answers.len() == 1
        }
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_only_answers_everything_and_counts() {
    let options = "  responses-per-second 2\n  window 60\n  slip-ratio 2\n  report-only\n";
    let running = support::start(&corefile(options, HOSTS), &support::temp_dir("rrl-report")).await;
    let dns = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    let got = burst(dns, "127.0.0.2", "www.example.org.", 40, 0).await;
    assert_eq!((got.full, got.slipped), (40, 0), "{got:?}");
    let m = crate::support::scrape(metrics).await;
    let reported = limited(&m, "", "reported");
    assert!(reported >= 20.0, "{reported}");
    assert_eq!(limited(&m, "", "dropped"), 0.0);
    assert_eq!(limited(&m, "", "slipped"), 0.0);
    running.stop().await.unwrap();
}

/// `requests-per-second` judges a question before the rest of the chain is asked: a limited
/// question costs no upstream exchange.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limited_requests_never_reach_the_upstream() {
    let upstream = crate::support::upstream::Scripted::start().await;
    let text = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n rrl {{\n  ipv4-prefix-length 32\n  requests-per-second 2\n  window 60\n }}\n forward . {}\n}}\n",
        upstream.addr
    );
    let running = support::start(&text, &support::temp_dir("rrl-requests")).await;
    let dns = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    let got = burst(dns, "127.0.0.2", "www.example.com.", 30, 0).await;
    let m = crate::support::scrape(metrics).await;
    let dropped = limited(&m, "requests", "dropped");
    assert!(got.full >= 2 && dropped >= 15.0, "{got:?} {dropped}");
    assert_eq!(got.slipped, 0, "slip-ratio 0: silence");
    assert_eq!(got.full as f64, 30.0 - dropped);
    // Identical questions in flight share one upstream exchange (forward's coalescing), so
    // the answered ones may have cost fewer; the limited ones cost none.
    let asked = upstream.udp_queries();
    assert!(
        asked >= 1 && asked <= got.full,
        "only questions answered were asked upstream: {asked} exchanges, {got:?}"
    );
    running.stop().await.unwrap();
}

#[test]
fn bad_options_are_refused_at_their_line() {
    let dir = support::temp_dir("rrl-check");
    for (block, want) in [
        ("  slip-ratio 11\n", "Corefile:4: rrl: slip-ratio '11'"),
        ("  window 0\n", "Corefile:4: rrl: window '0'"),
        (
            "  ipv6-prefix-length 129\n",
            "Corefile:4: rrl: ipv6-prefix-length '129'",
        ),
        (
            "  responses-per-second 1\n  responses-per-second 2\n",
            "Corefile:5: rrl: responses-per-second is given twice",
        ),
        (
            "  max-table-size lots\n",
            "Corefile:4: rrl: max-table-size 'lots'",
        ),
        ("  limit 5\n", "Corefile:4: rrl: unknown property 'limit'"),
    ] {
        let text = format!(".:53 {{\n bind 127.0.0.1\n rrl {{\n{block} }}\n}}\n");
        let e = support::check_corefile(&dir, &text).unwrap_err();
        assert!(e.contains(want), "{block:?}: {e}");
    }
    let e = support::check_corefile(&dir, ".:53 {\n rrl\n rrl\n}\n").unwrap_err();
    assert!(e.contains("Corefile:3"), "{e}");
}

/// Amplification (bytes received / bytes sent by one source) of a name with a 30-address
/// answer, for a source that sends 2,000 questions as fast as it can: without `rrl`, and with
/// BIND's recommended `responses-per-second 5`, `slip-ratio 2`. With it the source gets at
/// most what it sends (issue 34: at most 1.0x). Printed for BENCHMARKS.md
/// (`cargo test --test integration -- plugins::rrl::amplification --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amplification_for_a_limited_source_is_at_most_one() {
    let hosts: String = (1..=30)
        .map(|i| format!("  192.0.2.{i} big.example.org\n"))
        .collect();
    let mut ratios = Vec::new();
    for options in [
        "  responses-per-second 0\n",
        "  responses-per-second 5\n  slip-ratio 2\n",
    ] {
        let running = support::start(&corefile(options, &hosts), &support::temp_dir("rrl-amp")).await;
        let dns = running.dns_addrs()[0];
        let metrics = running.http_addr("metrics").expect("/metrics listener");
        let got = burst(dns, "127.0.0.9", "big.example.org.", 2000, 1232).await;
        let m = crate::support::scrape(metrics).await;
        // What the server says it sent (the source's socket may lose replies when they come
        // faster than it reads them; dropped questions are in no size metric).
        let server_out = metric(&m, "coredns_dns_response_size_bytes_sum", &[]);
        let ratio = got.received as f64 / got.sent as f64;
        let server_ratio = server_out / got.sent as f64;
        println!(
            "rrl amplification [{}]: sent {} B, received {} B: {ratio:.3}x ({} full, {} slipped); server sent {server_out} B: {server_ratio:.3}x",
            options.trim().replace('\n', ","),
            got.sent,
            got.received,
            got.full,
            got.slipped,
        );
        ratios.push((ratio, server_ratio));
        running.stop().await.unwrap();
    }
    assert!(ratios[0].1 > 5.0, "the name amplifies without limits: {ratios:?}");
    assert!(
        ratios[1].0 <= 1.0 && ratios[1].1 <= 1.0,
        "limited: at most 1.0x: {ratios:?}"
    );
}

/// The `~~~ corefile` examples of a plugin README.
pub(crate) fn readme_examples(path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap();
    text.split("~~~ corefile\n")
        .skip(1)
        .map(|rest| rest.split("~~~").next().unwrap().to_owned())
        .collect()
}

#[test]
fn readme_examples_pass_check() {
    let examples = readme_examples("src/plugin/rrl/README.md");
    assert_eq!(examples.len(), 2);
    let dir = support::temp_dir("rrl-readme");
    for e in examples {
        support::check_corefile(&dir, &e).unwrap_or_else(|err| panic!("{e}: {err}"));
    }
}
