//! DNS over QUIC (RFC 9250): a `quic://` listener, served with quinn on one UDP socket, as
//! CoreDNS 1.14.7 serves it. TLS 1.3 with the ALPN protocol `doq`; each query takes one
//! client-initiated bidirectional stream, framed with a 2-byte length (§4.2), and is answered on
//! that stream through [`DnsHandler::answer_into`] (no truncation: the `proto` label is `tcp`),
//! after which the server ends the stream (STREAM FIN).
//!
//! A malformed query closes the connection with `DOQ_PROTOCOL_ERROR` (0x2), as §4.3.3 asks
//! and CoreDNS does: a stream that ends before its 2-byte length or its message, a length of 0,
//! a message that does not parse, a non-zero message ID, an `edns-tcp-keepalive` option, or a
//! query that does not arrive within the read timeout. Every stream ends counted in
//! `coredns_dns_quic_responses_total` under the code it ended with.
//!
//! What a client can make the server hold, and its bound:
//! * Connections: at most [`QuicLimits::max_connections`] (CoreDNS's 200) open or in their
//!   handshake; past it a new one is refused before its handshake (QUIC `CONNECTION_REFUSED`).
//! * Streams: at most [`QuicLimits::max_streams`] open at once per connection (`quic {
//!   max_streams }`, 256), enforced by QUIC's stream credit, so a client's further streams wait
//!   for credit; unidirectional streams get none (DoQ does not use them).
//! * Streams being answered: at most [`QuicLimits::workers`] per listener (`quic {
//!   worker_pool_size }`, 1024); a stream waits for a worker while its connection lives.
//! * Bytes: a stream's receive window is one largest message ([`STREAM_WINDOW`]), a
//!   connection's [`CONNECTION_WINDOW`]; a query is read into a buffer of its stated length
//!   (at most 65,535 bytes) only by a stream that holds a worker.
//! * Time: a query must arrive within [`QuicLimits::read_timeout`] of its stream being
//!   taken, an answer be written within [`QuicLimits::write_timeout`], and a connection with
//!   no traffic is closed after [`QuicLimits::idle_timeout`] (`timeouts read|write|idle`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::rr::rdata::opt::EdnsCode;
use hickory_proto::serialize::binary::BinDecodable;
use quinn::{Connection, Endpoint, RecvStream, SendStream, VarInt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::rustls;

use super::error::ServerError;
use super::handler::DnsHandler;
use super::route::RouterCell;
use crate::proto::Transport;
use crate::telemetry::quic::{DoqCode, ListenerQuicMetrics};

/// The ALPN protocol of DNS over QUIC (RFC 9250 §4.1.1).
pub const ALPN: &[u8] = b"doq";
/// CoreDNS's streams per connection (`DefaultMaxQUICStreams`).
pub const DEFAULT_MAX_STREAMS: u32 = 256;
/// CoreDNS's stream workers per listener (`DefaultQUICStreamWorkers`; its README says 512,
/// its code uses 1024).
pub const DEFAULT_WORKERS: usize = 1024;
/// CoreDNS's connections per listener (`DefaultQUICMaxConnections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 200;
/// CoreDNS's read timeout for a query (its server's `ReadTimeout`).
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(3);
/// CoreDNS's idle timeout of a connection (its server's `IdleTimeout`).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an answer may take to be written.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// A stream's receive window: one largest message with its length.
pub const STREAM_WINDOW: u32 = 65_537;
/// A connection's receive and send windows.
pub const CONNECTION_WINDOW: u32 = 1 << 20;
/// How long a stopping listener lets its connections learn they are closed.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// The bounds of a `quic://` listener (see the module docs).
#[derive(Debug, Clone)]
pub struct QuicLimits {
    /// Streams open at once per connection.
    pub max_streams: u32,
    /// Streams answered at once across the listener's connections.
    pub workers: usize,
    /// Connections open (or in their handshake) at once.
    pub max_connections: usize,
    /// A query must arrive within this of its stream being taken.
    pub read_timeout: Duration,
    /// An answer must be written within this.
    pub write_timeout: Duration,
    /// A connection with no traffic is closed after this.
    pub idle_timeout: Duration,
    /// The listener's series.
    pub metrics: Option<ListenerQuicMetrics>,
}

impl Default for QuicLimits {
    fn default() -> Self {
        Self {
            max_streams: DEFAULT_MAX_STREAMS,
            workers: DEFAULT_WORKERS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            read_timeout: DEFAULT_READ_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            metrics: None,
        }
    }
}

/// A bound `quic://` listener: its endpoint, and what its server configuration is made of
/// (so a reload can bring new certificates).
#[derive(Debug, Clone)]
pub struct QuicListener {
    pub(super) endpoint: Endpoint,
    transport: Arc<quinn::TransportConfig>,
    max_connections: usize,
    /// The ALPN protocol it offers: `doq`, or `h3` for DNS over HTTP/3 (`super::h3`).
    alpn: &'static [u8],
}

impl QuicListener {
    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Puts `tls` in place of the listener's certificate for new connections.
    pub fn update_tls(&self, tls: &rustls::ServerConfig) -> Result<(), ServerError> {
        let config = server_config(tls, self.transport.clone(), self.max_connections, self.alpn)?;
        self.endpoint.set_server_config(Some(config));
        Ok(())
    }
}

/// quinn's server configuration from the block's certificate and the transport bounds.
fn server_config(
    tls: &rustls::ServerConfig,
    transport: Arc<quinn::TransportConfig>,
    max_connections: usize,
    alpn: &[u8],
) -> Result<quinn::ServerConfig, ServerError> {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![alpn.to_vec()];
    // No 0-RTT: RFC 9250 §4.5 forbids answering replayable queries in it, and a server cannot
    // tell which are.
    tls.max_early_data_size = 0;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(Arc::new(tls)).map_err(|e| {
        ServerError::Serve(format!(
            "the certificate cannot serve DNS over QUIC (it needs TLS 1.3 with AES-128-GCM): {e}"
        ))
    })?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(transport);
    // Handshakes waiting to be accepted: a little more than the connections admitted, so
    // the ones over the limit reach the accept loop to be refused.
    config.max_incoming(max_connections.saturating_mul(2).max(16));
    Ok(config)
}

/// Binds a `quic://` listener on `addr` with `tls` and `limits`.
pub fn bind_quic(
    addr: SocketAddr,
    tls: &rustls::ServerConfig,
    limits: &QuicLimits,
) -> Result<QuicListener, ServerError> {
    bind_quic_with(addr, tls, limits, ALPN, 0)
}

/// Binds a QUIC listener offering `alpn`, whose clients may open `uni_streams`
/// unidirectional streams (DoQ none; HTTP/3 its control and QPACK streams).
pub(super) fn bind_quic_with(
    addr: SocketAddr,
    tls: &rustls::ServerConfig,
    limits: &QuicLimits,
    alpn: &'static [u8],
    uni_streams: u32,
) -> Result<QuicListener, ServerError> {
    let err = |source| ServerError::Bind {
        addr: addr.to_string(),
        source,
    };
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(VarInt::from_u32(limits.max_streams))
        .max_concurrent_uni_streams(VarInt::from_u32(uni_streams))
        .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_WINDOW))
        .send_window(u64::from(CONNECTION_WINDOW))
        .max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(limits.idle_timeout)
                .map_err(|_| ServerError::Serve("the QUIC idle timeout is too long".into()))?,
        ));
    let transport = Arc::new(transport);
    let config = server_config(tls, transport.clone(), limits.max_connections, alpn)?;
    let socket = std::net::UdpSocket::bind(addr).map_err(err)?;
    let endpoint = Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(err)?;
    Ok(QuicListener {
        endpoint,
        transport,
        max_connections: limits.max_connections,
        alpn,
    })
}

