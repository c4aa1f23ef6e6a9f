//! The wire: EDNS sizes, truncation and TCP retry, header flags, and bad input (garbage,
//! truncated packets, two questions, unknown types and classes, opcodes). After every bad packet
//! the server must still answer.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};

use crate::support;

/// A headless service with `n` ready endpoints, plus the default kube-dns service.
fn big_headless(n: u32) -> String {
    let mut y = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: big}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: many, namespace: big}\nspec: {clusterIP: None, ports: [{name: http, port: 80}]}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: many-1, namespace: big, labels: {kubernetes.io/service-name: many}}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\nendpoints:\n",
    );
    for i in 0..n {
        writeln!(
            y,
            "- {{addresses: [10.1.{}.{}], conditions: {{ready: true}}}}",
            i / 250,
            i % 250 + 1
        )
        .unwrap();
    }
    y
}

async fn start_big(n: u32) -> (cluster_dns::app::Running, SocketAddr) {
    let dir = support::temp_dir("big");
    std::fs::write(dir.join("big.yaml"), big_headless(n)).unwrap();
    let running = support::start(
        ".:0 {\n bind 127.0.0.1\n kubernetes cluster.local in-addr.arpa ip6.arpa {\n  manifests big.yaml\n }\n}\n",
        &dir,
    )
    .await;
    let addr = running.dns_addrs()[0];
    (running, addr)
}

