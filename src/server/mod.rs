//! The DNS server: request validation (opcode, question count, class (IN, or one the block's
//! plugins declare), EDNS version and COOKIE
//! option lengths), routing to
//! the server block whose zone matches, and response encoding with EDNS and truncation, all in
//! [`DnsHandler::answer_into`], the one function every transport calls to go from request bytes
//! to response bytes. The transports are in [`udp`] (one worker thread per core answering inline)
//! and [`tcp`] (a tokio task per connection).
//!
//! [`serve`] takes already-bound sockets and a shutdown future, so tests bind port 0 and stop
//! the server cleanly.

mod compress;
mod error;
pub mod fit;
pub mod h3;
mod listen;
pub mod memo;
pub mod observe;
pub mod proxy;
pub mod quic;
mod request;
mod route;
pub mod tcp;
pub mod udp;
mod xfr;

pub use error::ServerError;
pub use listen::{Listeners, TCP_DRAIN_LIMIT, bind, bind_stream, bind_with, serve, serve_with};
use request::{Parsed, cookies_well_formed, parse_body};
pub use route::{BlockRoute, Router, RouterCell, router_cell};
pub use tcp::TCP_IDLE_TIMEOUT;
pub use udp::{SHED_DEPTH, Shed, UdpLimits};

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;

use hickory_proto::op::{Edns, Header, HeaderCounts, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncodable, BinEncoder};

use crate::chain::{Answered, ReplayPlan, ResponseSigner, SignedRequest, Verdict};
use crate::proto::{FlagEdit, MAX_UDP_PAYLOAD, PLAIN_UDP_LIMIT, Question, Records, Reply, Transport};
use observe::{Exchange, Observers};

/// Decides and encodes the response to every request, whatever the transport.
#[derive(Debug, Clone)]
pub struct DnsHandler {
    router: RouterCell,
    /// The listener's bound address, which its questions carry (`Question::server`).
    local: Option<SocketAddr>,
}

/// What one answered request was: for metrics and the query log, which observe every response
/// after it is encoded (see [`DnsHandler::answer_into`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Size of the request.
    pub request_len: usize,
    /// Size of the encoded response.
    pub response_len: usize,
    /// The rcode sent.
    pub rcode: ResponseCode,
    /// The type asked, when the request had a readable question.
    pub qtype: Option<RecordType>,
    /// The transport.
    pub protocol: Transport,
    /// The client.
    pub src: SocketAddr,
    /// From the request bytes to the encoded response.
    pub elapsed: Duration,
    /// `out` holds several messages, each with its two-byte length already (a zone transfer
    /// over a stream, [`DnsHandler::answer_stream_into`]); otherwise one message, bare.
    pub framed: bool,
}

impl DnsHandler {
    /// A handler routing through `router`.
    pub fn new(router: RouterCell) -> Self {
        Self { router, local: None }
    }

    /// The same handler for the listener bound to `local`.
    #[must_use]
    pub fn with_local(&self, local: Option<SocketAddr>) -> Self {
        Self {
            router: self.router.clone(),
            local,
        }
    }

    /// The routing table now (a reload may swap it for the next request; this one keeps it).
    pub fn router(&self) -> Arc<Router> {
        self.router.load_full()
    }
}

/// The response an error-only or answered request gets, before encoding.
struct Response {
    meta: Metadata,
    answers: Records,
    authority: Vec<Record>,
    additional: Vec<Record>,
    /// The block that answered (index into the router) and the zone that matched (index into
    /// its zones).
    block: Option<(usize, usize)>,
    /// The question the chain was asked (for the query log and errors).
    question: Option<Question>,
    /// The plugin that wrote the response.
    plugin: &'static str,
    /// How the response may be replayed from the memo, when it may.
    replay: Option<ReplayPlan>,
    /// The chain's own failure, for `errors`.
    failure: Option<&'static str>,
    /// No reply is sent ([`Reply::Dropped`]).
    dropped: bool,
    /// Signs the encoded response (a verified or rejected signed request, `tsig`).
    signer: Option<Box<dyn ResponseSigner>>,
}

impl Response {
    fn rcode(meta: Metadata, rcode: ResponseCode) -> Self {
        let mut meta = meta;
        meta.response_code = rcode;
        Self {
            meta,
            answers: Records::default(),
            authority: Vec::new(),
            additional: Vec::new(),
            block: None,
            question: None,
            plugin: "",
            replay: None,
            failure: None,
            dropped: false,
            signer: None,
        }
    }
}

