//! Beside the walk, for a NOTIFY request (RFC 1996) that passed the gate: not a question for
//! the chain (no store may keep or answer it), so the server answers it itself. The block's
//! plugins that follow zones as secondaries ([`NotifyTaker`], offered by type) are told; the
//! response echoes the question with AA set when one took it, REFUSED when the sender is not
//! a primary of the zone, NOTAUTH when no plugin of the block follows the zone (as Knot).

use hickory_proto::op::{Metadata, ResponseCode};

use super::map::{Response, rejected};
use super::route::BlockRoute;
use crate::chain::ResponseSigner;
use crate::proto::{NotifyTaker, Question};

/// The response to `question`, a NOTIFY routed to `block` (block and zone index `at`), over
/// the header `meta`; signed by `signer` when the request was.
pub(super) fn answer(
    meta: Metadata,
    block: &BlockRoute,
    at: (usize, usize),
    question: Question,
    signer: Option<Box<dyn ResponseSigner>>,
) -> Response {
    let taken = block
        .chain
        .offered::<NotifyTaker>()
        .find_map(|(_, t)| t.0.notified(&question.name, question.client.ip()));
    let rcode = match taken {
        Some(true) => ResponseCode::NoError,
        Some(false) => ResponseCode::Refused,
        None => ResponseCode::NotAuth,
    };
    let mut resp = rejected(meta, rcode, at, question, signer);
    resp.meta.authoritative = taken == Some(true);
    resp
}
