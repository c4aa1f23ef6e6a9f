//! The PROXY protocol (HAProxy's proxy-protocol.txt, versions 1 and 2) in front of DNS
//! (`proxyproto`): the header a load balancer puts before a connection's bytes or a datagram,
//! naming the client it forwards for. From a source whose policy is `use`
//! ([`policy_for`]) the header's source address becomes the client address the
//! chain sees (acl, log, view, metrics); replies still go to the peer. As CoreDNS does, UDP
//! takes version 2 only (a `DGRAM` header, or a `LOCAL` one: the peer's own address), TCP
//! both; a datagram with a malformed header is
//! dropped, a connection with one closed.
//!
//! With `udp_session_tracking` (Cloudflare Spectrum), a datagram holding only a header is
//! remembered ([`UdpSessions`]): the headerless datagrams that follow from the same peer within
//! the TTL get its client, and each refreshes the TTL.
//!
//! Bounds: a TCP header is read within the listener's message deadline (by the caller) and is
//! at most [`MAX_V2_HEADER`] bytes (version 1: 107, as the specification says); a datagram's
//! header is read in place; at most `max_sessions` UDP sessions are remembered per listener
//! (the oldest goes first once none has expired), counted in
//! `cluster_dns_proxyproto_udp_sessions`.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use crate::chain::{ProxyPolicy, ProxyProtocol};

/// The version 2 signature.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The version 1 start.
const V1_START: &[u8] = b"PROXY ";
/// The longest version 1 line, CRLF included.
const V1_MAX: usize = 107;
/// The longest version 2 header taken (16 bytes and its addresses and TLVs).
pub const MAX_V2_HEADER: usize = 4096;

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Its length in bytes (what comes after it is DNS).
    pub len: usize,
    /// The client it names; `None` for `LOCAL` (v2) and `UNKNOWN` (v1): the peer itself.
    pub source: Option<SocketAddr>,
    /// True for a version 2 header of a datagram (`DGRAM`) transport.
    pub datagram: bool,
    /// True for a version 2 `LOCAL` command: the proxy speaks for itself (a health check); the
    /// receiver must accept it and use the connection's own addresses, whatever family and
    /// addresses it carries (the specification's section 2.2).
    pub local: bool,
}

/// Why a header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyError {
    /// More bytes are needed.
    Incomplete,
    /// It is not a header of either version.
    Invalid(&'static str),
    /// The policy refuses a header from this source (`default reject`).
    Rejected,
    /// A datagram held a header and no DNS message: a UDP session was remembered.
    HeaderOnly,
}

/// The UDP sessions of one listener (`udp_session_tracking`): peer to client, with when each
/// was last used. At most `max` (see the module docs).
#[derive(Debug)]
pub struct UdpSessions {
    ttl: Duration,
    max: usize,
    table: Mutex<HashMap<SocketAddr, (SocketAddr, Instant)>>,
    gauge: Option<prometheus::IntGauge>,
}

impl UdpSessions {
    /// Sessions that last `ttl` since their last datagram, at most `max` at once, counted in
    /// `gauge`.
    pub fn new(ttl: Duration, max: usize, gauge: Option<prometheus::IntGauge>) -> Self {
        Self {
            ttl,
            max: max.max(1),
            table: Mutex::new(HashMap::new()),
            gauge,
        }
    }

    fn count(&self, table: &HashMap<SocketAddr, (SocketAddr, Instant)>) {
        if let Some(g) = &self.gauge {
            g.set(i64::try_from(table.len()).unwrap_or(i64::MAX));
        }
    }

