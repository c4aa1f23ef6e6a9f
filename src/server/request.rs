//! Reading a request: the header, the question section kept as sent, the EDNS record, an IXFR's
//! serial, and the checks on it that do not need a server block (the COOKIE option's length).

use std::borrow::Cow;

use hickory_proto::op::{Edns, Header, Message, Metadata, Query};
use hickory_proto::rr::RData;
use hickory_proto::rr::rdata::opt::EdnsCode;

use hickory_proto::serialize::binary::{
    BinDecodable, BinDecoder, BinEncodable, BinEncoder, DecodeError, NameEncoding,
};

/// A request as the server reads it: the header, the first question, the question section to
/// echo (as sent, unless it holds a compression pointer: see [`echoable`]) and the client's EDNS. Every section is read and checked as
/// hickory-server's `MessageRequest` reads it, so what parses is the same.
pub(super) struct Parsed<'a> {
    pub(super) meta: Metadata,
    pub(super) query_count: usize,
    pub(super) query: Option<Query>,
    pub(super) question: Cow<'a, [u8]>,
    pub(super) edns: Option<Edns>,
    /// The serial of the SOA in the authority section: the version an IXFR asker holds
    /// (RFC 1995 section 3). `None` when there is none.
    pub(super) soa_serial: Option<u32>,
    /// Where the additional section starts in the request, and its record count (a signature
    /// is its last record).
    pub(super) additional_at: usize,
    pub(super) additional_count: u16,
}

pub(super) fn parse_body<'a>(
    decoder: &mut BinDecoder<'a>,
    header: Header,
) -> Result<Parsed<'a>, DecodeError> {
    let Header { mut metadata, counts } = header;
    let start = decoder.index();
    // The first question is kept; the others are read (to check them) and dropped.
    let mut first = None;
    for _ in 0..counts.queries {
        let q = Query::read(decoder)?;
        first.get_or_insert(q);
    }
    let question = echoable(decoder, start, usize::from(counts.queries))?;
    let op = metadata.op_code;
    Message::read_records(decoder, usize::from(counts.answers), false, op)?;
    let (authority, _, _) = Message::read_records(decoder, usize::from(counts.authorities), false, op)?;
    let soa_serial = authority.iter().find_map(|r| match &r.data {
        RData::SOA(soa) => Some(soa.serial),
        _ => None,
    });
    let additional_at = decoder.index();
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
        soa_serial,
        additional_at,
        additional_count: counts.additionals,
    })
}

/// The question section to send back for `raw`, the request's (`count` questions, read
/// already from `message`): the bytes as sent, or when a name in it uses a compression
/// pointer, the questions written again without one. A pointer is legal in a request, but it
/// points at the request's bytes: copied into the reply it would point at other bytes there
/// (into the header, say), and the reply would not parse.
fn echoable<'a>(message: &BinDecoder<'a>, start: usize, count: usize) -> Result<Cow<'a, [u8]>, DecodeError> {
    let raw = message.slice_from(start)?;
    if !has_pointer(raw, count) {
        return Ok(Cow::Borrowed(raw));
    }
    // Rare: read the questions again (their pointers lead into the whole message).
    let mut again = message.clone(u16::try_from(start).map_err(|_| DecodeError::InsufficientBytes)?);
    let mut out = Vec::with_capacity(raw.len() + 32);
    let mut encoder = BinEncoder::new(&mut out);
    encoder.set_name_encoding(NameEncoding::Uncompressed);
    for _ in 0..count {
        let q = Query::read(&mut again)?;
        q.emit(&mut encoder).map_err(|_| DecodeError::InsufficientBytes)?;
    }
    Ok(Cow::Owned(out))
}

/// True when one of the `count` names of the question section `raw` uses a compression
/// pointer (`raw` was read as `count` questions already, so it is well formed).
fn has_pointer(raw: &[u8], count: usize) -> bool {
    let mut at = 0;
    for _ in 0..count {
        match name_end(raw, at) {
            Some((_, true)) => return true,
            // Type and class.
            Some((end, false)) => at = end + 4,
            None => return false,
        }
    }
    false
}

/// Where the wire-format name that starts at `at` in `msg` ends (the offset just past its root
/// label or its compression pointer), and whether it ends in a pointer. `None` when `msg` ends
/// first or a label has the reserved 0x40 or 0x80 type (RFC 6891 §5).
pub(super) fn name_end(msg: &[u8], mut at: usize) -> Option<(usize, bool)> {
    loop {
        let len = *msg.get(at)?;
        match len {
            0 => return Some((at + 1, false)),
            l if l & 0xC0 == 0xC0 => return msg.get(at + 1).map(|_| (at + 2, true)),
            l if l & 0xC0 == 0 => at += 1 + usize::from(l),
            _ => return None,
        }
    }
}

/// RFC 7873 §5.2.2: every COOKIE option is a client cookie of 8 bytes, alone or followed by a
/// server cookie of 8 to 32 bytes; any other length is malformed (FORMERR).
pub(super) fn cookies_well_formed(edns: &Edns) -> bool {
    edns.options()
        .get_all(EdnsCode::Cookie)
        .iter()
        .all(|o| matches!(o.len(), 8 | 16..=40))
}
