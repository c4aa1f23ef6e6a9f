//! The TCP transport (RFC 7766) and every bound a TCP client meets. A tokio task per connection
//! reads length-prefixed messages, answers each through [`DnsHandler::answer_into`] as its own
//! task (so pipelined queries are answered concurrently, in whatever order they finish), and
//! writes the replies back with their length prefix.
//!
//! What a client can make the server hold, and its bound:
//! * Message buffers grow with the bytes that arrived ([`MessageReader`]), never from what the
//!   length prefix claims; beyond the first [`FIRST_CHUNK`] bytes of a message, the bytes held
//!   (being received or being answered) come out of one budget per listener
//!   ([`TcpLimits::buffer_budget`]); a connection that needs more when it is spent is closed.
//! * A message must arrive whole within [`TcpLimits::message_deadline`] of its first byte, and
//!   an answer must be taken by the client within the same time (else the connection is closed
//!   and its other answers dropped); a connection with no query in flight and no message started
//!   is closed after [`TcpLimits::idle_timeout`].
//! * At most [`TcpLimits::max_connections`] connections per listener ([`MAX_CONNECTIONS_ENV`],
//!   kept below the open-file limit so the HTTP probes and upstream sockets always have
//!   descriptors). At the limit, the connection that has waited longest with no query in flight
//!   is closed to admit the new one ([`Slots`]); only when every connection has a query in flight
//!   is the new one closed.
//!
//! The same listener serves DNS over TLS (RFC 7858: the same framing inside TLS, the handshake
//! within the message deadline) and DNS over HTTPS (RFC 8484, in [`super::doh`]) when its
//! [`StreamProtocol`] says so; the bounds above hold for those connections too.
//!
//! It also raises the soft open-file limit to the hard one at start ([`raise_nofile_limit`]).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;

use super::{DnsHandler, TCP_IDLE_TIMEOUT};
use crate::proto::Transport;
use crate::telemetry::tcp::{CloseReason, ListenerTcpMetrics};

/// Most queries of one connection answered at the same time; reading waits beyond that.
const MAX_IN_FLIGHT: usize = 32;
/// The environment variable that sets the most TCP connections per listener.
pub const MAX_CONNECTIONS_ENV: &str = "CLUSTER_DNS_TCP_MAX_CONNECTIONS";
/// The default most TCP connections per listener.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1000;
/// How long a message may take to arrive whole, from its first byte (RFC 7766 §6.2.3 asks
/// servers to keep such timeouts short; stub resolvers send a query in one segment).
pub const MESSAGE_DEADLINE: Duration = Duration::from_secs(5);
/// The bytes of a message's buffer that do not come out of the listener's budget: every
/// query a stub resolver sends fits.
pub const FIRST_CHUNK: usize = 512;
/// The default budget per listener for message bytes beyond each message's first chunk.
pub const DEFAULT_BUFFER_BUDGET: usize = 4 << 20;

/// A listener's TLS configuration, replaced in place when a reload brings new certificates
/// (connections already open keep theirs).
pub type TlsCell = Arc<ArcSwap<ServerConfig>>;

/// What a stream listener speaks.
#[derive(Debug, Clone, Default)]
pub enum StreamProtocol {
    /// DNS over TCP, each message with its length prefix (RFC 7766).
    #[default]
    Tcp,
    /// DNS over TLS (RFC 7858): the same framing inside TLS.
    Tls(TlsCell),
    /// DNS over HTTPS (RFC 8484) on `/dns-query`; plain HTTP/1.1 without TLS (for a
    /// TLS-terminating proxy in front, as CoreDNS allows).
    Https(Option<TlsCell>),
}

impl StreamProtocol {
    /// DNS over TLS with `config`, offering the `dot` ALPN protocol (RFC 7858 §3.2).
    pub fn dot(config: &ServerConfig) -> Self {
        Self::Tls(Arc::new(ArcSwap::from_pointee(Self::with_alpn(
            config,
            &[b"dot"],
        ))))
    }

    /// DNS over HTTPS, over TLS with `config` (offering `h2` and `http/1.1`), or plain HTTP.
    pub fn doh(config: Option<&ServerConfig>) -> Self {
        Self::Https(
            config.map(|c| Arc::new(ArcSwap::from_pointee(Self::with_alpn(c, &[b"h2", b"http/1.1"])))),
        )
    }