    /// Remembers `client` for datagrams from `peer`.
    pub fn store(&self, peer: SocketAddr, client: SocketAddr) {
        let now = Instant::now();
        let Ok(mut table) = self.table.lock() else { return };
        if !table.contains_key(&peer) && table.len() >= self.max {
            table.retain(|_, (_, used)| now.duration_since(*used) < self.ttl);
            if table.len() >= self.max
                && let Some(oldest) = table.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| *k)
            {
                table.remove(&oldest);
            }
        }
        table.insert(peer, (client, now));
        self.count(&table);
    }

    /// The client remembered for `peer`, refreshing its TTL; `None` when there is none or it
    /// expired (then forgotten).
    pub fn lookup(&self, peer: SocketAddr) -> Option<SocketAddr> {
        let now = Instant::now();
        let mut table = self.table.lock().ok()?;
        let (client, used) = table.get_mut(&peer)?;
        if now.duration_since(*used) < self.ttl {
            *used = now;
            return Some(*client);
        }
        table.remove(&peer);
        self.count(&table);
        None
    }

    /// Sessions remembered now.
    pub fn len(&self) -> usize {
        self.table.lock().map_or(0, |t| t.len())
    }

    /// True when none is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The policy for a datagram or connection from `peer` under `proxy` (CoreDNS's setup: without
/// `allow` every source is used, unless `default` says otherwise).
pub fn policy_for(proxy: &ProxyProtocol, peer: IpAddr) -> ProxyPolicy {
    if proxy.allow.is_empty() {
        return proxy.default.unwrap_or(ProxyPolicy::Use);
    }
    let peer = match peer {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
        v4 => v4,
    };
    if proxy.allow.iter().any(|c| c.contains(peer)) {
        ProxyPolicy::Use
    } else {
        proxy.default.unwrap_or(ProxyPolicy::Ignore)
    }
}

/// The header at the start of `buf`, `None` when `buf` does not start with one.
pub fn parse(buf: &[u8]) -> Result<Option<Header>, ProxyError> {
    let n = buf.len().min(V2_SIGNATURE.len());
    if buf[..n] == V2_SIGNATURE[..n] {
        if buf.len() < 16 {
            return Err(ProxyError::Incomplete);
        }
        return parse_v2(buf).map(Some);
    }
    let n = buf.len().min(V1_START.len());
    if n > 0 && buf[..n] == V1_START[..n] {
        return parse_v1(buf).map(Some);
    }
    Ok(None)
}

fn parse_v2(buf: &[u8]) -> Result<Header, ProxyError> {
    if buf[12] >> 4 != 2 {
        return Err(ProxyError::Invalid("version 2 signature with another version"));
    }
    let len = 16 + usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    if len > MAX_V2_HEADER {
        return Err(ProxyError::Invalid("version 2 header too long"));
    }
    if buf.len() < len {
        return Err(ProxyError::Incomplete);
    }
    let body = &buf[16..len];
    let datagram = buf[13] & 0x0f == 2;
    let local = buf[12] & 0x0f == 0;
    let source = match (buf[12] & 0x0f, buf[13] >> 4) {
        // LOCAL: the proxy's own connection (a health check).
        (0, _) => None,
        (1, 1) if body.len() >= 12 => {
            let ip = Ipv4Addr::new(body[0], body[1], body[2], body[3]);
            Some(SocketAddr::new(
                IpAddr::V4(ip),
                u16::from_be_bytes([body[8], body[9]]),
            ))
        }
        (1, 2) if body.len() >= 36 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&body[..16]);
            let ip = Ipv6Addr::from(octets);
            Some(SocketAddr::new(
                IpAddr::V6(ip),
                u16::from_be_bytes([body[32], body[33]]),
            ))
        }
        // UNSPEC and UNIX families carry no usable address.
        (1, 0 | 3) => None,
        (1, _) => return Err(ProxyError::Invalid("version 2 addresses too short")),
        _ => return Err(ProxyError::Invalid("version 2 command neither LOCAL nor PROXY")),
    };
    Ok(Header {
        len,
        source,
        datagram,
        local,
    })
}

