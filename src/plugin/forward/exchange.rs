//! One exchange with one upstream: the query built with a fresh random ID (from the thread's
//! CSPRNG), sent from a socket on a random source port (UDP; from the upstream's pool of them,
//! [`super::udp`]) or over a TCP connection (kept for reuse, [`super::tls`]),
//! and a reply accepted only when its source address and port, ID, QR bit and question (name
//! case-insensitively, type, class) match. The UDP socket is connected to the upstream: the
//! kernel drops datagrams from any other source, and an ICMP port unreachable comes back as
//! ECONNREFUSED at once instead of a silent wait for the timeout. Anything else is dropped and counted, and the wait
//! goes on until the attempt's deadline.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use nix::sys::socket::{MsgFlags, recv};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::UdpSocket;
use tokio::time::{Instant, timeout_at};

use super::doh::DohTransport;
use super::tls::{TlsTransport, tcp_connect};
use super::udp::{self, UdpPool};
use crate::proto::MAX_UDP_PAYLOAD;
use crate::proto::Question;

/// Most datagrams one UDP attempt reads before it gives up (the deadline normally ends it first).
const MAX_DATAGRAMS_PER_ATTEMPT: usize = 256;
/// The receive buffer of one UDP read, on the stack. The query advertises [`MAX_UDP_PAYLOAD`]; a
/// larger datagram is cut by the kernel, fails to parse and is dropped like any bad reply.
const UDP_RECV_BUFFER: usize = 4096;

/// Errors of one upstream exchange.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForwardError {
    /// No matching reply before the deadline.
    #[error("no reply from {addr} ({}) in time", if *tcp { "tcp" } else { "udp" })]
    Timeout {
        /// The upstream.
        addr: SocketAddr,
        /// Over TCP.
        tcp: bool,
    },
    /// A socket error.
    #[error("{addr}: {source}")]
    Io {
        /// The upstream.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// Only replies that did not match the query arrived.
    #[error("{addr}: only mismatched replies")]
    Unwanted {
        /// The upstream.
        addr: SocketAddr,
    },
    /// The query could not be encoded.
    #[error("cannot encode the upstream query: {0}")]
    Encode(String),
}

/// The query sent upstream for `q` with message ID `id`: the client's name (its case kept), type,
/// class, RD and CD bits, and EDNS advertising [`MAX_UDP_PAYLOAD`] with the client's DO bit
/// and the question's EDNS options (the client's, as `rewrite`'s `edns0` rules left them).
pub fn build_query(q: &Question, id: u16) -> Result<Vec<u8>, ForwardError> {
    let mut msg = Message::new(id, MessageType::Query, OpCode::Query);
    msg.metadata.recursion_desired = q.recursion_desired;
    msg.metadata.checking_disabled = q.checking_disabled;
    let mut query = Query::query(q.name.clone(), q.qtype);
    query.set_query_class(q.qclass);
    msg.add_query(query);
    let mut edns = Edns::new();
    edns.set_max_payload(MAX_UDP_PAYLOAD);
    edns.set_dnssec_ok(q.dnssec_ok);
    for o in &q.edns_options {
        edns.options_mut().as_mut().push((
            EdnsCode::from(o.code),
            EdnsOption::Unknown(o.code, o.data.clone()),
        ));
    }
    msg.set_edns(edns);
    msg.to_bytes().map_err(|e| ForwardError::Encode(e.to_string()))
}

/// The reply in `bytes` if it answers query `id` for `q`: a response with that ID and exactly
/// that question.
pub fn accept_reply(bytes: &[u8], id: u16, q: &Question) -> Option<Message> {
    let msg = Message::from_bytes(bytes).ok()?;
    if msg.metadata.id != id || msg.metadata.message_type != MessageType::Response {
        return None;
    }
    match msg.queries.as_slice() {
        [rq] if same_name(rq.name(), &q.name)
            && rq.query_type() == q.qtype
            && rq.query_class() == q.qclass =>
        {
            Some(msg)
        }
        _ => None,
    }
}

fn same_name(a: &Name, b: &Name) -> bool {
    a.to_lowercase() == b.to_lowercase()
}

/// Counters the exchanges update.
#[derive(Debug, Default)]
pub struct ExchangeStats {
    /// Replies dropped: wrong ID or question, or unparsable (the connected socket never sees
    /// another source's datagrams).
    pub unwanted_replies: AtomicU64,
}

/// An upstream as the exchanges reach it: its address, and the local address outgoing sockets
/// are bound to (`source_address`; the kernel's choice when `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The upstream's address.
    pub addr: SocketAddr,
    /// `source_address`.
    pub source: Option<IpAddr>,
}

