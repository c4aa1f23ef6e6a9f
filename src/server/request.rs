//! Reading a request: the header, the question section kept as sent, the EDNS record, and the
//! checks on it that do not need a server block (the COOKIE option's length).

use hickory_proto::op::{Edns, Header, Message, Metadata, Query};
use hickory_proto::rr::rdata::opt::EdnsCode;
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, DecodeError};

/// A request as the server reads it: the header, the first question, the raw question section
/// (echoed back as sent) and the client's EDNS. Every section is read and checked as
/// hickory-server's `MessageRequest` reads it, so what parses is the same.
pub(super) struct Parsed<'a> {
    pub(super) meta: Metadata,
    pub(super) query_count: usize,
    pub(super) query: Option<Query>,
    pub(super) question: &'a [u8],
    pub(super) edns: Option<Edns>,
}

pub(super) fn parse_body<'a>(
    decoder: &mut BinDecoder<'a>,
    header: Header,
) -> Result<Parsed<'a>, DecodeError> {
    let Header { mut metadata, counts } = header;
    let start = decoder.index();
    let mut first = None;
    for i in 0..counts.queries {
        let q = Query::read(decoder)?;
        if i == 0 {
            first = Some(q);
        }
    }
    let question = decoder.slice_from(start)?;
    let op = metadata.op_code;
    Message::read_records(decoder, usize::from(counts.answers), false, op)?;
    Message::read_records(decoder, usize::from(counts.authorities), false, op)?;
    let (_, edns, _) = Message::read_records(decoder, usize::from(counts.additionals), true, op)?;
    if let Some(e) = &edns {
        metadata.merge_response_code(e.rcode_high());
    }
    Ok(Parsed {
        meta: metadata,
        query_count: usize::from(counts.queries),
        query: first,
        question,
        edns,
    })
}

/// RFC 7873 §5.2.2: every COOKIE option is a client cookie of 8 bytes, alone or followed by a
/// server cookie of 8 to 32 bytes; any other length is malformed (FORMERR).
pub(super) fn cookies_well_formed(edns: &Edns) -> bool {
    edns.options()
        .get_all(EdnsCode::Cookie)
        .iter()
        .all(|o| matches!(o.len(), 8 | 16..=40))
}
