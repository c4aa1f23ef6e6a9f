//! Forwarding, caching, loop detection and load balancing, end to end: the real server on
//! loopback forwarding to real DNS servers on loopback (the scripted upstream of
//! [`crate::support::upstream`] for the faults it can stage, and Debian's `unbound` so forwarding is
//! proven against software nobody here wrote).
//!
//! Time bounds are generous and only check "within the deadline" behaviour.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, RecordType};

use crate::support::upstream::{Mode, SPOOFED_IP, Scripted, Unbound};
use crate::support::{self, show};

/// The ExternalName services the chase tests use, besides the conformance fixture's.
const EXT_YAML: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: testns\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: ext\n  namespace: testns\nspec:\n  type: ExternalName\n  externalName: www.example.com\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: ext-nx\n  namespace: testns\nspec:\n  type: ExternalName\n  externalName: nx.example.com\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: gone\n  namespace: testns\nspec:\n  type: ClusterIP\n  clusterIP: 10.96.50.50\n  ports:\n  - name: http\n    port: 80\n    protocol: TCP\n";

/// Starts the server with one `.` block: a `kubernetes` stanza over [`EXT_YAML`] (ttl `k8s_ttl`)
/// and `extra` (forward/cache/...) lines.
async fn start(tag: &str, k8s_ttl: u32, extra: &str) -> (cluster_dns::app::Running, SocketAddr) {
    let dir = support::temp_dir(tag);
    std::fs::write(dir.join("cluster.yaml"), EXT_YAML).unwrap();
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local in-addr.arpa ip6.arpa {{\n  manifests cluster.yaml\n  pods insecure\n  fallthrough in-addr.arpa ip6.arpa\n  ttl {k8s_ttl}\n }}\n {extra}\n}}\n"
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    (running, addr)
}

async fn ask(addr: SocketAddr, name: &str, qtype: RecordType) -> Message {
    support::udp(addr, &support::query_edns(name, qtype, 1232))
        .await
        .0
}

/// Asks over UDP and waits up to 8 s (longer than any deadline under test).
async fn ask_slow(addr: SocketAddr, name: &str) -> (Option<Message>, Duration) {
    let t = Instant::now();
    let bytes = {
        use hickory_proto::serialize::binary::BinEncodable;
        support::query_edns(name, RecordType::A, 1232).to_bytes().unwrap()
    };
    let reply = support::udp_raw(addr, &bytes, Duration::from_secs(8)).await;
    let msg = reply.map(|r| {
        use hickory_proto::serialize::binary::BinDecodable;
        Message::from_bytes(&r).unwrap()
    });
    (msg, t.elapsed())
}

