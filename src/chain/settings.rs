//! What a server block's directives set for the server that runs it, beside its chain (as
//! CoreDNS's setups write `dnsserver.Config`): listen addresses, UDP size, server TLS, the
//! lameduck, reload, debug logging, whether its requests are counted, the HTTP routes its
//! plugins serve, and the filter that tells blocks of one zone apart. Setups write these
//! ([`crate::chain::Configured::configure`]); the runtime reads the plain fields and never
//! the plugins' own types.

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::ready::Readiness;
use crate::proto::{MAX_UDP_PAYLOAD, Question};
use crate::telemetry::DnsMetrics;

/// Which questions a server block takes (`view`): blocks of the same zones and port are told
/// apart by it, the first whose filter admits a question answering it.
pub trait BlockFilter: Send + Sync + fmt::Debug {
    /// True when the block takes `q`.
    fn admits(&self, q: &Question) -> bool;
    /// Its name (the `view` label of the block's metrics).
    fn name(&self) -> &str;
}

/// How often the Corefile is read again for changes (`reload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReloadSettings {
    /// How often.
    pub interval: Duration,
    /// Up to this much is added to or taken from each interval.
    pub jitter: Duration,
}

/// The bounds of a listener's stream connections (DNS over TCP, TLS and HTTPS) a block sets
/// (`timeouts`); `None` keeps the server's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamTimeouts {
    /// A message must arrive whole within this from its first byte.
    pub read: Option<Duration>,
    /// A reply must be written within this.
    pub write: Option<Duration>,
    /// A connection with nothing to do is closed after this.
    pub idle: Option<Duration>,
    /// Most queries one TCP or TLS connection serves before it is closed.
    pub max_queries: Option<usize>,
}

/// The DNS-over-QUIC bounds a block sets (`quic`); `None` keeps CoreDNS's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuicOptions {
    /// Streams (queries) one connection may have open at once (`max_streams`).
    pub max_streams: Option<u32>,
    /// Streams answered at once across all connections of the listener (`worker_pool_size`).
    pub workers: Option<usize>,
}

/// What a listener does with a PROXY protocol header from a source (`proxyproto`), as
/// go-proxyproto's policies CoreDNS uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyPolicy {
    /// Takes the header's source address as the client's.
    Use,
    /// Reads the header and discards it; the client is the peer.
    Ignore,
    /// Drops the datagram or closes the connection that carries a header.
    Reject,
    /// Does not look for a header (one present is taken as DNS, which then fails to parse).
    Skip,
}

/// A block's `proxyproto`: the sources whose headers are used, and the policy for the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyProtocol {
    /// The sources whose headers are used (`allow`); empty: every source.
    pub allow: Vec<crate::corefile::Cidr>,
    /// The policy for sources not allowed (`default`); unset is `ignore`.
    pub default: Option<ProxyPolicy>,
    /// UDP sessions (`udp_session_tracking`): how long the client of a header-only datagram
    /// is applied to the headerless datagrams that follow from the same peer, and the most
    /// peers remembered at once.
    pub udp_sessions: Option<(Duration, usize)>,
}

/// What an HTTP route's handler may use: the process-wide state that outlives configurations.
#[derive(Debug, Clone, Copy)]
pub struct HttpCtx<'a> {
    /// The metrics registry.
    pub metrics: &'a DnsMetrics,
    /// What `/ready` reads.
    pub readiness: &'a Readiness,
}

/// Makes a route's handler when its listener starts.
type MakeRouter = Arc<dyn Fn(HttpCtx<'_>) -> axum::Router + Send + Sync>;

/// Work that runs beside a listener while it serves, given the address it is bound to.
type Beside = Arc<dyn Fn(SocketAddr, HttpCtx<'_>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A path a plugin serves over HTTP on an address (`/health` on `:8080`). Routes of every
/// block on one address share one listener, as in CoreDNS.
#[derive(Clone)]
pub struct HttpRoute {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The path, with its slash (`/health`).
    pub path: &'static str,
    /// Its handler.
    pub router: MakeRouter,
    /// Work that runs while the listener serves (`health`'s probe of itself).
    pub beside: Option<Beside>,
}

impl fmt::Debug for HttpRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRoute")
            .field("addr", &self.addr)
            .field("path", &self.path)
            .field("beside", &self.beside.is_some())
            .finish()
    }
}