    /// Puts `config` in place of the listener's TLS configuration, keeping its ALPN protocols.
    /// False when this protocol has no TLS to update.
    pub fn update_tls(&self, config: &ServerConfig) -> bool {
        let cell = match self {
            Self::Tls(cell) | Self::Https(Some(cell)) => cell,
            Self::Tcp | Self::Https(None) => return false,
        };
        let alpn = cell.load().alpn_protocols.clone();
        let mut next = config.clone();
        next.alpn_protocols = alpn;
        cell.store(Arc::new(next));
        true
    }

    fn with_alpn(config: &ServerConfig, protocols: &[&[u8]]) -> ServerConfig {
        let mut c = config.clone();
        c.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        c
    }
}

/// What bounds the TCP connections of one listener.
#[derive(Debug, Clone)]
pub struct TcpLimits {
    /// Most connections open at once (at least 1).
    pub max_connections: usize,
    /// A connection with nothing in flight and no message started is closed after this.
    pub idle_timeout: Duration,
    /// A message must arrive whole within this from its first byte.
    pub message_deadline: Duration,
    /// Bytes of message buffers beyond each message's [`FIRST_CHUNK`], for the listener.
    pub buffer_budget: usize,
    /// Where to count open and closed connections.
    pub metrics: Option<ListenerTcpMetrics>,
}

impl Default for TcpLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: TCP_IDLE_TIMEOUT,
            message_deadline: MESSAGE_DEADLINE,
            buffer_budget: DEFAULT_BUFFER_BUDGET,
            metrics: None,
        }
    }
}

impl TcpLimits {
    /// The defaults, with the connection limit from [`MAX_CONNECTIONS_ENV`] when set, then
    /// kept below the open-file limit ([`descriptor_ceiling`]).
    pub fn from_env() -> Self {
        let value = std::env::var(MAX_CONNECTIONS_ENV).ok();
        Self {
            max_connections: max_connections(value.as_deref(), current_nofile()),
            ..Self::default()
        }
    }
}

/// The connection limit from the [`MAX_CONNECTIONS_ENV`] `value` (the default when unset; the
/// default with a warning when not a positive number), lowered to [`descriptor_ceiling`] of
/// `nofile` with a warning.
fn max_connections(value: Option<&str>, nofile: Option<u64>) -> usize {
    let configured = match value.map(|v| (v, v.trim().parse::<usize>())) {
        None => DEFAULT_MAX_CONNECTIONS,
        Some((_, Ok(n))) if n > 0 => n,
        Some((v, _)) => {
            tracing::warn!(
                value = %v,
                default = DEFAULT_MAX_CONNECTIONS,
                "{MAX_CONNECTIONS_ENV} is not a positive number; using the default"
            );
            DEFAULT_MAX_CONNECTIONS
        }
    };
    let ceiling = descriptor_ceiling(nofile);
    if configured > ceiling {
        tracing::warn!(
            configured,
            limit = ceiling,
            nofile = nofile.unwrap_or_default(),
            "the TCP connection limit is above what the open-file limit leaves for TCP clients; using the lower figure"
        );
    }
    configured.min(ceiling).max(1)
}

/// The soft open-file limit now (`None` when it cannot be read or is unlimited).
fn current_nofile() -> Option<u64> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    (soft != RLIM_INFINITY).then_some(soft)
}

/// Most TCP connections a listener may hold under an open-file limit of `nofile`: a quarter of
/// the descriptors (at least 64, at most 1,024) stay free for everything else (UDP sockets, the
/// HTTP listeners and their clients, upstream sockets, the API connection, the log).
pub fn descriptor_ceiling(nofile: Option<u64>) -> usize {
    let Some(nofile) = nofile else {
        return usize::MAX;
    };
    let reserve = (nofile / 4).clamp(64, 1024);
    usize::try_from(nofile.saturating_sub(reserve))
        .unwrap_or(usize::MAX)
        .max(1)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (as Go's runtime does, so CoreDNS does):
/// systemd and containerd 2.x hand out a soft limit of 1,024. Returns the (soft, hard) limits
/// in force afterwards.
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    if soft == hard {
        return Ok((soft, hard));
    }
    // An unlimited hard limit cannot be the soft one: the kernel caps descriptors at nr_open.
    let target = if hard == RLIM_INFINITY {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(1 << 20)
    } else {
        hard
    };
    if target > soft {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard).map_err(io::Error::from)?;
    }
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    Ok((soft, hard))
}

