//! The body of the `tsig_verify` fuzz target (`fuzz/`), kept beside the code it drives so
//! `cargo test` replays its committed corpus through the same code
//! (`tests/integration/project/fuzz_corpus.rs`): arbitrary bytes as a request, read as the server reads
//! one, checked by [`TsigAuth`] against a fixed key set, and the response signed. Not part of
//! the server.

use std::collections::HashMap;

use hickory_proto::op::{Header, Message, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncoder, NameEncoding};

use super::verify::{Require, TsigAuth};
use crate::chain::{RequestAuth, SignedRequest, Verdict};
use crate::plugin::kit::tsig::{Algorithm, same};

/// The time the requests are checked at (2027-01-15T08:00:00Z); the seeds are signed at it.
pub const NOW: u64 = 1_800_000_000;

/// The configured keys: name (lower-case) and secret. One shorter than any hash's block, one
/// longer than SHA-256's (hashed first, RFC 2104 §2).
pub const KEYS: [(&str, &[u8]); 3] = [
    ("k.", b"0123456789abcdef0123456789abcdef"),
    ("transfer.example.org.", b"secret-of-the-transfer-key"),
    (
        "long.key.",
        b"a secret longer than the block of SHA-1, SHA-224 and SHA-256, which is sixty-four bytes",
    ),
];

fn auth() -> &'static TsigAuth {
    static AUTH: std::sync::OnceLock<TsigAuth> = std::sync::OnceLock::new();
    AUTH.get_or_init(|| {
        let keys = KEYS
            .iter()
            .map(|(name, secret)| (Name::from_ascii(name).expect("a key name"), secret.to_vec()))
            .collect::<HashMap<_, _>>();
        let require = Require {
            all_types: true,
            ..Require::default()
        };
        TsigAuth::new(
            vec![Name::from_ascii("example.org.").expect("a zone")],
            keys,
            require,
        )
    })
}

/// Arbitrary bytes as a request: read as the server reads one (`server::request::parse_body`:
/// header, questions, answer and authority sections, then the additional section from where
/// it starts), checked by `tsig` for zone `example.org.` with [`KEYS`], requiring a signature,
/// at [`NOW`]; the response to it signed by the signer the check gives. Invariants: no panic;
/// a verified request carries, as hickory-proto reads it, a last additional TSIG record of a
/// configured key, within its fudge of [`NOW`], whose MAC (possibly cut, to no less than half
/// and 10 bytes) is the HMAC of the request without it, with its original ID, and of its
/// variables (RFC 8945 §4.3.3); a rejection is NOTAUTH; the signed response parses with a
/// TSIG, within the bytes the signer said it adds (exactly them when verified).
pub fn tsig_verify(data: &[u8]) {
    let _ = tsig_outcome(data);
}

/// [`tsig_verify`], saying what the check made of the request: `unread` (the server would
/// not have read it), `pass`, `rcode` (FORMERR or REFUSED), `reject` (NOTAUTH, signed) or
/// `verified`. (So a test can tell that the seeds reach the MAC.)
pub fn tsig_outcome(data: &[u8]) -> &'static str {
    let mut d = BinDecoder::new(data);
    let Ok(header) = Header::read(&mut d) else {
        return "unread";
    };
    let op = header.metadata.op_code;
    let counts = header.counts;
    let mut first = None;
    for _ in 0..counts.queries {
        let Ok(q) = Query::read(&mut d) else {
            return "unread";
        };
        first.get_or_insert(q);
    }
    let Some(query) = first else { return "unread" };
    let questions_end = d.index();
    let records = usize::from(counts.answers) + usize::from(counts.authorities);
    if Message::read_records(&mut d, records, false, op).is_err() {
        return "unread";
    }
    let additional_at = d.index();
    if Message::read_records(&mut d, usize::from(counts.additionals), true, op).is_err() {
        return "unread";
    }
    let req = SignedRequest {
        wire: data,
        additional_at,
        additional_count: counts.additionals,
        name: query.name(),
        qtype: query.query_type(),
        opcode: op,
    };
    let (mut signer, verified) = match auth().check(&req, NOW) {
        Verdict::Pass => return "pass",
        Verdict::Rcode(rcode) => {
            assert!(
                matches!(rcode, ResponseCode::FormErr | ResponseCode::Refused),
                "{rcode:?}"
            );
            return "rcode";
        }
        Verdict::Reject(rcode, signer) => {
            assert_eq!(rcode, ResponseCode::NotAuth);
            (signer, false)
        }
        Verdict::Verified(signer) => {
            check_signature(data);
            (signer, true)
        }
    };
    // The response: the request's header and questions, as a response with no records.
    let mut reply = data[..questions_end].to_vec();
    reply[2] |= 0x80;
    reply[6..12].fill(0);
    let before = reply.len();
    let overhead = signer.overhead();
    signer.sign(&mut reply).expect("a response is signed");
    let added = reply.len() - before;
    if verified {
        assert_eq!(added, overhead, "the signer's overhead is exact");
    } else {
        assert!(added <= overhead, "{added} bytes added, {overhead} announced");
    }
    let signed = Message::from_bytes(&reply).expect("the signed response parses");
    assert!(
        signed
            .additionals
            .last()
            .is_some_and(|r| matches!(r.data, RData::TSIG(_))),
        "the signed response ends with a TSIG"
    );
    if verified { "verified" } else { "reject" }
}

