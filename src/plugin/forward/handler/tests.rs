//! The tests of the `forward` handler (`handler.rs`), on configurations its setup (`setup.rs`)
//! parses: a file of their own, so that the handler itself never imports the setup.

use std::net::Ipv4Addr;
use std::path::Path;

use hickory_proto::op::MessageType;
use hickory_proto::rr::RData;
use hickory_proto::rr::Record;
use hickory_proto::rr::rdata::A;
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use prometheus::Registry;
use tokio::net::UdpSocket;

use super::*;
use crate::plugin::forward::setup;
use crate::telemetry::render_registry as render;

fn forward(text: &str) -> Forward {
    let cf = crate::corefile::Corefile::parse_str(&format!(".:53 {{\n{text}\n}}\n"), Path::new("Corefile"))
        .unwrap();
    Forward::new(&setup::parse(&cf.blocks[0].directives[0], Path::new("/")).unwrap())
}

/// A loopback upstream: answers `nx.*` NXDOMAIN and everything else one A record, `count`
/// times, then stops.
async fn upstream(count: usize) -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        for _ in 0..count {
            let (n, from) = sock.recv_from(&mut buf).await.unwrap();
            let query = Message::from_bytes(&buf[..n]).unwrap();
            let mut reply = query.clone();
            reply.metadata.message_type = MessageType::Response;
            let name = query.queries[0].name().clone();
            if name.to_ascii().starts_with("nx.") {
                reply.metadata.response_code = ResponseCode::NXDomain;
            } else {
                reply.add_answer(Record::from_rdata(
                    name,
                    60,
                    RData::A(A(Ipv4Addr::new(192, 0, 2, 7))),
                ));
            }
            sock.send_to(&reply.to_bytes().unwrap(), from).await.unwrap();
        }
    });
    addr
}

fn has(text: &str, want: &str) {
    assert!(text.contains(want), "missing {want} in\n{text}");
}

/// Each UDP question in flight holds `Forward::forward`'s future: with the TLS, HTTPS and TCP
/// exchanges boxed inside it, it stays small whatever transports forward knows. Inline, they
/// made it 9.6 KiB in the debug build (about 96 MiB at the default `max_concurrent`).
#[test]
fn a_question_in_flight_holds_a_small_future() {
    let f = forward("forward . 127.0.0.1:53 tls://127.0.0.1:853 https://127.0.0.1/dns-query");
    let q = Question::new(Name::from_ascii("a.example.").unwrap(), RecordType::A);
    let size = std::mem::size_of_val(&Forward::forward(&f, &q));
    assert!(size < 3 * 1024, "Forward::forward's future is {size} bytes");
}

