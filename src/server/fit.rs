//! Truncation and encoding: a response encoded once, cut to the client's size limit as it is
//! written.
//!
//! One rule for every response: the question is always kept, space for the OPT record is
//! reserved, whole records are dropped from the end, answer and authority overflow sets TC (and
//! drops every later section), and additional records that do not fit are dropped without TC
//! (RFC 2181 §9: glue is optional). The OPT goes last, into its reserved space. Records are
//! written straight into the output with name compression (`compress`); a record
//! that does not fit is taken back with the names it recorded, so what is sent is exactly the
//! records that fitted.

use hickory_proto::ProtoError;
use hickory_proto::op::{Edns, Header, HeaderCounts, MessageType, Metadata};
use hickory_proto::rr::Record;

use super::compress::Suffixes;
use crate::proto::Records;

/// Wire size of an OPT record without options.
pub const OPT_LEN: usize = 11;

/// A response to encode: the header fields, the question section as the client sent it, the
/// records, and the OPT to append (if the query had one).
#[derive(Debug, Clone, Copy)]
pub struct Parts<'a> {
    /// Header fields; the counts and TC are filled in by [`encode`].
    pub meta: Metadata,
    /// Number of questions in `question`.
    pub query_count: usize,
    /// The raw question section of the request.
    pub question: &'a [u8],
    /// Answer section. When its records share one owner
    /// ([`Records::share_one_owner`]), that owner is written once and pointed at.
    pub answers: &'a Records,
    /// Authority section.
    pub authority: &'a [Record],
    /// Additional section (without OPT).
    pub additional: &'a [Record],
    /// The OPT to send.
    pub edns: Option<&'a Edns>,
}

/// Outcome of writing one section.
enum Section {
    All(u16),
    Cut(u16),
}

/// Writes `records` while the output stays within `max` bytes. With `one_owner` (every
/// record's owner is the first one's, spelt the same), later records point at the first one's
/// owner without reading their own.
fn emit_section(
    out: &mut Vec<u8>,
    names: &mut Suffixes,
    records: &[Record],
    one_owner: bool,
    max: usize,
) -> Result<Section, ProtoError> {
    let mut shared_owner = None;
    for (i, r) in records.iter().enumerate() {
        let (start, recorded) = (out.len(), names.len());
        names.write_record(out, r, shared_owner)?;
        if out.len() > max {
            out.truncate(start);
            names.truncate(recorded);
            return Ok(Section::Cut(count(i)?));
        }
        if one_owner && i == 0 {
            shared_owner = Suffixes::owner_pointer(out, start);
        }
    }
    Ok(Section::All(count(records.len())?))
}

/// Length of the header.
const HEADER_LEN: usize = 12;
/// Offset of the question's name: right after the header.
const QNAME_AT: usize = HEADER_LEN;

fn count(n: usize) -> Result<u16, ProtoError> {
    u16::try_from(n).map_err(|_| ProtoError::Message("too many records for the header count"))
}

/// Encodes `parts` into `out` (cleared first) in at most `limit` bytes, and returns the header
/// that was written.
pub fn encode(parts: &Parts<'_>, limit: u16, out: &mut Vec<u8>) -> Result<Header, ProtoError> {
    out.clear();
    let limit = usize::from(limit);
    // The OPT and its options (`nsid`'s) are kept when records are cut: room for them first.
    let reserve = parts.edns.map_or(0, |e| {
        OPT_LEN
            + e.options()
                .as_ref()
                .iter()
                .map(|(_, o)| 4 + usize::from(o.len()))
                .sum::<usize>()
    });
    let records_max = limit.saturating_sub(reserve);
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.extend_from_slice(parts.question);
    if out.len() > limit {
        return Err(ProtoError::MaxBufferSizeExceeded(limit));
    }
    Suffixes::with_empty(|names| encode_records(parts, limit, records_max, names, out))
}

