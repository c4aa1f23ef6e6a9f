//! The DNS server: UDP and TCP listeners on hickory-server, request validation (opcode, question
//! count, class, EDNS version), routing to the server block whose zone matches, and response
//! writing with EDNS and truncation.
//!
//! [`serve`] takes already-bound sockets and a shutdown future, so tests bind port 0 and stop
//! the server cleanly.

pub mod fit;
pub mod observe;

use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures::FutureExt as _;

use hickory_proto::op::{Edns, Header, HeaderCounts, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncodable, BinEncoder};
use hickory_server::Server;
use hickory_server::net::runtime::Time;
pub use hickory_server::net::xfer::Protocol;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use tokio::net::{TcpListener, UdpSocket};

use crate::plugin::metrics::Proto;
use crate::plugin::{Chain, Question, Reply};
use observe::{Exchange, Observers};

/// The UDP payload size cluster-dns advertises and never exceeds (DNS Flag Day 2020).
pub const MAX_UDP_PAYLOAD: u16 = 1232;
/// UDP size limit for a query without EDNS (RFC 1035).
pub const PLAIN_UDP_LIMIT: u16 = 512;
/// How long an idle TCP connection is kept.
pub const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors of the serving layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server stopped with an error.
    #[error("dns server failed: {0}")]
    Serve(String),
}

/// One server block as the router sees it: its zones (lower-case, absolute), its chain and
/// what it observes of each request.
#[derive(Debug, Clone)]
pub struct BlockRoute {
    /// The block's zones.
    pub zones: Vec<Name>,
    /// Its plugins.
    pub chain: Chain,
    /// Its `prometheus`, `log` and `errors`.
    pub observers: Observers,
}

/// The server blocks that share one listen address, routed by the longest matching zone.
#[derive(Debug, Clone, Default)]
pub struct Router {
    /// The `server` label of this address's metrics (`dns://:53`).
    pub server: String,
    /// The blocks.
    pub blocks: Vec<BlockRoute>,
}

impl Router {
    /// The block whose zone is the longest suffix of `lower`, and that zone.
    pub fn route(&self, lower: &Name) -> Option<(&BlockRoute, &Name)> {
        self.blocks
            .iter()
            .flat_map(|b| b.zones.iter().map(move |z| (b, z)))
            .filter(|(_, z)| z.zone_of(lower))
            .max_by_key(|(_, z)| z.num_labels())
    }
}

/// The routing table of one listen address, swapped whole when the Corefile is reloaded; a
/// request in flight keeps the table it started with.
pub type RouterCell = Arc<ArcSwap<Router>>;

/// A new cell holding `router`.
pub fn router_cell(router: Router) -> RouterCell {
    Arc::new(ArcSwap::from_pointee(router))
}

/// hickory-server's request handler for a [`RouterCell`].
#[derive(Debug, Clone)]
pub struct DnsHandler {
    router: RouterCell,
}

impl DnsHandler {
    /// A handler routing through `router`.
    pub fn new(router: RouterCell) -> Self {
        Self { router }
    }
}

/// The response an error-only or answered request gets, before encoding.
struct Response {
    meta: Metadata,
    answers: Vec<Record>,
    authority: Vec<Record>,
    additional: Vec<Record>,
    /// The block that answered (index into the router) and the zone that matched.
    block: Option<(usize, Name)>,
    /// The plugin that wrote the response.
    plugin: &'static str,
    /// The chain's own failure, for `errors`.
    failure: Option<&'static str>,
}

impl Response {
    fn rcode(meta: Metadata, rcode: ResponseCode) -> Self {
        let mut meta = meta;
        meta.response_code = rcode;
        Self {
            meta,
            answers: Vec::new(),
            authority: Vec::new(),
            additional: Vec::new(),
            block: None,
            plugin: "",
            failure: None,
        }
    }
}