#[tokio::test]
async fn over_max_concurrent_is_refused_and_counted() {
    // An upstream that never answers keeps the first query in flight.
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let f = forward(&format!(
        "forward . {addr} {{\n max_concurrent 1\n read_timeout 100ms\n}}"
    ));
    let q = Question::new(Name::from_ascii("a.example.").unwrap(), RecordType::A);
    let first = {
        let (f, q) = (f.clone(), q.clone());
        tokio::spawn(async move { f.forward(&q).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Another name is over max_concurrent (the same one would wait for the first's reply).
    let other = Question::new(Name::from_ascii("b.example.").unwrap(), RecordType::A);
    assert_eq!(
        f.forward(&other).await,
        Reply::Failed(crate::proto::Failure {
            rcode: ResponseCode::Refused,
            reason: crate::plugin::forward::TOO_MANY_IN_FLIGHT
        })
    );
    assert_eq!(f.stats().max_concurrent_rejects.load(Ordering::Relaxed), 1);
    assert_eq!(
        first.await.unwrap(),
        Reply::Failed(crate::proto::Failure {
            rcode: ResponseCode::ServFail,
            reason: crate::plugin::forward::NO_REPLY_IN_TIME
        })
    );
    // The permit is back: the next query is tried again (and fails again), not refused.
    assert_eq!(
        f.forward(&q).await,
        Reply::Failed(crate::proto::Failure {
            rcode: ResponseCode::ServFail,
            reason: crate::plugin::forward::NO_REPLY_IN_TIME
        })
    );
    assert_eq!(f.stats().max_concurrent_rejects.load(Ordering::Relaxed), 1);
}

#[test]
fn handles_from_and_except() {
    let f = forward("forward example.org 127.0.0.1 {\n except internal.example.org\n}");
    let n = |s: &str| Name::from_ascii(s).unwrap();
    assert!(f.handles(&n("www.EXAMPLE.org.")));
    assert!(!f.handles(&n("a.internal.example.org.")));
    assert!(!f.handles(&n("example.com.")));
}

/// An upstream whose port is closed answers with ICMP port unreachable: on the connected
/// UDP socket that is ECONNREFUSED, so the question fails at once with the "refused" reason,
/// not after the 2 s read timeout (the reason says which path was taken). Before the socket
/// was connected the error never reached it and the question waited for the timeout.
#[tokio::test]
async fn a_closed_upstream_port_fails_without_a_timeout() {
    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let f = forward(&format!("forward . {addr}"));
    let q = Question::new(Name::from_ascii("a.example.").unwrap(), RecordType::A);
    assert_eq!(
        f.forward(&q).await,
        Reply::Failed(Failure {
            rcode: ResponseCode::ServFail,
            reason: NO_REPLY_REFUSED
        })
    );
    assert_eq!(
        f.stats().attempts.load(Ordering::Relaxed),
        1,
        "a refusing upstream is asked once"
    );
}

/// One silent upstream is asked again while the budget lasts (CoreDNS's forward does the
/// same): with `read_timeout 100ms`, more than one attempt, all within the attempt bound.
#[tokio::test]
async fn a_silent_upstream_is_retried_within_the_budget() {
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let f = forward(&format!("forward . {addr} {{\n read_timeout 100ms\n}}"));
    let q = Question::new(Name::from_ascii("a.example.").unwrap(), RecordType::A);
    assert_eq!(
        f.forward(&q).await,
        Reply::Failed(Failure {
            rcode: ResponseCode::ServFail,
            reason: NO_REPLY_IN_TIME
        })
    );
    let attempts = f.stats().attempts.load(Ordering::Relaxed);
    assert!(
        (2..=MAX_ATTEMPTS as u64).contains(&attempts),
        "{attempts} attempts"
    );
}

/// Three questions in turn: one new UDP socket, reused for the next two (its pool keeps it
/// idle in between).
#[tokio::test]
async fn exchanges_are_timed_and_counted_per_upstream_and_rcode() {
    let r = Registry::new();
    let m = ForwardMetrics::register(&r).unwrap();
    let up = upstream(3).await;
    let f = forward(&format!("forward . {up}")).with_metrics(m, "dns://:53");
    let ask = |name: &str| Question::new(Name::from_ascii(name).unwrap(), RecordType::A);
    for name in ["a.example.", "b.example.", "nx.example."] {
        assert!(matches!(f.forward(&ask(name)).await, Reply::Forwarded(_)));
    }
    let text = render(&r);
    let to = up.to_string();
    for want in [
        format!(
            "coredns_proxy_request_duration_seconds_count{{proxy_name=\"forward\",rcode=\"NOERROR\",to=\"{to}\"}} 2"
        ),
        format!(
            "coredns_proxy_request_duration_seconds_count{{proxy_name=\"forward\",rcode=\"NXDOMAIN\",to=\"{to}\"}} 1"
        ),
        format!(
            "coredns_proxy_request_duration_seconds_bucket{{proxy_name=\"forward\",rcode=\"NOERROR\",to=\"{to}\",le=\"+Inf\"}} 2"
        ),
        format!(
            "coredns_proxy_conn_cache_misses_total{{proto=\"udp\",proxy_name=\"forward\",to=\"{to}\"}} 1"
        ),
        format!(
            "coredns_proxy_conn_cache_misses_total{{proto=\"tcp\",proxy_name=\"forward\",to=\"{to}\"}} 0"
        ),
        format!("coredns_proxy_conn_cache_hits_total{{proto=\"udp\",proxy_name=\"forward\",to=\"{to}\"}} 2"),
        format!("coredns_proxy_healthcheck_failures_total{{proxy_name=\"forward\",to=\"{to}\"}} 0"),
        format!("cluster_dns_forward_udp_idle_sockets{{to=\"{to}\"}} 1"),
        "# TYPE coredns_proxy_request_duration_seconds histogram".to_owned(),
        "coredns_forward_healthcheck_broken_total 0".to_owned(),
    ] {
        has(&text, &want);
    }
}

/// Identical questions in flight at once share one exchange: the upstream sees one query,
/// every asker gets its reply, and the followers are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_questions_in_flight_share_one_exchange() {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 512];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            counter.fetch_add(1, Ordering::Relaxed);
            // Answer after 300 ms, NXDOMAIN with the query's ID and question.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let mut reply = buf[..n].to_vec();
            reply[2] |= 0x80;
            reply[3] = (reply[3] & 0xf0) | 3;
            let _ = sock.send_to(&reply, from).await;
        }
    });
    let f = forward(&format!("forward . {addr}"));
    let q = Question::new(Name::from_ascii("same.example.").unwrap(), RecordType::A);
    let asks: Vec<_> = (0..20)
        .map(|_| {
            let (f, q) = (f.clone(), q.clone());
            tokio::spawn(async move { f.forward(&q).await })
        })
        .collect();
    for a in asks {
        assert_eq!(a.await.unwrap().rcode(), ResponseCode::NXDomain);
    }
    assert_eq!(
        seen.load(Ordering::Relaxed),
        1,
        "one exchange for 20 identical questions"
    );
    assert_eq!(f.stats().coalesced.load(Ordering::Relaxed), 19);
    // Once answered, the next one asks again.
    assert_eq!(f.forward(&q).await.rcode(), ResponseCode::NXDomain);
    assert_eq!(seen.load(Ordering::Relaxed), 2);
}