/// What a listener's connections share.
#[derive(Debug)]
struct Shared {
    handler: DnsHandler,
    limits: QuicLimits,
    workers: Arc<Semaphore>,
}

impl Shared {
    fn count(&self, code: DoqCode) {
        if let Some(m) = &self.limits.metrics {
            m.response(code);
        }
    }
}

/// Serves `listener` with `router` until `shutdown` completes, then closes its connections.
pub async fn serve_quic(
    router: RouterCell,
    listener: QuicListener,
    limits: QuicLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let shared = Arc::new(Shared {
        handler: DnsHandler::new(router),
        workers: Arc::new(Semaphore::new(limits.workers)),
        limits,
    });
    let limits = shared.limits.clone();
    accept_until(
        listener.endpoint,
        &limits,
        DoqCode::NoError.code(),
        shutdown,
        |incoming, permit| {
            tokio::spawn(connection(incoming, permit, shared.clone()));
        },
    )
    .await;
    Ok(())
}

/// Accepts `endpoint`'s connections until `shutdown` completes: each is handed to `serve` with
/// a permit of the listener's cap ([`QuicLimits::max_connections`]), or refused before its
/// handshake when none is left (counted, as the cap is, in the limits' metrics); then the
/// endpoint is closed with application `code` and given a moment to tell its peers. (The
/// `quic://` and `https3://` listeners' one accept loop.)
pub(super) async fn accept_until(
    endpoint: Endpoint,
    limits: &QuicLimits,
    code: u32,
    shutdown: impl std::future::Future<Output = ()>,
    mut serve: impl FnMut(quinn::Incoming, OwnedSemaphorePermit),
) {
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let metrics = limits.metrics.as_ref();
    if let Some(m) = metrics {
        m.set_limit(limits.max_connections);
    }
    let mut shutdown = std::pin::pin!(shutdown);
    // Bounded by the endpoint: it ends when the endpoint is closed, or at shutdown.
    loop {
        let incoming = tokio::select! {
            () = &mut shutdown => break,
            i = endpoint.accept() => match i {
                Some(i) => i,
                None => break,
            },
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            if let Some(m) = metrics {
                m.refused();
            }
            incoming.refuse();
            continue;
        };
        serve(incoming, permit);
    }
    endpoint.close(VarInt::from_u32(code), b"");
    let _ = tokio::time::timeout(CLOSE_WAIT, endpoint.wait_idle()).await;
}

