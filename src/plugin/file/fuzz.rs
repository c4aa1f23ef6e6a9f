//! The body of the `zone_file` fuzz target (`fuzz/`), kept beside the code it drives so
//! `cargo test` replays its committed corpus through the same code
//! (`tests/integration/fuzz_corpus.rs`): arbitrary text as a zone file, through the parser,
//! the lookup and the transfer. Not part of the server.

use std::path::Path;

use hickory_proto::rr::{Name, RecordType};

use super::zone::{Lookup, ZoneData};

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