#[tokio::test]
async fn rejects_broken_health_and_failed_probes() {
    let r = Registry::new();
    let m = ForwardMetrics::register(&r).unwrap();
    // An upstream that never answers: every attempt times out.
    let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let f = forward(&format!(
        "forward . {addr} {{\n max_concurrent 1\n read_timeout 100ms\n max_fails 1\n health_check 50ms\n}}"
    ))
    .with_metrics(m, "dns://:53");
    let q = Question::new(Name::from_ascii("a.example.").unwrap(), RecordType::A);
    // The first query fails (SERVFAIL) and marks the upstream down; a probe starts.
    assert_eq!(
        f.forward(&q).await,
        Reply::Failed(crate::proto::Failure {
            rcode: ResponseCode::ServFail,
            reason: crate::plugin::forward::NO_REPLY_IN_TIME
        })
    );
    assert!(f.upstreams()[0].is_down());
    // With every upstream down, the next query is sprayed at it anyway: health check broken.
    let second = {
        let (f, q) = (f.clone(), q.clone());
        tokio::spawn(async move { f.forward(&q).await })
    };
    // While that one is in flight, a third is over max_concurrent. (The test runtime has one
    // thread: after a yield the second query has taken its permit and waits for the reply.)
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    let other = Question::new(Name::from_ascii("b.example.").unwrap(), RecordType::A);
    assert_eq!(
        f.forward(&other).await,
        Reply::Failed(crate::proto::Failure {
            rcode: ResponseCode::Refused,
            reason: crate::plugin::forward::TOO_MANY_IN_FLIGHT
        })
    );
    assert_eq!(
        second.await.unwrap(),
        Reply::Failed(crate::proto::Failure {
            rcode: ResponseCode::ServFail,
            reason: crate::plugin::forward::NO_REPLY_IN_TIME
        })
    );
    // The probe (every 50 ms, 1 s timeout each) fails at least once while nobody answers.
    for _ in 0..400 {
        if f.stats().healthcheck_failures.load(Ordering::Relaxed) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text = render(&r);
    let to = addr.to_string();
    // Every attempt of both failed queries (a silent upstream is retried within the budget)
    // is one exchange; the refused one made none.
    let attempts = f.stats().attempts.load(Ordering::Relaxed);
    assert!(attempts >= 4, "{attempts}");
    for want in [
        "coredns_forward_max_concurrent_rejects_total 1".to_owned(),
        "coredns_forward_healthcheck_broken_total 1".to_owned(),
        format!(
            "coredns_proxy_conn_cache_misses_total{{proto=\"udp\",proxy_name=\"forward\",to=\"{to}\"}} {attempts}"
        ),
    ] {
        has(&text, &want);
    }
    // The probe keeps failing in the background: at least one failure is counted.
    let series = format!("coredns_proxy_healthcheck_failures_total{{proxy_name=\"forward\",to=\"{to}\"}} ");
    let failures: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("missing {series} in\n{text}"));
    assert!(failures >= 1, "{text}");
    // No reply, no duration sample.
    assert!(!text.contains("coredns_proxy_request_duration_seconds_count"));
}
