//! Test support: start the real server in process on loopback port 0, and a small DNS client
//! (hickory-proto for the wire format) that queries it over real UDP and TCP sockets.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cluster_dns::app::{self, Running};
use cluster_dns::config::{Config, DEFAULT_DNS_PORT};
use cluster_dns::corefile::Corefile;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// Where the test data lives.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// A unique temporary directory for one test.
pub fn temp_dir(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "cluster-dns-test-{}-{}-{}",
        std::process::id(),
        tag,
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Starts the server from Corefile text. Relative paths in it resolve against `dir`.
pub async fn start(corefile: &str, dir: &Path) -> Running {
    let path = dir.join("Corefile");
    std::fs::write(&path, corefile).expect("write Corefile");
    let cf = Corefile::parse_str(corefile, &path).expect("Corefile parses");
    let config = Config::from_corefile(&cf, &path, DEFAULT_DNS_PORT).expect("config is valid");
    app::start(&config).await.expect("server starts")
}

/// A query message.
pub fn query(name: &str, qtype: RecordType) -> Message {
    let mut msg = Message::new(rand_id(), MessageType::Query, OpCode::Query);
    msg.metadata.recursion_desired = true;
    let mut q = Query::query(Name::from_ascii(name).expect("test name"), qtype);
    q.set_query_class(DNSClass::IN);
    msg.add_query(q);
    msg
}

/// A query with an EDNS OPT advertising `payload`.
pub fn query_edns(name: &str, qtype: RecordType, payload: u16) -> Message {
    let mut msg = query(name, qtype);
    let mut edns = Edns::new();
    edns.set_max_payload(payload);
    msg.set_edns(edns);
    msg
}

fn rand_id() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static N: AtomicU16 = AtomicU16::new(4242);
    N.fetch_add(7919, Ordering::Relaxed)
}

/// Sends raw bytes over UDP and returns the raw reply, or `None` after `wait`.
pub async fn udp_raw(addr: SocketAddr, bytes: &[u8], wait: Duration) -> Option<Vec<u8>> {
    let sock = UdpSocket::bind("127.0.0.1:0").await.expect("client socket");
    sock.send_to(bytes, addr).await.expect("send");
    let mut buf = vec![0u8; 65535];
    match tokio::time::timeout(wait, sock.recv_from(&mut buf)).await {
        Ok(Ok((n, _))) => Some(buf[..n].to_vec()),
        _ => None,
    }
}

/// Sends a message over UDP; returns the reply and its wire size.
pub async fn udp(addr: SocketAddr, msg: &Message) -> (Message, usize) {
    let bytes = msg.to_bytes().expect("encode");
    let reply = udp_raw(addr, &bytes, Duration::from_secs(3))
        .await
        .expect("a UDP reply");
    let parsed = Message::from_bytes(&reply).expect("reply parses");
    assert_eq!(parsed.metadata.id, msg.metadata.id, "reply id");
    (parsed, reply.len())
}

/// Sends raw bytes over TCP (length-prefixed) and returns the raw reply.
pub async fn tcp_raw(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.expect("tcp connect");
    let len = u16::try_from(bytes.len()).expect("small message");
    s.write_all(&len.to_be_bytes()).await.expect("write");
    s.write_all(bytes).await.expect("write");
    let mut lenb = [0u8; 2];
    tokio::time::timeout(Duration::from_secs(3), s.read_exact(&mut lenb))
        .await
        .expect("tcp reply in time")
        .expect("read");
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(lenb))];
    s.read_exact(&mut buf).await.expect("read");
    buf
}

/// Sends a message over TCP.
pub async fn tcp(addr: SocketAddr, msg: &Message) -> Message {
    let reply = tcp_raw(addr, &msg.to_bytes().expect("encode")).await;
    let parsed = Message::from_bytes(&reply).expect("reply parses");
    assert_eq!(parsed.metadata.id, msg.metadata.id, "reply id");
    parsed
}

/// A record as the conformance table writes it: `owner TYPE rdata`.
pub fn show(r: &Record) -> String {
    let rdata = match &r.data {
        RData::A(a) => a.0.to_string(),
        RData::AAAA(a) => a.0.to_string(),
        RData::SRV(s) => format!("{} {} {} {}", s.priority, s.weight, s.port, s.target),
        RData::PTR(p) => p.0.to_string(),
        RData::CNAME(c) => c.0.to_string(),
        RData::NS(n) => n.0.to_string(),
        RData::TXT(t) => t
            .txt_data
            .iter()
            .map(|d| format!("\"{}\"", String::from_utf8_lossy(d)))
            .collect::<Vec<_>>()
            .join(" "),
        RData::SOA(s) => format!(
            "{} {} {} {} {} {} {}",
            s.mname, s.rname, s.serial, s.refresh, s.retry, s.expire, s.minimum
        ),
        other => format!("{other:?}"),
    };
    format!("{} {} {}", r.name, r.record_type(), rdata)
}

/// Real `dig` against `addr` (one try, 2 s), its output; the test fails if dig does.
pub fn dig(addr: SocketAddr, args: &[&str]) -> String {
    let out = std::process::Command::new("dig")
        .arg(format!("@{}", addr.ip()))
        .arg("-p")
        .arg(addr.port().to_string())
        .args(["+time=2", "+tries=1"])
        .args(args)
        .output()
        .expect("dig is installed (apt-get install bind9-dnsutils)");
    assert!(
        out.status.success(),
        "dig {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The status word of dig's header line (`NOERROR`, `NXDOMAIN`, ...) in `out`.
pub fn dig_status(out: &str) -> String {
    out.split("status: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or("")
        .to_owned()
}

/// `line` with every run of whitespace (dig's tabs) made one space.
pub fn single_spaced(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The record lines of dig's `out` (comments and blank lines left out), single-spaced.
pub fn dig_records(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(single_spaced)
        .collect()
}

/// Reads Corefile `text` (as if at `dir/Corefile`) the way start-up does: `Err` with the
/// message a user would see.
pub fn check_corefile(dir: &Path, text: &str) -> Result<(), String> {
    let path = dir.join("Corefile");
    let cf = Corefile::parse_str(text, &path).map_err(|e| e.to_string())?;
    Config::from_corefile(&cf, &path, DEFAULT_DNS_PORT)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The cluster zone of the running configuration's first `kubernetes` block.
pub fn zone(running: &Running) -> std::sync::Arc<cluster_dns::cluster::ClusterZone> {
    running.acquired::<cluster_dns::cluster::ClusterSource>()[0]
        .zone()
        .clone()
}

/// The API watches' sync state of the running configuration's first `kubernetes` block.
pub fn sync_state(running: &Running) -> cluster_dns::cluster::watch::SyncState {
    running.acquired::<cluster_dns::cluster::ClusterSource>()[0]
        .sync_state()
        .expect("the kubernetes block watches the API")
}

/// What the first `loop` plugin of the running configuration found.
pub fn loop_status(running: &Running) -> std::sync::Arc<cluster_dns::plugin::loop_detect::LoopStatus> {
    running
        .chains()
        .iter()
        .find_map(|c| {
            c.find::<cluster_dns::plugin::loop_detect::LoopDetect>()
                .map(|l| l.status().clone())
        })
        .expect("a loop plugin")
}