/// [`encode`] after the question: the records, the OPT and the header.
fn encode_records(
    parts: &Parts<'_>,
    limit: usize,
    records_max: usize,
    names: &mut Suffixes,
    out: &mut Vec<u8>,
) -> Result<Header, ProtoError> {
    // Records owned by the question's name (or under it) point at it.
    if parts.query_count > 0 {
        names.record_question(out, QNAME_AT);
    }
    let mut counts = HeaderCounts {
        queries: count(parts.query_count)?,
        answers: 0,
        authorities: 0,
        additionals: 0,
    };
    let mut truncated = false;
    if out.len() > records_max {
        // Not even room for the OPT after the question: no records, TC.
        truncated = true;
    } else {
        match emit_section(
            out,
            names,
            parts.answers,
            parts.answers.share_one_owner(),
            records_max,
        )? {
            Section::Cut(n) => {
                counts.answers = n;
                truncated = true;
            }
            Section::All(n) => {
                counts.answers = n;
                match emit_section(out, names, parts.authority, false, records_max)? {
                    Section::Cut(n) => {
                        counts.authorities = n;
                        truncated = true;
                    }
                    Section::All(n) => {
                        counts.authorities = n;
                        counts.additionals =
                            match emit_section(out, names, parts.additional, false, records_max)? {
                                Section::All(n) | Section::Cut(n) => n,
                            };
                    }
                }
            }
        }
    }
    if let Some(edns) = parts.edns {
        // The extended rcode's high bits travel in the OPT.
        let mut edns = edns.clone();
        edns.set_rcode_high(parts.meta.response_code.high());
        match emit_section(
            out,
            names,
            std::slice::from_ref(&Record::from(&edns)),
            false,
            limit,
        )? {
            Section::All(n) => counts.additionals += n,
            Section::Cut(_) => truncated = true,
        }
    }
    let mut metadata = parts.meta;
    metadata.truncation = metadata.truncation || truncated;
    let header = Header { metadata, counts };
    write_header(&header, out);
    Ok(header)
}