/// The check of a verified request, through hickory-proto's reading of TSIG (as its
/// `signed_bitmessage_to_buf` makes the signed bytes): panics unless `wire` carries a TSIG of a
/// configured key that verifies at [`NOW`].
fn check_signature(wire: &[u8]) {
    let mut d = BinDecoder::new(wire);
    let Header {
        mut metadata,
        mut counts,
    } = Header::read(&mut d).expect("a verified request has a header");
    counts.additionals = counts
        .additionals
        .checked_sub(1)
        .expect("a verified request has an additional record");
    let start = wire.len() - d.len();
    for _ in 0..counts.queries {
        Query::read(&mut d).expect("questions");
    }
    let records = usize::from(counts.answers) + usize::from(counts.authorities);
    let op = metadata.op_code;
    Message::read_records(&mut d, records, false, op).expect("answer and authority");
    let (before, _, _) =
        Message::read_records(&mut d, usize::from(counts.additionals), true, op).expect("additional");
    assert!(
        !before.iter().any(|r| r.record_type() == RecordType::TSIG),
        "a TSIG before the last additional record"
    );
    let end = wire.len() - d.len();
    let (last, _, _) = Message::read_records(&mut d, 1, true, op).expect("the last record");
    let tsig = last.first().expect("the last additional record");
    let RData::TSIG(rdata) = &tsig.data else {
        panic!("a verified request's last additional record is {:?}", tsig.data);
    };
    assert_eq!(tsig.dns_class, DNSClass::ANY, "a TSIG's class is ANY");
    let key_name = tsig.name.to_lowercase();
    let (_, key) = KEYS
        .iter()
        .find(|(name, _)| Name::from_ascii(name).expect("a key name") == key_name)
        .expect("a verified request is signed with a configured key");
    let mut algorithm = rdata.algorithm.to_name().to_lowercase();
    algorithm.set_fqdn(true);
    let algorithm =
        Algorithm::from_name(&algorithm.to_ascii()).expect("a verified request names a supported algorithm");
    assert!(
        NOW.abs_diff(rdata.time) <= u64::from(rdata.fudge),
        "time {} fudge {}",
        rdata.time,
        rdata.fudge
    );
    metadata.id = rdata.oid;
    let mut signed = Vec::with_capacity(wire.len());
    let mut e = BinEncoder::new(&mut signed);
    hickory_proto::serialize::binary::BinEncodable::emit(&Header { metadata, counts }, &mut e)
        .expect("header");
    e.emit_vec(&wire[start..end]).expect("body");
    e.set_name_encoding(NameEncoding::UncompressedLowercase);
    rdata.emit_tsig_for_mac(&mut e, &tsig.name).expect("variables");
    let want = algorithm.mac(key, &[&signed]);
    let mac = &rdata.mac;
    assert!(
        mac.len() >= (algorithm.mac_len() / 2).max(10) && mac.len() <= want.len(),
        "a MAC of {} bytes",
        mac.len()
    );
    assert!(same(mac, &want[..mac.len()]), "the MAC verifies");
}