#[tokio::test]
async fn headless_200_truncates_over_udp_and_is_whole_over_tcp() {
    let (running, addr) = start_big(200).await;
    let name = "many.big.svc.cluster.local.";

    // No EDNS: at most 512 bytes, TC set, no OPT added.
    let (reply, size) = support::udp(addr, &support::query(name, RecordType::A)).await;
    assert!(size <= 512, "{size}");
    assert!(reply.metadata.truncation);
    assert!(
        reply.edns.is_none(),
        "OPT added to a reply to a query without one"
    );
    assert!(!reply.answers.is_empty() && reply.answers.len() < 200);

    // EDNS 4096 is capped at our 1232; the OPT is kept.
    let (reply, size) = support::udp(addr, &support::query_edns(name, RecordType::A, 4096)).await;
    assert!(size <= 1232 && size > 1100, "{size}");
    assert!(reply.metadata.truncation);
    assert_eq!(reply.edns.as_ref().map(|e| e.max_payload()), Some(1232));

    // A client advertising less than 512 still gets 512.
    let (_, size) = support::udp(addr, &support::query_edns(name, RecordType::A, 100)).await;
    assert!(size <= 512 && size > 400, "{size}");

    // TCP: all 200, no TC.
    let reply = support::tcp(addr, &support::query(name, RecordType::A)).await;
    assert_eq!(reply.answers.len(), 200);
    assert!(!reply.metadata.truncation);

    // SRV over TCP: 200 SRV and 200 glue records.
    let reply = support::tcp(
        addr,
        &support::query(&format!("_http._tcp.{name}"), RecordType::SRV),
    )
    .await;
    assert_eq!(reply.answers.len(), 200);
    assert_eq!(reply.additionals.len(), 200);
    assert!(
        reply
            .answers
            .iter()
            .all(|r| matches!(&r.data, hickory_proto::rr::RData::SRV(s) if s.weight == 1 && s.port == 8080))
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn answers_that_just_fit_are_not_truncated() {
    let name = "many.big.svc.cluster.local.";
    // With 60 endpoints a plain 512-byte reply is cut: k records fit.
    let (running, addr) = start_big(60).await;
    let (cut, cut_size) = support::udp(addr, &support::query(name, RecordType::A)).await;
    assert!(cut.metadata.truncation && cut_size <= 512);
    let k = cut.answers.len();
    running.stop().await.unwrap();
    // Exactly k endpoints: the same size, all records, no TC.
    let (running, addr) = start_big(k as u32).await;
    let (whole, size) = support::udp(addr, &support::query(name, RecordType::A)).await;
    assert!(!whole.metadata.truncation, "{size} bytes for {k} records");
    assert_eq!((whole.answers.len(), size), (k, cut_size));
    // An OPT advertising 512 costs 11 bytes: the OPT is kept, and records are cut (with TC)
    // only if the k records left less than 11 bytes free.
    let (reply, size) = support::udp(addr, &support::query_edns(name, RecordType::A, 512)).await;
    assert!(size <= 512);
    assert!(reply.edns.is_some(), "OPT dropped");
    let slack = 512 - cut_size;
    assert_eq!(reply.metadata.truncation, slack < 11, "slack {slack}");
    assert_eq!(reply.answers.len(), if slack < 11 { k - 1 } else { k });
    running.stop().await.unwrap();
}

async fn demo() -> (cluster_dns::app::Running, SocketAddr) {
    let fixture = support::data_dir().join("conformance-fixture.yaml");
    let running = support::start(
        &format!("cluster.local:0 in-addr.arpa:0 {{\n bind 127.0.0.1\n kubernetes cluster.local in-addr.arpa {{\n  manifests {}\n  pods insecure\n }}\n}}\n", fixture.display()),
        &support::temp_dir("wire"),
    )
    .await;
    let addr = running.dns_addrs()[0];
    (running, addr)
}

async fn still_answers(addr: SocketAddr) {
    let (reply, _) = support::udp(
        addr,
        &support::query("svc1.testns.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(reply.answers.len(), 1);
}

#[tokio::test]
async fn flags_case_and_ids() {
    let (running, addr) = demo().await;
    let q = support::query("SvC1.TeStNs.SvC.ClUsTeR.LoCaL.", RecordType::A);
    let (reply, _) = support::udp(addr, &q).await;
    assert!(reply.metadata.authoritative);
    assert!(!reply.metadata.recursion_available);
    assert!(reply.metadata.recursion_desired, "RD copied");
    assert_eq!(reply.metadata.message_type, MessageType::Response);
    assert_eq!(
        reply.queries[0].name().to_ascii(),
        "SvC1.TeStNs.SvC.ClUsTeR.LoCaL."
    );
    assert_eq!(reply.answers[0].name.to_ascii(), "SvC1.TeStNs.SvC.ClUsTeR.LoCaL.");
    // Outside every server block zone: REFUSED.
    let (reply, _) = support::udp(addr, &support::query("example.com.", RecordType::A)).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::Refused);
    assert!(!reply.metadata.authoritative);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn rcodes_for_bad_questions() {
    let (running, addr) = demo().await;
    let name = "svc1.testns.svc.cluster.local.";

    // Class other than IN: REFUSED.
    for class in [DNSClass::CH, DNSClass::HS, DNSClass::ANY, DNSClass::Unknown(77)] {
        let mut m = Message::new(11, MessageType::Query, OpCode::Query);
        let mut q = Query::query(Name::from_ascii(name).unwrap(), RecordType::A);
        q.set_query_class(class);
        m.add_query(q);
        let (reply, _) = support::udp(addr, &m).await;
        assert_eq!(reply.metadata.response_code, ResponseCode::Refused, "{class:?}");
    }
    // Zone transfers: REFUSED.
    for t in [RecordType::AXFR, RecordType::IXFR] {
        let reply = support::tcp(addr, &support::query("cluster.local.", t)).await;
        assert_eq!(reply.metadata.response_code, ResponseCode::Refused, "{t:?}");
    }
    // Two questions: FORMERR.
    let mut m = support::query(name, RecordType::A);
    m.add_query(Query::query(
        Name::from_ascii("svc6.testns.svc.cluster.local.").unwrap(),
        RecordType::AAAA,
    ));
    let (reply, _) = support::udp(addr, &m).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::FormErr);
    // No question: SERVFAIL (CoreDNS's server answer).
    let m = Message::new(12, MessageType::Query, OpCode::Query);
    let (reply, _) = support::udp(addr, &m).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::ServFail);
    // Opcodes other than QUERY: NOTIMP.
    for op in [OpCode::Status, OpCode::Notify, OpCode::Update] {
        let mut m = support::query(name, RecordType::A);
        m.metadata.op_code = op;
        let (reply, _) = support::udp(addr, &m).await;
        assert_eq!(reply.metadata.response_code, ResponseCode::NotImp, "{op:?}");
    }
    // EDNS version 1: BADVERS, with an OPT of version 0.
    let mut m = support::query(name, RecordType::A);
    let mut edns = Edns::new();
    edns.set_version(1);
    m.set_edns(edns);
    let (reply, _) = support::udp(addr, &m).await;
    // Code 16 reads back as BADSIG (the same number); BADVERS is what was sent.
    assert_eq!(u16::from(reply.metadata.response_code), 16);
    assert_eq!(reply.edns.as_ref().map(|e| e.version()), Some(0));
    // Unknown types: NODATA where the name exists, NXDOMAIN where it does not.
    let (reply, _) = support::udp(addr, &support::query(name, RecordType::Unknown(65280))).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert!(reply.answers.is_empty() && reply.authorities.len() == 1);
    let (reply, _) = support::udp(
        addr,
        &support::query("nosuch.testns.svc.cluster.local.", RecordType::Unknown(65280)),
    )
    .await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
    still_answers(addr).await;
    running.stop().await.unwrap();
}

#[tokio::test]
async fn garbage_and_truncated_packets_never_stop_the_server() {
    let (running, addr) = demo().await;
    let good = support::query("svc1.testns.svc.cluster.local.", RecordType::A)
        .to_bytes()
        .unwrap();

    // Every length of zeros from 1 to 16 bytes (Knot's header sweep): at most a FORMERR back.
    for n in 1..=16 {
        if let Some(reply) = support::udp_raw(addr, &vec![0u8; n], Duration::from_millis(200)).await {
            let m = Message::from_bytes(&reply).expect("any reply parses");
            assert_ne!(
                m.metadata.response_code,
                ResponseCode::NoError,
                "{n} zero bytes answered NOERROR"
            );
        }
    }
    // The good query cut at every length: FORMERR or silence, never a crash.
    for n in 12..good.len() {
        if let Some(reply) = support::udp_raw(addr, &good[..n], Duration::from_millis(200)).await {
            let m = Message::from_bytes(&reply).expect("reply parses");
            assert_eq!(m.metadata.response_code, ResponseCode::FormErr, "cut at {n}");
        }
    }
    // Pseudo-random garbage with a fixed seed.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..300 {
        let len = (x % 600) as usize + 1;
        let mut pkt = Vec::with_capacity(len);
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            pkt.push(x as u8);
        }
        pkt[2] &= 0x7f; // QR=0, so the server reads it as a query
        let _ = support::udp_raw(addr, &pkt, Duration::from_millis(20)).await;
    }
    // A response packet (QR=1) is dropped, not answered.
    let mut resp = good.clone();
    resp[2] |= 0x80;
    assert!(
        support::udp_raw(addr, &resp, Duration::from_millis(300))
            .await
            .is_none()
    );
    // Garbage over TCP: the connection is dropped, the server lives.
    {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _ = s.write_all(&[0x00, 0x05, 1, 2, 3, 4, 5, 0xff, 0xff]).await;
    }
    still_answers(addr).await;
    let reply = support::tcp(
        addr,
        &support::query("svc1.testns.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(reply.answers.len(), 1);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn pipelined_tcp_queries_are_all_answered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (running, addr) = demo().await;
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let names = [
        "svc1.testns.svc.cluster.local.",
        "hdls.testns.svc.cluster.local.",
        "nosuch.testns.svc.cluster.local.",
    ];
    let mut ids = Vec::new();
    for n in names {
        let m = support::query(n, RecordType::A);
        ids.push(m.metadata.id);
        let b = m.to_bytes().unwrap();
        s.write_all(&(b.len() as u16).to_be_bytes()).await.unwrap();
        s.write_all(&b).await.unwrap();
    }
    let mut got = Vec::new();
    for _ in names {
        let mut l = [0u8; 2];
        tokio::time::timeout(Duration::from_secs(3), s.read_exact(&mut l))
            .await
            .unwrap()
            .unwrap();
        let mut b = vec![0u8; u16::from_be_bytes(l) as usize];
        s.read_exact(&mut b).await.unwrap();
        got.push(Message::from_bytes(&b).unwrap().metadata.id);
    }
    got.sort();
    ids.sort();
    assert_eq!(got, ids);
    running.stop().await.unwrap();
}

/// The request bytes of `A svc1.testns.svc.cluster.local` with an OPT carrying one COOKIE option
/// (code 10) of `cookie` bytes, written by hand so malformed lengths reach the server as sent.
fn query_with_cookie(cookie: &[u8]) -> Vec<u8> {
    let mut q = support::query("svc1.testns.svc.cluster.local.", RecordType::A)
        .to_bytes()
        .unwrap();
    // ARCOUNT = 1.
    q[11] = 1;
    let rdlen = u16::try_from(cookie.len() + 4).unwrap();
    let optlen = u16::try_from(cookie.len()).unwrap();
    // Root owner, type OPT, payload 1232, ext-rcode 0, version 0, flags 0, RDLEN.
    q.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0]);
    q.extend_from_slice(&rdlen.to_be_bytes());
    q.extend_from_slice(&[0, 10]);
    q.extend_from_slice(&optlen.to_be_bytes());
    q.extend_from_slice(cookie);
    q
}