impl DnsHandler {
    /// Decides the response to `req` (I/O only through the chain's `forward`).
    async fn respond(&self, router: &Router, req: &Request) -> Response {
        let mut meta = Metadata::response_from_request(&req.metadata);
        meta.recursion_available = false;
        if req.metadata.op_code != OpCode::Query {
            return Response::rcode(meta, ResponseCode::NotImp);
        }
        if let Some(edns) = &req.edns
            && edns.version() > 0
        {
            return Response::rcode(meta, ResponseCode::BADVERS);
        }
        let query = match req.queries.queries() {
            [q] => q,
            // No question: SERVFAIL, as CoreDNS's server answers it.
            [] => return Response::rcode(meta, ResponseCode::ServFail),
            _ => return Response::rcode(meta, ResponseCode::FormErr),
        };
        if query.query_class() != DNSClass::IN {
            return Response::rcode(meta, ResponseCode::Refused);
        }
        let qtype = query.query_type();
        if matches!(qtype, RecordType::AXFR | RecordType::IXFR) {
            return Response::rcode(meta, ResponseCode::Refused);
        }
        if qtype == RecordType::OPT {
            return Response::rcode(meta, ResponseCode::FormErr);
        }
        let original = query.original();
        let lower = original.name().to_lowercase();
        let Some((block, zone)) = router.route(&lower) else {
            return Response::rcode(meta, ResponseCode::Refused);
        };
        let chain = &block.chain;
        let index = router
            .blocks
            .iter()
            .position(|b| std::ptr::eq(b, block))
            .unwrap_or_default();
        let routed = Some((index, zone.clone()));
        let question = Question {
            name: original.name().clone(),
            qtype,
            qclass: query.query_class(),
            dnssec_ok: req.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok),
            checking_disabled: req.metadata.checking_disabled,
            recursion_desired: req.metadata.recursion_desired,
            tcp: !matches!(req.protocol(), Protocol::Udp),
        };
        // A panicking plugin costs one SERVFAIL, counted in coredns_panics_total, never the
        // listener.
        let reply = match AssertUnwindSafe(chain.serve(&question)).catch_unwind().await {
            Ok(reply) => reply,
            Err(_) => {
                if let Some(m) = router.blocks.iter().find_map(|b| b.observers.metrics.as_ref()) {
                    m.panic();
                }
                tracing::error!(qname = %question.name, qtype = %question.qtype, "a plugin panicked; answered SERVFAIL");
                let mut r = Response::rcode(meta, ResponseCode::ServFail);
                r.block = routed;
                r.failure = Some("a plugin panicked");
                return r;
            }
        };
        match reply {
            Reply::Authoritative(answer) => {
                meta.authoritative = true;
                meta.response_code = answer.rcode;
                Response {
                    meta,
                    answers: answer.answers,
                    authority: answer.authority,
                    additional: answer.additional,
                    block: routed,
                    plugin: "kubernetes",
                    failure: None,
                }
            }
            Reply::Forwarded(f) => {
                // The upstream's rcode and flags; not authoritative (we are not).
                meta.authoritative = false;
                meta.recursion_available = f.recursion_available;
                meta.authentic_data = f.authentic_data;
                meta.response_code = f.rcode;
                meta.truncation = f.truncated;
                Response {
                    meta,
                    answers: f.answers,
                    authority: f.authority,
                    additional: f.additional,
                    block: routed,
                    plugin: "forward",
                    failure: None,
                }
            }
            Reply::Rcode(rcode) => {
                let mut r = Response::rcode(meta, rcode);
                r.block = routed;
                r.failure = observe::is_failure(rcode).then_some(if chain.forward.is_some() {
                    "no upstream answered in time (or too many queries in flight)"
                } else {
                    "no plugin could answer"
                });
                r
            }
        }
    }
}

/// A response ready to encode: records cut to the size limit, and the OPT to send.
struct Prepared {
    resp: Response,
    edns: Option<Edns>,
}