/// The header bits a plugin set or cleared on the reply (`header`), over the server's.
fn edit_flags(meta: &mut Metadata, edit: FlagEdit) {
    let bits = [
        (&mut meta.authoritative, edit.authoritative),
        (&mut meta.recursion_available, edit.recursion_available),
        (&mut meta.recursion_desired, edit.recursion_desired),
    ];
    for (bit, to) in bits {
        if let Some(to) = to {
            *bit = to;
        }
    }
}

impl DnsHandler {
    /// Decides the response to `req` (I/O only through the chain) with `router`.
    async fn respond(
        &self,
        router: &Router,
        req: &mut Parsed<'_>,
        protocol: Transport,
        src: SocketAddr,
        stream: bool,
        wire: &[u8],
    ) -> Response {
        let mut meta = Metadata::response_from_request(&req.meta);
        meta.recursion_available = false;
        if req.meta.op_code != OpCode::Query {
            return Response::rcode(meta, ResponseCode::NotImp);
        }
        if let Some(edns) = &req.edns {
            if edns.version() > 0 {
                return Response::rcode(meta, ResponseCode::BADVERS);
            }
            if !cookies_well_formed(edns) {
                return Response::rcode(meta, ResponseCode::FormErr);
            }
        }
        let query = match (req.query_count, req.query.take()) {
            (1, Some(q)) => q,
            // No question: SERVFAIL, as CoreDNS's server answers it.
            (0, _) => return Response::rcode(meta, ResponseCode::ServFail),
            _ => return Response::rcode(meta, ResponseCode::FormErr),
        };
        let qtype = query.query_type;
        let transfer = matches!(qtype, RecordType::AXFR | RecordType::IXFR);
        if transfer && !stream {
            return Response::rcode(meta, ResponseCode::Refused);
        }
        if qtype == RecordType::OPT {
            return Response::rcode(meta, ResponseCode::FormErr);
        }
        let mut question = Question {
            name: query.name,
            qtype,
            qclass: query.query_class,
            dnssec_ok: req.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok),
            checking_disabled: req.meta.checking_disabled,
            recursion_desired: req.meta.recursion_desired,
            transport: protocol,
            client: observe::canonical_client(src),
            probe: false,
            edns_options: req
                .edns
                .as_ref()
                .map(request::travelling_options)
                .unwrap_or_default(),
            server: self.local,
            metadata: None,
            visibility: Default::default(),
        };
        let Some((index, zone, block)) = router.route_question(&mut question) else {
            return Response::rcode(meta, ResponseCode::Refused);
        };
        // Classes other than IN only where a plugin of the block answers them (`chaos`: CH).
        if !block.chain.answers_class(question.qclass) {
            return Response::rcode(meta, ResponseCode::Refused);
        }
        // The block's check of signed requests (`tsig`), before its chain is asked.
        let mut signer = None;
        if let Some(auth) = &block.auth {
            let signed = SignedRequest {
                wire,
                additional_at: req.additional_at,
                additional_count: req.additional_count,
                name: &question.name,
                qtype,
                opcode: req.meta.op_code,
            };
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let (rcode, signs) = match auth.check(&signed, now) {
                Verdict::Pass => (None, None),
                Verdict::Rcode(rcode) => (Some(rcode), None),
                Verdict::Reject(rcode, s) => (Some(rcode), Some(s)),
                Verdict::Verified(s) => (None, Some(s)),
            };
            if let Some(rcode) = rcode {
                let mut r = Response::rcode(meta, rcode);
                r.block = Some((index, zone));
                r.question = Some(question);
                r.signer = signs;
                return r;
            }
            signer = signs;
        }
        // Transfers only over a stream (RFC 5936), and only where a plugin answers them
        // (`transfer`); IXFR is answered as a whole transfer (RFC 1995 section 4 allows it).
        if transfer && !block.chain.answers_transfers() {
            return Response::rcode(meta, ResponseCode::Refused);
        }
        let routed = Some((index, zone));
        let chain = &block.chain;
        // A panicking plugin costs one SERVFAIL, counted in coredns_panics_total, never the
        // listener.
        // Only a response the memo may keep needs a replay plan (whose scope asks each
        // plugin what its answer read).
        let plan = router.memo.may_keep(protocol);
        let answered = match AssertUnwindSafe(chain.serve_planned(&question, plan))
            .catch_unwind()
            .await
        {
            Ok(answered) => answered,
            Err(_) => {
                if let Some(m) = router.blocks.iter().find_map(|b| b.observers.metrics.as_ref()) {
                    m.metrics().panic();
                }
                tracing::error!(qname = %question.name, qtype = %question.qtype, "a plugin panicked; answered SERVFAIL");
                Answered {
                    reply: Reply::Rcode(ResponseCode::ServFail),
                    by: "",
                    replay: None,
                }
            }
        };
        let mut resp = match answered.reply {
            Reply::Authoritative(answer) => {
                meta.authoritative = true;
                edit_flags(&mut meta, answer.flags);
                meta.response_code = answer.rcode;
                Response {
                    answers: answer.answers,
                    authority: answer.authority,
                    additional: answer.additional,
                    ..Response::rcode(meta, answer.rcode)
                }
            }
            Reply::Forwarded(f) => {
                // The upstream's rcode and flags; not authoritative (we are not).
                meta.authoritative = false;
                meta.recursion_available = f.recursion_available;
                meta.authentic_data = f.authentic_data;
                meta.truncation = f.truncated;
                edit_flags(&mut meta, f.flags);
                Response {
                    answers: f.answers.into(),
                    authority: f.authority,
                    additional: f.additional,
                    ..Response::rcode(meta, f.rcode)
                }
            }
            Reply::Rcode(rcode) => Response::rcode(meta, rcode),
            Reply::Failed(f) => {
                let mut r = Response::rcode(meta, f.rcode);
                r.failure = Some(f.reason);
                r
            }
            Reply::Dropped => {
                let mut r = Response::rcode(meta, ResponseCode::Refused);
                r.dropped = true;
                r
            }
            Reply::Truncated => {
                meta.truncation = true;
                Response::rcode(meta, ResponseCode::NoError)
            }
        };
        // An IXFR from a client that holds the zone's current serial gets the SOA alone (RFC
        // 1995 section 2: the zone is up to date), as CoreDNS answers it; any other IXFR gets the
        // whole zone.
        if qtype == RecordType::IXFR
            && let Some(held) = req.soa_serial
            && let Some(soa) = resp.answers.first()
            && matches!(&soa.data, RData::SOA(s) if s.serial == held)
        {
            let soa = soa.clone();
            resp.answers = vec![soa].into();
        }
        resp.plugin = answered.by;
        resp.replay = answered.replay;
        resp.block = routed;
        resp.question = Some(question);
        resp.signer = signer;
        resp
    }

    /// Answers one wire-format request: decides the response and encodes it into `out`
    /// (cleared first), cut to the client's size limit in the same pass (see [`fit`]). `None`
    /// where nothing is sent: shorter than a header, or a response packet. Unparsable bodies
    /// get FORMERR. Every transport calls this, so the per-request observation (metrics, query
    /// log) belongs at its end, where [`Served`] is complete.
    pub async fn answer_into(
        &self,
        req: &[u8],
        src: SocketAddr,
        protocol: Transport,
        out: &mut Vec<u8>,
    ) -> Option<Served> {
        let started = Instant::now();
        if matches!(protocol, Transport::Udp)
            && let Some(served) = self.answer_from_memo(req, src, out, started)
        {
            return Some(served);
        }
        self.answer_in_full(req, src, protocol, out, started, false).await
    }

    /// [`DnsHandler::answer_into`] for a DNS-over-TCP or -TLS connection, the one transport a
    /// zone transfer may come over: its answer may be several messages, which `out` then holds
    /// with their lengths ([`Served::framed`]).
    pub async fn answer_stream_into(&self, req: &[u8], src: SocketAddr, out: &mut Vec<u8>) -> Option<Served> {
        self.answer_in_full(req, src, Transport::Tcp, out, Instant::now(), true)
            .await
    }

    /// Answers a UDP request as a UDP worker does on its own thread, without a task: from the
    /// answer memo, or, when no block's chain may await I/O, in full with one poll of the
    /// answer's future (ready at once, since nothing awaits). `Some` as
    /// [`DnsHandler::answer_into`] gives; `None` when the answer must run as a task (a chain
    /// may await an upstream, or the answer was not ready after all); the caller then answers
    /// it anew, and `out` holds nothing to send.
    pub fn answer_inline(
        &self,
        req: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
        started: Instant,
    ) -> Option<Option<Served>> {
        // A memoized answer needs no future (nor a task, in blocks that forward); past a miss
        // the full path does not look again.
        if let Some(served) = self.answer_from_memo(req, src, out, started) {
            return Some(Some(served));
        }
        if self.router.load().may_await_io() {
            return None;
        }
        let fut = std::pin::pin!(self.answer_in_full(req, src, Transport::Udp, out, started, false));
        match fut.poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
            std::task::Poll::Ready(served) => Some(served),
            // Not ready after all (nothing was sent upstream): the caller runs it as a task.
            std::task::Poll::Pending => None,
        }
    }

    /// [`DnsHandler::answer_into`] without the memo lookup, for a caller that has just missed
    /// it (the UDP workers look it up before they build this future).
    pub(crate) async fn answer_in_full(
        &self,
        req: &[u8],
        src: SocketAddr,
        protocol: Transport,
        out: &mut Vec<u8>,
        started: Instant,
        stream: bool,
    ) -> Option<Served> {
        out.clear();
        let mut decoder = BinDecoder::new(req);
        let header = Header::read(&mut decoder).ok()?;
        let header_meta = header.metadata;
        let mut parsed = match parse_body(&mut decoder, header) {
            Ok(p) => p,
            Err(_) => {
                let mut meta = Metadata::response_from_request(&header_meta);
                meta.response_code = ResponseCode::FormErr;
                Header {
                    metadata: meta,
                    counts: HeaderCounts::default(),
                }
                .emit(&mut BinEncoder::new(out))
                .ok()?;
                return Some(Served {
                    request_len: req.len(),
                    response_len: out.len(),
                    rcode: ResponseCode::FormErr,
                    qtype: None,
                    protocol,
                    src,
                    elapsed: started.elapsed(),
                    framed: false,
                });
            }
        };
        if parsed.meta.message_type == MessageType::Response {
            return None;
        }
        let qtype = parsed.query.as_ref().map(|q| q.query_type);
        let router = self.router();
        // Read before the answer is made: the memo keeps it only if no zone changed meanwhile.
        let generation = router.memo.generation();
        // A UDP answer that has to wait (on an upstream) lets its reply buffer go while it
        // waits: the reply is written, into a buffer grown to its size, once the wait is over.
        // Each UDP question in flight held the worker slot's 1,232 bytes, 12 MiB at forward's
        // default `max_concurrent` (tests/integration/fairness.rs, the RSS ceiling).
        let mut resp = {
            let mut responding =
                std::pin::pin!(self.respond(&router, &mut parsed, protocol, src, stream, req));
            std::future::poll_fn(|cx| {
                let polled = responding.as_mut().poll(cx);
                if polled.is_pending() && matches!(protocol, Transport::Udp) && out.capacity() > 0 {
                    *out = Vec::new();
                }
                polled
            })
            .await
        };
        if resp.dropped {
            return None;
        }
        // Our OPT, sent only when the query had one: the client's payload capped at the
        // answering block's (`bufsize`, 1232 by default) and never below 512.
        let block = resp.block.as_ref().and_then(|(i, _)| router.blocks.get(*i));
        let ours_max = block.map_or(MAX_UDP_PAYLOAD, |b| b.udp_payload);
        let edns = parsed.edns.as_ref().map(|client| {
            let mut ours = Edns::new();
            ours.set_version(0);
            ours.set_max_payload(client.max_payload().clamp(PLAIN_UDP_LIMIT, ours_max));
            ours.set_dnssec_ok(client.flags().dnssec_ok);
            // Options the block's plugins add (`nsid`).
            for option in block.map(|b| b.chain.edns_options(client)).unwrap_or_default() {
                ours.options_mut().insert(option);
            }
            ours
        });
        let limit = match (&edns, protocol) {
            (Some(e), Transport::Udp) => e.max_payload(),
            (None, Transport::Udp) => PLAIN_UDP_LIMIT,
            _ => u16::MAX,
        };
        // Room for the signature, when the response is signed.
        let mut signer = resp.signer.take();
        let limit = signer.as_ref().map_or(limit, |s| {
            limit.saturating_sub(u16::try_from(s.overhead()).unwrap_or(u16::MAX))
        });
        let parts = fit::Parts {
            meta: resp.meta,
            query_count: parsed.query_count,
            question: &parsed.question,
            answers: &resp.answers,
            authority: &resp.authority,
            additional: &resp.additional,
            edns: edns.as_ref(),
        };
        let transfer = stream
            && matches!(qtype, Some(RecordType::AXFR | RecordType::IXFR))
            && resp.meta.response_code == ResponseCode::NoError
            && !resp.answers.is_empty();
        let encoded = if transfer {
            xfr::encode_framed(&parts, limit, out)
        } else {
            fit::encode(&parts, limit, out).map(|h| h.metadata)
        };
        if let (Some(s), Ok(_)) = (signer.as_mut(), &encoded) {
            let signed = if transfer {
                xfr::sign_framed(out, s.as_mut())
            } else {
                s.sign(out)
            };
            if let Err(error) = signed {
                tracing::error!(%error, "a response could not be signed; sent unsigned");
            }
        }
        let sent = match encoded {
            Ok(meta) => meta,
            Err(error) => {
                // As hickory-server does when a response cannot be encoded: SERVFAIL, no records.
                tracing::error!(%error, "error encoding a response");
                out.clear();
                let meta = Metadata::new(resp.meta.id, MessageType::Response, OpCode::Query);
                let mut meta = meta;
                meta.response_code = ResponseCode::ServFail;
                Header {
                    metadata: meta,
                    counts: HeaderCounts::default(),
                }
                .emit(&mut BinEncoder::new(out))
                .ok()?;
                meta
            }
        };
        let rcode = sent.response_code;
        let served = Served {
            request_len: req.len(),
            response_len: out.len(),
            rcode,
            qtype,
            protocol,
            src,
            elapsed: started.elapsed(),
            framed: transfer,
        };
        let wire = (req, if transfer { &[][..] } else { out.as_slice() });
        observe_request(&router, &parsed, &resp, &sent, &served, wire);
        if router.memo.may_keep(protocol)
            && let Some(info) = memo_info(&router, &parsed, &resp, &sent, out)
        {
            router.memo.insert(req, generation, out, info);
        }
        Some(served)
    }

    /// Answers `req` (UDP) from the router's answer memo, if it holds a current response to
    /// it, and reports it to the observers as the full path would.
    pub fn answer_from_memo(
        &self,
        req: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
        started: Instant,
    ) -> Option<Served> {
        let router = self.router.load();
        if !router.memo.is_on() {
            return None;
        }
        // A response made for a class of clients is replayed to clients of that class only:
        // the plugin that made it classifies this one.
        let info = router
            .memo
            .lookup_for(req, out, |marker| client_class(&router, marker, src))?;
        let block = router.blocks.get(info.block)?;
        let zone = block.zones.get(info.zone);
        block.chain.replayed(
            info.counted,
            crate::chain::Replayed {
                from_store: info.lifetime.is_some(),
                rcode: info.rcode,
                answers: info.answers,
                note: info.class.map_or(0, |c| c.note),
            },
        );
        let served = Served {
            request_len: req.len(),
            response_len: out.len(),
            rcode: info.rcode,
            qtype: Some(info.qtype),
            protocol: Transport::Udp,
            src,
            elapsed: started.elapsed(),
            framed: false,
        };
        if !block.observers.is_empty() {
            let request = Header::read(&mut BinDecoder::new(req)).ok()?.metadata;
            block.observers.observe(
                zone,
                &Exchange {
                    client: observe::canonical_client(src),
                    proto: Transport::Udp,
                    request: &request,
                    // Read only by `log` (whose blocks do not memoize) and for failures (never memoized).
                    query: None,
                    qtype: Some(info.qtype),
                    dnssec_ok: info.dnssec_ok,
                    bufsize: PLAIN_UDP_LIMIT,
                    request_size: served.request_len,
                    response: &info.response,
                    rcode: info.rcode,
                    response_size: served.response_len,
                    answers: info.answers,
                    elapsed: served.elapsed,
                    plugin: info.by,
                    failure: None,
                    // Blocks with `metadata` do not memoize.
                    metadata: None,
                    request_wire: req,
                    response_wire: out,
                },
            );
        }
        Some(served)
    }
}