/// What the listener of one listen address is told by the blocks that listen on it: the
/// options of `tls`, `timeouts`, `multisocket`, `shed`, `quic`, `https3` and `proxyproto`.
/// The runtime folds the blocks' values once per address (`server::fold_listener`: the first
/// block that sets an option decides; `shed` is on when any block has it) and hands the value
/// whole to the server, which turns it into its limits. A new listener option is a field
/// here, its plugin folder, and the server's fold and reading of it; never the runtime.
#[derive(Debug, Clone, Default)]
pub struct ListenerSettings {
    /// The server certificate of `tls://`, `https://`, `quic://` and `https3://` listeners
    /// (`tls`).
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// Stream connection bounds (`timeouts`).
    pub stream: Option<StreamTimeouts>,
    /// How many UDP sockets to bind on the port with `SO_REUSEPORT`, each served by its own
    /// worker (`multisocket`). `None`: one per CPU.
    pub udp_sockets: Option<usize>,
    /// The UDP sockets drop queries that would wait for I/O while the socket has as many
    /// answers waiting as it sheds at (`shed`).
    pub shed: bool,
    /// `quic://` stream bounds (`quic`).
    pub quic: Option<QuicOptions>,
    /// `https3://` stream bounds (`https3 { max_streams }`).
    pub https3: Option<QuicOptions>,
    /// PROXY protocol handling (`proxyproto`).
    pub proxy: Option<Arc<ProxyProtocol>>,
}

/// A server block's settings (see the module docs). The defaults are a block without any
/// of the directives that set them.
#[derive(Debug, Clone)]
pub struct BlockSettings {
    /// The addresses to listen on (`bind`); empty: every interface.
    pub bind: Vec<IpAddr>,
    /// The largest UDP payload the block advertises and fills (`bufsize`; 1232 by default).
    pub udp_payload: u16,
    /// The process logs cluster-dns's own messages at debug level (`debug`).
    pub debug: bool,
    /// How long DNS keeps answering after SIGTERM (`health { lameduck }`): the upper bound.
    pub lameduck: Duration,
    /// How long DNS keeps answering after this server's own endpoint left every Service
    /// (`health { propagation_margin }`), for kube-proxy on every node to follow.
    pub propagation_margin: Option<Duration>,
    /// Read the Corefile again for changes (`reload`).
    pub reload: Option<ReloadSettings>,
    /// The block's requests are counted in CoreDNS's `coredns_dns_*` families (`prometheus`).
    pub records_metrics: bool,
    /// The HTTP routes its plugins serve (`health`, `ready`, `prometheus`).
    pub http: Vec<HttpRoute>,
    /// Which questions the block takes (`view`); all when `None`.
    pub filter: Option<Arc<dyn BlockFilter>>,
    /// What its listeners are told (`tls`, `timeouts`, `multisocket`, `shed`, `quic`,
    /// `https3`, `proxyproto`); see [`ListenerSettings`].
    pub listener: ListenerSettings,
    /// Its questions carry metadata (`metadata`), published by its plugins for the names
    /// under these zones (empty: the block's zones).
    pub metadata: Option<Vec<hickory_proto::rr::Name>>,
    /// Its check of signed requests and signing of their replies (`tsig`).
    pub auth: Option<Arc<dyn super::auth::RequestAuth>>,
    /// A plugin answers zone transfers (`transfer`): the server refuses AXFR and IXFR in
    /// blocks without one.
    pub transfers: bool,
}

impl Default for BlockSettings {
    fn default() -> Self {
        Self {
            bind: Vec::new(),
            udp_payload: MAX_UDP_PAYLOAD,
            debug: false,
            lameduck: Duration::ZERO,
            propagation_margin: None,
            reload: None,
            records_metrics: false,
            http: Vec::new(),
            filter: None,
            listener: ListenerSettings::default(),
            metadata: None,
            auth: None,
            transfers: false,
        }
    }
}