/// Writes `header` over the first 12 bytes of `out` (RFC 1035 §4.1.1; the Z bit is 0).
fn write_header(header: &Header, out: &mut [u8]) {
    let m = &header.metadata;
    let bit = |set: bool, mask: u8| if set { mask } else { 0 };
    let flags = [
        bit(m.message_type == MessageType::Response, 0x80)
            | (u8::from(m.op_code) << 3)
            | bit(m.authoritative, 0x04)
            | bit(m.truncation, 0x02)
            | bit(m.recursion_desired, 0x01),
        bit(m.recursion_available, 0x80)
            | bit(m.authentic_data, 0x20)
            | bit(m.checking_disabled, 0x10)
            | m.response_code.low(),
    ];
    let c = &header.counts;
    let mut bytes = [0u8; HEADER_LEN];
    bytes[0..2].copy_from_slice(&m.id.to_be_bytes());
    bytes[2..4].copy_from_slice(&flags);
    for (i, n) in [c.queries, c.answers, c.authorities, c.additionals]
        .into_iter()
        .enumerate()
    {
        bytes[4 + 2 * i..6 + 2 * i].copy_from_slice(&n.to_be_bytes());
    }
    if let Some(head) = out.get_mut(..HEADER_LEN) {
        head.copy_from_slice(&bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{Message, MessageType, OpCode};
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{Name, RData};
    use hickory_proto::serialize::binary::{BinDecodable, BinEncodable, BinEncoder};
    use std::net::Ipv4Addr;

    fn many(n: u8) -> Vec<Record> {
        let owner = Name::from_ascii("h.ns.svc.cluster.local.").unwrap();
        (0..n)
            .map(|i| Record::from_rdata(owner.clone(), 5, RData::A(A(Ipv4Addr::new(10, 0, 0, i)))))
            .collect()
    }

    fn question() -> Vec<u8> {
        let mut q = Vec::new();
        let mut e = BinEncoder::new(&mut q);
        let name = Name::from_ascii("h.ns.svc.cluster.local.").unwrap();
        name.emit(&mut e).unwrap();
        e.emit_u16(1).unwrap();
        e.emit_u16(1).unwrap();
        q
    }

    fn meta() -> Metadata {
        Metadata::new(7, MessageType::Response, OpCode::Query)
    }

    /// Encodes and parses back: (answers, additionals without OPT, has OPT, TC, wire length).
    fn run(
        answers: &[Record],
        additional: &[Record],
        edns: Option<&Edns>,
        limit: u16,
    ) -> (usize, usize, bool, bool, usize) {
        let q = question();
        let answers = Records::from(answers.to_vec());
        let parts = Parts {
            meta: meta(),
            query_count: 1,
            question: &q,
            answers: &answers,
            authority: &[],
            additional,
            edns,
        };
        let mut out = vec![0xAA; 3000];
        let header = encode(&parts, limit, &mut out).unwrap();
        assert!(out.len() <= usize::from(limit));
        let m = Message::from_bytes(&out).unwrap();
        assert_eq!(m.queries.len(), 1);
        assert_eq!(header.metadata.truncation, m.metadata.truncation);
        (
            m.answers.len(),
            m.additionals.len(),
            m.edns.is_some(),
            m.metadata.truncation,
            out.len(),
        )
    }

    #[test]
    fn everything_fits_when_small() {
        let (a, _, opt, tc, _) = run(&many(3), &[], None, 512);
        assert_eq!((a, opt, tc), (3, false, false));
        let (a, _, opt, tc, _) = run(&many(3), &[], Some(&Edns::new()), 512);
        assert_eq!((a, opt, tc), (3, true, false));
    }

    /// The smallest limit at which `n` records fit without TC.
    fn smallest_fitting(n: u8, edns: Option<&Edns>) -> u16 {
        (40..2000).find(|l| !run(&many(n), &[], edns, *l).3).unwrap()
    }

    #[test]
    fn answers_cut_at_exact_boundary() {
        let limit = smallest_fitting(10, None);
        assert_eq!(run(&many(10), &[], None, limit).0, 10);
        // One byte less: the last record goes, TC is set.
        let (a, _, _, tc, _) = run(&many(10), &[], None, limit - 1);
        assert_eq!((a, tc), (9, true));
        // The OPT reserve is exactly 11 bytes, and the OPT is kept when answers are cut.
        let edns = Edns::new();
        assert_eq!(smallest_fitting(10, Some(&edns)), limit + OPT_LEN as u16);
        let (a, _, opt, tc, _) = run(&many(10), &[], Some(&edns), limit + OPT_LEN as u16 - 1);
        assert_eq!((a, opt, tc), (9, true, true));
    }

    #[test]
    fn glue_overflow_drops_glue_without_tc() {
        // Room for five records in all: three answers, two of the five glue records.
        let limit = smallest_fitting(5, None);
        let (a, add, _, tc, _) = run(&many(3), &many(5), None, limit);
        assert_eq!((a, add, tc), (3, 2, false));
    }

    #[test]
    fn answer_overflow_drops_later_sections() {
        let limit = smallest_fitting(4, None);
        let (a, add, _, tc, _) = run(&many(6), &many(1), None, limit);
        assert_eq!((a, add, tc), (4, 0, true));
    }

    #[test]
    fn records_of_every_kind_owned_by_the_question_point_at_it() {
        use hickory_proto::op::Query;
        use hickory_proto::rr::RecordType;
        use hickory_proto::rr::rdata::{CNAME, PTR, SRV, TXT};
        let n = |s: &str| Name::from_ascii(s).unwrap();
        let qname = n("h.ns.svc.cluster.local.");
        let target = n("p-0.h.ns.svc.cluster.local.");
        let answers: Records = vec![
            Record::from_rdata(qname.clone(), 5, RData::SRV(SRV::new(0, 100, 80, target.clone()))),
            Record::from_rdata(qname.clone(), 5, RData::PTR(PTR(target.clone()))),
            Record::from_rdata(
                qname.clone(),
                5,
                RData::CNAME(CNAME(n("web.other.svc.cluster.local."))),
            ),
            Record::from_rdata(qname.clone(), 5, RData::TXT(TXT::new(vec!["1.1.0".into()]))),
            Record::from_rdata(
                n("H.ns.svc.cluster.local."),
                5,
                RData::A(A(Ipv4Addr::new(10, 0, 0, 1))),
            ),
        ]
        .into();
        let additional = vec![Record::from_rdata(
            target,
            5,
            RData::A(A(Ipv4Addr::new(10, 0, 0, 2))),
        )];
        let mut q = Vec::new();
        let mut e = BinEncoder::new(&mut q);
        Query::query(qname.clone(), RecordType::SRV).emit(&mut e).unwrap();
        let parts = Parts {
            meta: meta(),
            query_count: 1,
            question: &q,
            answers: &answers,
            authority: &[],
            additional: &additional,
            edns: None,
        };
        let mut out = Vec::new();
        encode(&parts, 4096, &mut out).unwrap();
        let m = Message::from_bytes(&out).unwrap();
        assert_eq!(m.answers, *answers);
        for (got, sent) in m.answers.iter().zip(&answers) {
            assert!(got.name.eq_case(&sent.name), "{} for {}", got.name, sent.name);
        }
        assert_eq!(m.additionals, additional);
        // Each record owned by the question's very spelling: its owner is the pointer to it.
        for t in [
            RecordType::SRV,
            RecordType::PTR,
            RecordType::CNAME,
            RecordType::TXT,
        ] {
            let [hi, lo] = u16::from(t).to_be_bytes();
            assert!(out.windows(4).any(|w| w == [0xC0, 0x0C, hi, lo]), "{t}");
        }
    }

    #[test]
    fn answers_owned_by_the_question_point_at_it() {
        let q = question();
        let records = Records::from(many(3));
        let parts = Parts {
            meta: meta(),
            query_count: 1,
            question: &q,
            answers: &records,
            authority: &[],
            additional: &[],
            edns: None,
        };
        let mut out = Vec::new();
        encode(&parts, 512, &mut out).unwrap();
        // Header, question, and 16 bytes per A record: the owner is a 2-byte pointer.
        assert_eq!(out.len(), 12 + q.len() + 3 * 16);
        let m = Message::from_bytes(&out).unwrap();
        assert_eq!(m.answers, *records);
        // Another spelling of the name is written out, not pointed at.
        let other = Name::from_ascii("H.ns.svc.cluster.local.").unwrap();
        let mut upper = many(1);
        upper[0].name = other.clone();
        let upper = Records::from(upper);
        let parts = Parts {
            answers: &upper,
            ..parts
        };
        encode(&parts, 512, &mut out).unwrap();
        let m = Message::from_bytes(&out).unwrap();
        assert!(m.answers[0].name.eq_case(&other));
    }

    /// A section marked as one owner's is written as the same records: the question's name
    /// as before (the bytes are equal, so the memo's shuffle still applies), another name in
    /// full once and then as pointers to it, in the case it was given; and cut as exactly.
    #[test]
    fn answers_of_one_owner_point_at_the_first() {
        let q = question();
        let encode_with = |records: &Records, limit: u16| {
            let parts = Parts {
                meta: meta(),
                query_count: 1,
                question: &q,
                answers: records,
                authority: &[],
                additional: &[],
                edns: None,
            };
            let mut out = Vec::new();
            let header = encode(&parts, limit, &mut out).unwrap();
            (out, header.counts.answers)
        };
        let data = |n: u8| (0..n).map(|i| RData::A(A(Ipv4Addr::new(10, 0, 0, i))));
        let question_owner = Name::from_ascii("h.ns.svc.cluster.local.").unwrap();
        let marked = Records::with_owner(&question_owner, 5, data(5));
        assert!(marked.share_one_owner());
        let unmarked = Records::from(marked.to_vec());
        assert_eq!(encode_with(&marked, 512), encode_with(&unmarked, 512));

        let other = Name::from_ascii("Web.Other.svc.cluster.local.").unwrap();
        let marked = Records::with_owner(&other, 5, data(5));
        let (out, n) = encode_with(&marked, 512);
        let (plain, _) = encode_with(&Records::from(marked.to_vec()), 512);
        assert_eq!(n, 5);
        // "Web.Other" is written in full once, then every owner is a 2-byte pointer to it.
        let first = 12 + q.len();
        let owner_at = u16::try_from(first).unwrap();
        for i in 1..5 {
            // The first record: "Web", "Other", a pointer into the question, then 14 bytes.
            let at = first + (1 + 3 + 1 + 5 + 2) + 14 + (i - 1) * 16;
            assert_eq!(out[at..at + 2], (0xC000 | owner_at).to_be_bytes(), "record {i}");
        }
        // What the suffix table finds for each later owner: the same pointer.
        assert_eq!(out, plain);
        let m = Message::from_bytes(&out).unwrap();
        assert_eq!(m.answers, *marked);
        assert!(m.answers.iter().all(|r| r.name.eq_case(&other)));
        // Cut at every limit, the records that fit are the plain encoding's.
        for limit in 40..u16::try_from(out.len()).unwrap() {
            let (cut, n) = encode_with(&marked, limit);
            let m = Message::from_bytes(&cut).unwrap();
            assert_eq!(m.answers.len(), usize::from(n));
            assert_eq!(m.answers[..], marked[..usize::from(n)], "limit {limit}");
            assert!(m.metadata.truncation == (usize::from(n) < marked.len()));
        }
    }

    #[test]
    fn the_header_is_written_as_hickory_proto_writes_it() {
        use hickory_proto::op::{OpCode, ResponseCode};
        for i in 0u16..512 {
            let mut m = Metadata::new(0xBEEF ^ i, MessageType::Query, OpCode::Query);
            let on = |b: u16| i & (1 << b) != 0;
            if on(0) {
                m.message_type = MessageType::Response;
            }
            m.op_code = if on(1) { OpCode::Update } else { OpCode::Notify };
            m.authoritative = on(2);
            m.truncation = on(3);
            m.recursion_desired = on(4);
            m.recursion_available = on(5);
            m.authentic_data = on(6);
            m.checking_disabled = on(7);
            m.response_code = if on(8) {
                ResponseCode::NXDomain
            } else {
                ResponseCode::BADVERS
            };
            let header = Header {
                metadata: m,
                counts: HeaderCounts {
                    queries: 1,
                    answers: i,
                    authorities: 0x0102,
                    additionals: 0xFFFF - i,
                },
            };
            let mut ours = vec![0u8; 12];
            write_header(&header, &mut ours);
            let mut theirs = Vec::new();
            header.emit(&mut BinEncoder::new(&mut theirs)).unwrap();
            assert_eq!(ours, theirs, "{header:?}");
        }
    }

    /// Random responses (names from a few labels in both cases, so suffixes are shared and
    /// spellings differ; every record type the encoder writes itself, and TXT through
    /// hickory-proto), encoded at random limits: each must parse, hold exactly the records
    /// that fitted, in order and spelt as given, and stay within the limit.
    #[test]
    fn random_responses_read_back_as_written() {
        use hickory_proto::op::Query;
        use hickory_proto::rr::RecordType;
        use hickory_proto::rr::rdata::{AAAA, CNAME, MX, NS, PTR, SOA, SRV, TXT};
        // xorshift: reproducible without a dependency.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let labels = [
            "a", "B", "web", "Web", "ns", "svc", "cluster", "local", "x-1", "p-0",
        ];
        let name = |next: &mut dyn FnMut(u64) -> u64| {
            let n = 1 + next(5) as usize;
            let parts: Vec<&str> = (0..n)
                .map(|_| labels[next(labels.len() as u64) as usize])
                .collect();
            Name::from_ascii(format!("{}.", parts.join("."))).unwrap()
        };
        let (mut cut, mut whole) = (0, 0);
        for round in 0..400 {
            let qname = name(&mut next);
            let mut q = Vec::new();
            Query::query(qname.clone(), RecordType::A)
                .emit(&mut BinEncoder::new(&mut q))
                .unwrap();
            let record = |next: &mut dyn FnMut(u64) -> u64| {
                let owner = if next(3) == 0 { qname.clone() } else { name(next) };
                let data = match next(9) {
                    0 => RData::A(A(Ipv4Addr::new(10, 0, 0, next(250) as u8))),
                    1 => RData::AAAA(AAAA(std::net::Ipv6Addr::LOCALHOST)),
                    2 => RData::CNAME(CNAME(name(next))),
                    3 => RData::PTR(PTR(name(next))),
                    4 => RData::NS(NS(name(next))),
                    5 => RData::MX(MX::new(next(100) as u16, name(next))),
                    6 => RData::SRV(SRV::new(0, 10, 80, name(next))),
                    7 => RData::SOA(SOA::new(name(next), name(next), 1, 2, 3, 4, 5)),
                    _ => RData::TXT(TXT::new(vec!["v=1".into(), "two".into()])),
                };
                Record::from_rdata(owner, 30, data)
            };
            // Every third round, answers of one owner, marked so (`Records::with_owner`): the
            // question's name or another, in any case.
            let answers: Records = if round % 3 == 0 {
                let owner = if next(2) == 0 {
                    qname.clone()
                } else {
                    name(&mut next)
                };
                let data: Vec<RData> = (0..next(8)).map(|_| record(&mut next).data).collect();
                Records::with_owner(&owner, 30, data)
            } else {
                (0..next(8)).map(|_| record(&mut next)).collect()
            };
            assert_eq!(answers.share_one_owner(), round % 3 == 0);
            let authority: Vec<Record> = (0..next(3)).map(|_| record(&mut next)).collect();
            let additional: Vec<Record> = (0..next(6)).map(|_| record(&mut next)).collect();
            let edns = Edns::new();
            let parts = Parts {
                meta: meta(),
                query_count: 1,
                question: &q,
                answers: &answers,
                authority: &authority,
                additional: &additional,
                edns: (round % 2 == 0).then_some(&edns),
            };
            let limit = if next(4) == 0 { 4096 } else { 60 + next(500) as u16 };
            let mut out = Vec::new();
            let header = encode(&parts, limit, &mut out).unwrap();
            assert!(out.len() <= usize::from(limit), "round {round}");
            if answers.share_one_owner() {
                // The mark saves reading owners, and changes no byte.
                let mut plain = Vec::new();
                let unmarked_answers = Records::from(answers.to_vec());
                let unmarked = Parts {
                    answers: &unmarked_answers,
                    ..parts
                };
                encode(&unmarked, limit, &mut plain).unwrap();
                assert_eq!(out, plain, "round {round}");
            }
            let m = Message::from_bytes(&out).unwrap_or_else(|e| panic!("round {round}: {e}"));
            assert!(m.queries[0].name().eq_case(&qname));
            let c = header.counts;
            let same = |got: &[Record], sent: &[Record], n: u16| {
                assert_eq!(got.len(), usize::from(n), "round {round}");
                for (g, s) in got.iter().zip(sent) {
                    assert_eq!(g, s, "round {round}");
                    assert!(
                        g.name.eq_case(&s.name),
                        "round {round}: {} for {}",
                        g.name,
                        s.name
                    );
                }
            };
            same(&m.answers, &answers, c.answers);
            same(&m.authorities, &authority, c.authorities);
            let opt = u16::from(parts.edns.is_some() && m.edns.is_some());
            same(&m.additionals, &additional, c.additionals - opt);
            // Cut answers or authority set TC; everything fitting does not.
            let all =
                usize::from(c.answers) == answers.len() && usize::from(c.authorities) == authority.len();
            assert_eq!(
                m.metadata.truncation,
                !all || (parts.edns.is_some() && m.edns.is_none()),
                "round {round}"
            );
            if m.metadata.truncation {
                cut += 1;
            } else if !answers.is_empty() {
                whole += 1;
            }
        }
        // The limits cut some responses and not others.
        assert!(cut > 50 && whole > 50, "{cut} cut, {whole} whole");
    }
}
