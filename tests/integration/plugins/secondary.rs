//! `secondary` (issue 46): zones followed from primaries no one here wrote. Knot DNS as the
//! primary sends NOTIFY on each reload and answers IXFR with its journal's differences; NSD
//! 4.6 answers IXFR with the whole zone. The copy answers as the primary does, and a transfer
//! that breaks off or goes backwards leaves the copy held serving.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};

use crate::support;
use crate::support::peers::{Kind, Peer};

/// Serial 1, refresh two hours: within a test, only a NOTIFY explains a prompt refresh.
const ZONE: &str = "$ORIGIN example.org.\n$TTL 3600\n\
@ IN SOA ns.example.org. admin.example.org. 1 7200 3600 1209600 300\n\
@ IN NS ns.example.org.\n\
ns IN A 192.0.2.53\n\
www IN A 192.0.2.1\n\
mail IN MX 10 mx.example.org.\n\
mx IN A 192.0.2.25\n\
alias IN CNAME www.example.org.\n\
*.wild IN TXT \"wildcard\"\n\
sub IN NS ns.sub.example.org.\n\
ns.sub IN A 192.0.2.54\n";

/// The next version: serial 2, www moved, a TXT added, mail's MX gone.
fn version_2() -> String {
    ZONE.replace(" 1 7200 ", " 2 7200 ")
        .replace("www IN A 192.0.2.1", "www IN A 192.0.2.2")
        .replace("mail IN MX 10 mx.example.org.\n", "")
        + "new IN TXT \"added in 2\"\n"
}