impl DnsHandler {
    /// Decides the response to `req` and cuts it to the client's size limit: the client's EDNS
    /// payload capped at ours and never below 512 on UDP, 512 without EDNS, 64 KiB on TCP. An
    /// OPT is sent only when the query had one.
    async fn prepare(&self, router: &Router, req: &Request) -> Prepared {
        let mut resp = self.respond(router, req).await;
        let udp = matches!(req.protocol(), Protocol::Udp);
        let edns = req.edns.as_ref().map(|client| {
            let mut ours = Edns::new();
            ours.set_version(0);
            ours.set_max_payload(client.max_payload().clamp(PLAIN_UDP_LIMIT, MAX_UDP_PAYLOAD));
            ours.set_dnssec_ok(client.flags().dnssec_ok);
            ours
        });
        let limit = match (&edns, udp) {
            (_, false) => usize::from(u16::MAX),
            (Some(e), true) => usize::from(e.max_payload()),
            (None, true) => usize::from(PLAIN_UDP_LIMIT),
        };
        let f = fit::fit(
            req.queries.as_bytes(),
            &resp.answers,
            &resp.authority,
            &resp.additional,
            edns.is_some(),
            limit,
        );
        resp.answers.truncate(f.answers);
        resp.authority.truncate(f.authority);
        resp.additional.truncate(f.additional);
        resp.meta.truncation = resp.meta.truncation || f.truncated;
        Prepared { resp, edns }
    }

    /// Answers one wire-format request without sockets, as the server would (used by the fuzz
    /// targets and benchmarks), blocking the calling thread. Only for chains that do no I/O
    /// (no `forward`); use [`DnsHandler::answer_wire_async`] inside a tokio runtime otherwise.
    pub fn answer_wire(&self, bytes: &[u8], src: SocketAddr, protocol: Protocol) -> Option<Vec<u8>> {
        futures::executor::block_on(self.answer_wire_async(bytes, src, protocol))
    }

    /// Answers one wire-format request without sockets, as the server would. `None` where the
    /// server sends nothing: shorter than a header, or a response packet. Unparsable bodies get
    /// FORMERR.
    pub async fn answer_wire_async(
        &self,
        bytes: &[u8],
        src: SocketAddr,
        protocol: Protocol,
    ) -> Option<Vec<u8>> {
        let mut decoder = BinDecoder::new(bytes);
        let header = Header::read(&mut decoder).ok()?;
        let req = match Request::from_bytes(bytes.to_vec(), src, protocol) {
            Ok(r) => r,
            Err(_) => {
                let mut meta = Metadata::response_from_request(&header.metadata);
                meta.response_code = ResponseCode::FormErr;
                let mut out = Vec::new();
                Header {
                    metadata: meta,
                    counts: HeaderCounts::default(),
                }
                .emit(&mut BinEncoder::new(&mut out))
                .ok()?;
                return Some(out);
            }
        };
        if req.metadata.message_type == MessageType::Response {
            return None;
        }
        let started = Instant::now();
        let router = self.router.load_full();
        let p = self.prepare(&router, &req).await;
        let out = encode(&req, &p)?;
        observe_request(&router, &req, &p.resp, out.len(), started);
        Some(out)
    }
}

/// The wire form of a prepared response (UDP capped at its size limit).
fn encode(req: &Request, p: &Prepared) -> Option<Vec<u8>> {
    let builder = MessageResponseBuilder::new(&req.queries, p.edns.as_ref());
    let message = builder.build(
        p.resp.meta,
        p.resp.answers.iter(),
        p.resp.authority.iter(),
        [],
        p.resp.additional.iter(),
    );
    let mut out = Vec::with_capacity(512);
    let mut enc = BinEncoder::new(&mut out);
    if matches!(req.protocol(), Protocol::Udp) {
        enc.set_max_size(p.edns.as_ref().map_or(PLAIN_UDP_LIMIT, Edns::max_payload));
    }
    message.destructive_emit(&mut enc).ok()?;
    Some(out)
}

/// True when some observer will see this response (so its size must be measured).
fn observed(router: &Router, resp: &Response) -> bool {
    match &resp.block {
        Some((i, _)) => router.blocks.get(*i).is_some_and(|b| !b.observers.is_empty()),
        None => router.blocks.iter().any(|b| b.observers.metrics.is_some()),
    }
}

