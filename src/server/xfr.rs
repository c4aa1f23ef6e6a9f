//! Zone transfers over a stream (AXFR, RFC 5936 section 2.2): the records of a transfer answer
//! split over as many messages as they need, each at most 65,535 bytes and written with its
//! two-byte length, the question in each (section 2.2.1 allows it), the OPT in each when the
//! request had one. The answer itself (the zone's records, SOA first and last) comes from the
//! chain (`transfer`).

use hickory_proto::op::Metadata;
use hickory_proto::rr::Record;

use super::fit::{self, Parts};
use crate::proto::Records;

/// Signs each framed message of `out` with `signer`, in order (a signed transfer).
pub(super) fn sign_framed(
    out: &mut Vec<u8>,
    signer: &mut dyn crate::chain::ResponseSigner,
) -> Result<(), String> {
    let framed = std::mem::take(out);
    let mut at = 0;
    let mut message = Vec::new();
    while let Some(len) = framed.get(at..at + 2) {
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        let body = framed
            .get(at + 2..at + 2 + len)
            .ok_or("a framed message is cut short")?;
        message.clear();
        message.extend_from_slice(body);
        signer.sign(&mut message)?;
        let len = u16::try_from(message.len()).map_err(|_| "a signed message is too long")?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&message);
        at += 2 + body.len();
    }
    Ok(())
}

/// Most records tried in one message before it is found to fit.
const FIRST_TRY: usize = 500;

/// Encodes `parts`' answers into framed messages in `out` (cleared first), each holding as
/// many whole records as fit in `limit` bytes; gives the first message's header metadata.
pub(super) fn encode_framed(
    parts: &Parts<'_>,
    limit: u16,
    out: &mut Vec<u8>,
) -> Result<Metadata, hickory_proto::ProtoError> {
    out.clear();
    let records: &[Record] = parts.answers;
    let mut first: Option<Metadata> = None;
    let mut at = 0;
    let mut message = Vec::new();
    loop {
        let mut take = FIRST_TRY.min(records.len() - at).max(1);
        let header = loop {
            let chunk: Records = records[at..(at + take).min(records.len())].to_vec().into();
            let chunk_parts = Parts {
                answers: &chunk,
                // The authority and additional sections go with the first message only.
                authority: if at == 0 { parts.authority } else { &[] },
                additional: if at == 0 { parts.additional } else { &[] },
                ..*parts
            };
            // Too many records for one message: cut (TC) or refused by the encoder's bound.
            match fit::encode(&chunk_parts, limit, &mut message) {
                Ok(header) if !header.metadata.truncation || take == 1 => break header,
                Err(e) if take == 1 => return Err(e),
                Ok(_) | Err(_) => take = take.div_ceil(2),
            }
        };
        let len = u16::try_from(message.len())
            .map_err(|_| hickory_proto::ProtoError::Message("message too long"))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&message);
        first.get_or_insert(header.metadata);
        at += take;
        if at >= records.len() {
            break;
        }
    }
    first.ok_or(hickory_proto::ProtoError::Message("nothing to transfer"))
}