/// The class `src` is in for the memo's `marker` of a response made for classes of clients:
/// as the plugin that made it classifies. Out of line: the plain memo hit does not carry it.
#[inline(never)]
fn client_class(router: &Router, marker: &memo::MemoInfo, src: SocketAddr) -> Option<u64> {
    let class = marker.class?;
    router
        .blocks
        .get(marker.block)?
        .chain
        .client_class(class.plugin, src.ip())
}

/// What the memo keeps with `out`, the response just sent for `req`, or `None` when it must not
/// keep it (see [`memo`] for the rules).
fn memo_info(
    router: &Router,
    req: &Parsed<'_>,
    resp: &Response,
    sent: &Metadata,
    out: &[u8],
) -> Option<memo::MemoInfo> {
    if resp.failure.is_some() || observe::is_failure(sent.response_code) {
        return None;
    }
    let plan = resp.replay?;
    let (index, zone) = resp.block.as_ref()?;
    let block = router.blocks.get(*index)?;
    // Metadata is made per client (`kubernetes/client-namespace`): a replay would skip it.
    // A signed exchange is never replayed (its signature holds a time).
    if block.observers.need_every_question() || block.metadata.is_some() || block.auth.is_some() {
        return None;
    }
    let question = resp.question.as_ref()?;
    let shuffle = if plan.reordered {
        memo::shuffle_plan(
            out,
            req.question.len(),
            sent.truncation,
            &resp.answers,
            &resp.additional,
        )
        .ok()?
    } else {
        None
    };
    let (scope, serial_at) = memo_scope(router, &plan, resp, out);
    Some(memo::MemoInfo {
        block: *index,
        zone: *zone,
        qtype: question.qtype,
        dnssec_ok: question.dnssec_ok,
        rcode: sent.response_code,
        response: *sent,
        answers: resp.answers.len(),
        counted: plan.counted,
        by: resp.plugin,
        shuffle,
        scope,
        serial_at,
        lifetime: plan.lifetime,
        reads_zones: plan.lifetime.is_none() || plan.reads_zones,
        class: plan.class,
    })
}