fn a_records(m: &Message) -> Vec<String> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn forwards_with_upstream_flags_and_cluster_answers_stay_authoritative() {
    let up = Scripted::start().await;
    let (running, addr) = start("fwd-basic", 30, &format!("forward . {}", up.addr)).await;
    let m = ask(addr, "WwW.Example.COM.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_eq!(a_records(&m), ["192.0.2.1"]);
    assert!(m.metadata.recursion_available, "RA from upstream");
    assert!(
        !m.metadata.authoritative,
        "forwarded answers are not authoritative"
    );
    assert_eq!(
        m.queries[0].name().to_ascii(),
        "WwW.Example.COM.",
        "question case echoed"
    );
    let m = ask(addr, "nx1.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(m.authorities.len(), 1);
    // Cluster names never reach the upstream and keep AA=1, RA=0.
    let before = up.udp_queries();
    let m = ask(addr, "gone.testns.svc.cluster.local.", RecordType::A).await;
    assert!(m.metadata.authoritative && !m.metadata.recursion_available);
    assert_eq!(a_records(&m), ["10.96.50.50"]);
    assert_eq!(up.udp_queries(), before);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn slow_upstream_times_out_and_the_next_one_answers() {
    let slow = Scripted::start().await;
    slow.set_mode(Mode::Slow(Duration::from_secs(4)));
    let good = Scripted::start().await;
    good.set_octet(2);
    let (running, addr) = start(
        "fwd-slow",
        30,
        &format!(
            "forward . {} {} {{\n policy sequential\n }}",
            slow.addr, good.addr
        ),
    )
    .await;
    let (m, took) = ask_slow(addr, "www.example.com.").await;
    let m = m.expect("an answer");
    assert_eq!(a_records(&m), ["192.0.2.2"]);
    // The slow one had its 2 s, then the next one answered: well within the client's 5 s.
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(4500),
        "{took:?}"
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn all_upstreams_dead_gives_servfail_within_the_deadline() {
    let a = Scripted::start().await;
    let b = Scripted::start().await;
    a.set_mode(Mode::Drop);
    b.set_mode(Mode::Drop);
    let (running, addr) = start("fwd-dead", 30, &format!("forward . {} {}", a.addr, b.addr)).await;
    let (m, took) = ask_slow(addr, "www.example.com.").await;
    let m = m.expect("SERVFAIL, not silence");
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(a.udp_queries() >= 1 && b.udp_queries() >= 1, "both were tried");
    running.stop().await.unwrap();
}

/// Three scripted upstreams: the first two answering `first` and `second`, the third answering
/// 192.0.2.3.
async fn three_upstreams(first: ResponseCode, second: ResponseCode) -> [Scripted; 3] {
    let ups = [
        Scripted::start().await,
        Scripted::start().await,
        Scripted::start().await,
    ];
    ups[0].set_mode(Mode::Rcode(first));
    ups[1].set_mode(Mode::Rcode(second));
    ups[2].set_octet(3);
    ups
}

/// The UDP questions each of `ups` got.
fn asked(ups: &[Scripted; 3]) -> [usize; 3] {
    [ups[0].udp_queries(), ups[1].udp_queries(), ups[2].udp_queries()]
}

#[tokio::test]
async fn failover_rcodes_move_on_to_the_next_upstream() {
    // The README's example: SERVFAIL or REFUSED from 1.2.3.4 tries 5.6.7.8, then 9.0.1.2.
    let ups = three_upstreams(ResponseCode::ServFail, ResponseCode::Refused).await;
    let [a, b, c] = &ups;
    let (running, addr) = start(
        "fwd-failover",
        30,
        &format!(
            "forward . {} {} {} {{\n policy sequential\n failover SERVFAIL REFUSED\n }}",
            a.addr, b.addr, c.addr
        ),
    )
    .await;
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{m:?}");
    assert_eq!(a_records(&m), ["192.0.2.3"]);
    assert_eq!(asked(&ups), [1, 1, 1]);
    // An rcode not listed is returned as it is.
    a.set_mode(Mode::Rcode(ResponseCode::NotImp));
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NotImp);
    assert_eq!(asked(&ups), [2, 1, 1]);
    // All three answer a failover rcode: the last reply is returned.
    a.set_mode(Mode::Rcode(ResponseCode::ServFail));
    c.set_mode(Mode::Rcode(ResponseCode::Refused));
    b.set_mode(Mode::Rcode(ResponseCode::ServFail));
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::Refused, "{m:?}");
    assert_eq!(asked(&ups), [3, 2, 2]);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn next_rcodes_go_to_the_following_forward() {
    // The README's example: NXDOMAIN from the first goes to the second, then to the third.
    let ups = three_upstreams(ResponseCode::NXDomain, ResponseCode::NXDomain).await;
    let [a, b, c] = &ups;
    let (running, addr) = start(
        "fwd-next",
        30,
        &format!(
            "forward . {} {{\n next NXDOMAIN\n }}\n forward . {} {{\n next NXDOMAIN\n }}\n forward . {} {{\n }}",
            a.addr, b.addr, c.addr
        ),
    )
    .await;
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{m:?}");
    assert_eq!(a_records(&m), ["192.0.2.3"]);
    assert_eq!(asked(&ups), [1, 1, 1]);
    // An rcode not listed is the answer; the first answering normally is too.
    b.set_mode(Mode::Rcode(ResponseCode::ServFail));
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert_eq!(asked(&ups), [2, 2, 1]);
    a.set_mode(Mode::Answer);
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(a_records(&m), ["192.0.2.1"]);
    assert_eq!(asked(&ups), [3, 2, 1]);
    running.stop().await.unwrap();
    // Followed by a plugin that is not `forward` (whoami), `next` is ignored, as in CoreDNS.
    a.set_mode(Mode::Rcode(ResponseCode::NXDomain));
    let (running, addr) = start(
        "fwd-next-last",
        30,
        &format!("forward . {} {{\n next NXDOMAIN\n }}\n whoami", a.addr),
    )
    .await;
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain, "{m:?}");
    assert!(m.additionals.is_empty() && m.answers.is_empty(), "{m:?}");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn max_connect_attempts_caps_the_failed_attempts() {
    let (a, b) = (Scripted::start().await, Scripted::start().await);
    a.set_mode(Mode::Drop);
    b.set_mode(Mode::Drop);
    let (running, addr) = start(
        "fwd-max-connect",
        30,
        &format!("forward . {} {} {{\n max_connect_attempts 1\n }}", a.addr, b.addr),
    )
    .await;
    let (m, took) = ask_slow(addr, "www.example.com.").await;
    assert_eq!(
        m.expect("SERVFAIL").metadata.response_code,
        ResponseCode::ServFail
    );
    assert!(took >= Duration::from_millis(1900), "one read_timeout: {took:?}");
    assert_eq!(a.udp_queries() + b.udp_queries(), 1, "one attempt only");
    running.stop().await.unwrap();
    // The default: twice the upstreams, so a silent single upstream is asked twice.
    let (running, addr) = start("fwd-max-connect-default", 30, &format!("forward . {}", a.addr)).await;
    let before = a.udp_queries();
    let (m, _) = ask_slow(addr, "www.example.com.").await;
    assert_eq!(
        m.expect("SERVFAIL").metadata.response_code,
        ResponseCode::ServFail
    );
    assert_eq!(a.udp_queries() - before, 2);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn source_address_binds_the_outgoing_sockets() {
    let up = Scripted::start().await;
    let (running, addr) = start(
        "fwd-source",
        30,
        &format!("forward . {} {{\n source_address 127.0.0.2\n }}", up.addr),
    )
    .await;
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(a_records(&m), ["192.0.2.1"]);
    // Over TCP too (the client's transport is the upstream's).
    let m = support::tcp(addr, &support::query("big.example.com.", RecordType::A)).await;
    assert_eq!(m.answers.len(), 100);
    let local = std::net::IpAddr::from([127, 0, 0, 2]);
    assert_eq!((up.udp_queries(), up.tcp_queries()), (1, 1));
    assert_eq!(up.sources(), [local, local]);
    running.stop().await.unwrap();
    // Without it the kernel picks 127.0.0.1 for a loopback upstream.
    let (running, addr) = start("fwd-source-default", 30, &format!("forward . {}", up.addr)).await;
    let _ = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(up.sources().last(), Some(&std::net::IpAddr::from([127, 0, 0, 1])));
    running.stop().await.unwrap();
}

#[tokio::test]
async fn dead_upstream_is_marked_down_probed_and_taken_back() {
    let dead = Scripted::start().await;
    dead.set_mode(Mode::Drop);
    let good = Scripted::start().await;
    good.set_octet(2);
    let (running, addr) = start(
        "fwd-health",
        30,
        &format!(
            "forward . {} {} {{\n policy sequential\n max_fails 2\n health_check 100ms\n read_timeout 300ms\n }}",
            dead.addr, good.addr
        ),
    )
    .await;
    // Two failures in a row mark it down.
    for i in 0..2 {
        let m = ask(addr, &format!("q{i}.example.com."), RecordType::A).await;
        assert_eq!(a_records(&m), ["192.0.2.2"]);
    }
    // Now traffic goes to the good one at once (no 300 ms wait on the dead one).
    let t = Instant::now();
    for i in 2..6 {
        let m = ask(addr, &format!("q{i}.example.com."), RecordType::A).await;
        assert_eq!(a_records(&m), ["192.0.2.2"]);
    }
    assert!(t.elapsed() < Duration::from_millis(1000), "{:?}", t.elapsed());
    // It comes back: the background probe sees it answer, and sequential order prefers it.
    dead.set_mode(Mode::Answer);
    let mut back = false;
    for i in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let m = ask(addr, &format!("r{i}.example.com."), RecordType::A).await;
        if a_records(&m) == ["192.0.2.1"] {
            back = true;
            break;
        }
    }
    assert!(back, "the recovered upstream was taken back");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn truncated_udp_reply_is_retried_over_tcp() {
    let up = Scripted::start().await;
    let (running, addr) = start("fwd-tc", 30, &format!("forward . {}", up.addr)).await;
    // Client over TCP: all 100 records, fetched from upstream over TCP after a TC reply.
    let m = support::tcp(addr, &support::query("big.example.com.", RecordType::A)).await;
    assert_eq!(m.answers.len(), 100);
    assert!(up.tcp_queries() >= 1);
    // Client over UDP: our own 1232-byte limit applies, with TC.
    let (m, len) = support::udp(
        addr,
        &support::query_edns("big.example.com.", RecordType::A, 4096),
    )
    .await;
    assert!(
        m.metadata.truncation && m.answers.len() < 100 && len <= 1232,
        "{len}"
    );
    let (m, len) = support::udp(addr, &support::query("big.example.com.", RecordType::A)).await;
    assert!(m.metadata.truncation && len <= 512, "{len}");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn spoofed_replies_are_ignored() {
    let up = Scripted::start().await;
    up.set_mode(Mode::Spoof);
    let (running, addr) = start("fwd-spoof", 30, &format!("forward . {}", up.addr)).await;
    for i in 0..5 {
        let m = ask(addr, &format!("s{i}.example.com."), RecordType::A).await;
        assert_eq!(a_records(&m), ["192.0.2.1"], "the real answer, not {SPOOFED_IP}");
    }
    running.stop().await.unwrap();
}

#[tokio::test]
async fn over_max_concurrent_is_refused_at_once() {
    let up = Scripted::start().await;
    up.set_mode(Mode::Slow(Duration::from_millis(1500)));
    let (running, addr) = start(
        "fwd-maxc",
        30,
        &format!("forward . {} {{\n max_concurrent 2\n }}", up.addr),
    )
    .await;
    let mut tasks = Vec::new();
    for i in 0..6 {
        tasks.push(tokio::spawn(async move {
            // Stagger a little so the first two are in flight.
            tokio::time::sleep(Duration::from_millis(if i < 2 { 0 } else { 200 })).await;
            let t = Instant::now();
            let (m, _) = ask_slow(addr, &format!("c{i}.example.com.")).await;
            (m.unwrap().metadata.response_code, t.elapsed())
        }));
    }
    let mut refused = 0;
    let mut answered = 0;
    for t in tasks {
        let (rcode, took) = t.await.unwrap();
        match rcode {
            ResponseCode::Refused => {
                refused += 1;
                assert!(
                    took < Duration::from_millis(1000),
                    "REFUSED at once, took {took:?}"
                );
            }
            ResponseCode::NoError => answered += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((answered, refused), (2, 4));
    running.stop().await.unwrap();
}

#[tokio::test]
async fn nxdomain_is_cached_then_expires() {
    let up = Scripted::start().await;
    let (running, addr) = start(
        "fwd-neg",
        30,
        &format!("forward . {}\n cache 30 {{\n denial 100 30 1\n }}", up.addr),
    )
    .await;
    let m = ask(addr, "nxcache.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    let n = up.udp_queries();
    let m = ask(addr, "nxcache.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(up.udp_queries(), n, "served from the cache");
    // The same request again: replayed from the answer memo, which holds the cache's hit.
    let m = ask(addr, "nxcache.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(up.udp_queries(), n);
    assert_eq!(running.memoized(), 1, "the cache's hit was not memoized");
    // SOA TTL and MINIMUM are 2 s: after that the upstream is asked again (the memo's copy
    // expired with the cache's entry).
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let m = ask(addr, "nxcache.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(up.udp_queries(), n + 1);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn cache_ttl_counts_down_and_respects_do_bit() {
    let up = Scripted::start().await;
    let (running, addr) = start("fwd-ttl", 30, &format!("forward . {}\n cache 30", up.addr)).await;
    let m = ask(addr, "ttl.example.com.", RecordType::A).await;
    assert_eq!(m.answers[0].ttl, 30, "upstream 300 capped at 30");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let m = ask(addr, "ttl.example.com.", RecordType::A).await;
    assert!((27..=28).contains(&m.answers[0].ttl), "{}", m.answers[0].ttl);
    assert_eq!(up.udp_queries(), 1);
    // Replayed from the answer memo from now on, its TTL still counted down.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again = ask(addr, "ttl.example.com.", RecordType::A).await;
    assert_eq!(running.memoized(), 1, "the cache's hit was not memoized");
    assert!(
        again.answers[0].ttl < m.answers[0].ttl,
        "{}",
        again.answers[0].ttl
    );
    assert_eq!(up.udp_queries(), 1);
    // A DO query is another cache key.
    let mut q = support::query_edns("ttl.example.com.", RecordType::A, 1232);
    if let Some(e) = q.edns.as_mut() {
        e.set_dnssec_ok(true);
    }
    support::udp(addr, &q).await;
    assert_eq!(up.udp_queries(), 2);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn serve_stale_after_upstream_death() {
    let up = Scripted::start().await;
    up.set_ttl(1);
    let (running, addr) = start(
        "fwd-stale",
        30,
        &format!(
            "forward . {}\n cache 30 {{\n success 100 30 1\n serve_stale 1h\n }}",
            up.addr
        ),
    )
    .await;
    let m = ask(addr, "stale.example.com.", RecordType::A).await;
    assert_eq!(a_records(&m), ["192.0.2.1"]);
    up.set_mode(Mode::Drop);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    // Expired: the upstream is tried first, then the stale answer comes with a 30 s TTL.
    let (m, took) = ask_slow(addr, "stale.example.com.").await;
    let m = m.expect("stale answer");
    assert_eq!(a_records(&m), ["192.0.2.1"]);
    assert_eq!(m.answers[0].ttl, 30);
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(5),
        "{took:?}"
    );
    running.stop().await.unwrap();
}

/// `serve_stale`'s values after the mode, as CoreDNS 1.14.7 reads them: `immediate` with a
/// RESPONSE_TTL answers stale at once with that TTL and refreshes once however many hits come;
/// `verify` with a VERIFY_TIMEOUT waits that long for the upstream. (The old parser read
/// `verify 300ms 5s` as a stale window of 5 s.)
#[tokio::test]
async fn serve_stale_modes_response_ttl_and_one_refresh_at_a_time() {
    let up = Scripted::start().await;
    up.set_ttl(1);
    let (running, addr) = start(
        "fwd-stale-immediate",
        30,
        &format!(
            "forward . {}\n cache 30 {{\n success 100 30 1\n serve_stale 1h immediate 7s 1m\n }}",
            up.addr
        ),
    )
    .await;
    assert_eq!(
        a_records(&ask(addr, "imm.example.com.", RecordType::A).await),
        ["192.0.2.1"]
    );
    tokio::time::sleep(Duration::from_millis(1300)).await;
    up.set_octet(9);
    up.set_mode(Mode::Slow(Duration::from_millis(800)));
    // Expired: two hits both get the stale answer with the configured TTL, without waiting for
    // the upstream (which would have given 192.0.2.9).
    for _ in 0..2 {
        let m = ask(addr, "imm.example.com.", RecordType::A).await;
        assert_eq!(a_records(&m), ["192.0.2.1"]);
        assert_eq!(m.answers[0].ttl, 7);
    }
    let mut fresh = None;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let m = ask(addr, "imm.example.com.", RecordType::A).await;
        if a_records(&m) == ["192.0.2.9"] {
            fresh = Some(m);
            break;
        }
    }
    assert!(fresh.is_some(), "the background refresh stored the new answer");
    assert_eq!(up.udp_queries(), 2, "one refresh for all the stale hits");
    running.stop().await.unwrap();

    let up = Scripted::start().await;
    up.set_ttl(1);
    let (running, addr) = start(
        "fwd-stale-verify",
        30,
        &format!(
            "forward . {}\n cache 30 {{\n success 100 30 1\n serve_stale 1h verify 300ms 5s\n }}",
            up.addr
        ),
    )
    .await;
    for name in ["ver.example.com.", "fast.example.com."] {
        assert_eq!(a_records(&ask(addr, name, RecordType::A).await), ["192.0.2.1"]);
    }
    tokio::time::sleep(Duration::from_millis(1300)).await;
    // Both expired. An upstream that answers within the timer gives the hit that waits the
    // fresh answer.
    up.set_octet(10);
    let m = ask(addr, "fast.example.com.", RecordType::A).await;
    assert_eq!(a_records(&m), ["192.0.2.10"]);
    // One that does not: the upstream is waited for 300 ms, then the stale answer goes out
    // with a 5 s TTL.
    up.set_octet(9);
    up.set_mode(Mode::Slow(Duration::from_secs(2)));
    let (m, took) = ask_slow(addr, "ver.example.com.").await;
    let m = m.expect("stale answer");
    assert_eq!(a_records(&m), ["192.0.2.1"]);
    assert_eq!(m.answers[0].ttl, 5);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    running.stop().await.unwrap();
}

/// `serve_stale_policy prefer_positive` (CoreDNS 1.14.7): once a name had a positive answer,
/// an NXDOMAIN from the upstream does not replace it while it is within the stale window (in
/// `immediate` mode and in `verify` mode, where only a positive refresh replaces it); a
/// positive refresh does. Without the policy the same sequence gives NXDOMAIN, so the test can
/// tell the two apart.
#[tokio::test]
async fn serve_stale_policy_prefer_positive_keeps_the_last_good_answer() {
    for (mode, policy) in [("immediate", true), ("verify 300ms", true), ("immediate", false)] {
        let up = Scripted::start().await;
        up.set_ttl(1);
        let policy_line = if policy {
            " serve_stale_policy prefer_positive\n"
        } else {
            ""
        };
        let (running, addr) = start(
            "fwd-prefer-positive",
            30,
            &format!(
                "forward . {}\n cache 30 {{\n success 100 30 1\n denial 100 30 1\n serve_stale 1h {mode}\n{policy_line} }}",
                up.addr
            ),
        )
        .await;
        let name = "kept.example.com.";
        assert_eq!(a_records(&ask(addr, name, RecordType::A).await), ["192.0.2.1"]);
        tokio::time::sleep(Duration::from_millis(1300)).await;
        up.set_mode(Mode::Rcode(ResponseCode::NXDomain));
        let first = ask(addr, name, RecordType::A).await;
        assert_eq!(a_records(&first), ["192.0.2.1"], "{mode}: stale at first");
        // The refresh has brought the NXDOMAIN by now (immediate: in the background).
        tokio::time::sleep(Duration::from_millis(500)).await;
        let second = ask(addr, name, RecordType::A).await;
        if policy {
            assert_eq!(second.metadata.response_code, ResponseCode::NoError, "{mode}");
            assert_eq!(
                a_records(&second),
                ["192.0.2.1"],
                "{mode}: the positive answer kept"
            );
            // A positive refresh replaces it.
            up.set_octet(7);
            up.set_mode(Mode::Answer);
            let mut replaced = false;
            for _ in 0..30 {
                if a_records(&ask(addr, name, RecordType::A).await) == ["192.0.2.7"] {
                    replaced = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(replaced, "{mode}: a positive refresh replaces the kept answer");
        } else {
            assert_eq!(
                second.metadata.response_code,
                ResponseCode::NXDomain,
                "without the policy"
            );
        }
        running.stop().await.unwrap();
    }
}

#[tokio::test]
async fn prefetch_refreshes_a_popular_name() {
    let up = Scripted::start().await;
    up.set_ttl(3);
    let (running, addr) = start(
        "fwd-prefetch",
        30,
        &format!(
            "forward . {}\n cache 30 {{\n success 100 30 1\n prefetch 2 1m 50%\n }}",
            up.addr
        ),
    )
    .await;
    ask(addr, "pop.example.com.", RecordType::A).await;
    ask(addr, "pop.example.com.", RecordType::A).await;
    assert_eq!(up.udp_queries(), 1);
    up.set_octet(9);
    // Past half of the 3 s TTL, a hit starts a background refresh; the client still gets the
    // cached answer at once.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let m = ask(addr, "pop.example.com.", RecordType::A).await;
    assert_eq!(a_records(&m), ["192.0.2.1"]);
    let mut refreshed = false;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if up.udp_queries() == 2 {
            refreshed = true;
            break;
        }
    }
    assert!(refreshed, "prefetch asked the upstream");
    // After the first entry's expiry, the refreshed one answers without another upstream query.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let m = ask(addr, "pop.example.com.", RecordType::A).await;
    assert_eq!(a_records(&m), ["192.0.2.9"]);
    assert_eq!(up.udp_queries(), 2);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn cluster_answers_are_never_stale_past_their_ttl() {
    let up = Scripted::start().await;
    // The kubeadm shape of old: a bare `cache 30` in front of a `ttl 2` cluster zone.
    let (running, addr) = start("fwd-k8s-cache", 2, &format!("forward . {}\n cache 30", up.addr)).await;
    let m = ask(addr, "gone.testns.svc.cluster.local.", RecordType::A).await;
    assert_eq!(a_records(&m), ["10.96.50.50"]);
    assert!(m.metadata.authoritative);
    support::zone(&running).delete_service("testns", "gone");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let m = ask(addr, "gone.testns.svc.cluster.local.", RecordType::A).await;
    assert_eq!(
        m.metadata.response_code,
        ResponseCode::NXDomain,
        "{:?}",
        m.answers
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn externalname_is_chased_through_forward_with_the_targets_rcode() {
    let up = Scripted::start().await;
    let (running, addr) = start("fwd-ext", 30, &format!("forward . {}\n cache 30", up.addr)).await;
    let m = ask(addr, "ext.testns.svc.cluster.local.", RecordType::A).await;
    let got: Vec<String> = m.answers.iter().map(show).collect();
    assert_eq!(
        got,
        [
            "ext.testns.svc.cluster.local. CNAME www.example.com.",
            "www.example.com. A 192.0.2.1"
        ]
    );
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    let m = ask(addr, "ext-nx.testns.svc.cluster.local.", RecordType::A).await;
    assert_eq!(
        m.metadata.response_code,
        ResponseCode::NXDomain,
        "RFC 6604: the target's rcode"
    );
    assert_eq!(
        m.answers.iter().map(show).collect::<Vec<_>>(),
        ["ext-nx.testns.svc.cluster.local. CNAME nx.example.com."]
    );
    // A CNAME question is not chased.
    let n = up.udp_queries();
    let m = ask(addr, "ext.testns.svc.cluster.local.", RecordType::CNAME).await;
    assert_eq!(m.answers.len(), 1);
    assert_eq!(up.udp_queries(), n);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn loop_back_to_ourselves_is_detected_and_we_keep_serving() {
    // A stub resolver (like systemd-resolved on 127.0.0.53) that forwards to us.
    let stub = Scripted::start().await;
    let (running, addr) = start("fwd-loop", 30, &format!("forward . {}\n loop", stub.addr)).await;
    stub.set_mode(Mode::Relay(addr));
    let status = support::loop_status(&running).clone();
    let mut detected = false;
    for _ in 0..100 {
        if status.detected() {
            detected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(detected, "the probe came back through the stub");
    assert_eq!(status.upstreams(), [stub.addr]);
    assert_eq!(status.detections(), 1);
    // The cluster zone is still served; forwarded names fail fast instead of looping.
    let m = ask(addr, "gone.testns.svc.cluster.local.", RecordType::A).await;
    assert_eq!(a_records(&m), ["10.96.50.50"]);
    let before = stub.udp_queries();
    let (m, took) = ask_slow(addr, "www.example.com.").await;
    assert_eq!(m.unwrap().metadata.response_code, ResponseCode::ServFail);
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(
        stub.udp_queries(),
        before,
        "nothing forwarded to the looping upstream"
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn no_loop_against_a_real_upstream() {
    let up = Scripted::start().await;
    let (running, addr) = start(
        "fwd-noloop",
        30,
        &format!("forward . {}\n loop\n loadbalance", up.addr),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!support::loop_status(&running).detected());
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(a_records(&m), ["192.0.2.1"]);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn loadbalance_shuffles_forwarded_addresses() {
    let up = Scripted::start().await;
    let (running, addr) = start(
        "fwd-lb",
        30,
        &format!("forward . {}\n loadbalance round_robin", up.addr),
    )
    .await;
    let mut firsts = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let m = support::tcp(addr, &support::query("big.example.com.", RecordType::A)).await;
        assert_eq!(m.answers.len(), 100);
        firsts.insert(show(&m.answers[0]));
    }
    assert!(firsts.len() > 1, "the first address changes between answers");
    running.stop().await.unwrap();
}

/// The same faults against the real `unbound`: forwarding, truncation retried over TCP, negative
/// caching by its SOA, one of two upstreams dead, the TTL count-down, serve-stale once it is
/// killed, then SERVFAIL within the deadline with every upstream dead.
#[tokio::test]
async fn against_unbound() {
    let dir = support::temp_dir("unbound");
    let Some(ub) = Unbound::start(&dir).await else {
        panic!("unbound is not installed: run ./test.sh, which installs it");
    };
    let dead = Scripted::start().await;
    dead.set_mode(Mode::Drop);
    let (running, addr) = start(
        "fwd-unbound",
        30,
        &format!(
            "forward . {} {} {{\n policy sequential\n read_timeout 500ms\n health_check 200ms\n }}\n cache 30 {{\n success 100 30 1\n denial 100 30 1\n serve_stale 1h\n }}",
            dead.addr, ub.addr
        ),
    )
    .await;
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert_eq!(a_records(&m), ["192.0.2.10"]);
    assert!(!m.metadata.authoritative);
    let m = ask(addr, "8.8.8.8.in-addr.arpa.", RecordType::PTR).await;
    assert_eq!(
        m.answers.iter().map(show).collect::<Vec<_>>(),
        ["8.8.8.8.in-addr.arpa. PTR dns.google."]
    );
    // One dead of two: marked down after two failures, then answers come at once.
    let t = Instant::now();
    let m = ask(addr, "nosuch.example.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert!(
        t.elapsed() < Duration::from_millis(300),
        "the dead upstream is skipped: {:?}",
        t.elapsed()
    );
    // Truncated by unbound over UDP, fetched over TCP.
    let m = support::tcp(addr, &support::query("big.example.com.", RecordType::A)).await;
    assert_eq!(m.answers.len(), 100);
    // The TTL counts down from unbound's.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let m = ask(addr, "www.example.com.", RecordType::A).await;
    assert!((28..=29).contains(&m.answers[0].ttl), "{}", m.answers[0].ttl);
    // ExternalName chase through unbound.
    let m = ask(addr, "ext.testns.svc.cluster.local.", RecordType::A).await;
    assert_eq!(
        m.answers.iter().map(show).collect::<Vec<_>>(),
        [
            "ext.testns.svc.cluster.local. CNAME www.example.com.",
            "www.example.com. A 192.0.2.10"
        ]
    );
    // short.example.com has TTL 1; kill unbound, let it expire: served stale.
    ask(addr, "short.example.com.", RecordType::A).await;
    drop(ub);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (m, _) = ask_slow(addr, "short.example.com.").await;
    let m = m.expect("stale answer");
    assert_eq!(a_records(&m), ["192.0.2.11"]);
    assert_eq!(m.answers[0].ttl, 30);
    // A name never cached: SERVFAIL within the deadline.
    let (m, took) = ask_slow(addr, "never.example.com.").await;
    assert_eq!(
        m.expect("SERVFAIL").metadata.response_code,
        ResponseCode::ServFail
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    running.stop().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TCP query in flight when the server stops is answered before its connection closes:
/// stopping drains TCP (no new connection, no new message read, the answers in flight sent)
/// rather than aborting the connections. Here the question waits on a slow upstream (1.5 s)
/// when the stop comes. Before, the client saw its connection closed without an answer.
#[tokio::test]
async fn a_tcp_query_in_flight_at_shutdown_is_answered() {
    let up = Scripted::start().await;
    up.set_mode(Mode::Slow(Duration::from_millis(1500)));
    let (running, addr) = start("fwd-drain", 30, &format!("forward . {}", up.addr)).await;
    let client =
        tokio::spawn(
            async move { support::tcp(addr, &support::query("slow.example.com.", RecordType::A)).await },
        );
    // The query is read and waiting on the upstream when the stop comes.
    for _ in 0..100 {
        if up.udp_queries() + up.tcp_queries() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        up.udp_queries() + up.tcp_queries() > 0,
        "the query reached the upstream"
    );
    running.stop().await.unwrap();
    let m = client.await.expect("the client got its answer");
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_eq!(a_records(&m), ["192.0.2.1"]);
    // And the listener is gone.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// Identical questions in flight share one upstream exchange: 20 clients asking the same name
/// while a slow upstream answers cost one query upstream, and each client gets the answer under
/// its own message ID; the waiters are counted in `cluster_dns_forward_coalesced_total`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_questions_in_flight_share_one_upstream_query() {
    let up = Scripted::start().await;
    up.set_mode(Mode::Slow(Duration::from_millis(400)));
    let dir = support::temp_dir("fwd-coalesce");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n forward . {}\n}}\n",
        up.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let asks: Vec<_> = (0..20)
        .map(|_| tokio::spawn(async move { ask(addr, "burst.example.com.", RecordType::A).await }))
        .collect();
    for a in asks {
        assert_eq!(a_records(&a.await.unwrap()), ["192.0.2.1"]);
    }
    assert_eq!(
        up.udp_queries(),
        1,
        "one upstream query for 20 identical questions"
    );
    let m = crate::support::scrape(running.http_addr("metrics").unwrap()).await;
    assert_eq!(
        crate::support::sum(&m, "cluster_dns_forward_coalesced_total", &[]),
        19.0
    );
    // Different names are separate exchanges.
    let asks: Vec<_> = (0..3)
        .map(|i| tokio::spawn(async move { ask(addr, &format!("n{i}.example.com."), RecordType::A).await }))
        .collect();
    for a in asks {
        a.await.unwrap();
    }
    assert_eq!(up.udp_queries(), 4);
    running.stop().await.unwrap();
}