/// RFC 7873 §5.2.2: a COOKIE option shorter than a client cookie (8 bytes), with a server cookie
/// of 1 to 7 bytes, or longer than 40 bytes is malformed: FORMERR, over UDP and TCP. Well-formed
/// cookies (8 bytes alone, 8 + 8 to 32) are answered. Before the fix a 3-byte cookie got NOERROR.
#[tokio::test]
async fn malformed_edns_cookies_get_formerr() {
    let (running, addr) = demo().await;
    let udp = |len: usize, fill: u8| async move {
        let req = query_with_cookie(&vec![fill; len]);
        let reply = support::udp_raw(addr, &req, Duration::from_secs(2))
            .await
            .expect("no UDP reply");
        (req, Message::from_bytes(&reply).unwrap())
    };
    for len in [0usize, 3, 7, 9, 15, 41, 64] {
        let (req, reply) = udp(len, 0xA5).await;
        assert_eq!(
            reply.metadata.response_code,
            ResponseCode::FormErr,
            "cookie of {len} bytes over UDP"
        );
        assert!(reply.answers.is_empty());
        let reply = Message::from_bytes(&support::tcp_raw(addr, &req).await).unwrap();
        assert_eq!(
            reply.metadata.response_code,
            ResponseCode::FormErr,
            "cookie of {len} bytes over TCP"
        );
    }
    for len in [8usize, 16, 24, 40] {
        let (_, reply) = udp(len, 0x5A).await;
        assert_eq!(
            reply.metadata.response_code,
            ResponseCode::NoError,
            "cookie of {len} bytes"
        );
        assert_eq!(reply.answers.len(), 1, "cookie of {len} bytes");
    }
    still_answers(addr).await;
    drop(running);
}

