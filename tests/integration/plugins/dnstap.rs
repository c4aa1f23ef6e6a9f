//! `dnstap`: the server's dnstap messages read by a receiver in this test, which speaks Frame
//! Streams' reader side (READY -> ACCEPT -> START ... STOP -> FINISH) over a unix socket and
//! over TCP and decodes the protobuf by hand, and by the real `dnstap` tool
//! (golang-dnstap's command, Debian's golang-github-dnstap-golang-dnstap-cli), and over TLS
//! (`skipverify`; a reader whose certificate the system does not trust gets nothing). Client queries
//! and responses carry the client's address and port and, with `full`, the exact bytes on the
//! wire; `forward`'s exchanges come as FORWARDER_QUERY/RESPONSE with the upstream's address;
//! a receiver that goes away is reconnected to; one that stops reading slows no answer, and
//! what cannot be queued is counted in `coredns_dnstap_dropped_total`. With `dnstap listen`,
//! readers that connect to the server (unix and TCP) get the messages.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::support;
use crate::support::upstream::Scripted;

const CONTENT_TYPE: &[u8] = b"protobuf:dnstap.Dnstap";

/// One decoded `Dnstap`: its header fields and its `Message`'s fields by number.
#[derive(Debug, Clone, Default)]
struct Tap {
    identity: Vec<u8>,
    version: Vec<u8>,
    extra: Option<Vec<u8>>,
    kind: u64,
    msg: BTreeMap<u64, Field>,
}

#[derive(Debug, Clone, PartialEq)]
enum Field {
    Int(u64),
    Bytes(Vec<u8>),
}

impl Tap {
    fn int(&self, n: u64) -> Option<u64> {
        match self.msg.get(&n)? {
            Field::Int(v) => Some(*v),
            Field::Bytes(_) => None,
        }
    }
    fn bytes(&self, n: u64) -> Option<&[u8]> {
        match self.msg.get(&n)? {
            Field::Bytes(b) => Some(b),
            Field::Int(_) => None,
        }
    }
    /// `Message.type`.
    fn mtype(&self) -> u64 {
        self.int(1).unwrap_or(0)
    }
    fn addr(&self, addr_field: u64, port_field: u64) -> Option<SocketAddr> {
        let ip: std::net::IpAddr = match self.bytes(addr_field)? {
            b if b.len() == 4 => <[u8; 4]>::try_from(b).ok()?.into(),
            b if b.len() == 16 => <[u8; 16]>::try_from(b).ok()?.into(),
            _ => return None,
        };
        Some(SocketAddr::new(ip, u16::try_from(self.int(port_field)?).ok()?))
    }
}

const CLIENT_QUERY: u64 = 5;
const CLIENT_RESPONSE: u64 = 6;
const FORWARDER_QUERY: u64 = 7;
const FORWARDER_RESPONSE: u64 = 8;

fn varint(b: &mut &[u8]) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (first, rest) = b.split_first().expect("varint");
        *b = rest;
        v |= u64::from(first & 0x7f) << shift;
        if first & 0x80 == 0 {
            break;
        }
    }
    v
}

/// The fields of one protobuf message (the last value of each number).
fn fields(mut b: &[u8]) -> BTreeMap<u64, Field> {
    let mut out = BTreeMap::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        let value = match key & 7 {
            0 => Field::Int(varint(&mut b)),
            2 => {
                let n = usize::try_from(varint(&mut b)).unwrap();
                let (v, rest) = b.split_at(n);
                b = rest;
                Field::Bytes(v.to_vec())
            }
            5 => {
                let (v, rest) = b.split_at(4);
                b = rest;
                Field::Int(u64::from(u32::from_le_bytes(v.try_into().unwrap())))
            }
            1 => {
                let (v, rest) = b.split_at(8);
                b = rest;
                Field::Int(u64::from_le_bytes(v.try_into().unwrap()))
            }
            w => panic!("wire type {w}"),
        };
        out.insert(key >> 3, value);
    }
    out
}