/// How an upstream is reached: plain DNS (UDP or TCP), DNS over TLS or DNS over HTTPS, with
/// the connections kept for it.
#[derive(Debug)]
pub enum Link {
    /// Plain DNS.
    Plain,
    /// DNS over TLS (`tls://`).
    Tls(TlsTransport),
    /// DNS over HTTPS (`https://`).
    Https(DohTransport),
    /// A `tls://` or `https://` upstream whose TLS settings could not be built (setup checks
    /// them, so this is not expected): every exchange fails, never falling back to plain DNS.
    Unusable(String),
}

impl Link {
    /// True for plain DNS (UDP is possible, and so is a TCP retry after truncation).
    pub fn is_plain(&self) -> bool {
        matches!(self, Link::Plain)
    }
}

/// The sockets and connections of a plain upstream kept for reuse.
#[derive(Debug, Clone, Copy)]
pub struct Pools<'a> {
    /// Its UDP sockets.
    pub udp: &'a UdpPool,
    /// Its TCP connections.
    pub tcp: &'a TlsTransport,
}

/// A query on its way to an upstream: the question, its message ID and wire form, and the
/// local address it left from once sent (what `dnstap` reports of it).
#[derive(Debug)]
pub struct Outgoing<'a> {
    /// The question.
    pub q: &'a Question,
    /// The message ID.
    pub id: u16,
    /// The query as sent.
    pub wire: Vec<u8>,
    /// This server's end of the socket it went out on (not known over TLS).
    pub local: OnceLock<SocketAddr>,
}

impl<'a> Outgoing<'a> {
    /// The query for `q` to an upstream reached over `link`: a fresh random ID, or 0 over
    /// HTTPS (RFC 8484).
    pub fn new(q: &'a Question, link: &Link) -> Result<Self, ForwardError> {
        let id: u16 = if matches!(link, Link::Https(_)) {
            0
        } else {
            rand::random()
        };
        Ok(Self {
            q,
            id,
            wire: build_query(q, id)?,
            local: OnceLock::new(),
        })
    }
}

/// Asks `peer` for `q` over `link`: TLS or HTTPS when it says so, else UDP (or TCP when `tcp`),
/// giving up at `deadline`. Over UDP and TCP the socket or connection comes from `pools` when
/// given (and goes back once the reply is in), else it is opened for this query alone. Over
/// HTTPS the ID is 0 (RFC 8484).
pub async fn exchange(
    peer: Peer,
    link: &Link,
    pools: Option<Pools<'_>>,
    q: &Question,
    tcp: bool,
    deadline: Instant,
    stats: &ExchangeStats,
) -> Result<Message, ForwardError> {
    send(peer, link, pools, &Outgoing::new(q, link)?, tcp, deadline, stats).await
}

/// [`exchange`] for a query already built (its local address is recorded in `out` once sent,
/// over UDP and TCP).
pub async fn send(
    peer: Peer,
    link: &Link,
    pools: Option<Pools<'_>>,
    out: &Outgoing<'_>,
    tcp: bool,
    deadline: Instant,
    stats: &ExchangeStats,
) -> Result<Message, ForwardError> {
    let addr = peer.addr;
    let (q, id, query) = (out.q, out.id, out.wire.as_slice());
    // The TLS, HTTPS and TCP exchanges' futures are boxed: inline they made this future about
    // 8 KiB whatever the transport, held by every UDP question in flight (at the default
    // `max_concurrent` of 10,000, 80 MiB: tests/integration/plugins/fairness.rs, the RSS ceiling).
    let work = async {
        let secure = match link {
            Link::Tls(tls) => Some(Box::pin(tls.exchange(addr, query)).await),
            Link::Https(doh) => Some(Box::pin(doh.exchange(addr, query)).await),
            Link::Unusable(why) => Some(Err(std::io::Error::other(why.clone()))),
            Link::Plain => None,
        };
        if let Some(reply) = secure {
            let reply = reply.map_err(|source| ForwardError::Io { addr, source })?;
            accept_reply(&reply, id, q).ok_or_else(|| {
                stats.unwanted_replies.fetch_add(1, Ordering::Relaxed);
                ForwardError::Unwanted { addr }
            })
        } else if tcp {
            match pools {
                Some(p) => {
                    let reply = Box::pin(p.tcp.exchange(addr, query))
                        .await
                        .map_err(|source| ForwardError::Io { addr, source })?;
                    accept_reply(&reply, id, q).ok_or_else(|| {
                        stats.unwanted_replies.fetch_add(1, Ordering::Relaxed);
                        ForwardError::Unwanted { addr }
                    })
                }
                None => Box::pin(exchange_tcp(peer, out, stats)).await,
            }
        } else {
            let io = |source| ForwardError::Io { addr, source };
            match pools.map(|p| p.udp) {
                Some(pool) => {
                    let lease = pool.lease().await.map_err(io)?;
                    if let Ok(local) = lease.socket().local_addr() {
                        let _ = out.local.set(local);
                    }
                    let reply = exchange_udp(addr, lease.socket(), query, id, q, stats).await?;
                    pool.give_back(lease);
                    Ok(reply)
                }
                None => {
                    let sock = udp::connect(addr, peer.source).await.map_err(io)?;
                    if let Ok(local) = sock.local_addr() {
                        let _ = out.local.set(local);
                    }
                    exchange_udp(addr, &sock, query, id, q, stats).await
                }
            }
        }
    };
    match timeout_at(deadline, work).await {
        Ok(r) => r,
        Err(_) => Err(ForwardError::Timeout { addr, tcp }),
    }
}