/// The handshake of an admitted connection (bounded by the idle timeout); `None`, logged at
/// trace level under `what`, when it is not accepted or fails. (The `quic://` and `https3://`
/// listeners' one handshake.)
pub(super) async fn handshake(incoming: quinn::Incoming, what: &str) -> Option<Connection> {
    match incoming.accept() {
        Ok(connecting) => match connecting.await {
            Ok(c) => Some(c),
            Err(error) => {
                tracing::trace!(%error, "{what} handshake failed");
                None
            }
        },
        Err(error) => {
            tracing::trace!(%error, "{what} connection not accepted");
            None
        }
    }
}

/// Counts an admitted connection open until dropped (`quic://` and `https3://` alike).
pub(super) struct Admitted<'a>(Option<&'a ListenerQuicMetrics>);

impl<'a> Admitted<'a> {
    /// Counts the connection open now.
    pub(super) fn count(metrics: Option<&'a ListenerQuicMetrics>) -> Self {
        if let Some(m) = metrics {
            m.opened();
        }
        Self(metrics)
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if let Some(m) = self.0 {
            m.gone();
        }
    }
}

/// One connection: its handshake, then a task per stream while a worker is free.
async fn connection(incoming: quinn::Incoming, _permit: OwnedSemaphorePermit, shared: Arc<Shared>) {
    let _admitted = Admitted::count(shared.limits.metrics.as_ref());
    let Some(conn) = handshake(incoming, "DNS-over-QUIC").await else {
        return;
    };
    // Bounded by the connection: accept_bi fails once it is closed or idles out.
    loop {
        let (send, recv) = match conn.accept_bi().await {
            Ok(s) => s,
            Err(error) => {
                tracing::trace!(%error, "DNS-over-QUIC connection ended");
                return;
            }
        };
        let worker = tokio::select! {
            w = shared.workers.clone().acquire_owned() => match w {
                Ok(w) => w,
                Err(_) => return,
            },
            _ = conn.closed() => return,
        };
        tokio::spawn(stream(conn.clone(), send, recv, worker, shared.clone()));
    }
}

