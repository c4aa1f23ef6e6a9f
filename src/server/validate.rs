//! Stage 1 of the answer path, validate: reads the request bytes ([`read`]) and checks what
//! needs no server block before a question is made of them ([`question`]): the opcode, the
//! EDNS version and COOKIE lengths, one question, zone transfers only over a stream, no OPT
//! asked. A request that fails gets its rcode alone; no block is asked.

use std::net::SocketAddr;

use hickory_proto::op::{Header, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};

use super::observe::canonical_client;
use super::request::{Parsed, cookies_well_formed, parse_body};
use crate::proto::{Question, Transport};

/// `req` read: `None` when nothing is sent (shorter than a header, or a response packet);
/// `Err` with the request's header when its body does not parse (answered FORMERR).
pub(super) fn read(req: &[u8]) -> Option<Result<Parsed<'_>, Metadata>> {
    let mut decoder = BinDecoder::new(req);
    let header = Header::read(&mut decoder).ok()?;
    let header_meta = header.metadata;
    let Ok(parsed) = parse_body(&mut decoder, header) else {
        return Some(Err(header_meta));
    };
    if parsed.meta.message_type == MessageType::Response {
        return None;
    }
    Some(Ok(parsed))
}

/// The question `req` asks, as the chain will see it (its first question taken out of `req`),
/// or the rcode it gets without one: a request received over `protocol` (a stream when
/// `stream`) from `src` on the listener bound to `server`.
pub(super) fn question(
    req: &mut Parsed<'_>,
    protocol: Transport,
    src: SocketAddr,
    stream: bool,
    server: Option<SocketAddr>,
) -> Result<Question, ResponseCode> {
    // NOTIFY (RFC 1996) is answered beside the chain (`notify`); other opcodes are not served.
    if !matches!(req.meta.op_code, OpCode::Query | OpCode::Notify) {
        return Err(ResponseCode::NotImp);
    }
    if let Some(edns) = &req.edns {
        if edns.version() > 0 {
            return Err(ResponseCode::BADVERS);
        }
        if !cookies_well_formed(edns) {
            return Err(ResponseCode::FormErr);
        }
    }
    let query = match (req.query_count, req.query.take()) {
        (1, Some(q)) => q,
        // No question: SERVFAIL, as CoreDNS's server answers it.
        (0, _) => return Err(ResponseCode::ServFail),
        _ => return Err(ResponseCode::FormErr),
    };
    let qtype = query.query_type;
    // A NOTIFY names a zone by its SOA (RFC 1996 section 3.7); no other type is defined.
    if req.meta.op_code == OpCode::Notify && qtype != RecordType::SOA {
        return Err(ResponseCode::NotImp);
    }
    if matches!(qtype, RecordType::AXFR | RecordType::IXFR) && !stream {
        return Err(ResponseCode::Refused);
    }
    if qtype == RecordType::OPT {
        return Err(ResponseCode::FormErr);
    }
    Ok(Question {
        name: query.name,
        qtype,
        qclass: query.query_class,
        dnssec_ok: req.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok),
        checking_disabled: req.meta.checking_disabled,
        recursion_desired: req.meta.recursion_desired,
        transport: protocol,
        client: canonical_client(src),
        probe: false,
        edns_options: req
            .edns
            .as_ref()
            .map(crate::proto::travelling_options)
            .unwrap_or_default(),
        server,
        metadata: None,
        visibility: Default::default(),
        ixfr_serial: req.soa_serial.filter(|_| qtype == RecordType::IXFR),
    })
}
