//! Upstream DNS servers for the forwarding tests, all on 127.0.0.1 port 0:
//!
//! - [`Scripted`]: a small authoritative server for `example.com` written here, over UDP and
//!   TCP, whose behaviour a test switches at run time ([`Mode`]): answer, be slow, drop, answer
//!   spoofed replies (wrong ID, wrong source port, wrong question) before the real one, answer a
//!   chosen rcode, or relay every query to another server (a resolv.conf stub such as 127.0.0.53 pointing back at us).
//!   It counts the queries it gets and keeps the source addresses and EDNS options they came
//!   with.
//! - [`Unbound`]: the real Debian `unbound`, authoritative for a small zone through
//!   `local-zone`/`local-data`, started from a config in a temp dir and killed on drop.

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};
use tokio::task::JoinHandle;

/// How the scripted upstream behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answer at once.
    Answer,
    /// Answer after this delay.
    Slow(Duration),
    /// Never answer.
    Drop,
    /// Send three bad replies (from another port, with another ID, for another question), each
    /// claiming 203.0.113.66, then the real answer 50 ms later.
    Spoof,
    /// Pass every query to this server and its reply back.
    Relay(SocketAddr),
    /// Answer at once with this rcode and empty sections (a recursor's SERVFAIL or REFUSED).
    Rcode(ResponseCode),
}

/// The address the spoofed replies claim.
pub const SPOOFED_IP: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 66);

struct State {
    mode: Mutex<Mode>,
    udp_queries: AtomicUsize,
    tcp_queries: AtomicUsize,
    /// The last octet of `www.example.com`'s address (192.0.2.X).
    last_octet: AtomicU8,
    /// The TTL of positive answers.
    ttl: AtomicU32,
    /// The source address of every query, UDP and TCP, in arrival order.
    sources: Mutex<Vec<IpAddr>>,
    /// The EDNS options (code, data) of every query parsed, UDP and TCP, in arrival order.
    options: Mutex<Vec<Options>>,
    /// When set, the address positive answers give instead of 192.0.2.X.
    address: Mutex<Option<Ipv4Addr>>,
}

/// One query's EDNS options: code and wire data, in the order sent.
pub type Options = Vec<(u16, Vec<u8>)>;

