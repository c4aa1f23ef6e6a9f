//! Stage 6 of the answer path, encode: the response written into the bytes sent, with our
//! OPT (the client's payload capped at the block's, options the block's plugins add), cut to
//! the client's size limit in the same pass ([`fit`]), a zone transfer split into framed
//! messages ([`xfr`]), and signed when the request was (`tsig`). A response that cannot be
//! encoded is sent as SERVFAIL, as hickory-server does.

use hickory_proto::op::{Edns, Header, HeaderCounts, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

use super::fit;
use super::map::Response;
use super::request::Parsed;
use super::route::BlockRoute;
use super::xfr;
use crate::proto::{MAX_UDP_PAYLOAD, PLAIN_UDP_LIMIT, Transport};

/// Encodes `resp`, the response to `req` answered by `block`, into `out` for `protocol`: as
/// framed messages when `transfer` (a zone transfer over a stream), else as one message. The
/// header sent; `None` when not even a SERVFAIL header could be written.
pub(super) fn encode(
    block: Option<&BlockRoute>,
    req: &Parsed<'_>,
    resp: &mut Response,
    protocol: Transport,
    transfer: bool,
    out: &mut Vec<u8>,
) -> Option<Metadata> {
    let edns = our_edns(req.edns.as_ref(), block);
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
        query_count: req.query_count,
        question: &req.question,
        answers: &resp.answers,
        authority: &resp.authority,
        additional: &resp.additional,
        edns: edns.as_ref(),
    };
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
    match encoded {
        Ok(meta) => Some(meta),
        Err(error) => {
            // As hickory-server does when a response cannot be encoded: SERVFAIL, no records.
            tracing::error!(%error, "error encoding a response");
            let mut meta = Metadata::new(resp.meta.id, MessageType::Response, OpCode::Query);
            meta.response_code = ResponseCode::ServFail;
            header_only(meta, out)?;
            Some(meta)
        }
    }
}

/// Our OPT, sent only when the query had one (`client`): the client's payload capped at the
/// answering block's (`bufsize`, 1232 by default) and never below 512.
fn our_edns(client: Option<&Edns>, block: Option<&BlockRoute>) -> Option<Edns> {
    let ours_max = block.map_or(MAX_UDP_PAYLOAD, |b| b.udp_payload);
    client.map(|client| {
        let mut ours = Edns::new();
        ours.set_version(0);
        ours.set_max_payload(client.max_payload().clamp(PLAIN_UDP_LIMIT, ours_max));
        ours.set_dnssec_ok(client.flags().dnssec_ok);
        // Options the block's plugins add (`nsid`).
        for option in block.map(|b| b.chain.edns_options(client)).unwrap_or_default() {
            ours.options_mut().insert(option);
        }
        ours
    })
}

/// Writes a response of header `meta` and no sections into `out` (cleared first): the answer
/// to a request whose body does not parse, or to one whose response cannot be encoded.
pub(super) fn header_only(meta: Metadata, out: &mut Vec<u8>) -> Option<()> {
    out.clear();
    Header {
        metadata: meta,
        counts: HeaderCounts::default(),
    }
    .emit(&mut BinEncoder::new(out))
    .ok()
}