fn decode(payload: &[u8]) -> Tap {
    let top = fields(payload);
    let bytes = |n| match top.get(&n) {
        Some(Field::Bytes(b)) => Some(b.clone()),
        _ => None,
    };
    assert_eq!(top.get(&15), Some(&Field::Int(1)), "Dnstap.type MESSAGE");
    Tap {
        identity: bytes(1).unwrap_or_default(),
        version: bytes(2).unwrap_or_default(),
        extra: bytes(3),
        kind: 1,
        msg: fields(&bytes(14).expect("a Message")),
    }
}

fn control(kind: u32) -> Vec<u8> {
    let mut body = kind.to_be_bytes().to_vec();
    body.extend_from_slice(&1u32.to_be_bytes());
    body.extend_from_slice(&(CONTENT_TYPE.len() as u32).to_be_bytes());
    body.extend_from_slice(CONTENT_TYPE);
    let mut out = vec![0, 0, 0, 0];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reads one control frame; its type.
async fn read_control<S: AsyncRead + Unpin>(s: &mut S) -> u32 {
    assert_eq!(s.read_u32().await.unwrap(), 0, "an escape");
    let len = s.read_u32().await.unwrap();
    assert!(len <= 512);
    let mut body = vec![0; len as usize];
    s.read_exact(&mut body).await.unwrap();
    let kind = u32::from_be_bytes(body[..4].try_into().unwrap());
    if kind == 4 || kind == 2 {
        assert!(
            body.windows(CONTENT_TYPE.len()).any(|w| w == CONTENT_TYPE),
            "READY/START name the dnstap content type"
        );
    }
    kind
}

/// The reader's side of one connection: the handshake, then every data frame decoded into
/// `tx` until STOP (answered with FINISH) or the end of the stream. With `stall`, it stops
/// reading after the handshake and holds the connection until the test drops it.
async fn read_stream<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    tx: mpsc::UnboundedSender<Tap>,
    stall: bool,
) {
    assert_eq!(read_control(&mut s).await, 4, "READY");
    s.write_all(&control(1)).await.unwrap();
    assert_eq!(read_control(&mut s).await, 2, "START");
    if stall {
        std::future::pending::<()>().await;
    }
    loop {
        let Ok(len) = s.read_u32().await else { return };
        if len == 0 {
            let len = s.read_u32().await.unwrap();
            let mut body = vec![0; len as usize];
            s.read_exact(&mut body).await.unwrap();
            assert_eq!(&body[..4], &3u32.to_be_bytes(), "STOP");
            let mut finish = vec![0, 0, 0, 0, 0, 0, 0, 4];
            finish.extend_from_slice(&5u32.to_be_bytes());
            let _ = s.write_all(&finish).await;
            return;
        }
        let mut payload = vec![0; len as usize];
        s.read_exact(&mut payload).await.unwrap();
        let _ = tx.send(decode(&payload));
    }
}

/// A receiver on a unix socket: each connection read in its own task (ended with the
/// receiver's task).
fn unix_receiver(path: &Path, stall: bool) -> (mpsc::UnboundedReceiver<Tap>, tokio::task::JoinHandle<()>) {
    let _ = std::fs::remove_file(path);
    let listener = tokio::net::UnixListener::bind(path).unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((s, _)) = listener.accept().await {
            conns.spawn(read_stream(s, tx.clone(), stall));
        }
    });
    (rx, task)
}

/// Collects messages from `rx` until `done` holds of them, for at most 20 s.
async fn collect(rx: &mut mpsc::UnboundedReceiver<Tap>, done: impl Fn(&[Tap]) -> bool) -> Vec<Tap> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut got = Vec::new();
    while !done(&got) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(t)) => got.push(t),
            _ => panic!("dnstap messages did not all arrive; got {got:#?}"),
        }
    }
    got
}