/// What cluster-dns at `addr` answers for `name` `qtype` (dig +short), once it is `want`
/// (within 15 s); the last answer otherwise.
fn answers_within(addr: SocketAddr, name: &str, qtype: &str, want: &str) -> String {
    let mut last = String::new();
    for _ in 0..150 {
        last = support::dig(addr, &["+short", "+norec", name, qtype]);
        if last.trim() == want {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    last.trim().to_owned()
}

/// The questions whose replies the copy must give as the primary gives them.
fn questions() -> Vec<(&'static str, &'static str)> {
    vec![
        ("example.org", "SOA"),
        ("example.org", "NS"),
        ("www.example.org", "A"),
        ("www.example.org", "AAAA"),
        ("alias.example.org", "A"),
        ("mail.example.org", "MX"),
        ("nothere.example.org", "A"),
        ("x.wild.example.org", "TXT"),
        ("host.sub.example.org", "A"),
        ("new.example.org", "TXT"),
    ]
}

/// `seen` without what RFC 1034 section 4.3.2 step 6 leaves to each server: the authority
/// and additional sections of a positive answer (Knot sends neither, NSD the apex NS and its
/// address). Negative answers keep their SOA, referrals their NS and glue, and every reply its
/// rcode, AA bit and answer.
fn comparable(mut seen: crate::support::peers::Seen) -> crate::support::peers::Seen {
    if seen.rcode == "NOERROR" && !seen.answer.is_empty() {
        seen.authority.clear();
        seen.additional.clear();
    }
    seen
}

/// Follows `kind`'s zone: the first copy by AXFR, the edit by NOTIFY (Knot, NSD both send
/// it on reload) and IXFR; each time the copy answers every question as the primary does.
async fn follows(kind: Kind) {
    let dir = support::temp_dir(&format!("secondary-{kind}"));
    let primary_port = crate::support::upstream::free_port();
    let corefile = format!(
        "example.org:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n secondary {{\n  transfer from 127.0.0.1:{primary_port}\n }}\n}}\n"
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics");
    let (before, after, logs) = tokio::task::spawn_blocking(move || {
        let primary = Peer::primary_on(kind, "example.org.", ZONE, addr, primary_port);
        let first = answers_within(addr, "www.example.org", "A", "192.0.2.1");
        assert_eq!(
            first,
            "192.0.2.1",
            "{kind}'s zone never arrived:\n{}",
            primary.logs()
        );
        let compare = |tag: &str| {
            for (name, qtype) in questions() {
                // The primary may still be settling on its reload (Knot answers without AA
                // for a moment): asked again, up to 3 s, until both agree.
                let mut last = None;
                for _ in 0..30 {
                    let ours = comparable(crate::support::peers::ask(addr, name, qtype));
                    let theirs = comparable(primary.ask(name, qtype));
                    if ours == theirs {
                        last = None;
                        break;
                    }
                    last = Some((ours, theirs));
                    std::thread::sleep(Duration::from_millis(100));
                }
                if let Some((ours, theirs)) = last {
                    panic!("{tag}: {name} {qtype}: ours\n{ours}\n{kind}'s\n{theirs}");
                }
            }
        };
        compare("serial 1");
        primary.reload(&version_2());
        let moved = answers_within(addr, "www.example.org", "A", "192.0.2.2");
        assert_eq!(moved, "192.0.2.2", "the edit never arrived:\n{}", primary.logs());
        compare("serial 2");
        (first, moved, primary.logs())
    })
    .await
    .unwrap();
    assert_ne!(before, after);
    let m = support::scrape(metrics).await;
    let count = |name: &str, labels: &[&str]| support::sum(&m, name, labels);
    assert_eq!(
        count("cluster_dns_secondary_serial", &["zone=\"example.org.\""]),
        2.0
    );
    assert!(
        count("cluster_dns_secondary_notifies_total", &["result=\"accepted\""]) >= 1.0,
        "no NOTIFY from {kind} was taken"
    );
    assert_eq!(
        count(
            "cluster_dns_secondary_transfers_total",
            &["kind=\"axfr\"", "result=\"ok\""]
        ),
        1.0
    );
    assert!(
        count(
            "cluster_dns_secondary_transfers_total",
            &["kind=\"ixfr\"", "result=\"ok\""]
        ) >= 1.0
    );
    assert_eq!(
        count("cluster_dns_secondary_transfers_total", &["result=\"failed\""]),
        0.0
    );
    if kind == Kind::Knot {
        // Knot gave the difference, not the zone again.
        assert!(logs.contains("IXFR, outgoing"), "Knot sent no IXFR:\n{logs}");
        assert!(
            !logs.contains("AXFR-style"),
            "Knot sent the whole zone for the IXFR:\n{logs}"
        );
    }
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_knot_by_notify_and_ixfr() {
    follows(Kind::Knot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_nsd_by_notify() {
    follows(Kind::Nsd).await;
}

/// The SOA checks refused for their signature (`check_failures_total{reason="tsig"}`) on the
/// server whose metrics are at `metrics`, once there is one (up to 5 s).
async fn tsig_refusals(metrics: SocketAddr) -> f64 {
    let mut refused = 0.0;
    for _ in 0..50 {
        let m = support::scrape(metrics).await;
        refused = support::sum(
            &m,
            "cluster_dns_secondary_check_failures_total",
            &["reason=\"tsig\""],
        );
        if refused > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    refused
}

/// The TSIG key of the signed tests (base64 of 32 bytes).
const FABRIC_KEY: &str = "c2VjcmV0IG9mIHRoZSBmYWJyaWMgb2Ygbm9kZSBhZ2VudHM=";

/// TSIG (RFC 8945) with a primary that transfers only to signed requests: a secondary with the
/// key signs its SOA checks, AXFR and IXFR, and takes the primary's signed messages after
/// checking each (a mistake on either side and nothing arrives); one with another secret gets
/// nothing, answers SERVFAIL and is never confirmed.
async fn follows_with_tsig(kind: Kind) {
    let dir = support::temp_dir(&format!("secondary-tsig-{kind}"));
    for d in ["right", "wrong"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let primary_port = crate::support::upstream::free_port();
    let block = |secret: &str| {
        format!(
            "example.org:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n tsig {{\n  secret fabric.key. {secret}\n }}\n secondary {{\n  transfer from 127.0.0.1:{primary_port}\n  tsig fabric.key. {secret} hmac-sha256\n }}\n}}\n"
        )
    };
    let right = support::start(&block(FABRIC_KEY), &dir.join("right")).await;
    let addr = right.dns_addrs()[0];
    let primary = tokio::task::spawn_blocking(move || {
        let primary = Peer::primary_signed_on(
            kind,
            "example.org.",
            ZONE,
            (addr, primary_port),
            ("fabric.key.", FABRIC_KEY),
        );
        let first = answers_within(addr, "www.example.org", "A", "192.0.2.1");
        assert_eq!(
            first,
            "192.0.2.1",
            "{kind}'s zone never arrived:\n{}",
            primary.logs()
        );
        primary.reload(&version_2());
        let moved = answers_within(addr, "www.example.org", "A", "192.0.2.2");
        assert_eq!(moved, "192.0.2.2", "the edit never arrived:\n{}", primary.logs());
        primary
    })
    .await
    .unwrap();
    let m = support::scrape(right.http_addr("metrics").expect("/metrics")).await;
    assert_eq!(support::sum(&m, "cluster_dns_secondary_serial", &[]), 2.0);
    assert_eq!(
        support::sum(
            &m,
            "cluster_dns_secondary_transfers_total",
            &["result=\"failed\""]
        ),
        0.0
    );
    // Another secret, with the primary up from the start: its SOA checks are refused by the
    // primary (BADSIG), counted, and no copy is ever taken.
    let wrong = support::start(&block("b3RoZXIgc2VjcmV0"), &dir.join("wrong")).await;
    let wrong_addr = wrong.dns_addrs()[0];
    let wrong_metrics = wrong.http_addr("metrics").expect("/metrics");
    let refused = tsig_refusals(wrong_metrics).await;
    assert!(refused >= 1.0, "no SOA check refused for its signature");
    let out = support::dig(wrong_addr, &["www.example.org", "A"]);
    assert_eq!(support::dig_status(&out), "SERVFAIL", "{out}");
    let m = support::scrape(wrong_metrics).await;
    assert_eq!(support::sum(&m, "cluster_dns_secondary_serial", &[]), 0.0);
    assert_eq!(
        support::sum(&m, "cluster_dns_secondary_confirmed_timestamp_seconds", &[]),
        0.0
    );
    // With `tsig` in its block, the secondary's reply to the signed NOTIFY is signed too.
    let logs = primary.logs();
    assert!(!logs.contains("failed to verify TSIG"), "{logs}");
    drop(primary);
    right.stop().await.unwrap();
    wrong.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_knot_with_tsig() {
    follows_with_tsig(Kind::Knot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_nsd_with_tsig() {
    follows_with_tsig(Kind::Nsd).await;
}

/// A NOTIFY message for `zone`.
fn notify(zone: &str) -> Message {
    let mut m = Message::new(0x4e4f, MessageType::Query, OpCode::Notify);
    m.metadata.authoritative = true;
    let mut q = Query::query(Name::from_ascii(zone).unwrap(), RecordType::SOA);
    q.set_query_class(DNSClass::IN);
    m.add_query(q);
    m
}

/// Sends `msg` over UDP from `from` to `to`; the reply.
async fn udp_from(from: [u8; 4], to: SocketAddr, msg: &Message) -> Message {
    let sock = tokio::net::UdpSocket::bind(SocketAddr::from((from, 0)))
        .await
        .unwrap();
    sock.send_to(&msg.to_bytes().unwrap(), to).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let (n, _) = tokio::time::timeout(Duration::from_secs(3), sock.recv_from(&mut buf))
        .await
        .expect("a reply")
        .unwrap();
    Message::from_bytes(&buf[..n]).unwrap()
}

/// A tiny primary this test controls, for what Knot and NSD will not do on request: break a
/// transfer off, or go backwards in serial. It answers SOA questions with `serial` and
/// transfers with the zone at `serial`, or, once `broken`, with half a transfer.
struct ScriptedPrimary {
    addr: SocketAddr,
    state: std::sync::Arc<std::sync::Mutex<(u32, bool)>>,
    connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl ScriptedPrimary {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = std::sync::Arc::new(std::sync::Mutex::new((1u32, false)));
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (shared, counted) = (state.clone(), connections.clone());
        std::thread::spawn(move || {
            // Bounded: at most 200 connections, then the thread ends.
            for stream in listener.incoming().take(200) {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                // Each request of the connection, until the client closes it (at most 10).
                for _ in 0..10 {
                    let (serial, broken) = *shared.lock().unwrap();
                    match Self::serve(&mut stream, serial, broken) {
                        Ok(true) => {}
                        _ => break,
                    }
                }
            }
        });
        Self {
            addr,
            state,
            connections,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn set(&self, serial: u32, broken: bool) {
        *self.state.lock().unwrap() = (serial, broken);
    }

    /// Answers one request of `stream`; `Ok(true)` when the connection may carry another.
    fn serve(stream: &mut std::net::TcpStream, serial: u32, broken: bool) -> std::io::Result<bool> {
        use std::io::{Read, Write};
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut len = [0u8; 2];
        stream.read_exact(&mut len)?;
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut buf)?;
        let req = Message::from_bytes(&buf).map_err(std::io::Error::other)?;
        let qtype = req.queries[0].query_type();
        let text = ZONE
            .replace(" 1 7200 ", &format!(" {serial} 7200 "))
            .replace("192.0.2.1", &format!("192.0.2.{serial}"));
        let records = cluster_dns::plugin::kit::ZoneData::parse(
            &text,
            std::path::Path::new("scripted"),
            &Name::from_ascii("example.org.").unwrap(),
        )
        .unwrap()
        .transfer();
        let mut reply = Message::new(req.metadata.id, MessageType::Response, OpCode::Query);
        reply.metadata.authoritative = true;
        reply.add_query(req.queries[0].clone());
        match qtype {
            RecordType::SOA => {
                reply.add_answer(records[0].clone());
            }
            _ if broken => {
                // The first half of the zone, then the connection closes.
                reply.add_answers(records[..records.len() / 2].iter().cloned());
            }
            _ => {
                reply.add_answers(records);
            }
        }
        let bytes = reply.to_bytes().map_err(std::io::Error::other)?;
        let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&bytes);
        stream.write_all(&framed)?;
        Ok(!(broken && qtype != RecordType::SOA))
    }
}

/// Bad input never replaces a good copy: a transfer that breaks off, and a primary whose
/// serial went backwards, leave serial 3's data answering; a NOTIFY from anyone but the
/// primary is refused, and one for a zone not followed is NOTAUTH.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_transfer_or_an_older_serial_keeps_the_copy() {
    let primary = ScriptedPrimary::start();
    primary.set(3, false);
    let dir = support::temp_dir("secondary-broken");
    let corefile = format!(
        "example.org:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n secondary {{\n  transfer from {}\n }}\n}}\n",
        primary.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics");
    let www = move || answers_within(addr, "www.example.org", "A", "192.0.2.3");
    assert_eq!(tokio::task::spawn_blocking(www).await.unwrap(), "192.0.2.3");

    // Serial 4, but every transfer breaks off: NOTIFY makes it try at once, and fail.
    primary.set(4, true);
    let reply = udp_from([127, 0, 0, 1], addr, &notify("example.org.")).await;
    assert_eq!(reply.metadata.op_code, OpCode::Notify);
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert!(reply.metadata.authoritative);
    let failed = async || {
        support::sum(
            &support::scrape(metrics).await,
            "cluster_dns_secondary_transfers_total",
            &["result=\"failed\""],
        )
    };
    for _ in 0..100 {
        if failed().await >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(failed().await >= 1.0, "the broken transfer was not counted");
    let still = support::dig(addr, &["+short", "www.example.org", "A"]);
    assert_eq!(still.trim(), "192.0.2.3", "a broken transfer replaced the copy");

    // Serial 2 (backwards), whole: not taken.
    primary.set(2, false);
    udp_from([127, 0, 0, 1], addr, &notify("example.org.")).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let still = support::dig(addr, &["+short", "www.example.org", "A"]);
    assert_eq!(still.trim(), "192.0.2.3", "an older serial replaced the copy");

    // Serial 5, whole: taken.
    primary.set(5, false);
    udp_from([127, 0, 0, 1], addr, &notify("example.org.")).await;
    let www = move || answers_within(addr, "www.example.org", "A", "192.0.2.5");
    assert_eq!(tokio::task::spawn_blocking(www).await.unwrap(), "192.0.2.5");

    // NOTIFY from an address that is not the primary's, and for a zone not followed.
    let reply = udp_from([127, 0, 0, 2], addr, &notify("example.org.")).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::Refused);
    let reply = udp_from([127, 0, 0, 1], addr, &notify("other.example.org.")).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NotAuth);
    let m = support::scrape(metrics).await;
    assert_eq!(
        support::sum(
            &m,
            "cluster_dns_secondary_notifies_total",
            &["result=\"refused\""]
        ),
        1.0
    );
    running.stop().await.unwrap();
}

/// Issue 46, the fabric's first link: a node agent follows the cluster zone from a central
/// server (`kubernetes` fed by the fake API server, `transfer` with NOTIFY to the agent)
/// with `secondary` (its Corefile has no `kubernetes`: it holds no watch), and answers the cluster's Service names
/// as the central server does. A Service created later reaches the agent by the central
/// zone's NOTIFY (batched once a second) and an IXFR.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_follows_the_cluster_zone_from_a_central_server() {
    use serde_json::json;
    let fake = fake_apiserver::FakeApiServer::start().await.unwrap();
    for ns in ["default", "apps"] {
        fake.create(fake_apiserver::synthetic::namespace(ns)).unwrap();
    }
    let service =
        |ns: &str, name: &str, ip: &str| fake_apiserver::synthetic::service(ns, name, ip.parse().ok());
    fake.create(service("default", "web", "10.96.0.10")).unwrap();
    fake.create(service("apps", "db", "None")).unwrap();
    fake.create(
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "db-1", "namespace": "apps", "labels": {"kubernetes.io/service-name": "db"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.1.0.5"], "hostname": "db-0", "conditions": {"ready": true}},
            {"addresses": ["10.1.0.6"], "conditions": {"ready": true}},
            {"addresses": ["10.1.0.7"], "conditions": {"ready": false}}],
        "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}]}),
    )
    .unwrap();
    let dir = support::temp_dir("secondary-agent");
    let agent_port = crate::support::upstream::free_port();
    let central = support::start(
        &format!(
            "cluster.local:0 {{\n bind 127.0.0.1\n transfer {{\n  to 127.0.0.1:{agent_port}\n }}\n kubernetes cluster.local {{\n  endpoint {}\n }}\n}}\n",
            fake.url()
        ),
        &dir,
    )
    .await;
    let central_addr = central.dns_addrs()[0];
    let agent_dir = support::temp_dir("secondary-agent-node");
    let agent = support::start(
        &format!(
            "cluster.local:{agent_port} {{\n bind 127.0.0.1\n secondary {{\n  transfer from {central_addr}\n }}\n}}\n"
        ),
        &agent_dir,
    )
    .await;
    let agent_addr = agent.dns_addrs()[0];
    let questions: Vec<(String, &str)> = [
        ("web.default.svc.cluster.local", "A"),
        ("web.default.svc.cluster.local", "AAAA"),
        ("_http._tcp.web.default.svc.cluster.local", "SRV"),
        ("db.apps.svc.cluster.local", "A"),
        ("db-0.db.apps.svc.cluster.local", "A"),
        ("_sql._tcp.db.apps.svc.cluster.local", "SRV"),
        ("nothere.default.svc.cluster.local", "A"),
        ("cluster.local", "SOA"),
        ("cluster.local", "NS"),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_owned(), t))
    .collect();
    tokio::task::spawn_blocking(move || {
        let first = answers_within(agent_addr, "web.default.svc.cluster.local", "A", "10.96.0.10");
        assert_eq!(first, "10.96.0.10", "the agent never took the cluster zone");
        for (name, qtype) in &questions {
            let ours = comparable(crate::support::peers::ask(agent_addr, name, qtype));
            let central = comparable(crate::support::peers::ask(central_addr, name, qtype));
            assert_eq!(ours, central, "{name} {qtype}: agent\n{ours}\ncentral\n{central}");
        }
    })
    .await
    .unwrap();
    // A new Service: on the agent by NOTIFY and IXFR.
    fake.create(service("apps", "cache", "10.96.0.20")).unwrap();
    let seen = tokio::task::spawn_blocking(move || {
        answers_within(agent_addr, "cache.apps.svc.cluster.local", "A", "10.96.0.20")
    })
    .await
    .unwrap();
    assert_eq!(seen, "10.96.0.20", "the new Service never reached the agent");
    let serial = |addr: SocketAddr| support::dig(addr, &["+norec", "+short", "cluster.local", "SOA"]);
    let (a, c) = tokio::task::spawn_blocking(move || (serial(agent_addr), serial(central_addr)))
        .await
        .unwrap();
    assert_eq!(a, c, "the agent holds the central serial");
    agent.stop().await.unwrap();
    central.stop().await.unwrap();
}

/// The fabric signed as `deploy/node-local/README.md` says: the central server's `tsig`
/// requires a key for transfers, the agent's `secondary` signs with it and checks every message
/// of the central server's answers. A zone of several messages (each signed over the prior
/// MAC, RFC 8945 section 5.3.1) arrives, a new Service follows by IXFR; an unsigned AXFR is
/// refused, and an agent with another secret is refused at its SOA check and holds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_fabric_takes_only_what_its_key_signs() {
    let fake = fake_apiserver::FakeApiServer::start().await.unwrap();
    fake.create(fake_apiserver::synthetic::namespace("default"))
        .unwrap();
    // 600 Services: a transfer of several 64 KiB messages.
    for i in 0..600u32 {
        let ip = format!("10.96.{}.{}", i / 250, i % 250 + 1);
        fake.create(fake_apiserver::synthetic::service(
            "default",
            &format!("svc-{i}"),
            ip.parse().ok(),
        ))
        .unwrap();
    }
    let dir = support::temp_dir("secondary-signed-fabric");
    let agent_port = crate::support::upstream::free_port();
    let central = support::start(
        &format!(
            "cluster.local:0 {{\n bind 127.0.0.1\n tsig cluster.local {{\n  secret fabric.key. {FABRIC_KEY}\n  require AXFR IXFR\n }}\n transfer {{\n  to *\n  notify transferred {agent_port}\n }}\n kubernetes cluster.local {{\n  endpoint {}\n }}\n}}\n",
            fake.url()
        ),
        &dir,
    )
    .await;
    let central_addr = central.dns_addrs()[0];
    let agent_corefile = |port: u16, secret: &str| {
        format!(
            "cluster.local:{port} {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n tsig {{\n  secret fabric.key. {secret}\n }}\n secondary {{\n  transfer from {central_addr}\n  tsig fabric.key. {secret}\n }}\n}}\n"
        )
    };
    let agent_dir = support::temp_dir("secondary-signed-agent");
    let agent = support::start(&agent_corefile(agent_port, FABRIC_KEY), &agent_dir).await;
    let agent_addr = agent.dns_addrs()[0];
    let first = tokio::task::spawn_blocking(move || {
        answers_within(
            agent_addr,
            "svc-599.default.svc.cluster.local",
            "A",
            "10.96.2.100",
        )
    })
    .await
    .unwrap();
    assert_eq!(first, "10.96.2.100", "the signed transfer never arrived");
    fake.create(fake_apiserver::synthetic::service(
        "default",
        "late",
        "10.96.9.9".parse().ok(),
    ))
    .unwrap();
    let late = tokio::task::spawn_blocking(move || {
        answers_within(agent_addr, "late.default.svc.cluster.local", "A", "10.96.9.9")
    })
    .await
    .unwrap();
    assert_eq!(late, "10.96.9.9", "the change never reached the agent");
    let m = support::scrape(agent.http_addr("metrics").expect("/metrics")).await;
    assert!(
        support::sum(
            &m,
            "cluster_dns_secondary_transfers_total",
            &["kind=\"ixfr\"", "result=\"ok\""]
        ) >= 1.0
    );
    assert_eq!(
        support::sum(&m, "cluster_dns_secondary_check_failures_total", &[]),
        0.0
    );
    // Unsigned, the central server refuses the transfer; signed, dig checks its messages too.
    let unsigned = support::dig(central_addr, &["+tcp", "AXFR", "cluster.local"]);
    assert!(unsigned.contains("Transfer failed"), "{unsigned}");
    let key = format!("hmac-sha256:fabric.key.:{FABRIC_KEY}");
    let signed = support::dig(central_addr, &["-y", &key, "AXFR", "cluster.local"]);
    let messages: u32 = signed
        .split("(messages ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no XFR size line:\n{signed}"));
    assert!(messages >= 2, "one message only:\n{signed}");
    assert!(
        !signed.contains("failure") && !signed.contains("Transfer failed"),
        "{signed}"
    );
    // Another secret: refused at its SOA check, nothing held.
    let other_dir = support::temp_dir("secondary-signed-other");
    let other_port = crate::support::upstream::free_port();
    let other = support::start(&agent_corefile(other_port, "b3RoZXIgc2VjcmV0"), &other_dir).await;
    let other_metrics = other.http_addr("metrics").expect("/metrics");
    let refused = tsig_refusals(other_metrics).await;
    assert!(
        refused >= 1.0,
        "the other secret was not refused for its signature"
    );
    let m = support::scrape(other_metrics).await;
    assert_eq!(support::sum(&m, "cluster_dns_secondary_serial", &[]), 0.0);
    other.stop().await.unwrap();
    agent.stop().await.unwrap();
    central.stop().await.unwrap();
}

/// Issue 46, never stale through the fabric: an agent with `cache 30` in front of its copy of
/// the cluster zone (TTL 30) asked for a Service that does not exist yet keeps the NXDOMAIN
/// only until a copy that has the name comes: the Service created at the central server
/// answers on the agent within seconds, not after the 30 s the cache would hold it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cache_drops_a_name_the_next_copy_changed() {
    let fake = fake_apiserver::FakeApiServer::start().await.unwrap();
    fake.create(fake_apiserver::synthetic::namespace("jobs")).unwrap();
    let service =
        |name: &str, ip: &str| fake_apiserver::synthetic::service("jobs", name, Some(ip.parse().unwrap()));
    fake.create(service("coordinator", "10.96.1.1")).unwrap();
    let dir = support::temp_dir("secondary-agent-cache");
    let agent_port = crate::support::upstream::free_port();
    let central = support::start(
        &format!(
            "cluster.local:0 {{\n bind 127.0.0.1\n transfer {{\n  to 127.0.0.1:{agent_port}\n }}\n kubernetes cluster.local {{\n  endpoint {}\n  ttl 30\n }}\n}}\n",
            fake.url()
        ),
        &dir,
    )
    .await;
    let central_addr = central.dns_addrs()[0];
    let agent = support::start(
        &format!(
            "cluster.local:{agent_port} {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n cache 30\n secondary {{\n  transfer from {central_addr}\n }}\n}}\n"
        ),
        &support::temp_dir("secondary-agent-cache-node"),
    )
    .await;
    let agent_addr = agent.dns_addrs()[0];
    let metrics = agent.http_addr("metrics").expect("/metrics");
    let worker = "worker-0.jobs.svc.cluster.local";
    tokio::task::spawn_blocking(move || {
        let first = answers_within(agent_addr, "coordinator.jobs.svc.cluster.local", "A", "10.96.1.1");
        assert_eq!(first, "10.96.1.1", "the agent never took the cluster zone");
        // Asked before it exists: NXDOMAIN, twice, the second from the cache.
        for _ in 0..2 {
            let out = support::dig(agent_addr, &["+norec", worker, "A"]);
            assert_eq!(support::dig_status(&out), "NXDOMAIN", "{out}");
        }
    })
    .await
    .unwrap();
    let hits = support::sum(
        &support::scrape(metrics).await,
        "coredns_cache_hits_total",
        &["type=\"denial\""],
    );
    assert!(
        hits >= 1.0,
        "the NXDOMAIN was not cached, so the test shows nothing"
    );
    fake.create(service("worker-0", "10.96.1.2")).unwrap();
    let seen = tokio::task::spawn_blocking(move || answers_within(agent_addr, worker, "A", "10.96.1.2"))
        .await
        .unwrap();
    assert_eq!(
        seen, "10.96.1.2",
        "the agent's cache kept the NXDOMAIN of a name the new copy has"
    );
    agent.stop().await.unwrap();
    central.stop().await.unwrap();
}

/// Issue 46, a zone that survives: with `snapshot`, each new copy is kept on disk; a server
/// restarted with no primary reachable answers from it at once, is ready, and says it serves
/// a snapshot; a damaged snapshot is refused (SERVFAIL, not ready) and a primary that answers
/// again brings the zone back, and a sound snapshot with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_secondary_serves_its_snapshot_and_refuses_a_damaged_one() {
    let primary = ScriptedPrimary::start();
    primary.set(3, false);
    let dir = support::temp_dir("secondary-snapshot");
    let snapshot = dir.join("snap").join("example.org.zone-snapshot");
    let corefile = |from: &str| {
        format!(
            "example.org:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n ready 127.0.0.1:0\n secondary {{\n  transfer from {from}\n  snapshot snap\n }}\n}}\n"
        )
    };
    let reachable = primary.addr.to_string();
    // Nothing listens on the discard port of 127.0.0.1 here.
    let unreachable = "127.0.0.1:9";

    let first = support::start(&corefile(&reachable), &dir).await;
    let addr = first.dns_addrs()[0];
    let www = move || answers_within(addr, "www.example.org", "A", "192.0.2.3");
    assert_eq!(tokio::task::spawn_blocking(www).await.unwrap(), "192.0.2.3");
    for _ in 0..100 {
        if snapshot.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(snapshot.exists(), "no snapshot at {}", snapshot.display());
    first.stop().await.unwrap();

    // Restarted, no primary: the snapshot answers at once, and the server is ready.
    let second = support::start(&corefile(unreachable), &dir).await;
    let addr = second.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || support::dig(addr, &["+short", "www.example.org", "A"]))
        .await
        .unwrap();
    assert_eq!(out.trim(), "192.0.2.3", "the snapshot was not served at start");
    let (status, body) = support::http_get(second.http_addr("ready").unwrap(), "/ready").await;
    assert_eq!(status, 200, "not ready while serving the snapshot: {body}");
    let m = support::scrape(second.http_addr("metrics").unwrap()).await;
    assert_eq!(support::sum(&m, "cluster_dns_secondary_from_snapshot", &[]), 1.0);
    assert_eq!(support::sum(&m, "cluster_dns_secondary_serial", &[]), 3.0);
    let confirmed = support::sum(&m, "cluster_dns_secondary_confirmed_timestamp_seconds", &[]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as f64;
    assert!(
        confirmed > 0.0 && confirmed <= now,
        "confirmed at {confirmed}, now {now}"
    );
    second.stop().await.unwrap();

    // Damaged (cut short): refused, never served.
    let bytes = std::fs::read(&snapshot).unwrap();
    std::fs::write(&snapshot, &bytes[..bytes.len() - 20]).unwrap();
    let third = support::start(&corefile(unreachable), &dir).await;
    let addr = third.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || support::dig(addr, &["www.example.org", "A"]))
        .await
        .unwrap();
    assert_eq!(
        support::dig_status(&out),
        "SERVFAIL",
        "a damaged snapshot was served:\n{out}"
    );
    let (status, body) = support::http_get(third.http_addr("ready").unwrap(), "/ready").await;
    assert_eq!(status, 503, "ready without a copy: {body}");
    third.stop().await.unwrap();

    // The primary answers again (now at serial 4): the zone comes back, with a sound snapshot.
    primary.set(4, false);
    let fourth = support::start(&corefile(&reachable), &dir).await;
    let addr = fourth.dns_addrs()[0];
    let www = move || answers_within(addr, "www.example.org", "A", "192.0.2.4");
    assert_eq!(tokio::task::spawn_blocking(www).await.unwrap(), "192.0.2.4");
    let origin = Name::from_ascii("example.org.").unwrap();
    let mut sound = None;
    for _ in 0..100 {
        if let Ok((zone, _)) = cluster_dns::plugin::secondary::snapshot::read(&snapshot, &origin) {
            sound = Some(zone.serial());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sound, Some(4), "the snapshot was not written again");
    fourth.stop().await.unwrap();
}

/// The SOA check and the transfer it leads to share one connection: behind a Service address
/// (the central replicas), both reach the same replica, so the transfer brings the serial the
/// check saw. Each refresh here is one connection to the primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_soa_check_and_the_transfer_share_one_connection() {
    let primary = ScriptedPrimary::start();
    primary.set(1, false);
    let dir = support::temp_dir("secondary-one-connection");
    let corefile = format!(
        "example.org:0 {{\n bind 127.0.0.1\n secondary {{\n  transfer from {}\n }}\n}}\n",
        primary.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let www = move || answers_within(addr, "www.example.org", "A", "192.0.2.1");
    assert_eq!(tokio::task::spawn_blocking(www).await.unwrap(), "192.0.2.1");
    assert_eq!(
        primary.connections(),
        1,
        "the first SOA check and AXFR took more than one connection"
    );
    for serial in [2u32, 3] {
        primary.set(serial, false);
        udp_from([127, 0, 0, 1], addr, &notify("example.org.")).await;
        let want = format!("192.0.2.{serial}");
        let www = move || answers_within(addr, "www.example.org", "A", &want);
        assert_eq!(
            tokio::task::spawn_blocking(www).await.unwrap(),
            format!("192.0.2.{serial}")
        );
        assert_eq!(
            primary.connections(),
            serial as usize,
            "a refresh (SOA check, then IXFR) took more than one connection"
        );
    }
    running.stop().await.unwrap();
}

/// Issue 46: a central server with `notify transferred` tells the agents that transferred the
/// cluster zone of each change, without listing them: the agent here is in no `to` line, yet
/// a Service created after its first copy reaches it by NOTIFY (the zone's SOA refresh is two
/// hours), also after a reload of the central Corefile, and the central server counts it
/// among the learned addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_transferred_tells_an_agent_no_one_listed() {
    let fake = fake_apiserver::FakeApiServer::start().await.unwrap();
    fake.create(fake_apiserver::synthetic::namespace("default"))
        .unwrap();
    let service =
        |name: &str, ip: &str| fake_apiserver::synthetic::service("default", name, Some(ip.parse().unwrap()));
    fake.create(service("one", "10.96.2.1")).unwrap();
    let agent_port = crate::support::upstream::free_port();
    let central_dir = support::temp_dir("secondary-learned-central");
    let central = support::start(
        &format!(
            "cluster.local:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n transfer {{\n  to *\n  notify transferred {agent_port}\n }}\n kubernetes cluster.local {{\n  endpoint {}\n }}\n}}\n",
            fake.url()
        ),
        &central_dir,
    )
    .await;
    let central_addr = central.dns_addrs()[0];
    let agent = support::start(
        &format!(
            "cluster.local:{agent_port} {{\n bind 127.0.0.1\n secondary {{\n  transfer from {central_addr}\n }}\n}}\n"
        ),
        &support::temp_dir("secondary-learned-agent"),
    )
    .await;
    let agent_addr = agent.dns_addrs()[0];
    let first = tokio::task::spawn_blocking(move || {
        answers_within(agent_addr, "one.default.svc.cluster.local", "A", "10.96.2.1")
    })
    .await
    .unwrap();
    assert_eq!(first, "10.96.2.1");
    let m = support::scrape(central.http_addr("metrics").unwrap()).await;
    assert_eq!(support::sum(&m, "cluster_dns_transfer_notify_learned", &[]), 1.0);
    // A reload of the central Corefile keeps what it learned.
    let path = central_dir.join("Corefile");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(" bind 127.0.0.1\n", " bind 127.0.0.1\n errors\n");
    std::fs::write(&path, text).unwrap();
    let config = cluster_dns::config::Config::load(&path, 53).unwrap();
    central.reload(config).await.unwrap();
    assert_eq!(central.dns_addrs(), [central_addr], "the listener is kept");
    fake.create(service("two", "10.96.2.2")).unwrap();
    let seen = tokio::task::spawn_blocking(move || {
        answers_within(agent_addr, "two.default.svc.cluster.local", "A", "10.96.2.2")
    })
    .await
    .unwrap();
    assert_eq!(seen, "10.96.2.2", "the agent was not told of the change");
    agent.stop().await.unwrap();
    central.stop().await.unwrap();
}