/// Message bytes held beyond each message's first chunk, for one listener.
///
/// Invariant: `used` is the sum of the bytes of every live [`Reservation`] taken from it, and
/// never exceeds `max` (a reservation that would go over fails and changes nothing).
#[derive(Debug)]
pub struct Budget {
    used: AtomicUsize,
    max: usize,
}

impl Budget {
    /// A budget of `max` bytes.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            used: AtomicUsize::new(0),
            max,
        })
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    fn try_take(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|n| *n <= self.max)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Bytes taken from a [`Budget`], given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Reservation {
    /// An empty reservation on `budget`.
    pub fn new(budget: Arc<Budget>) -> Self {
        Self { budget, bytes: 0 }
    }

    /// Makes this reservation `bytes` long; false (and unchanged) when the budget lacks it.
    pub fn resize(&mut self, bytes: usize) -> bool {
        if bytes > self.bytes {
            if !self.budget.try_take(bytes - self.bytes) {
                return false;
            }
        } else {
            self.budget.give_back(self.bytes - bytes);
        }
        self.bytes = bytes;
        true
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

/// Why reading a message stopped.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed, or the socket failed.
    Closed(io::Error),
    /// The listener's buffer budget could not cover the message.
    Budget,
}

/// Reads length-prefixed messages from `rd`, one `read` at a time, into a buffer that grows with
/// what arrived: up to [`FIRST_CHUNK`] bytes at first, then doubling up to the length the
/// prefix claims, the part beyond the first chunk reserved from the listener's [`Budget`].
/// Every step keeps its progress in `self`, so [`MessageReader::read_some`] is cancel-safe.
#[derive(Debug)]
pub struct MessageReader<R> {
    rd: R,
    prefix: [u8; 2],
    prefix_len: usize,
    claimed: usize,
    buf: Vec<u8>,
    filled: usize,
    started: Option<Instant>,
    reservation: Reservation,
}

impl<R: AsyncRead + Unpin> MessageReader<R> {
    /// A reader over `rd` whose large messages draw on `budget`.
    pub fn new(rd: R, budget: Arc<Budget>) -> Self {
        Self {
            rd,
            prefix: [0; 2],
            prefix_len: 0,
            claimed: 0,
            buf: Vec::new(),
            filled: 0,
            started: None,
            reservation: Reservation::new(budget),
        }
    }

    /// When the first byte of the message being read arrived (`None` between messages).
    pub fn started(&self) -> Option<Instant> {
        self.started
    }

    /// Bytes allocated for the message being read.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Bytes of the message being read that arrived (prefix included).
    pub fn received(&self) -> usize {
        self.prefix_len + self.filled
    }

    /// One `read` from the socket. `Some` with a whole message (and the reservation covering
    /// it, to hold while it is answered), `None` when more must arrive.
    pub async fn read_some(&mut self) -> Result<Option<(Vec<u8>, Reservation)>, ReadError> {
        if self.prefix_len < 2 {
            let n = self
                .rd
                .read(&mut self.prefix[self.prefix_len..])
                .await
                .map_err(ReadError::Closed)?;
            if n == 0 {
                return Err(ReadError::Closed(io::ErrorKind::UnexpectedEof.into()));
            }
            self.started.get_or_insert_with(Instant::now);
            self.prefix_len += n;
            if self.prefix_len < 2 {
                return Ok(None);
            }
            self.claimed = usize::from(u16::from_be_bytes(self.prefix));
            if self.claimed == 0 {
                return Ok(Some(self.finish()));
            }
        }
        if self.filled == self.buf.len() {
            let target = self.claimed.min(FIRST_CHUNK.max(self.filled.saturating_mul(2)));
            if !self.reservation.resize(target.saturating_sub(FIRST_CHUNK)) {
                return Err(ReadError::Budget);
            }
            self.buf.reserve_exact(target - self.buf.len());
            self.buf.resize(target, 0);
        }
        let n = self
            .rd
            .read(&mut self.buf[self.filled..])
            .await
            .map_err(ReadError::Closed)?;
        if n == 0 {
            return Err(ReadError::Closed(io::ErrorKind::UnexpectedEof.into()));
        }
        self.filled += n;
        if self.filled < self.claimed {
            return Ok(None);
        }
        Ok(Some(self.finish()))
    }

    fn finish(&mut self) -> (Vec<u8>, Reservation) {
        let msg = std::mem::take(&mut self.buf);
        let fresh = Reservation::new(self.reservation.budget.clone());
        let held = std::mem::replace(&mut self.reservation, fresh);
        self.prefix_len = 0;
        self.claimed = 0;
        self.filled = 0;
        self.started = None;
        (msg, held)
    }
}

/// Descriptors held by TCP connections across every listener of the process, so several
/// listeners together stay below the open-file limit too.
static OPEN_ACROSS_LISTENERS: AtomicUsize = AtomicUsize::new(0);

/// The connections of one listener and the order they started waiting.
///
/// Invariant (all under the one mutex): `open` holds exactly the admitted connections that were
/// neither evicted nor ended, so `open.len() <= max`; `waiting` holds `(since, id)` for exactly
/// the entries of `open` whose `waiting` is `Some(since)` (no query in flight), `since` from
/// the same counter as ids, so the first of `waiting` is the connection that has waited
/// longest. Each entry of `open` is counted once in [`OPEN_ACROSS_LISTENERS`].
#[derive(Debug)]
pub struct Slots {
    max: usize,
    state: Mutex<SlotState>,
    /// The open gauge follows `open` (changed under the same lock).
    metrics: Option<ListenerTcpMetrics>,
}

#[derive(Debug, Default)]
struct SlotState {
    next: u64,
    open: HashMap<u64, SlotEntry>,
    waiting: BTreeSet<(u64, u64)>,
}

#[derive(Debug)]
struct SlotEntry {
    evict: Arc<Notify>,
    waiting: Option<u64>,
}

/// What [`Slots::admit`] decided.
#[derive(Debug)]
pub enum Admission {
    /// Admitted; `evicted` when the connection waiting longest was closed to make room.
    Admitted {
        /// The new connection's slot.
        slot: Slot,
        /// A connection was evicted for it.
        evicted: bool,
    },
    /// At the limit with every connection busy: the new one is to be closed.
    Refused,
}

impl Slots {
    /// Room for `max` connections (and within `process_max` across the process).
    pub fn new(max: usize, metrics: Option<ListenerTcpMetrics>) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            state: Mutex::new(SlotState::default()),
            metrics,
        })
    }

    fn gauge(&self, opened: bool) {
        if let Some(m) = &self.metrics {
            if opened { m.opened() } else { m.gone() }
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // The state is consistent at every unlock (no panics inside); keep serving after one.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// The limit.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Admits a new connection (waiting, as it has sent nothing yet). At the listener's limit,
    /// or when the process holds `process_max` TCP connections, the connection that has waited
    /// longest is told to close and its slot goes to the new one; with none waiting, refused.
    pub fn admit(self: &Arc<Self>, process_max: usize) -> Admission {
        let mut st = self.lock();
        let mut evicted = false;
        if st.open.len() >= self.max || OPEN_ACROSS_LISTENERS.load(Ordering::Acquire) >= process_max {
            let Some((since, victim)) = st.waiting.pop_first() else {
                return Admission::Refused;
            };
            debug_assert!(since <= st.next);
            if let Some(entry) = st.open.remove(&victim) {
                OPEN_ACROSS_LISTENERS.fetch_sub(1, Ordering::AcqRel);
                self.gauge(false);
                entry.evict.notify_one();
            }
            evicted = true;
        }
        let id = st.next;
        st.next += 1;
        let evict = Arc::new(Notify::new());
        st.open.insert(
            id,
            SlotEntry {
                evict: evict.clone(),
                waiting: Some(id),
            },
        );
        st.waiting.insert((id, id));
        OPEN_ACROSS_LISTENERS.fetch_add(1, Ordering::AcqRel);
        self.gauge(true);
        drop(st);
        Admission::Admitted {
            slot: Slot {
                slots: self.clone(),
                id,
                evict,
            },
            evicted,
        }
    }
}

/// One admitted connection's place in its listener's [`Slots`]; leaves it when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    id: u64,
    evict: Arc<Notify>,
}

