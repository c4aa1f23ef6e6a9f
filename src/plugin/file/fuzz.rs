//! The body of the `zone_file` fuzz target (`fuzz/`), kept beside the code it drives so
//! `cargo test` replays its committed corpus through the same code
//! (`tests/integration/project/fuzz_corpus.rs`): arbitrary text as a zone file, through the parser,
//! the lookup and the transfer. Not part of the server.

use std::path::Path;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::BinDecodable;

use crate::plugin::kit::{Lookup, ZoneData};

/// Most owner names one input looks up (bounds the work per input).
const MAX_OWNERS: usize = 64;

/// A zone file (the `file` plugin's input) read as zone `example.org.`, then every owner name
/// and a name under each looked up for a few types, and the zone made into a transfer.
/// Invariants: no panic; a transfer starts and ends with the SOA; an answer found for a name
/// and type starts with a record of that type, a CNAME or a DNAME (RFC 6672), or is a
/// referral.
pub fn zone_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let origin = Name::from_ascii("example.org.").expect("a name");
    // Relative $INCLUDEs resolve under a folder that does not exist.
    let Ok(zone) = ZoneData::parse(text, Path::new("/nonexistent-fuzz-dir/db.example.org"), &origin) else {
        return;
    };
    check_zone(&zone);
}

/// The checks of [`zone_file`] on a zone read.
fn check_zone(zone: &ZoneData) {
    let records = zone.transfer();
    assert_eq!(records.first().map(|r| r.record_type()), Some(RecordType::SOA));
    assert_eq!(records.last().map(|r| r.record_type()), Some(RecordType::SOA));
    let below = Name::from_ascii("fuzz").expect("a label");
    for owner in records.iter().map(|r| r.name.clone()).take(MAX_OWNERS) {
        let child = below.clone().append_domain(&owner).ok();
        for name in std::iter::once(owner).chain(child) {
            for qtype in [
                RecordType::A,
                RecordType::CNAME,
                RecordType::NS,
                RecordType::MX,
                RecordType::ANY,
            ] {
                if let Lookup::Answer { answers, .. } = zone.lookup(&name, qtype)
                    && let Some(first) = answers.first()
                {
                    assert!(
                        qtype == RecordType::ANY
                            || first.record_type() == qtype
                            || first.record_type() == RecordType::CNAME
                            || first.record_type() == RecordType::DNAME,
                        "{name} {qtype}: {first:?}"
                    );
                }
            }
        }
    }
}

/// What [`zone_file_dname`] puts before its input: the apex's SOA and NS, and DNAMEs below it
/// (out of the zone, into it, to another DNAME, and to a name under itself).
pub const DNAME_PREFIX: &str = "$ORIGIN example.org.
$TTL 300
@ IN SOA ns.example.org. hostmaster.example.org. 1 7200 3600 1209600 300
@ IN NS ns.example.org.
ns IN A 192.0.2.53
out IN DNAME example.net.
in IN DNAME sub.example.org.
www.sub IN A 192.0.2.9
hop IN DNAME in.example.org.
self IN DNAME deeper.self.example.org.
";

/// Names asked under each DNAME owner: one label, two, and one long label (63 octets).
const UNDER: [&str; 3] = [
    "fuzz",
    "a.b",
    "x123456789012345678901234567890123456789012345678901234567890123",
];

/// Text after [`DNAME_PREFIX`] (so a zone with DNAMEs at and below the apex, and whatever the
/// input adds: more DNAMEs, records under them, a DNAME at the apex), read as zone
/// `example.org.` and checked as [`zone_file`] checks; then names under each DNAME owner asked
/// for A, CNAME, DNAME, TXT and ANY. Invariants: those of [`zone_file`]; an answer under a
/// DNAME is a referral (a zone cut above it), or starts with a DNAME of the name's ancestor
/// (the owner or one above it), then, unless the substitution is too long (YXDOMAIN, the
/// DNAME alone), the CNAME from the name asked to the name with that DNAME's owner replaced by
/// its target (RFC 6672 section 2.2).
pub fn zone_file_dname(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let origin = Name::from_ascii("example.org.").expect("a name");
    let Ok(zone) = ZoneData::parse(
        &format!("{DNAME_PREFIX}{text}"),
        Path::new("/nonexistent-fuzz-dir/db.example.org"),
        &origin,
    ) else {
        return;
    };
    check_zone(&zone);
    let owners: Vec<Name> = zone
        .transfer()
        .iter()
        .filter(|r| r.record_type() == RecordType::DNAME)
        .map(|r| r.name.clone())
        .take(MAX_OWNERS)
        .collect();
    for owner in owners {
        for under in UNDER {
            let Ok(qname) = Name::from_ascii(under).and_then(|u| u.append_domain(&owner)) else {
                continue;
            };
            for qtype in [
                RecordType::A,
                RecordType::CNAME,
                RecordType::DNAME,
                RecordType::TXT,
                RecordType::ANY,
            ] {
                check_under_dname(&zone, &qname, qtype);
            }
        }
    }
}

/// A DNAME record's target (its data: the target's uncompressed wire form).
fn dname_target(r: &Record) -> Name {
    let RData::Unknown { rdata, .. } = &r.data else {
        panic!("a DNAME with data {:?}", r.data);
    };
    Name::from_bytes(&rdata.anything).expect("a DNAME's data is a name")
}

/// The checks of [`zone_file_dname`] on `qname`, a name strictly below a DNAME's owner.
fn check_under_dname(zone: &ZoneData, qname: &Name, qtype: RecordType) {
    let Lookup::Answer { rcode, answers, .. } = zone.lookup(qname, qtype) else {
        return;
    };
    let dname = answers
        .first()
        .unwrap_or_else(|| panic!("{qname} {qtype}: {rcode:?} with no answer below a DNAME"));
    assert_eq!(
        dname.record_type(),
        RecordType::DNAME,
        "{qname} {qtype}: {answers:?}"
    );
    assert!(
        dname.name.zone_of(qname) && dname.name != *qname,
        "{qname} {qtype}: a DNAME of {}",
        dname.name
    );
    let target = dname_target(dname);
    let keep = qname.num_labels() - dname.name.num_labels();
    let substituted = Name::from_labels(qname.iter().take(usize::from(keep)))
        .expect("labels of a name")
        .append_domain(&target)
        .ok()
        .filter(|n| n.iter().map(|l| l.len() + 1).sum::<usize>() < 255);
    let Some(substituted) = substituted else {
        assert_eq!(rcode, ResponseCode::YXDomain, "{qname} {qtype}: {answers:?}");
        assert_eq!(answers.len(), 1, "{qname} {qtype}: {answers:?}");
        return;
    };
    let cname = answers
        .get(1)
        .unwrap_or_else(|| panic!("{qname} {qtype}: {rcode:?} {answers:?}"));
    assert_eq!(cname.name, *qname, "{qname} {qtype}: {answers:?}");
    let RData::CNAME(to) = &cname.data else {
        panic!("{qname} {qtype}: {answers:?}");
    };
    assert_eq!(
        to.0.to_lowercase(),
        substituted.to_lowercase(),
        "{qname} {qtype}: {answers:?}"
    );
}