/// The scope a memoized response is kept by, and where its SOA serial is: the plan's scope,
/// unless the answer holds a CNAME (made from its target's data too) or carries a SOA whose
/// serial cannot be found once or written on replay; then none (any change makes it stale).
fn memo_scope(
    router: &Router,
    plan: &crate::chain::ReplayPlan,
    resp: &Response,
    out: &[u8],
) -> (Option<u64>, Option<usize>) {
    let Some(scope) = plan.scope else {
        return (None, None);
    };
    if resp.answers.iter().any(|r| r.record_type() == RecordType::CNAME) {
        return (None, None);
    }
    let soas: Vec<&hickory_proto::rr::rdata::SOA> = resp
        .answers
        .iter()
        .chain(&resp.authority)
        .filter_map(|r| match &r.data {
            hickory_proto::rr::RData::SOA(soa) => Some(soa),
            _ => None,
        })
        .collect();
    match soas.as_slice() {
        [] => (Some(scope), None),
        [soa] if router.memo.patches_serials() => match memo::serial_offset(out, soa) {
            Some(at) => (Some(scope), Some(at)),
            None => (None, None),
        },
        _ => (None, None),
    }
}

impl DnsHandler {
    /// Answers one wire-format request without sockets, as the server would (used by the fuzz
    /// targets and benchmarks), blocking the calling thread. Only for chains that do no I/O
    /// (no `forward`); use [`DnsHandler::answer_wire_async`] inside a tokio runtime otherwise.
    pub fn answer_wire(&self, bytes: &[u8], src: SocketAddr, protocol: Transport) -> Option<Vec<u8>> {
        futures::executor::block_on(self.answer_wire_async(bytes, src, protocol))
    }