impl Slot {
    /// A query is in flight: this connection may not be evicted. False when it already was.
    pub fn busy(&self) -> bool {
        let mut st = self.slots.lock();
        let st = &mut *st;
        let Some(entry) = st.open.get_mut(&self.id) else {
            return false;
        };
        if let Some(since) = entry.waiting.take() {
            st.waiting.remove(&(since, self.id));
        }
        true
    }

    /// Nothing in flight any more: this connection waits again, as the newest.
    pub fn waiting(&self) {
        let mut st = self.slots.lock();
        let st = &mut *st;
        let since = st.next;
        let Some(entry) = st.open.get_mut(&self.id) else {
            return;
        };
        if let Some(old) = entry.waiting.replace(since) {
            st.waiting.remove(&(old, self.id));
        }
        st.next += 1;
        st.waiting.insert((since, self.id));
    }

    /// Completes when this connection is evicted.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut st = self.slots.lock();
        if let Some(entry) = st.open.remove(&self.id) {
            if let Some(since) = entry.waiting {
                st.waiting.remove(&(since, self.id));
            }
            OPEN_ACROSS_LISTENERS.fetch_sub(1, Ordering::AcqRel);
            self.slots.gauge(false);
        }
    }
}

/// What one listener's connections share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) handler: DnsHandler,
    /// Turns true when the listener stops: each connection stops reading, sends the answers
    /// in flight and closes.
    pub(super) stopping: tokio::sync::watch::Receiver<bool>,
    pub(super) limits: TcpLimits,
    protocol: StreamProtocol,
    pub(super) budget: Arc<Budget>,
    addr: String,
    /// The limit and buffer warnings, each logged once per listener.
    warned_limit: AtomicBool,
    warned_buffer: AtomicBool,
}

