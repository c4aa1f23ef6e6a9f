//! Stage 3 of the answer path, gate: the checks a routed question meets in its server block
//! before the block's chain is asked: the class (IN, or one a plugin of the block answers:
//! `chaos`), the block's check of signed requests (`tsig`), and zone transfers only where a
//! plugin answers them (`transfer`).

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

use super::request::Parsed;
use super::route::BlockRoute;
use crate::chain::{ResponseSigner, SignedRequest, Verdict};
use crate::proto::Question;

/// Why a question does not reach the chain.
pub(super) enum Shut {
    /// The block does not take it (its class, or a transfer no plugin answers): REFUSED, as a
    /// question no block took.
    Refused,
    /// The block's check of signed requests answered this rcode, signed by the signer when
    /// there is one (`NOTAUTH`'s error record).
    Rejected(ResponseCode, Option<Box<dyn ResponseSigner>>),
}

/// Lets `question` (read from `req`, whose bytes are `wire`) through to `block`'s chain, with
/// the signer of its response when the request was signed and verified; or says why not.
pub(super) fn admit(
    block: &BlockRoute,
    req: &Parsed<'_>,
    question: &Question,
    wire: &[u8],
) -> Result<Option<Box<dyn ResponseSigner>>, Shut> {
    // Classes other than IN only where a plugin of the block answers them (`chaos`: CH).
    if !block.chain.answers_class(question.qclass) {
        return Err(Shut::Refused);
    }
    // The block's check of signed requests (`tsig`), before its chain is asked.
    let mut signer = None;
    if let Some(auth) = &block.auth {
        let signed = SignedRequest {
            wire,
            additional_at: req.additional_at,
            additional_count: req.additional_count,
            name: &question.name,
            qtype: question.qtype,
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
            return Err(Shut::Rejected(rcode, signs));
        }
        signer = signs;
    }
    // Transfers only over a stream (RFC 5936), and only where a plugin answers them
    // (`transfer`); IXFR is answered as a whole transfer (RFC 1995 section 4 allows it).
    let transfer = matches!(question.qtype, RecordType::AXFR | RecordType::IXFR);
    if transfer && !block.transfers {
        return Err(Shut::Refused);
    }
    Ok(signer)
}