/// The EDNS options of `query` as code and wire data, in the order sent.
fn options_of(query: &Message) -> Options {
    query
        .edns
        .as_ref()
        .map(|e| {
            e.options()
                .as_ref()
                .iter()
                .map(|(code, o)| (u16::from(*code), o.to_bytes().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

/// The scripted upstream.
pub struct Scripted {
    /// Where it listens (UDP and TCP).
    pub addr: SocketAddr,
    state: Arc<State>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn soa() -> Record {
    let zone = Name::from_ascii("example.com.").unwrap();
    let soa = SOA::new(
        Name::from_ascii("ns.example.com.").unwrap(),
        Name::from_ascii("hostmaster.example.com.").unwrap(),
        1,
        3600,
        600,
        86400,
        2,
    );
    Record::from_rdata(zone, 2, RData::SOA(soa))
}

/// True for names the upstream never answers, in any mode: those whose first label starts with
/// `silent` (a flood of names an upstream never resolves).
fn never_answered(query: &Message) -> bool {
    query.queries.first().is_some_and(|q| {
        q.name()
            .iter()
            .next()
            .is_some_and(|l| l.to_ascii_lowercase().starts_with(b"silent"))
    })
}

/// The answer to `query` (parsed): `nx*` names are NXDOMAIN (SOA TTL and MINIMUM 2 s); `big*`
/// names have 100 A records (truncated over UDP); HINFO and other types get NODATA; every other
/// name gets one A 192.0.2.X with the state's TTL; in [`Mode::Rcode`], that rcode and nothing
/// else. Always RA=1, AA=1.
fn answer(state: &State, query: &Message, udp: bool) -> Message {
    let mut reply = Message::response(query.metadata.id, query.metadata.op_code);
    reply.metadata.recursion_desired = query.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.metadata.authoritative = true;
    reply.queries = query.queries.clone();
    let Some(q) = query.queries.first() else {
        reply.metadata.response_code = ResponseCode::FormErr;
        return reply;
    };
    let name = q.name().clone();
    let first = name
        .iter()
        .next()
        .map(|l| String::from_utf8_lossy(l).to_ascii_lowercase())
        .unwrap_or_default();
    let ttl = state.ttl.load(Ordering::Relaxed);
    if let Mode::Rcode(code) = *state.mode.lock().unwrap() {
        reply.metadata.response_code = code;
    } else if first.starts_with("nx") {
        reply.metadata.response_code = ResponseCode::NXDomain;
        reply.authorities.push(soa());
    } else if q.query_type() != RecordType::A {
        reply.authorities.push(soa());
    } else if first.starts_with("big") {
        if udp {
            reply.metadata.truncation = true;
        } else {
            for i in 0..100u8 {
                reply.answers.push(Record::from_rdata(
                    name.clone(),
                    ttl,
                    RData::A(A(Ipv4Addr::new(198, 51, 100, i))),
                ));
            }
        }
    } else {
        let octet = state.last_octet.load(Ordering::Relaxed);
        let ip = state
            .address
            .lock()
            .unwrap()
            .unwrap_or(Ipv4Addr::new(192, 0, 2, octet));
        reply.answers.push(Record::from_rdata(name, ttl, RData::A(A(ip))));
    }
    reply
}

fn spoof_of(good: &Message, id: u16, name: Option<&str>) -> Vec<u8> {
    let mut m = good.clone();
    m.metadata.id = id;
    if let Some(n) = name
        && let Some(q) = m.queries.first_mut()
    {
        q.set_name(Name::from_ascii(n).unwrap());
    }
    m.answers = vec![Record::from_rdata(
        good.queries[0].name().clone(),
        300,
        RData::A(A(SPOOFED_IP)),
    )];
    m.to_bytes().unwrap()
}

async fn relay(target: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let sock = UdpSocket::bind("127.0.0.1:0").await.ok()?;
    sock.send_to(bytes, target).await.ok()?;
    let mut buf = vec![0u8; 65535];
    let (n, _) = tokio::time::timeout(Duration::from_secs(3), sock.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    buf.truncate(n);
    Some(buf)
}

impl Scripted {
    /// Starts it on 127.0.0.1, a free port, answering ([`Mode::Answer`]) with TTL 300.
    pub async fn start() -> Self {
        let (udp, tcp) = crate::support::upstream::bind_pair().await;
        let addr = udp.local_addr().unwrap();
        let state = Arc::new(State {
            mode: Mutex::new(Mode::Answer),
            udp_queries: AtomicUsize::new(0),
            tcp_queries: AtomicUsize::new(0),
            last_octet: AtomicU8::new(1),
            ttl: AtomicU32::new(300),
            sources: Mutex::new(Vec::new()),
            options: Mutex::new(Vec::new()),
            address: Mutex::new(None),
        });
        let udp = Arc::new(udp);
        let s = Arc::clone(&state);
        let u = Arc::clone(&udp);
        let udp_task = tokio::spawn(async move {
            let mut buf = vec![0u8; 65535];
            loop {
                let Ok((n, from)) = u.recv_from(&mut buf).await else {
                    return;
                };
                let bytes = buf[..n].to_vec();
                s.udp_queries.fetch_add(1, Ordering::Relaxed);
                s.sources.lock().unwrap().push(from.ip());
                let (s, u) = (Arc::clone(&s), Arc::clone(&u));
                tokio::spawn(async move {
                    let mode = *s.mode.lock().unwrap();
                    if let Mode::Relay(target) = mode {
                        if let Some(r) = relay(target, &bytes).await {
                            let _ = u.send_to(&r, from).await;
                        }
                        return;
                    }
                    let Ok(query) = Message::from_bytes(&bytes) else {
                        return;
                    };
                    if query.metadata.message_type != MessageType::Query {
                        return;
                    }
                    s.options.lock().unwrap().push(options_of(&query));
                    if never_answered(&query) {
                        return;
                    }
                    let reply = answer(&s, &query, true);
                    match mode {
                        Mode::Drop => return,
                        Mode::Slow(d) => tokio::time::sleep(d).await,
                        Mode::Spoof => {
                            let other = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                            let id = reply.metadata.id;
                            let _ = other.send_to(&spoof_of(&reply, id, None), from).await;
                            let _ = u.send_to(&spoof_of(&reply, id.wrapping_add(1), None), from).await;
                            let _ = u
                                .send_to(&spoof_of(&reply, id, Some("other.example.org.")), from)
                                .await;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        Mode::Answer | Mode::Relay(_) | Mode::Rcode(_) => {}
                    }
                    let _ = u.send_to(&reply.to_bytes().unwrap(), from).await;
                });
            }
        });
        let s = Arc::clone(&state);
        let tcp_task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, from)) = tcp.accept().await else {
                    return;
                };
                let s = Arc::clone(&s);
                tokio::spawn(async move {
                    let mut lenb = [0u8; 2];
                    if stream.read_exact(&mut lenb).await.is_err() {
                        return;
                    }
                    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(lenb))];
                    if stream.read_exact(&mut buf).await.is_err() {
                        return;
                    }
                    s.tcp_queries.fetch_add(1, Ordering::Relaxed);
                    s.sources.lock().unwrap().push(from.ip());
                    let mode = *s.mode.lock().unwrap();
                    let Ok(query) = Message::from_bytes(&buf) else {
                        return;
                    };
                    s.options.lock().unwrap().push(options_of(&query));
                    if never_answered(&query) {
                        tokio::time::sleep(Duration::from_secs(10)).await;
                        return;
                    }
                    match mode {
                        Mode::Drop => {
                            tokio::time::sleep(Duration::from_secs(10)).await;
                            return;
                        }
                        Mode::Slow(d) => tokio::time::sleep(d).await,
                        _ => {}
                    }
                    let out = answer(&s, &query, false).to_bytes().unwrap();
                    let mut framed = u16::try_from(out.len()).unwrap().to_be_bytes().to_vec();
                    framed.extend_from_slice(&out);
                    let _ = stream.write_all(&framed).await;
                });
            }
        });
        Self {
            addr,
            state,
            tasks: vec![udp_task, tcp_task],
        }
    }

    /// Switches its behaviour.
    pub fn set_mode(&self, mode: Mode) {
        *self.state.mode.lock().unwrap() = mode;
    }

    /// Sets the TTL of positive answers.
    pub fn set_ttl(&self, ttl: u32) {
        self.state.ttl.store(ttl, Ordering::Relaxed);
    }

    /// Sets the address positive answers give: 192.0.2.`octet`.
    pub fn set_octet(&self, octet: u8) {
        self.state.last_octet.store(octet, Ordering::Relaxed);
    }

    /// Sets the address positive answers give, whatever the name (a resolver for hostnames).
    pub fn set_address(&self, ip: Ipv4Addr) {
        *self.state.address.lock().unwrap() = Some(ip);
    }

    /// The source address of every query received (UDP and TCP), in arrival order.
    pub fn sources(&self) -> Vec<IpAddr> {
        self.state.sources.lock().unwrap().clone()
    }

    /// The EDNS options (code, wire data) of every query received, in arrival order.
    pub fn options(&self) -> Vec<Options> {
        self.state.options.lock().unwrap().clone()
    }

    /// UDP queries received.
    pub fn udp_queries(&self) -> usize {
        self.state.udp_queries.load(Ordering::Relaxed)
    }

    /// Queries received over TCP.
    pub fn tcp_queries(&self) -> usize {
        self.state.tcp_queries.load(Ordering::Relaxed)
    }
}

/// UDP and TCP on the same free port of 127.0.0.1.
pub async fn bind_pair() -> (UdpSocket, TcpListener) {
    for _ in 0..32 {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = udp.local_addr().unwrap().port();
        if let Ok(tcp) = TcpListener::bind(("127.0.0.1", port)).await {
            return (udp, tcp);
        }
    }
    panic!("no free port pair");
}

/// A free port on 127.0.0.1 for UDP and TCP (released, so a server can bind it next).
pub fn free_port() -> u16 {
    for _ in 0..32 {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port");
}

/// The real `unbound`, authoritative for the test zone.
pub struct Unbound {
    /// Where it listens (UDP and TCP).
    pub addr: SocketAddr,
    child: Child,
}

impl Unbound {
    /// Kills it and waits until it is gone: its port answers nothing.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Unbound {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The zone `unbound` serves: `www.example.com` A 192.0.2.10 (TTL 300), `short.example.com`
/// A 192.0.2.11 (TTL 1), `big.example.com` with 100 A records (too big for 1232 bytes, so UDP is
/// truncated), `8.8.8.8.in-addr.arpa` PTR `dns.google.`, a SOA at the root (TTL and MINIMUM 2,
/// so NXDOMAIN is cached 2 s), and NXDOMAIN for every other name.
pub const UNBOUND_DATA: &[&str] = &[
    ". 2 IN SOA ns.test. hostmaster.test. 1 3600 600 86400 2",
    "www.example.com. 300 IN A 192.0.2.10",
    "short.example.com. 1 IN A 192.0.2.11",
    "8.8.8.8.in-addr.arpa. 300 IN PTR dns.google.",
];

/// The `server:` lines every test `unbound` shares: on `port` of 127.0.0.1, in the foreground,
/// no user switch or chroot, files in `dir`, one thread, loopback clients, and only the local
/// data the caller adds (`local-zone: "." static`).
pub fn unbound_server_conf(dir: &Path, port: u16) -> String {
    format!(
        "server:\n  interface: 127.0.0.1@{port}\n  do-ip6: no\n  do-daemonize: no\n  username: \"\"\n  chroot: \"\"\n  directory: \"{dir}\"\n  pidfile: \"\"\n  use-syslog: no\n  logfile: \"\"\n  verbosity: 0\n  num-threads: 1\n  access-control: 127.0.0.0/8 allow\n  module-config: \"iterator\"\n  local-zone: \".\" static\n",
        dir = dir.display()
    )
}

/// Runs `unbound -d -c CONF` (the config written to `dir/unbound.conf`), its output discarded.
pub fn spawn_unbound(dir: &Path, conf: &str) -> std::io::Result<Child> {
    let path = dir.join("unbound.conf");
    std::fs::write(&path, conf)?;
    // Debian puts it in /usr/sbin, which a non-root PATH may lack.
    let bin = ["/usr/sbin/unbound", "/usr/local/sbin/unbound"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("unbound");
    Command::new(bin)
        .arg("-d")
        .arg("-c")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

impl Unbound {
    /// Starts `unbound` on a free port of 127.0.0.1 with its config in `dir`; waits until it
    /// answers. `None` when it cannot be started (test.sh installs it; callers panic then).
    pub async fn start(dir: &Path) -> Option<Self> {
        Self::start_on(dir, free_port()).await
    }

    /// [`Unbound::start`] on `port` (to start it again where it was, after [`Unbound::stop`]).
    pub async fn start_on(dir: &Path, port: u16) -> Option<Self> {
        let mut conf = unbound_server_conf(dir, port);
        conf.push_str(&format!("  port: {port}\n"));
        for d in UNBOUND_DATA {
            conf.push_str(&format!("  local-data: \"{d}\"\n"));
        }
        for i in 0..100 {
            conf.push_str(&format!(
                "  local-data: \"big.example.com. 300 IN A 198.51.100.{i}\"\n"
            ));
        }
        conf.push_str("remote-control:\n  control-enable: no\n");
        let child = spawn_unbound(dir, &conf).ok()?;
        let addr: SocketAddr = (Ipv4Addr::LOCALHOST, port).into();
        let ub = Self { addr, child };
        let probe = crate::support::query("www.example.com.", RecordType::A)
            .to_bytes()
            .unwrap();
        for _ in 0..50 {
            if crate::support::udp_raw(addr, &probe, Duration::from_millis(200))
                .await
                .is_some()
            {
                return Some(ub);
            }
        }
        panic!("unbound did not start answering on {addr}");
    }
}