/// Sends `query` on `sock` (connected to `addr`) and waits for the reply that matches it.
async fn exchange_udp(
    addr: SocketAddr,
    sock: &UdpSocket,
    query: &[u8],
    id: u16,
    q: &Question,
    stats: &ExchangeStats,
) -> Result<Message, ForwardError> {
    let io = |source| ForwardError::Io { addr, source };
    sock.send(query).await.map_err(io)?;
    for _ in 0..MAX_DATAGRAMS_PER_ATTEMPT {
        // Woken on an error too, as `recv` is: an ICMP port unreachable is ECONNREFUSED now.
        let read = sock.async_io(Interest::READABLE | Interest::ERROR, || read_reply(sock, id, q));
        match read.await.map_err(io)? {
            Some(msg) => return Ok(msg),
            None => {
                stats.unwanted_replies.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%addr, "dropped a reply whose ID or question does not match");
            }
        }
    }
    Err(ForwardError::Unwanted { addr })
}

/// Reads one queued datagram from `sock` and parses it as the reply to `id` for `q` (`None`:
/// not that reply). The receive buffer is on this function's stack, not in the exchange's
/// future: a query waiting for its reply holds no buffer, where a heap buffer per query in
/// flight (4 KiB, at `max_concurrent 1000`) left megabytes of freed holes between the cache's
/// entries once the burst was over.
fn read_reply(sock: &UdpSocket, id: u16, q: &Question) -> std::io::Result<Option<Message>> {
    let mut buf = [0u8; UDP_RECV_BUFFER];
    let n = recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty())?;
    Ok(buf.get(..n).and_then(|b| accept_reply(b, id, q)))
}

async fn exchange_tcp(
    peer: Peer,
    sent: &Outgoing<'_>,
    stats: &ExchangeStats,
) -> Result<Message, ForwardError> {
    let (q, id, query) = (sent.q, sent.id, sent.wire.as_slice());
    let addr = peer.addr;
    let io = |source| ForwardError::Io { addr, source };
    let mut stream = tcp_connect(addr, peer.source).await.map_err(io)?;
    if let Ok(local) = stream.local_addr() {
        let _ = sent.local.set(local);
    }
    let len = u16::try_from(query.len()).map_err(|_| ForwardError::Encode("query too long".into()))?;
    let mut out = Vec::with_capacity(query.len() + 2);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(query);
    stream.write_all(&out).await.map_err(io)?;
    let mut lenb = [0u8; 2];
    stream.read_exact(&mut lenb).await.map_err(io)?;
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(lenb))];
    stream.read_exact(&mut buf).await.map_err(io)?;
    match accept_reply(&buf, id, q) {
        Some(msg) => Ok(msg),
        None => {
            stats.unwanted_replies.fetch_add(1, Ordering::Relaxed);
            Err(ForwardError::Unwanted { addr })
        }
    }
}

/// The question a health probe asks: `. IN NS`, as CoreDNS's.
pub fn probe_question() -> Question {
    Question::new(Name::root(), RecordType::NS)
}

/// How long a health probe waits for its reply.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_must_match_id_and_question() {
        let q = Question::new(Name::from_ascii("WwW.Example.com.").unwrap(), RecordType::A);
        let bytes = build_query(&q, 7).unwrap();
        let mut reply = Message::from_bytes(&bytes).unwrap();
        // A query is not a reply.
        assert!(accept_reply(&bytes, 7, &q).is_none());
        reply.metadata.message_type = MessageType::Response;
        let ok = reply.to_bytes().unwrap();
        assert!(accept_reply(&ok, 7, &q).is_some());
        assert!(accept_reply(&ok, 8, &q).is_none());
        let other = Question::new(Name::from_ascii("www.example.org.").unwrap(), RecordType::A);
        assert!(accept_reply(&ok, 7, &other).is_none());
        let case = Question::new(Name::from_ascii("www.EXAMPLE.com.").unwrap(), RecordType::A);
        assert!(accept_reply(&ok, 7, &case).is_some());
        let aaaa = Question::new(q.name.clone(), RecordType::AAAA);
        assert!(accept_reply(&ok, 7, &aaaa).is_none());
        assert!(accept_reply(&ok[..5], 7, &q).is_none());
    }
}