fn parse_v1(buf: &[u8]) -> Result<Header, ProxyError> {
    let Some(end) = buf.windows(2).take(V1_MAX - 1).position(|w| w == b"\r\n") else {
        return Err(if buf.len() < V1_MAX {
            ProxyError::Incomplete
        } else {
            ProxyError::Invalid("version 1 line longer than 107 bytes")
        });
    };
    let line =
        std::str::from_utf8(&buf[..end]).map_err(|_| ProxyError::Invalid("version 1 line not ASCII"))?;
    let mut parts = line.split(' ').skip(1);
    let source = match parts.next() {
        Some("UNKNOWN") => None,
        Some(family @ ("TCP4" | "TCP6")) => {
            let bad = ProxyError::Invalid("version 1 addresses malformed");
            let ip: IpAddr = parts.next().and_then(|s| s.parse().ok()).ok_or(bad)?;
            let _dst: IpAddr = parts.next().and_then(|s| s.parse().ok()).ok_or(bad)?;
            let port: u16 = parts.next().and_then(|s| s.parse().ok()).ok_or(bad)?;
            let _dport: u16 = parts.next().and_then(|s| s.parse().ok()).ok_or(bad)?;
            if parts.next().is_some() || ip.is_ipv4() != (family == "TCP4") {
                return Err(bad);
            }
            Some(SocketAddr::new(ip, port))
        }
        _ => {
            return Err(ProxyError::Invalid(
                "version 1 protocol neither TCP4, TCP6 nor UNKNOWN",
            ));
        }
    };
    Ok(Header {
        len: end + 2,
        source,
        datagram: false,
        local: false,
    })
}

/// What to do with a datagram from `peer` under `proxy` (and its UDP `sessions`, with
/// `udp_session_tracking`): answer the DNS message from byte `.1` on as from client `.0`, or
/// drop it (`Err`, with why).
pub fn datagram(
    proxy: &ProxyProtocol,
    sessions: Option<&UdpSessions>,
    buf: &[u8],
    peer: SocketAddr,
) -> Result<(SocketAddr, usize), ProxyError> {
    let policy = policy_for(proxy, peer.ip());
    if policy == ProxyPolicy::Skip {
        return Ok((peer, 0));
    }
    let header = match parse(buf) {
        Ok(None) => {
            let remembered = match (policy, sessions) {
                (ProxyPolicy::Use, Some(s)) => s.lookup(peer),
                _ => None,
            };
            return Ok((remembered.unwrap_or(peer), 0));
        }
        Ok(Some(h)) => h,
        Err(ProxyError::Incomplete) => return Err(ProxyError::Invalid("truncated header")),
        Err(e) => return Err(e),
    };
    // LOCAL (dnsdist's UDP health checks send one, family UNSPEC): accepted, as the
    // specification requires, with the peer's own address; it names no client, so it starts no
    // session.
    if header.local {
        if header.len == buf.len() {
            return Err(ProxyError::Invalid("a header and no DNS message"));
        }
        return match policy {
            ProxyPolicy::Reject => Err(ProxyError::Rejected),
            ProxyPolicy::Ignore | ProxyPolicy::Use | ProxyPolicy::Skip => Ok((peer, header.len)),
        };
    }
    // CoreDNS takes a version 2 header naming UDP addresses only, whatever the policy.
    let source = match header.source {
        Some(s) if header.datagram => s,
        _ => return Err(ProxyError::Invalid("not a version 2 header of a UDP client")),
    };
    if policy == ProxyPolicy::Use
        && let Some(s) = sessions
    {
        s.store(peer, source);
    }
    if header.len == buf.len() {
        return Err(if sessions.is_some() && policy == ProxyPolicy::Use {
            ProxyError::HeaderOnly
        } else {
            ProxyError::Invalid("a header and no DNS message")
        });
    }
    match policy {
        ProxyPolicy::Reject => Err(ProxyError::Rejected),
        ProxyPolicy::Ignore => Ok((peer, header.len)),
        ProxyPolicy::Use | ProxyPolicy::Skip => Ok((source, header.len)),
    }
}

