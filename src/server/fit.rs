//! Truncation: how much of an answer fits the client's size limit.
//!
//! One rule for every response: the question is always kept, space for the OPT record is
//! reserved, whole records are dropped from the end, answer and authority overflow sets TC, and
//! additional records that do not fit are dropped without TC (RFC 2181 §9: glue is optional).
//! The sizes are measured with the same encoder and compression hickory-server uses to send, so
//! what is measured to fit is what is sent.

use hickory_proto::rr::Record;
use hickory_proto::serialize::binary::BinEncoder;

/// Wire size of an OPT record without options.
pub const OPT_LEN: usize = 11;
/// Size of the DNS header.
const HEADER_LEN: usize = 12;

/// How many records of each section fit, and whether TC must be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    /// Answer records that fit.
    pub answers: usize,
    /// Authority records that fit.
    pub authority: usize,
    /// Additional records that fit.
    pub additional: usize,
    /// Set TC: an answer or authority record did not fit.
    pub truncated: bool,
}

/// Measures what fits in `limit` bytes after a header, the raw question bytes `question` and,
/// when `with_opt`, an OPT record.
pub fn fit(
    question: &[u8],
    answers: &[Record],
    authority: &[Record],
    additional: &[Record],
    with_opt: bool,
    limit: usize,
) -> Fit {
    let all = Fit {
        answers: answers.len(),
        authority: authority.len(),
        additional: additional.len(),
        truncated: false,
    };
    let reserve = if with_opt { OPT_LEN } else { 0 };
    let max = limit.saturating_sub(reserve).min(usize::from(u16::MAX));
    let mut buf = Vec::with_capacity(max.min(4096));
    let mut enc = BinEncoder::new(&mut buf);
    enc.set_max_size(u16::try_from(max).unwrap_or(u16::MAX));
    if enc.emit_vec(&[0u8; HEADER_LEN]).is_err() {
        return Fit {
            answers: 0,
            authority: 0,
            additional: 0,
            truncated: true,
        };
    }
    let start = enc.offset();
    if enc.emit_vec(question).is_err() {
        return Fit {
            answers: 0,
            authority: 0,
            additional: 0,
            truncated: true,
        };
    }
    if !question.is_empty() {
        enc.store_label_pointer(start, start + question.len());
    }
    let answers_fit = emit_count(&mut enc, answers);
    if answers_fit < answers.len() {
        return Fit {
            answers: answers_fit,
            authority: 0,
            additional: 0,
            truncated: true,
        };
    }
    let authority_fit = emit_count(&mut enc, authority);
    if authority_fit < authority.len() {
        return Fit {
            authority: authority_fit,
            additional: 0,
            truncated: true,
            ..all
        };
    }
    let additional_fit = emit_count(&mut enc, additional);
    Fit {
        additional: additional_fit,
        ..all
    }
}

fn emit_count(enc: &mut BinEncoder<'_>, records: &[Record]) -> usize {
    match enc.emit_all(records.iter()) {
        Ok(n) => n,
        Err(hickory_proto::ProtoError::NotAllRecordsWritten { count, .. }) => count,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::{Name, RData};
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
        hickory_proto::serialize::binary::BinEncodable::emit(&name, &mut e).unwrap();
        e.emit_u16(1).unwrap();
        e.emit_u16(1).unwrap();
        q
    }

    #[test]
    fn everything_fits_when_small() {
        let f = fit(&question(), &many(3), &[], &[], true, 512);
        assert_eq!(
            f,
            Fit {
                answers: 3,
                authority: 0,
                additional: 0,
                truncated: false
            }
        );
    }

    /// The smallest limit at which `n` records fit without TC.
    fn smallest_fitting(q: &[u8], n: u8, opt: bool) -> usize {
        (12..2000)
            .find(|l| !fit(q, &many(n), &[], &[], opt, *l).truncated)
            .unwrap()
    }

    #[test]
    fn answers_cut_at_exact_boundary() {
        let q = question();
        let limit = smallest_fitting(&q, 10, false);
        assert_eq!(fit(&q, &many(10), &[], &[], false, limit).answers, 10);
        // One byte less: the last record goes, TC is set.
        let f = fit(&q, &many(10), &[], &[], false, limit - 1);
        assert_eq!((f.answers, f.truncated), (9, true));
        // The OPT reserve is exactly 11 bytes.
        assert_eq!(smallest_fitting(&q, 10, true), limit + OPT_LEN);
        // Nothing fits below the header and question.
        let f = fit(&q, &many(1), &[], &[], false, 12 + q.len());
        assert_eq!((f.answers, f.truncated), (0, true));
    }

    #[test]
    fn glue_overflow_drops_glue_without_tc() {
        let q = question();
        // Room for five records in all: three answers, two of the five glue records.
        let limit = smallest_fitting(&q, 5, false);
        let f = fit(&q, &many(3), &[], &many(5), false, limit);
        assert_eq!(
            f,
            Fit {
                answers: 3,
                authority: 0,
                additional: 2,
                truncated: false
            }
        );
    }
}