impl Shared {
    pub(super) fn closed(&self, reason: CloseReason) {
        if let Some(m) = &self.limits.metrics {
            m.closed(reason);
        }
        let warned = match reason {
            CloseReason::Limit => &self.warned_limit,
            CloseReason::Buffer => &self.warned_buffer,
            CloseReason::Idle | CloseReason::Deadline => return,
        };
        if !warned.swap(true, Ordering::AcqRel) {
            match reason {
                CloseReason::Limit => tracing::warn!(
                    addr = %self.addr,
                    limit = self.limits.max_connections,
                    "TCP connection limit reached: closing the connections waiting longest (or new ones, when all are busy); counted in cluster_dns_tcp_connections_closed_total{{reason=\"limit\"}}, logged once; raise {MAX_CONNECTIONS_ENV} if clients need more"
                ),
                _ => tracing::warn!(
                    addr = %self.addr,
                    budget = self.limits.buffer_budget,
                    "TCP message buffer budget spent: closing connections that send large messages; counted in cluster_dns_tcp_connections_closed_total{{reason=\"buffer\"}}, logged once"
                ),
            }
        }
    }
}

/// Accepts connections on `listener` with the default [`TcpLimits`] and serves each until it
/// closes or idles out. Runs until the task is aborted.
pub async fn serve(listener: TcpListener, handler: DnsHandler) {
    serve_limited(listener, handler, TcpLimits::default()).await;
}

/// [`serve`] within `limits`.
pub async fn serve_limited(listener: TcpListener, handler: DnsHandler, limits: TcpLimits) {
    serve_until(listener, handler, limits, std::future::pending()).await;
}

/// [`serve_limited`] until `shutdown` completes; then it drains: no new connection is
/// accepted, each connection stops reading, the queries already read are answered (each
/// answer written within the message deadline), and it returns once every connection closed.
pub async fn serve_until(
    listener: TcpListener,
    handler: DnsHandler,
    limits: TcpLimits,
    shutdown: impl Future<Output = ()> + Send,
) {
    serve_protocol_until(listener, handler, limits, StreamProtocol::Tcp, shutdown).await;
}