/// Reads the header a connection from `peer` may start with, under `proxy`: the client address
/// the chain is to see, and the bytes read that are not a header (the start of the DNS or TLS
/// stream, to be read again). The caller bounds it in time.
pub async fn read_stream_header<S>(
    stream: &mut S,
    proxy: &ProxyProtocol,
    peer: SocketAddr,
) -> Result<(SocketAddr, Vec<u8>), ProxyError>
where
    S: AsyncRead + Unpin,
{
    let policy = policy_for(proxy, peer.ip());
    if policy == ProxyPolicy::Skip {
        return Ok((peer, Vec::new()));
    }
    let io = |_| ProxyError::Incomplete;
    let mut buf = vec![0u8; 1];
    // Nothing sent: the connection serves (and ends) as it would without a header.
    if stream.read(&mut buf).await.map_err(io)? == 0 {
        return Ok((peer, Vec::new()));
    }
    // Bytes that start neither signature are the stream itself. A DNS message whose length
    // starts with 0x0d or 0x50 is at least 3,328 bytes long, so reading the rest of a
    // signature does not wait for bytes that will never come.
    let signature: &[u8] = match buf[0] {
        b'\r' => &V2_SIGNATURE,
        b'P' => V1_START,
        _ => return Ok((peer, buf)),
    };
    buf.resize(signature.len(), 0);
    stream.read_exact(&mut buf[1..]).await.map_err(io)?;
    if buf != signature {
        return Ok((peer, buf));
    }
    if buf[0] == b'\r' {
        buf.resize(16, 0);
        stream.read_exact(&mut buf[12..]).await.map_err(io)?;
        let len = 16 + usize::from(u16::from_be_bytes([buf[14], buf[15]]));
        if len > MAX_V2_HEADER {
            return Err(ProxyError::Invalid("version 2 header too long"));
        }
        buf.resize(len, 0);
        stream.read_exact(&mut buf[16..]).await.map_err(io)?;
    } else {
        // Byte by byte to its CRLF: nothing after the line is taken.
        while !buf.ends_with(b"\r\n") {
            if buf.len() >= V1_MAX {
                return Err(ProxyError::Invalid("version 1 line longer than 107 bytes"));
            }
            let b = stream.read_u8().await.map_err(io)?;
            buf.push(b);
        }
    }
    let header = parse(&buf)?.ok_or(ProxyError::Invalid("not a header"))?;
    match policy {
        ProxyPolicy::Reject => Err(ProxyError::Rejected),
        ProxyPolicy::Ignore | ProxyPolicy::Skip => Ok((peer, Vec::new())),
        ProxyPolicy::Use => Ok((header.source.unwrap_or(peer), Vec::new())),
    }
}