#[async_trait::async_trait]
impl RequestHandler for DnsHandler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        req: &Request,
        mut response_handle: R,
    ) -> ResponseInfo {
        let started = Instant::now();
        let router = self.router.load_full();
        let p = self.prepare(&router, req).await;
        let meta = p.resp.meta;
        let observed = observed(&router, &p.resp);
        // hickory-server encodes as it sends; measure the size apart only when it is observed.
        let response_size = if observed {
            encode(req, &p).map_or(0, |b| b.len())
        } else {
            0
        };
        let builder = MessageResponseBuilder::new(&req.queries, p.edns.as_ref());
        let message = builder.build(
            meta,
            p.resp.answers.iter(),
            p.resp.authority.iter(),
            [],
            p.resp.additional.iter(),
        );
        let sent = response_handle.send_response(message).await;
        if observed {
            observe_request(&router, req, &p.resp, response_size, started);
        }
        match sent {
            Ok(info) => info,
            Err(error) => {
                tracing::debug!(%error, "failed to send a response");
                Header {
                    metadata: meta,
                    counts: HeaderCounts::default(),
                }
                .into()
            }
        }
    }
}

/// Reports one answered request to the observers of the block that answered it. A request no
/// block took is counted (metrics only) under the zone `dropped`, by the first block that has
/// metrics.
fn observe_request(router: &Router, req: &Request, resp: &Response, response_size: usize, started: Instant) {
    let (observers, zone) = match &resp.block {
        Some((index, zone)) => match router.blocks.get(*index) {
            Some(b) => (b.observers.clone(), zone.to_string()),
            None => return,
        },
        None => match router.blocks.iter().find_map(|b| b.observers.metrics.clone()) {
            Some(metrics) => (
                Observers {
                    metrics: Some(metrics),
                    ..Observers::default()
                },
                observe::UNROUTED_ZONE.to_owned(),
            ),
            None => return,
        },
    };
    if observers.is_empty() {
        return;
    }
    let query = match req.queries.queries() {
        [q] => Some(q.original()),
        _ => None,
    };
    observers.observe(
        &router.server,
        &zone,
        &Exchange {
            client: observe::canonical_client(req.src()),
            proto: if matches!(req.protocol(), Protocol::Udp) {
                Proto::Udp
            } else {
                Proto::Tcp
            },
            request: &req.metadata,
            query: query.map(|q| (q.name(), q.query_type(), q.query_class())),
            dnssec_ok: req.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok),
            bufsize: req.edns.as_ref().map_or(PLAIN_UDP_LIMIT, |e| e.max_payload()),
            request_size: req.as_slice().len(),
            response: &resp.meta,
            response_size,
            answers: resp.answers.len(),
            elapsed: started.elapsed(),
            plugin: resp.plugin,
            failure: resp.failure,
        },
    );
}

/// Binds UDP and TCP on the same address and port. With port 0, UDP picks a free port and TCP
/// takes the same one.
pub async fn bind(addr: SocketAddr) -> Result<(UdpSocket, TcpListener), ServerError> {
    let err = |source| ServerError::Bind {
        addr: addr.to_string(),
        source,
    };
    if addr.port() != 0 {
        let udp = UdpSocket::bind(addr).await.map_err(err)?;
        let tcp = TcpListener::bind(addr).await.map_err(err)?;
        return Ok((udp, tcp));
    }
    let mut last = None;
    for _ in 0..16 {
        let udp = UdpSocket::bind(addr).await.map_err(err)?;
        let port = udp.local_addr().map_err(err)?.port();
        match TcpListener::bind((addr.ip(), port)).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) => last = Some(e),
        }
    }
    Err(err(last.unwrap_or_else(|| std::io::Error::other("no free port"))))
}

/// Serves `router` on the bound `sockets` until `shutdown` completes.
pub async fn serve(
    router: RouterCell,
    sockets: Vec<(UdpSocket, TcpListener)>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let mut server = Server::new(DnsHandler::new(router));
    for (udp, tcp) in sockets {
        server.register_socket(udp);
        server.register_listener(tcp, TCP_IDLE_TIMEOUT, 32);
    }
    let token = server.shutdown_token().clone();
    tokio::spawn(async move {
        shutdown.await;
        token.cancel();
    });
    server
        .block_until_done()
        .await
        .map_err(|e| ServerError::Serve(e.to_string()))
}