/// [`serve_until`], speaking `protocol` on each connection.
pub async fn serve_protocol_until(
    listener: TcpListener,
    handler: DnsHandler,
    limits: TcpLimits,
    protocol: StreamProtocol,
    shutdown: impl Future<Output = ()> + Send,
) {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string());
    let process_max = descriptor_ceiling(current_nofile());
    tracing::debug!(%addr, max_connections = limits.max_connections, process_max, "TCP limits");
    if let Some(m) = &limits.metrics {
        m.set_limit(limits.max_connections);
    }
    let slots = Slots::new(limits.max_connections, limits.metrics.clone());
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared {
        handler,
        stopping,
        budget: Budget::new(limits.buffer_budget),
        limits,
        protocol,
        addr,
        warned_limit: AtomicBool::new(false),
        warned_buffer: AtomicBool::new(false),
    });
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => a,
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        match accepted {
            Ok((stream, src)) => match slots.admit(process_max) {
                Admission::Admitted { slot, .. } => {
                    connections.spawn(serve_accepted(stream, src, shared.clone(), slot));
                }
                Admission::Refused => {
                    shared.closed(CloseReason::Limit);
                    drop(stream);
                }
            },
            Err(error) => {
                tracing::debug!(%error, "error accepting a TCP connection");
                // Out of descriptors and the like: do not spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    while connections.join_next().await.is_some() {}
}

/// One accepted connection, in its listener's protocol.
async fn serve_accepted(stream: TcpStream, src: SocketAddr, shared: Arc<Shared>, slot: Slot) {
    let _ = stream.set_nodelay(true);
    match shared.protocol.clone() {
        StreamProtocol::Tcp => connection(stream, src, shared, slot).await,
        StreamProtocol::Tls(cell) => {
            if let Some(tls) = handshake(&cell, stream, src, &shared).await {
                connection(tls, src, shared, slot).await;
            }
        }
        StreamProtocol::Https(None) => super::doh::connection(stream, src, shared, slot, false).await,
        StreamProtocol::Https(Some(cell)) => {
            if let Some(tls) = handshake(&cell, stream, src, &shared).await {
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                super::doh::connection(tls, src, shared, slot, h2).await;
            }
        }
    }
}

/// The server side of a TLS handshake, within the message deadline; `None` (and counted as a
/// deadline close when it timed out) when it did not complete.
async fn handshake(
    cell: &TlsCell,
    stream: TcpStream,
    src: SocketAddr,
    shared: &Shared,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let acceptor = TlsAcceptor::from(cell.load_full());
    match tokio::time::timeout(shared.limits.message_deadline, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(error)) => {
            tracing::debug!(%src, %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            shared.closed(CloseReason::Deadline);
            tracing::debug!(%src, "TLS handshake not done within the message deadline");
            None
        }
    }
}

async fn connection<S>(stream: S, src: SocketAddr, shared: Arc<Shared>, slot: Slot)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (rd, wr) = tokio::io::split(stream);
    let wr = Arc::new(tokio::sync::Mutex::new(wr));
    let mut reader = MessageReader::new(rd, shared.budget.clone());
    let mut in_flight = JoinSet::new();
    let mut idle_since = Instant::now();
    let limits = &shared.limits;
    let mut stopping = shared.stopping.clone();
    let reason = loop {
        let (timer, on_timer) = match reader.started() {
            Some(t) => (Some(t + limits.message_deadline), CloseReason::Deadline),
            None if in_flight.is_empty() => (Some(idle_since + limits.idle_timeout), CloseReason::Idle),
            None => (None, CloseReason::Idle),
        };
        tokio::select! {
            biased;
            () = slot.evicted() => break Some(CloseReason::Limit),
            // The listener stops: answer what was read, then close.
            _ = stopping.wait_for(|stop| *stop) => break None,
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                if matches!(done, Ok(Stalled(true))) {
                    // The client does not read its answers.
                    break Some(CloseReason::Deadline);
                }
                if in_flight.is_empty() {
                    slot.waiting();
                    idle_since = Instant::now();
                }
            }
            () = tokio::time::sleep_until(timer.unwrap_or_else(Instant::now)), if timer.is_some() => {
                break Some(on_timer);
            }
            read = reader.read_some(), if in_flight.len() < MAX_IN_FLIGHT => match read {
                Ok(None) => {}
                Ok(Some((msg, held))) => {
                    let still_open = slot.busy();
                    let handler = shared.handler.clone();
                    let wr = wr.clone();
                    let write_deadline = limits.message_deadline;
                    in_flight.spawn(async move {
                        let mut out = Vec::with_capacity(512);
                        let answered = handler.answer_into(&msg, src, Transport::Tcp, &mut out).await;
                        drop(msg);
                        drop(held);
                        match answered {
                            Some(_) => write_framed(&wr, &out, write_deadline).await,
                            None => Stalled(false),
                        }
                    });
                    if !still_open {
                        break Some(CloseReason::Limit);
                    }
                }
                Err(ReadError::Budget) => break Some(CloseReason::Buffer),
                Err(ReadError::Closed(error)) => {
                    tracing::trace!(%src, %error, "TCP connection closed by the client");
                    break None;
                }
            },
        }
    };
    if let Some(reason) = reason {
        shared.closed(reason);
        tracing::debug!(%src, reason = reason.label(), "closing a TCP connection");
    }
    // Free the message being read before the answers drain.
    drop(reader);
    // Let the answers already being worked on go out before the connection closes, unless the
    // client stopped reading them.
    while let Some(done) = in_flight.join_next().await {
        if matches!(done, Ok(Stalled(true))) {
            in_flight.abort_all();
        }
    }
}