/// A stream whose first bytes were already read: they are read again first.
#[derive(Debug)]
pub struct Rewound<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Rewound<S> {
    /// `inner`, with `prefix` read before its own bytes.
    pub fn new(prefix: Vec<u8>, inner: S) -> Self {
        Self { prefix, at: 0, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewound<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.prefix.len() {
            let n = (self.prefix.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.prefix[at..at + n]);
            self.at += n;
            if self.at == self.prefix.len() {
                self.prefix = Vec::new();
                self.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewound<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(cmd: u8, fam: u8, addrs: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.push(0x20 | cmd);
        h.push(fam);
        h.extend_from_slice(&(addrs.len() as u16).to_be_bytes());
        h.extend_from_slice(addrs);
        h
    }

    const V4_ADDRS: [u8; 12] = [192, 0, 2, 7, 10, 0, 0, 1, 0x30, 0x39, 0, 53];

    #[test]
    fn parses_both_versions() {
        let h = v2(1, 0x12, &V4_ADDRS);
        assert_eq!(
            parse(&h),
            Ok(Some(Header {
                len: 28,
                source: Some("192.0.2.7:12345".parse().unwrap()),
                datagram: true,
                local: false,
            }))
        );
        assert_eq!(parse(&h[..20]), Err(ProxyError::Incomplete));
        assert_eq!(parse(&v2(0, 0, &[])).unwrap().unwrap().source, None);
        assert!(parse(&v2(1, 0x11, &V4_ADDRS[..6])).is_err());
        let line = b"PROXY TCP6 2001:db8::7 2001:db8::1 5353 53\r\n\x00\x1d";
        let h = parse(line).unwrap().unwrap();
        assert_eq!(h.len, line.len() - 2);
        assert_eq!(h.source, Some("[2001:db8::7]:5353".parse().unwrap()));
        assert!(parse(b"PROXY TCP4 2001:db8::7 1.2.3.4 1 2\r\n").is_err());
        assert_eq!(parse(b"\x00\x1d\x12\x34"), Ok(None));
    }

    #[test]
    fn datagrams_by_policy() {
        let peer: SocketAddr = "127.0.0.9:4000".parse().unwrap();
        let mut d = v2(1, 0x12, &V4_ADDRS);
        d.extend_from_slice(b"DNS");
        let all = ProxyProtocol::default();
        assert_eq!(
            datagram(&all, None, &d, peer),
            Ok(("192.0.2.7:12345".parse().unwrap(), 28))
        );
        assert_eq!(datagram(&all, None, b"DNS", peer), Ok((peer, 0)));
        let others = ProxyProtocol {
            allow: Vec::new(),
            default: Some(ProxyPolicy::Ignore),
            udp_sessions: None,
        };
        assert_eq!(datagram(&others, None, &d, peer), Ok((peer, 28)));
        let reject = ProxyProtocol {
            allow: Vec::new(),
            default: Some(ProxyPolicy::Reject),
            udp_sessions: None,
        };
        assert_eq!(datagram(&reject, None, &d, peer), Err(ProxyError::Rejected));
        assert_eq!(datagram(&reject, None, b"DNS", peer), Ok((peer, 0)));
        // A stream header, a header alone and a truncated one are dropped.
        let mut tcp = v2(1, 0x11, &V4_ADDRS);
        tcp.extend_from_slice(b"DNS");
        assert!(datagram(&all, None, &tcp, peer).is_err());
        assert!(datagram(&all, None, &d[..28], peer).is_err());
        assert!(datagram(&all, None, &d[..20], peer).is_err());
    }

    /// A `LOCAL` header (dnsdist's UDP health checks send one, family `UNSPEC` and no
    /// addresses) is accepted in a datagram with the peer's own address, as section 2.2 of the
    /// specification requires, whatever family and addresses it carries; alone, it is still
    /// dropped, and remembers no session.
    #[test]
    fn a_local_header_in_a_datagram_keeps_the_peer() {
        let peer: SocketAddr = "127.0.0.9:4000".parse().unwrap();
        let all = ProxyProtocol::default();
        let dnsdist = v2(0, 0x00, &[]);
        assert_eq!(dnsdist, b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00");
        let mut d = dnsdist.clone();
        d.extend_from_slice(b"DNS");
        assert_eq!(datagram(&all, None, &d, peer), Ok((peer, 16)));
        let mut with_addrs = v2(0, 0x12, &V4_ADDRS);
        with_addrs.extend_from_slice(b"DNS");
        assert_eq!(datagram(&all, None, &with_addrs, peer), Ok((peer, 28)));
        let ignore = ProxyProtocol {
            allow: Vec::new(),
            default: Some(ProxyPolicy::Ignore),
            udp_sessions: None,
        };
        assert_eq!(datagram(&ignore, None, &d, peer), Ok((peer, 16)));
        let reject = ProxyProtocol {
            allow: Vec::new(),
            default: Some(ProxyPolicy::Reject),
            udp_sessions: None,
        };
        assert_eq!(datagram(&reject, None, &d, peer), Err(ProxyError::Rejected));
        let sessions = UdpSessions::new(Duration::from_secs(60), 2, None);
        assert!(datagram(&all, Some(&sessions), &dnsdist, peer).is_err());
        assert!(sessions.is_empty());
    }

    #[test]
    fn udp_sessions_follow_a_header_only_datagram_and_are_bounded() {
        let all = ProxyProtocol::default();
        let sessions = UdpSessions::new(Duration::from_secs(60), 2, None);
        let spectrum: SocketAddr = "127.0.0.9:4000".parse().unwrap();
        let client: SocketAddr = "192.0.2.7:12345".parse().unwrap();
        let header = v2(1, 0x12, &V4_ADDRS);
        assert_eq!(
            datagram(&all, Some(&sessions), &header, spectrum),
            Err(ProxyError::HeaderOnly)
        );
        assert_eq!(datagram(&all, Some(&sessions), b"DNS", spectrum), Ok((client, 0)));
        let other: SocketAddr = "127.0.0.9:4001".parse().unwrap();
        assert_eq!(datagram(&all, Some(&sessions), b"DNS", other), Ok((other, 0)));
        for port in 5000..5010 {
            sessions.store(SocketAddr::new(spectrum.ip(), port), client);
            assert!(sessions.len() <= 2);
        }
        assert_eq!(sessions.lookup(spectrum), None, "the oldest went first");
        let expired = UdpSessions::new(Duration::ZERO, 2, None);
        expired.store(spectrum, client);
        assert_eq!(expired.lookup(spectrum), None);
        assert!(expired.is_empty());
    }

    /// Arbitrary bytes after either signature (and none) never panic the parsers: each gives
    /// a header, none, or an error.
    #[test]
    fn arbitrary_bytes_never_panic() {
        let peer: SocketAddr = "127.0.0.9:4000".parse().unwrap();
        let all = ProxyProtocol::default();
        let sessions = UdpSessions::new(Duration::from_secs(1), 4, None);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..20_000 {
            let mut buf = match i % 3 {
                0 => V2_SIGNATURE.to_vec(),
                1 => V1_START.to_vec(),
                _ => Vec::new(),
            };
            buf.truncate((next() % 14) as usize);
            let len = (next() % 64) as usize;
            buf.extend((0..len).map(|_| next() as u8));
            if i % 5 == 0 && buf.len() > 15 {
                // A plausible version 2 length, often past the end.
                buf[12] = 0x21;
                buf[14] = 0;
                buf[15] = (next() % 48) as u8;
            }
            let _ = parse(&buf);
            let _ = datagram(&all, Some(&sessions), &buf, peer);
        }
    }

    #[tokio::test]
    async fn stream_headers_leave_the_rest() {
        let peer: SocketAddr = "127.0.0.9:4000".parse().unwrap();
        let all = ProxyProtocol::default();
        let mut s: &[u8] = b"PROXY TCP4 192.0.2.8 10.0.0.1 999 53\r\n\x00\x02ab";
        let (client, rest) = read_stream_header(&mut s, &all, peer).await.unwrap();
        assert_eq!(client, "192.0.2.8:999".parse().unwrap());
        assert!(rest.is_empty());
        assert_eq!(s, b"\x00\x02ab");
        let mut s: &[u8] = b"\x00\x02ab";
        assert_eq!(
            read_stream_header(&mut s, &all, peer).await.unwrap(),
            (peer, vec![0])
        );
        let mut s: &[u8] = b"\r\x0fXXXXXXXXXXXXXXXXXX";
        let (client, rest) = read_stream_header(&mut s, &all, peer).await.unwrap();
        assert_eq!((client, rest.len()), (peer, 12));
        let mut rewound = Rewound::new(rest, s);
        let mut all_bytes = Vec::new();
        rewound.read_to_end(&mut all_bytes).await.unwrap();
        assert_eq!(all_bytes, b"\r\x0fXXXXXXXXXXXXXXXXXX");
    }
}