    /// Answers one wire-format request without sockets, as the server would: see
    /// [`DnsHandler::answer_into`].
    pub async fn answer_wire_async(
        &self,
        bytes: &[u8],
        src: SocketAddr,
        protocol: Transport,
    ) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(512);
        self.answer_into(bytes, src, protocol, &mut out).await?;
        Some(out)
    }
}

/// Reports one answered request to the observers of the block that answered it. A request no
/// block took is counted (metrics only) under the zone `dropped`, by the first block of the
/// address that has metrics.
/// `wire`: the request and response bytes (the response empty when it is not one message).
fn observe_request(
    router: &Router,
    req: &Parsed<'_>,
    resp: &Response,
    sent: &Metadata,
    served: &Served,
    wire: (&[u8], &[u8]),
) {
    let routed = resp.block.as_ref().and_then(|&(i, zone)| {
        let b = router.blocks.get(i)?;
        Some((b, b.zones.get(zone)?))
    });
    let fallback;
    let (observers, zone) = match routed {
        Some((b, zone)) => {
            if b.observers.is_empty() {
                return;
            }
            (&b.observers, Some(zone))
        }
        None => match router.blocks.iter().find_map(|b| b.observers.metrics.clone()) {
            Some(metrics) => {
                fallback = Observers {
                    metrics: Some(metrics),
                    ..Observers::default()
                };
                (&fallback, None)
            }
            None => return,
        },
    };
    observers.observe(
        zone,
        &Exchange {
            client: observe::canonical_client(served.src),
            proto: served.protocol,
            request: &req.meta,
            query: resp.question.as_ref().map(|q| (&q.name, q.qtype, q.qclass)),
            qtype: served.qtype,
            dnssec_ok: req.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok),
            bufsize: req.edns.as_ref().map_or(PLAIN_UDP_LIMIT, |e| e.max_payload()),
            request_size: served.request_len,
            response: sent,
            rcode: served.rcode,
            response_size: served.response_len,
            answers: resp.answers.len(),
            elapsed: served.elapsed,
            plugin: resp.plugin,
            failure: resp.failure,
            metadata: resp.question.as_ref().and_then(|q| q.metadata.as_ref()),
            request_wire: wire.0,
            response_wire: wire.1,
        },
    );
}