fn has(kinds: &[u64]) -> impl Fn(&[Tap]) -> bool + '_ {
    move |got: &[Tap]| kinds.iter().all(|k| got.iter().any(|t| t.mtype() == *k))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_and_forwarder_messages_arrive_over_a_unix_socket_with_full_messages() {
    let dir = support::temp_dir("dnstap-unix");
    let sock = dir.join("tap.sock");
    let (mut rx, receiver) = unix_receiver(&sock, false);
    let upstream = Scripted::start().await;
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n dnstap unix://{} full {{\n  identity test-identity\n  version v9\n  extra hello\n }}\n forward . {}\n}}\n",
        sock.display(),
        upstream.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];

    // Over UDP from a socket whose port the test knows.
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let query = support::query("www.example.com.", RecordType::A)
        .to_bytes()
        .unwrap();
    client.send_to(&query, addr).await.unwrap();
    let mut buf = vec![0; 4096];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let response = buf[..n].to_vec();
    let got = collect(
        &mut rx,
        has(&[CLIENT_QUERY, CLIENT_RESPONSE, FORWARDER_QUERY, FORWARDER_RESPONSE]),
    )
    .await;
    let one = |k: u64| got.iter().find(|t| t.mtype() == k).unwrap();
    for t in &got {
        assert_eq!(t.identity, b"test-identity");
        assert_eq!(t.version, b"v9");
        assert_eq!(t.extra.as_deref(), Some(&b"hello"[..]));
        assert_eq!(t.int(2), Some(1), "INET");
        assert_eq!(t.int(3), Some(1), "UDP");
        assert!(t.int(8).unwrap() > 1_700_000_000, "query_time_sec");
    }
    let (cq, cr) = (one(CLIENT_QUERY), one(CLIENT_RESPONSE));
    let me = client.local_addr().unwrap();
    assert_eq!(cq.addr(4, 6), Some(me), "the client's address and port");
    assert_eq!(cr.addr(4, 6), Some(me));
    assert_eq!(cq.bytes(10), Some(&query[..]), "the query as sent");
    assert_eq!(cr.bytes(14), Some(&response[..]), "the response as received");
    assert!(cr.int(12).unwrap() >= cq.int(8).unwrap(), "response_time");
    let (fq, fr) = (one(FORWARDER_QUERY), one(FORWARDER_RESPONSE));
    assert_eq!(fq.addr(5, 7), Some(upstream.addr), "the upstream");
    assert_eq!(fr.addr(5, 7), Some(upstream.addr));
    let local = fq.addr(4, 6).expect("this server's end of the upstream socket");
    assert!(local.ip().is_loopback() && local.port() != 0);
    let sent = Message::from_bytes(fq.bytes(10).unwrap()).unwrap();
    assert_eq!(sent.queries[0].name().to_ascii(), "www.example.com.");
    let answered = Message::from_bytes(fr.bytes(14).unwrap()).unwrap();
    assert_eq!(answered.metadata.id, sent.metadata.id);
    assert!(!answered.answers.is_empty(), "the upstream's answer");
    assert!(fr.bytes(10).is_none() && fq.bytes(14).is_none());

    // Over TCP with dig: the protocol is TCP.
    let out =
        tokio::task::spawn_blocking(move || support::dig(addr, &["+tcp", "+short", "www.example.com", "A"]))
            .await
            .unwrap();
    assert!(out.contains("192.0.2."), "{out}");
    let got = collect(&mut rx, has(&[CLIENT_QUERY, CLIENT_RESPONSE])).await;
    for t in got
        .iter()
        .filter(|t| t.mtype() == CLIENT_QUERY || t.mtype() == CLIENT_RESPONSE)
    {
        assert_eq!(t.int(3), Some(2), "TCP");
        assert!(t.addr(4, 6).unwrap().ip().is_loopback());
    }

    // The receiver goes away and comes back: the output connects again.
    receiver.abort();
    drop(rx);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (mut rx, _receiver) = unix_receiver(&sock, false);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut back = false;
    while !back && Instant::now() < deadline {
        let _ = support::udp(addr, &support::query("again.example.com.", RecordType::A)).await;
        if let Ok(Some(t)) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
            back = t.kind == 1;
        }
    }
    assert!(back, "messages arrive at the new receiver");
    drop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_receiver_gets_messages_without_the_wire_form() {
    let dir = support::temp_dir("dnstap-tcp");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(read_stream(s, tx.clone(), false));
        }
    });
    let corefile = format!(".:0 {{\n bind 127.0.0.1\n dnstap tcp://{at}\n whoami\n}}\n");
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let _ = support::udp(addr, &support::query("who.example.", RecordType::A)).await;
    let got = collect(&mut rx, has(&[CLIENT_QUERY, CLIENT_RESPONSE])).await;
    for t in &got {
        assert!(
            t.bytes(10).is_none() && t.bytes(14).is_none(),
            "no wire messages without full"
        );
        assert!(!t.identity.is_empty(), "the host name");
        assert!(t.version.starts_with(b"cluster-dns-"));
        assert!(t.extra.is_none());
    }
    drop(running);
}