/// True when an answer could not be written within the deadline: the client does not read.
#[derive(Debug, Clone, Copy)]
struct Stalled(bool);

/// Writes `msg` with its length prefix, waiting at most `deadline` for the socket (and for the
/// answers before it).
async fn write_framed<W: AsyncWrite + Unpin>(
    wr: &tokio::sync::Mutex<W>,
    msg: &[u8],
    deadline: Duration,
) -> Stalled {
    let Ok(len) = u16::try_from(msg.len()) else {
        return Stalled(false);
    };
    let mut framed = Vec::with_capacity(msg.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(msg);
    let write = async {
        let mut w = wr.lock().await;
        w.write_all(&framed).await?;
        // TLS holds records until flushed; a plain socket's flush does nothing.
        w.flush().await
    };
    match tokio::time::timeout(deadline, write).await {
        Ok(Ok(())) => Stalled(false),
        Ok(Err(error)) => {
            tracing::debug!(%error, "failed to write a TCP response");
            Stalled(false)
        }
        Err(_) => Stalled(true),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (c, s)
    }

    /// Reads until `want` bytes of the current message arrived (or a message is whole).
    async fn read_until<R: AsyncRead + Unpin>(
        r: &mut MessageReader<R>,
        want: usize,
    ) -> Option<(Vec<u8>, Reservation)> {
        for _ in 0..10_000 {
            if let Some(m) = r.read_some().await.unwrap() {
                return Some(m);
            }
            if r.received() >= want {
                return None;
            }
        }
        panic!("no progress");
    }

    #[tokio::test]
    async fn the_buffer_grows_with_what_arrived_not_with_the_prefix() {
        let (mut client, server) = pair().await;
        let budget = Budget::new(1 << 20);
        let mut r = MessageReader::new(server, budget.clone());
        client.write_all(&[0xff, 0xff]).await.unwrap();
        client.write_all(&[7u8; 100]).await.unwrap();
        assert!(read_until(&mut r, 102).await.is_none());
        // 100 bytes arrived of 65,535 claimed: one first chunk, nothing from the budget.
        assert!(r.capacity() <= FIRST_CHUNK, "capacity {}", r.capacity());
        assert_eq!(budget.used(), 0);
        client.write_all(&[7u8; 3000]).await.unwrap();
        assert!(read_until(&mut r, 3102).await.is_none());
        // At most twice what arrived.
        assert!(r.capacity() <= 2 * 3100, "capacity {}", r.capacity());
        assert_eq!(budget.used(), r.capacity() - FIRST_CHUNK);
        // The rest arrives: the whole message, its bytes held by the reservation until dropped.
        client.write_all(&vec![7u8; 65_535 - 3100]).await.unwrap();
        let (msg, held) = read_until(&mut r, usize::MAX).await.unwrap();
        assert_eq!(msg.len(), 65_535);
        assert_eq!(held.bytes(), 65_535 - FIRST_CHUNK);
        assert_eq!(budget.used(), 65_535 - FIRST_CHUNK);
        drop(held);
        assert_eq!(budget.used(), 0);
        // The next message starts from nothing.
        assert_eq!(r.capacity(), 0);
        assert!(r.started().is_none());
        // A small pipelined pair: each whole, no budget.
        client.write_all(&[0, 3, 1, 2, 3, 0, 1, 9]).await.unwrap();
        let (a, _) = read_until(&mut r, usize::MAX).await.unwrap();
        let (b, _) = read_until(&mut r, usize::MAX).await.unwrap();
        assert_eq!((a, b), (vec![1, 2, 3], vec![9]));
        assert_eq!(budget.used(), 0);
    }

    #[tokio::test]
    async fn a_spent_budget_stops_the_reader_and_dropping_it_gives_back() {
        let (mut client, server) = pair().await;
        let budget = Budget::new(4096);
        let mut r = MessageReader::new(server, budget.clone());
        client.write_all(&[0xff, 0xff]).await.unwrap();
        client.write_all(&[1u8; 20_000]).await.unwrap();
        let mut outcome = None;
        for _ in 0..10_000 {
            match r.read_some().await {
                Ok(None) => {}
                other => {
                    outcome = Some(other);
                    break;
                }
            }
        }
        assert!(matches!(outcome, Some(Err(ReadError::Budget))), "{outcome:?}");
        assert!(budget.used() <= 4096);
        drop(r);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn the_connection_limit_setting() {
        assert_eq!(max_connections(None, Some(1 << 20)), DEFAULT_MAX_CONNECTIONS);
        assert_eq!(max_connections(Some(" 5000 "), Some(1 << 20)), 5000);
        // Not a positive number: the default.
        for bad in ["0", "-3", "lots", ""] {
            assert_eq!(max_connections(Some(bad), Some(1 << 20)), DEFAULT_MAX_CONNECTIONS);
        }
        // Kept below the open-file limit.
        assert_eq!(max_connections(None, Some(1024)), 768);
        assert_eq!(max_connections(Some("100000"), Some(20_000)), 18_976);
        assert_eq!(max_connections(Some("100000"), None), 100_000);
    }

    #[test]
    fn the_descriptor_ceiling_leaves_room() {
        assert_eq!(descriptor_ceiling(Some(1024)), 768);
        assert_eq!(descriptor_ceiling(Some(256)), 192);
        assert_eq!(descriptor_ceiling(Some(1 << 20)), (1 << 20) - 1024);
        assert_eq!(descriptor_ceiling(Some(10)), 1);
        assert_eq!(descriptor_ceiling(None), usize::MAX);
    }

    #[test]
    fn at_the_limit_the_longest_waiting_goes_and_busy_ones_stay() {
        let slots = Slots::new(3, None);
        let admit = |s: &Arc<Slots>| match s.admit(usize::MAX) {
            Admission::Admitted { slot, evicted } => (slot, evicted),
            Admission::Refused => panic!("refused"),
        };
        let (a, _) = admit(&slots);
        let (b, _) = admit(&slots);
        let (c, _) = admit(&slots);
        // a is busy: b has waited longest.
        assert!(a.busy());
        let (d, evicted) = admit(&slots);
        assert!(evicted);
        assert!(!b.busy(), "b was evicted");
        assert_eq!(slots.open(), 3);
        // c goes back to waiting after d: c is newer than d now.
        assert!(c.busy());
        c.waiting();
        let (e, evicted) = admit(&slots);
        assert!(evicted);
        assert!(!d.busy(), "d waited longer than c");
        assert!(c.busy());
        assert!(e.busy());
        // All busy: the next is refused.
        assert!(matches!(slots.admit(usize::MAX), Admission::Refused));
        drop(a);
        assert_eq!(slots.open(), 2);
        drop(b);
        assert_eq!(slots.open(), 2);
    }

    /// Many tasks admitting, turning busy and waiting, and leaving at once on a multi-threaded
    /// runtime: the limit always holds, and everything is given back at the end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn slots_and_budget_hold_under_concurrent_writers() {
        let slots = Slots::new(16, None);
        let budget = Budget::new(10_000);
        let mut tasks = JoinSet::new();
        for t in 0..8u64 {
            let slots = slots.clone();
            let budget = budget.clone();
            tasks.spawn(async move {
                let mut held = Vec::new();
                for i in 0..2_000u64 {
                    if let Admission::Admitted { slot, .. } = slots.admit(usize::MAX) {
                        if (i + t) % 3 == 0 {
                            slot.busy();
                        }
                        held.push(slot);
                    }
                    assert!(slots.open() <= 16);
                    if i % 5 == 0 {
                        held.truncate(held.len() / 2);
                        if let Some(s) = held.last() {
                            s.waiting();
                        }
                    }
                    let mut r = Reservation::new(budget.clone());
                    if r.resize(usize::try_from(i % 3_000).unwrap()) {
                        assert!(budget.used() <= 10_000);
                    }
                    tokio::task::yield_now().await;
                }
            });
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
        assert_eq!(slots.open(), 0);
        assert_eq!(budget.used(), 0);
        let st = slots.lock();
        assert!(st.waiting.is_empty());
    }
}