#[cfg(test)]
mod tests {
    //! The server alone, with stub chains: no cluster, no plugin.
    use std::sync::Mutex;

    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{DNSClass, Name, RData};

    use super::*;
    use crate::chain::{Chain, Exchange, Next, Observer, Plugin, ReplyFuture};
    use crate::proto::{Answer, Failure};

    /// Answers `a.test.` A with 192.0.2.1 and fails every other name.
    #[derive(Debug)]
    struct Stub;

    impl Plugin for Stub {
        fn name(&self) -> &'static str {
            "stub"
        }
        fn serve<'a>(&'a self, q: &'a Question, _next: Next<'a>) -> ReplyFuture<'a> {
            Box::pin(async move {
                if q.name.to_lowercase() == Name::from_ascii("a.test.").unwrap() {
                    Reply::Authoritative(Answer {
                        rcode: ResponseCode::NoError,
                        answers: vec![Record::from_rdata(
                            q.name.clone(),
                            5,
                            RData::A(A::new(192, 0, 2, 1)),
                        )]
                        .into(),
                        authority: Vec::new(),
                        additional: Vec::new(),
                        chase_target: None,
                        flags: crate::proto::FlagEdit::KEEP,
                    })
                } else {
                    Reply::Failed(Failure {
                        rcode: ResponseCode::ServFail,
                        reason: "stub failure",
                    })
                }
            })
        }
    }

    /// Records what it observes: (plugin label, failure, rcode).
    #[derive(Debug, Default)]
    struct Seen(Mutex<Vec<(&'static str, Option<&'static str>, ResponseCode)>>);

    impl Observer for Seen {
        fn name(&self) -> &'static str {
            "seen"
        }
        fn observe(&self, x: &Exchange<'_>) {
            self.0.lock().unwrap().push((x.plugin, x.failure, x.rcode));
        }
    }

    fn handler(seen: Arc<Seen>) -> DnsHandler {
        handler_of(Chain::new(vec![Arc::new(Stub)]), seen)
    }

    /// A handler of one block for `test.` with `chain`, observed by `seen`.
    fn handler_of(chain: Chain, seen: Arc<Seen>) -> DnsHandler {
        let block = BlockRoute {
            zones: vec![Name::from_ascii("test.").unwrap()],
            chain,
            udp_payload: MAX_UDP_PAYLOAD,
            view: None,
            metadata: None,
            auth: None,
            observers: Observers {
                metrics: None,
                plugins: vec![seen],
            },
        };
        DnsHandler::new(router_cell(Router::new(vec![block])))
    }

    fn ask(h: &DnsHandler, msg: &Message) -> Message {
        let src: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let out = h
            .answer_wire(&msg.to_bytes().unwrap(), src, Transport::Udp)
            .unwrap();
        Message::from_bytes(&out).unwrap()
    }

    fn query(name: &str, qtype: RecordType) -> Message {
        let mut m = Message::query();
        m.metadata.id = 7;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
        m
    }

    #[test]
    fn a_plugin_reply_is_encoded_authoritative_and_labelled_with_its_writer() {
        let seen = Arc::new(Seen::default());
        let h = handler(seen.clone());
        let m = ask(&h, &query("A.Test.", RecordType::A));
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert!(m.metadata.authoritative && !m.metadata.recursion_available);
        assert_eq!(m.answers.len(), 1);
        assert_eq!(m.answers[0].name.to_string(), "A.Test.", "the question's case");
        let m = ask(&h, &query("b.test.", RecordType::A));
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        assert_eq!(
            *seen.0.lock().unwrap(),
            [
                ("stub", None, ResponseCode::NoError),
                ("", Some("stub failure"), ResponseCode::ServFail)
            ]
        );
    }

    /// Declares that it may await I/O (as `forward` does) and passes every question on.
    #[derive(Debug)]
    struct Upstream;

    impl Plugin for Upstream {
        fn name(&self) -> &'static str {
            "upstream"
        }
        fn awaits_io(&self) -> bool {
            true
        }
        fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
            next.serve(q)
        }
    }

    #[test]
    fn a_worker_answers_inline_only_where_no_plugin_awaits_io() {
        let src: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let req = query("a.test.", RecordType::A).to_bytes().unwrap();
        // No plugin awaits: answered on the caller's thread, the bytes answer_wire gives,
        // and observed once.
        let seen = Arc::new(Seen::default());
        let h = handler(seen.clone());
        let mut out = Vec::new();
        let served = h.answer_inline(&req, src, &mut out, Instant::now());
        assert!(
            matches!(served, Some(Some(ref s)) if s.rcode == ResponseCode::NoError),
            "{served:?}"
        );
        assert_eq!(Some(out), h.answer_wire(&req, src, Transport::Udp));
        assert_eq!(seen.0.lock().unwrap().len(), 2);
        // A chain that may await an upstream: left to a task, nothing written or observed.
        let seen = Arc::new(Seen::default());
        let h = handler_of(Chain::new(vec![Arc::new(Upstream), Arc::new(Stub)]), seen.clone());
        let mut out = Vec::new();
        assert!(h.answer_inline(&req, src, &mut out, Instant::now()).is_none());
        assert!(out.is_empty() && seen.0.lock().unwrap().is_empty());
    }

    #[test]
    fn requests_are_checked_before_any_plugin() {
        let seen = Arc::new(Seen::default());
        let h = handler(seen.clone());
        let rcode = |m: Message| ask(&h, &m).metadata.response_code;
        // Outside every zone.
        assert_eq!(rcode(query("a.example.", RecordType::A)), ResponseCode::Refused);
        // Not a QUERY.
        let mut m = query("a.test.", RecordType::A);
        m.metadata.op_code = OpCode::Status;
        assert_eq!(rcode(m), ResponseCode::NotImp);
        // Two questions.
        let mut m = query("a.test.", RecordType::A);
        m.add_query(Query::query(
            Name::from_ascii("a.test.").unwrap(),
            RecordType::AAAA,
        ));
        assert_eq!(rcode(m), ResponseCode::FormErr);
        // Another class; zone transfers.
        let mut m = Message::query();
        let mut q = Query::query(Name::from_ascii("a.test.").unwrap(), RecordType::A);
        q.set_query_class(DNSClass::CH);
        m.add_query(q);
        assert_eq!(rcode(m), ResponseCode::Refused);
        assert_eq!(rcode(query("test.", RecordType::AXFR)), ResponseCode::Refused);
        // The plugin saw none of them, and only the routed ones were observed.
        assert!(
            seen.0
                .lock()
                .unwrap()
                .iter()
                .all(|(plugin, _, _)| plugin.is_empty())
        );
    }
}