/// Why a stream's query was refused.
#[derive(Debug)]
enum Malformed {
    /// The stream ended, was reset or timed out before the message was whole.
    Incomplete,
    /// The length prefix was 0.
    Empty,
    /// The message does not parse.
    Unparsable,
    /// The message ID was not 0 (§4.2.1).
    NonZeroId,
    /// The query carried `edns-tcp-keepalive` (§5.5.2).
    Keepalive,
}

/// One stream: reads its query, answers it, ends the stream; or closes the connection with
/// `DOQ_PROTOCOL_ERROR` for a malformed one.
async fn stream(
    conn: Connection,
    mut send: SendStream,
    mut recv: RecvStream,
    _worker: OwnedSemaphorePermit,
    shared: Arc<Shared>,
) {
    let query = match tokio::time::timeout(shared.limits.read_timeout, read_query(&mut recv)).await {
        Ok(Ok(q)) => q,
        Ok(Err(why)) => {
            tracing::debug!(remote = %conn.remote_address(), ?why, "malformed DNS-over-QUIC query; closing the connection");
            return protocol_error(&conn, &shared);
        }
        Err(_) => {
            tracing::debug!(remote = %conn.remote_address(), "DNS-over-QUIC query did not arrive in time; closing the connection");
            return protocol_error(&conn, &shared);
        }
    };
    let mut out = Vec::with_capacity(512);
    let answered = shared
        .handler
        .answer_into(&query, conn.remote_address(), Transport::Tcp, &mut out)
        .await;
    if answered.is_none() || out.is_empty() {
        // The chain chose not to answer (acl's drop): the stream ends with no message.
        let _ = send.reset(VarInt::from_u32(DoqCode::NoError.code()));
        shared.count(DoqCode::NoError);
        return;
    }
    let Ok(len) = u16::try_from(out.len()) else {
        let _ = send.reset(VarInt::from_u32(DoqCode::Internal.code()));
        shared.count(DoqCode::Internal);
        return;
    };
    let mut framed = Vec::with_capacity(out.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(&out);
    let written = tokio::time::timeout(shared.limits.write_timeout, async {
        send.write_all(&framed).await?;
        send.finish().map_err(|_| quinn::WriteError::ClosedStream)?;
        Ok::<_, quinn::WriteError>(())
    })
    .await;
    match written {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::trace!(%error, "DNS-over-QUIC answer not written"),
        Err(_) => {
            tracing::trace!("DNS-over-QUIC answer not taken in time");
            let _ = send.reset(VarInt::from_u32(DoqCode::NoError.code()));
        }
    }
    shared.count(DoqCode::NoError);
    // The query's stream ends with the client's FIN (§4.2): taken (nothing more is read, and
    // within the read timeout) so the stream closes cleanly and its credit goes back to the
    // client at once, rather than after a STOP_SENDING exchange.
    let _ = tokio::time::timeout(shared.limits.read_timeout, recv.read_to_end(0)).await;
}

fn protocol_error(conn: &Connection, shared: &Shared) {
    conn.close(VarInt::from_u32(DoqCode::Protocol.code()), b"");
    shared.count(DoqCode::Protocol);
}

/// Reads one length-prefixed query and checks it as §4.2 and §4.3.3 say. Does not wait for
/// the stream's FIN (as CoreDNS).
/// Generic over the stream so that the `doq_framing` fuzz target ([`fuzz::doq_framing`]) reads
/// a byte slice through the same code.
async fn read_query<R: tokio::io::AsyncRead + Unpin>(recv: &mut R) -> Result<Vec<u8>, Malformed> {
    use tokio::io::AsyncReadExt as _;
    let mut len = [0u8; 2];
    recv.read_exact(&mut len)
        .await
        .map_err(|_| Malformed::Incomplete)?;
    let len = usize::from(u16::from_be_bytes(len));
    if len == 0 {
        return Err(Malformed::Empty);
    }
    let mut buf = vec![0u8; len];
    recv.read_exact(&mut buf)
        .await
        .map_err(|_| Malformed::Incomplete)?;
    check_query(&buf)?;
    Ok(buf)
}

/// The checks of §4.2.1 and §4.3.3 on a whole message.
fn check_query(buf: &[u8]) -> Result<(), Malformed> {
    let msg = hickory_proto::op::Message::from_bytes(buf).map_err(|_| Malformed::Unparsable)?;
    if msg.metadata.id != 0 {
        return Err(Malformed::NonZeroId);
    }
    if msg
        .edns
        .as_ref()
        .is_some_and(|e| e.option(EdnsCode::Keepalive).is_some())
    {
        return Err(Malformed::Keepalive);
    }
    Ok(())
}

/// The body of the `doq_framing` fuzz target (`fuzz/`), kept beside the code it drives so
/// `cargo test` replays its committed corpus (`tests/integration/project/fuzz_corpus.rs`). Not part
/// of the server.
pub mod fuzz {
    use hickory_proto::op::Message;
    use hickory_proto::serialize::binary::BinDecodable;

    use super::{Malformed, read_query};

    /// Arbitrary bytes as the whole content of one DoQ stream, read by `read_query` (the
    /// 2-byte length, the message, the checks of RFC 9250 §4.2 and §4.3.3). Invariants: no
    /// panic; an accepted query is the message the length prefix framed, parses, has ID 0 and
    /// no `edns-tcp-keepalive` option; a refusal has the reason the bytes give.
    pub fn doq_framing(data: &[u8]) {
        let mut stream = data;
        let read = std::pin::pin!(read_query(&mut stream));
        // A byte slice is always ready: the read ends on its first poll.
        let std::task::Poll::Ready(read) = std::future::Future::poll(
            read,
            &mut std::task::Context::from_waker(std::task::Waker::noop()),
        ) else {
            panic!("reading a byte slice did not finish at once");
        };
        let stated = data
            .get(..2)
            .map(|l| usize::from(u16::from_be_bytes([l[0], l[1]])));
        match read {
            Ok(query) => {
                assert_eq!(Some(query.len()), stated, "the length prefix");
                assert_eq!(query, data[2..2 + query.len()], "the framed message");
                let msg = Message::from_bytes(&query).expect("an accepted query parses");
                assert_eq!(msg.metadata.id, 0, "an accepted query has ID 0");
                assert!(
                    !msg.edns.as_ref().is_some_and(|e| e
                        .options()
                        .as_ref()
                        .iter()
                        .any(|(code, _)| u16::from(*code) == 11)),
                    "an accepted query carries edns-tcp-keepalive"
                );
            }
            Err(why) => match stated {
                None => assert!(matches!(why, Malformed::Incomplete), "{why:?}"),
                Some(0) => assert!(matches!(why, Malformed::Empty), "{why:?}"),
                Some(len) if data.len() < 2 + len => {
                    assert!(matches!(why, Malformed::Incomplete), "{why:?}");
                }
                Some(_) => assert!(
                    matches!(
                        why,
                        Malformed::Unparsable | Malformed::NonZeroId | Malformed::Keepalive
                    ),
                    "{why:?}"
                ),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::{Name, RecordType};
    use hickory_proto::serialize::binary::BinEncodable;

    fn query(id: u16) -> Message {
        let mut m = Message::query();
        m.metadata.id = id;
        m.add_query(Query::query(
            Name::from_ascii("a.example.").unwrap(),
            RecordType::A,
        ));
        m
    }

    #[test]
    fn the_checks_of_rfc_9250() {
        assert!(check_query(&query(0).to_bytes().unwrap()).is_ok());
        assert!(matches!(
            check_query(&query(7).to_bytes().unwrap()),
            Err(Malformed::NonZeroId)
        ));
        assert!(matches!(check_query(&[0, 0, 1]), Err(Malformed::Unparsable)));
        let mut keepalive = query(0);
        let mut edns = hickory_proto::op::Edns::new();
        edns.options_mut()
            .insert(hickory_proto::rr::rdata::opt::EdnsOption::Unknown(
                11,
                vec![0, 10],
            ));
        keepalive.edns = Some(edns);
        assert!(matches!(
            check_query(&keepalive.to_bytes().unwrap()),
            Err(Malformed::Keepalive)
        ));
    }
}