/// Runs the real `dnstap` reader with `args`, writing YAML to `out`.
fn dnstap_tool(args: &[&str], out: &Path) -> std::process::Child {
    std::process::Command::new("dnstap")
        .args(args)
        .args(["-y", "-w"])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect(
            "the dnstap tool (apt-get install golang-github-dnstap-golang-dnstap-cli; ./test.sh installs it)",
        )
}

/// Waits until `file` holds `want` (at most 15 s) and returns it.
async fn wait_for(file: &Path, want: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if want.iter().all(|w| text.contains(w)) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "the dnstap tool wrote {text:?}, not all of {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_dnstap_tool_reads_both_outputs() {
    let dir = support::temp_dir("dnstap-tool");
    let sock = dir.join("tool.sock");
    let port = crate::support::upstream::free_port();
    let (unix_out, tcp_out) = (dir.join("unix.yaml"), dir.join("tcp.yaml"));
    let mut unix_tool = dnstap_tool(&["-u", sock.to_str().unwrap()], &unix_out);
    let mut tcp_tool = dnstap_tool(&["-l", &format!("127.0.0.1:{port}")], &tcp_out);
    // Let the tools listen before the server connects (it would retry anyway).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(sock.exists() && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()) {
        assert!(Instant::now() < deadline, "the dnstap tool did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let upstream = Scripted::start().await;
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n dnstap {} full {{\n  identity tool-test\n }}\n dnstap tcp://127.0.0.1:{port}\n forward . {}\n}}\n",
        sock.display(),
        upstream.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || support::dig(addr, &["+short", "www.example.com", "A"]))
        .await
        .unwrap();
    assert!(out.contains("192.0.2."), "{out}");
    let all = [
        "type: CLIENT_QUERY",
        "type: CLIENT_RESPONSE",
        "type: FORWARDER_QUERY",
        "type: FORWARDER_RESPONSE",
        "query_address: 127.0.0.1",
        "socket_family: INET",
        "socket_protocol: UDP",
    ];
    let unix = wait_for(&unix_out, &all).await;
    assert!(unix.contains("identity: \"tool-test\""), "{unix}");
    // `full`: the tool prints the decoded messages.
    assert!(
        unix.contains("query_message: |") && unix.contains("response_message: |"),
        "{unix}"
    );
    assert!(unix.contains("www.example.com."), "{unix}");
    assert!(
        unix.contains(&format!("response_port: {}", upstream.addr.port())),
        "{unix}"
    );
    let tcp = wait_for(&tcp_out, &all).await;
    assert!(
        !tcp.contains("query_message") && !tcp.contains("response_message"),
        "{tcp}"
    );
    drop(running);
    let _ = unix_tool.kill();
    let _ = tcp_tool.kill();
    let _ = unix_tool.wait();
    let _ = tcp_tool.wait();
}

