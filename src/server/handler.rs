//! The server's answer path: [`DnsHandler`], which every transport calls to go from request
//! bytes to response bytes ([`DnsHandler::answer_into`]). A request is answered from the UDP
//! answer memo when it holds a current response ([`DnsHandler::answer_from_memo`]), or in
//! full, through the stages, each in a file of its own, in this order:
//!
//! 1. `validate`: read the request and check what needs no server block;
//! 2. `route`: the block whose zone matches the question;
//! 3. `gate`: the block's checks (class, signed requests, transfers);
//! 4. `walk`: the block's chain asked for its reply;
//! 5. `map`: the reply made into a response message;
//! 6. `encode`: its bytes, fit to the client's limit, and signed;
//! 7. `observe`: reported to the block's metrics and observing plugins;
//!
//! then kept in the memo when it may be replayed (`memoize`). This file composes the stages
//! and holds none of their work.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use hickory_proto::op::{Header, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};

use super::gate::{self, Shut};
use super::map::{self, Response};
use super::notify;
use super::observe::{self, Exchange, Served};
use super::request::Parsed;
use super::route::{Router, RouterCell};
use super::{encode, memo, memoize, validate, walk};
use crate::proto::{PLAIN_UDP_LIMIT, Transport};

/// Decides and encodes the response to every request, whatever the transport.
#[derive(Debug, Clone)]
pub struct DnsHandler {
    router: RouterCell,
    /// The listener's bound address, which its questions carry (`Question::server`).
    local: Option<SocketAddr>,
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

    /// Decides the response to `req` (I/O only through the chain) with `router`: the stages
    /// validate, route, gate, walk and map. `wire`: the request's bytes; `stream`: it came over
    /// a stream, the one transport a zone transfer may come over.
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
        let mut question = match validate::question(req, protocol, src, stream, self.local) {
            Ok(question) => question,
            Err(rcode) => return Response::rcode(meta, rcode),
        };
        let Some((index, zone, block)) = router.route_question(&mut question) else {
            return Response::rcode(meta, ResponseCode::Refused);
        };
        let signer = match gate::admit(block, req, &question, wire) {
            Ok(signer) => signer,
            Err(Shut::Refused) => return Response::rcode(meta, ResponseCode::Refused),
            Err(Shut::Rejected(rcode, signer)) => {
                return map::rejected(meta, rcode, (index, zone), question, signer);
            }
        };
        if req.meta.op_code == OpCode::Notify {
            return notify::answer(meta, block, (index, zone), question, signer);
        }
        let answered = walk::walk(router, &block.chain, &question).await;
        map::answered(meta, answered, (index, zone), question, req.soa_serial, signer)
    }

    /// Answers one wire-format request: decides the response and encodes it into `out`
    /// (cleared first), cut to the client's size limit in the same pass (see [`fit`](super::fit)). `None`
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
        let mut parsed = match validate::read(req)? {
            Ok(parsed) => parsed,
            Err(request) => return malformed(&request, req, src, protocol, out, started),
        };
        let qtype = parsed.query.as_ref().map(|q| q.query_type);
        let router = self.router();
        // Read before the answer is made: the memo keeps it only if no zone changed meanwhile.
        let generation = router.memo.generation();
        // A UDP answer that has to wait (on an upstream) lets its reply buffer go while it
        // waits: the reply is written, into a buffer grown to its size, once the wait is over.
        // Each UDP question in flight held the worker slot's 1,232 bytes, 12 MiB at forward's
        // default `max_concurrent` (tests/integration/plugins/fairness.rs, the RSS ceiling).
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
        let block = resp.block.as_ref().and_then(|(i, _)| router.blocks.get(*i));
        let transfer = stream
            && matches!(qtype, Some(RecordType::AXFR | RecordType::IXFR))
            && resp.meta.response_code == ResponseCode::NoError
            && !resp.answers.is_empty();
        let sent = encode::encode(block, &parsed, &mut resp, protocol, transfer, out)?;
        let served = Served {
            request_len: req.len(),
            response_len: out.len(),
            rcode: sent.response_code,
            qtype,
            protocol,
            src,
            elapsed: started.elapsed(),
            framed: transfer,
        };
        if let Some((observers, zone)) = router.observers_of(resp.block) {
            let wire = (req, if transfer { &[][..] } else { out.as_slice() });
            observe::request(&observers, zone, &parsed, &resp, &sent, &served, wire);
        }
        if router.memo.may_keep(protocol) {
            memoize::keep(&router, req, generation, &parsed, &resp, &sent, out);
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

/// The answer to `req`, received over `protocol` from `src`, whose body does not parse
/// (`request`: its header): FORMERR alone, in `out`.
fn malformed(
    request: &Metadata,
    req: &[u8],
    src: SocketAddr,
    protocol: Transport,
    out: &mut Vec<u8>,
    started: Instant,
) -> Option<Served> {
    let mut meta = Metadata::response_from_request(request);
    meta.response_code = ResponseCode::FormErr;
    encode::header_only(meta, out)?;
    Some(Served {
        request_len: req.len(),
        response_len: out.len(),
        rcode: ResponseCode::FormErr,
        qtype: None,
        protocol,
        src,
        elapsed: started.elapsed(),
        framed: false,
    })
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

#[cfg(test)]
mod tests {
    //! The server alone, with stub chains: no cluster, no plugin.
    use std::sync::Mutex;

    use hickory_proto::op::{Message, Query};
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{DNSClass, Name, RData};

    use hickory_proto::op::OpCode;
    use hickory_proto::rr::Record;
    use hickory_proto::serialize::binary::BinEncodable;

    use super::*;
    use crate::chain::{Chain, Exchange, Next, Observer, Plugin, ReplyFuture};
    use crate::proto::{Answer, Failure, MAX_UDP_PAYLOAD, Question, Reply};
    use crate::server::observe::Observers;
    use crate::server::route::{BlockRoute, router_cell};

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
            transfers: false,
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