/// A question whose name ends in a compression pointer (legal in a request, RFC 1035 §4.1.4) is
/// answered with a reply that parses. The server used to echo the question section byte for
/// byte, pointer included, and a pointer into the request's header points at other bytes in
/// the reply: clients could not read it (found by the query_handler fuzz target).
#[tokio::test]
async fn a_question_with_a_compression_pointer_gets_a_readable_reply() {
    let (running, addr) = demo().await;
    // "1.10.96" then a pointer to offset 2 of the request (its flags), then nothing else of the
    // name is needed: the name hickory reads is whatever those bytes spell.
    let req: &[u8] = &[
        0, 5, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'1', 2, b'1', b'0', 2, b'9', b'6', 0xc0, 2, 0, 1, 0, 1,
    ];
    for reply in [
        support::udp_raw(addr, req, Duration::from_secs(2))
            .await
            .expect("a UDP reply"),
        support::tcp_raw(addr, req).await,
    ] {
        let m = Message::from_bytes(&reply).expect("the reply parses");
        assert_eq!(m.metadata.id, 5);
        assert_eq!(m.queries.len(), 1);
    }
    // A question that points at an earlier name of its own section is read the same way.
    let mut q = support::query("svc1.testns.svc.cluster.local.", RecordType::A)
        .to_bytes()
        .unwrap();
    let end = q.len() - 4;
    // Replace the root label of the name with a pointer to "svc.cluster.local." inside it:
    // offset 12 + "svc1"(5) + "testns"(7) = 24.
    q.splice(end - 1..end, [0xc0, 24]);
    q[end + 1..].copy_from_slice(&[0, 1, 0, 1]);
    let reply = support::udp_raw(addr, &q, Duration::from_secs(2))
        .await
        .expect("a UDP reply");
    let m = Message::from_bytes(&reply).expect("the reply parses");
    assert!(m.queries.len() == 1 || m.metadata.response_code == ResponseCode::FormErr);
    still_answers(addr).await;
    drop(running);
}