/// `extra` with CoreDNS metadata placeholders (issue 44): each message carries the values the
/// plugins published for its own question. The real `dnstap` tool reads the server's output
/// on a unix socket and relays it (`-U`) to a reader here, which decodes `extra` (the tool's
/// YAML and JSON leave that field out). A forwarded name's messages name the upstream; a name
/// `whoami` answers has none, so `-`, as CoreDNS writes; other placeholders are sent as
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_placeholders_are_filled_per_message() {
    let dir = support::temp_dir("dnstap-extra");
    let sock = dir.join("extra.sock");
    let relay = dir.join("relay.sock");
    let (mut rx, reader) = unix_receiver(&relay, false);
    let mut tool = std::process::Command::new("dnstap")
        .args(["-u", sock.to_str().unwrap(), "-U", relay.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the dnstap tool (apt-get install golang-github-dnstap-golang-dnstap-cli)");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "the dnstap tool did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let upstream = Scripted::start().await;
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n metadata\n dnstap {} {{\n  extra \"upstream: {{/forward/upstream}} {{type}}\"\n }}\n forward example.com {}\n whoami\n}}\n",
        sock.display(),
        upstream.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        let forwarded = support::dig(addr, &["+short", "www.example.com", "A"]);
        let local = support::dig(addr, &["whoami.test", "A"]);
        (forwarded, local)
    })
    .await
    .unwrap();
    assert!(out.0.contains("192.0.2."), "{out:?}");
    let filled = format!("upstream: {} {{type}}", upstream.addr).into_bytes();
    let empty = b"upstream: - {type}".to_vec();
    // 2 client messages per question, 2 forwarder messages for the forwarded one.
    let taps = collect(&mut rx, |got| got.len() >= 6).await;
    assert_eq!(taps.len(), 6, "{taps:#?}");
    let extra = |t: &Tap| String::from_utf8_lossy(t.extra.as_deref().unwrap_or_default()).into_owned();
    // FORWARDER_QUERY (7) and FORWARDER_RESPONSE (8) name the upstream.
    let forwarder: Vec<_> = taps.iter().filter(|t| [7, 8].contains(&t.mtype())).collect();
    assert_eq!(forwarder.len(), 2, "{taps:#?}");
    for t in &forwarder {
        assert_eq!(t.extra.as_deref(), Some(filled.as_slice()), "{}", extra(t));
    }
    // Of the client messages, the forwarded question's two name it, the other's two have `-`.
    let client: Vec<_> = taps
        .iter()
        .filter(|t| [5, 6].contains(&t.mtype()))
        .map(extra)
        .collect();
    let with = |want: &[u8]| client.iter().filter(|e| e.as_bytes() == want).count();
    assert_eq!((with(&filled), with(&empty)), (2, 2), "{client:?}");
    drop(running);
    let _ = tool.kill();
    let _ = tool.wait();
    reader.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_stops_reading_slows_no_answer_and_drops_are_counted() {
    let dir = support::temp_dir("dnstap-stall");
    let sock = dir.join("stall.sock");
    let (_rx, _receiver) = unix_receiver(&sock, true);
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n dnstap {} full\n whoami\n}}\n",
        sock.display()
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    let dropped = || async {
        crate::support::scrape(metrics)
            .await
            .get("coredns_dnstap_dropped_total{}")
            .copied()
            .unwrap_or(-1.0)
    };
    assert_eq!(dropped().await, 0.0, "registered at start-up");
    // 8 clients, 1,000 queries each: 16,000 messages, more than the queue (10,000) and the
    // socket buffer hold.
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..8 {
        clients.push(tokio::spawn(async move {
            let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let mut slowest = Duration::ZERO;
            let mut buf = vec![0; 1024];
            for i in 0..1000 {
                let q = support::query(&format!("q{c}-{i}.example."), RecordType::A)
                    .to_bytes()
                    .unwrap();
                let t = Instant::now();
                sock.send_to(&q, addr).await.unwrap();
                let got = tokio::time::timeout(Duration::from_secs(2), sock.recv_from(&mut buf)).await;
                assert!(got.is_ok(), "query {i} of client {c} was answered");
                slowest = slowest.max(t.elapsed());
            }
            slowest
        }));
    }
    let mut slowest = Duration::ZERO;
    for c in clients {
        slowest = slowest.max(c.await.unwrap());
    }
    let took = started.elapsed();
    let lost = dropped().await;
    assert!(lost >= 1000.0, "drops counted: {lost}");
    assert!(
        slowest < Duration::from_secs(1),
        "slowest answer {slowest:?} (all 8,000 in {took:?})"
    );
    drop(running);
}

#[test]
fn readme_examples_pass_check_and_bad_lines_fail_at_their_line() {
    let dir = support::temp_dir("dnstap-check");
    for example in [
        "dnstap /tmp/dnstap.sock",
        "dnstap /tmp/dnstap.sock full 1024 2048",
        "dnstap unix:///tmp/dnstap.sock full",
        "dnstap tcp://127.0.0.1:6000 full",
        "dnstap tcp://example.com:6000 full",
        "dnstap /tmp/dnstap.sock {\n  identity my-dns-server1\n  version MyDNSServer-1.2.3\n }",
        "dnstap /tmp/dnstap.sock full\n dnstap tcp://example.com:6000",
        "dnstap tls://127.0.0.1:6000 full {\n  skipverify\n }",
        "dnstap listen /tmp/dnstap.sock full",
        "dnstap listen tcp://127.0.0.1:6000 full",
        "dnstap tcp://remote-collector.example.com:6000 full\n dnstap listen tcp://127.0.0.1:6001 full",
    ] {
        let text = format!(".:53 {{\n {example}\n forward . 8.8.8.8\n}}\n");
        support::check_corefile(&dir, &text).unwrap_or_else(|e| panic!("{example}: {e}"));
    }
    for (line, want) in [
        ("dnstap tls://127.0.0.1 full", "tls://HOST:PORT"),
        (
            "dnstap listen tls://127.0.0.1:6000 full {\n  tls cert.pem key.pem\n }",
            "not implemented",
        ),
        ("dnstap /tmp/dnstap.sock full 0", "WRITEBUFFER"),
        ("dnstap tcp://127.0.0.1", "tcp://HOST:PORT"),
    ] {
        let text = format!(".:53 {{\n whoami\n {line}\n}}\n");
        let err = support::check_corefile(&dir, &text).unwrap_err();
        assert!(err.contains("Corefile:3") && err.contains(want), "{line}: {err}");
    }
}

/// A TLS reader with a certificate for 127.0.0.1 from a CA made for the test (so not one the
/// system trusts): its address, and what it decodes.
async fn tls_receiver(tag: &str) -> (SocketAddr, mpsc::UnboundedReceiver<Tap>) {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let pki = fake_apiserver::tls::TestPki::new(&format!("{tag} test CA")).unwrap();
    let id = pki.server(&["127.0.0.1"]).unwrap();
    let chain = CertificateDer::pem_slice_iter(id.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes()).unwrap();
    let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((s, _)) = listener.accept().await {
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            conns.spawn(async move {
                if let Ok(s) = acceptor.accept(s).await {
                    read_stream(s, tx, false).await;
                }
            });
        }
    });
    (at, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_reader_gets_messages_with_skipverify_and_an_untrusted_one_none() {
    let dir = support::temp_dir("dnstap-tls");
    let (trusting, mut got) = tls_receiver("skipverify").await;
    let (checked, mut refused) = tls_receiver("verified").await;
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n dnstap tls://{trusting} full {{\n  skipverify\n }}\n dnstap tls://{checked}\n whoami\n}}\n"
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    let query = support::query("tls.example.", RecordType::A);
    let _ = support::udp(addr, &query).await;
    let taps = collect(&mut got, has(&[CLIENT_QUERY, CLIENT_RESPONSE])).await;
    let cq = taps.iter().find(|t| t.mtype() == CLIENT_QUERY).unwrap();
    assert_eq!(
        cq.bytes(10),
        Some(&query.to_bytes().unwrap()[..]),
        "full, over TLS"
    );
    // The other reader's certificate is from a CA the system does not trust: no stream.
    let none = tokio::time::timeout(Duration::from_millis(1500), refused.recv()).await;
    assert!(
        none.is_err(),
        "no messages without a trusted certificate: {none:?}"
    );
    let dropped = crate::support::scrape(metrics)
        .await
        .get("coredns_dnstap_dropped_total{}")
        .copied()
        .unwrap_or(0.0);
    assert!(
        dropped >= 2.0,
        "the unverified output's messages are dropped: {dropped}"
    );
    drop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_that_connect_to_dnstap_listen_get_the_messages() {
    let dir = support::temp_dir("dnstap-listen");
    let sock = dir.join("listen.sock");
    let port = crate::support::upstream::free_port();
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n dnstap listen unix://{} full\n dnstap listen tcp://127.0.0.1:{port}\n whoami\n}}\n",
        sock.display()
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let (unix_tx, mut unix_rx) = mpsc::unbounded_channel();
    let (tcp_tx, mut tcp_rx) = mpsc::unbounded_channel();
    let deadline = Instant::now() + Duration::from_secs(10);
    let unix = loop {
        match tokio::net::UnixStream::connect(&sock).await {
            Ok(s) => break s,
            Err(e) => assert!(
                Instant::now() < deadline,
                "the server listens at {}: {e}",
                sock.display()
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let tcp = loop {
        match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(s) => break s,
            Err(e) => assert!(Instant::now() < deadline, "the server listens on {port}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let readers = [
        tokio::spawn(read_stream(unix, unix_tx, false)),
        tokio::spawn(read_stream(tcp, tcp_tx, false)),
    ];
    // Ask until both readers have a question's messages (a reader gets what comes after it
    // is accepted).
    let query = support::query("listen.example.", RecordType::A);
    let wire = query.to_bytes().unwrap();
    let (mut from_unix, mut from_tcp) = (Vec::new(), Vec::new());
    while !(has(&[CLIENT_QUERY, CLIENT_RESPONSE])(&from_unix)
        && has(&[CLIENT_QUERY, CLIENT_RESPONSE])(&from_tcp))
    {
        assert!(
            Instant::now() < deadline,
            "unix: {from_unix:?}\ntcp: {from_tcp:?}"
        );
        let _ = support::udp(addr, &query).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        while let Ok(t) = unix_rx.try_recv() {
            from_unix.push(t);
        }
        while let Ok(t) = tcp_rx.try_recv() {
            from_tcp.push(t);
        }
    }
    let cq = from_unix.iter().find(|t| t.mtype() == CLIENT_QUERY).unwrap();
    assert_eq!(
        cq.bytes(10).map(|b| &b[2..]),
        Some(&wire[2..]),
        "full: the query (its ID aside)"
    );
    assert!(
        from_tcp
            .iter()
            .all(|t| t.bytes(10).is_none() && t.bytes(14).is_none())
    );
    drop(running);
    for r in readers {
        r.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dnstap_listen_binds_once_its_address_is_free() {
    let dir = support::temp_dir("dnstap-listen-busy");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let corefile = format!(".:0 {{\n bind 127.0.0.1\n dnstap listen tcp://127.0.0.1:{port}\n whoami\n}}\n");
    let running = support::start(&corefile, &dir).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(taken);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut s = loop {
        if let Ok(s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the server listens once the port is free"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut head = [0u8; 8];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&head[..4], &[0, 0, 0, 0], "READY");
    drop(running);
}
