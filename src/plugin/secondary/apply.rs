//! What a transfer's records make of the zone held: the new version from a whole transfer
//! (AXFR, or IXFR answered in AXFR form), or the held version with an IXFR's differences
//! applied in order (RFC 1995 section 4). A response that does not fit the version held (a
//! difference from another serial, a record removed that is not there) is refused, so the
//! zone held is never replaced by a guess.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use hickory_proto::rr::{Name, Record, RecordType};
use hickory_proto::serialize::binary::BinEncodable;

use super::xfr::serial_of;
use crate::plugin::kit::{ZoneData, ZoneError};

/// Why a transfer's records were not taken.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The records do not make a valid zone.
    #[error(transparent)]
    Zone(#[from] ZoneError),
    /// The differences do not start from the version held, or do not fit it.
    #[error("{from}: {reason}")]
    Mismatch {
        /// Where the records came from.
        from: String,
        /// What does not fit.
        reason: String,
    },
}

/// A record as a set member: owner (lower-case), type and data, not its TTL (RFC 1995 removes
/// records by value).
fn key(r: &Record) -> (Name, RecordType, Vec<u8>) {
    (
        r.name.to_lowercase(),
        r.record_type(),
        r.data.to_bytes().unwrap_or_default(),
    )
}

/// The zone `origin` the transfer `records` bring, from `source`, given the version held:
/// `None` for a response that only says the held version is current.
pub fn apply(
    held: Option<&ZoneData>,
    records: Vec<Record>,
    source: &str,
    origin: &Name,
) -> Result<Option<ZoneData>, ApplyError> {
    let mismatch = |reason: String| ApplyError::Mismatch {
        from: source.to_owned(),
        reason,
    };
    let path = Path::new(source);
    if records.len() == 1 {
        return Ok(None);
    }
    let incremental = records.len() > 2 && serial_of(&records[1]).is_some();
    if !incremental {
        // The SOA, the zone, the SOA again: the closing copy goes.
        let mut records = records;
        records.pop();
        return Ok(Some(ZoneData::from_records(records, path, origin)?));
    }
    let Some(held) = held else {
        return Err(mismatch("differences came for a zone not held".into()));
    };
    // Each difference as the keys it removes and the records it adds; then one pass over the
    // held version copies what stays (the new version must own its records; nothing else of
    // the held one is copied).
    let body = &records[1..records.len() - 1];
    let mut serial = held.serial();
    let mut removed: HashSet<(Name, RecordType, Vec<u8>)> = HashSet::new();
    let mut added: HashMap<(Name, RecordType, Vec<u8>), &Record> = HashMap::new();
    let mut soa = None;
    let mut removing = false;
    for r in body {
        if let Some(s) = serial_of(r) {
            if !removing {
                if s != serial {
                    return Err(mismatch(format!(
                        "a difference starts at serial {s}, the zone held is at {serial}"
                    )));
                }
                removing = true;
            } else {
                serial = s;
                soa = Some(r.clone());
                removing = false;
            }
            continue;
        }
        let k = key(r);
        if removing {
            // A record added by an earlier difference and removed by a later one.
            if added.remove(&k).is_none() && !removed.insert(k) {
                return Err(mismatch(format!(
                    "the difference to serial after {serial} removes {} {} twice",
                    r.name,
                    r.record_type()
                )));
            }
        } else {
            removed.remove(&k);
            added.insert(k, r);
        }
    }
    let Some(soa) = soa.filter(|_| !removing) else {
        return Err(mismatch("the differences end inside a difference".into()));
    };
    // The last difference brings the zone to the serial the response starts with (RFC 1995
    // section 4). Another serial would be held as the zone's, and the next IXFR asked from a
    // version the primary never had (found by the `secondary_transfer` fuzz target).
    let newest = serial_of(&records[0]);
    if newest != Some(serial) {
        return Err(mismatch(format!(
            "the differences end at serial {serial}, the response announces {}",
            newest.unwrap_or_default()
        )));
    }
    let mut all = Vec::with_capacity(held.records() + added.len());
    all.push(soa);
    let mut found = 0;
    for r in held.iter().skip(1) {
        let k = key(r);
        if removed.contains(&k) {
            found += 1;
        } else if !added.contains_key(&k) {
            all.push(r.clone());
        }
    }
    if found != removed.len() {
        return Err(mismatch(format!(
            "the differences remove {} records the zone does not hold",
            removed.len() - found
        )));
    }
    all.extend(added.into_values().cloned());
    Ok(Some(ZoneData::from_records(all, path, origin)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::secondary::xfr::tests::{a, soa};

    fn origin() -> Name {
        Name::from_ascii("example.org.").unwrap()
    }

    fn addresses(z: &ZoneData) -> Vec<String> {
        let mut v: Vec<String> = z
            .transfer()
            .iter()
            .filter(|r| r.record_type() == RecordType::A)
            .map(|r| r.data.to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn differences_apply_in_order_and_a_mismatch_keeps_nothing() {
        let held = apply(None, vec![soa(3), a(1), soa(3)], "test", &origin())
            .unwrap()
            .unwrap();
        assert_eq!(held.serial(), 3);
        let seq = vec![soa(5), soa(3), a(1), soa(4), a(2), soa(4), soa(5), a(3), soa(5)];
        let next = apply(Some(&held), seq, "test", &origin()).unwrap().unwrap();
        assert_eq!(next.serial(), 5);
        assert_eq!(addresses(&next), ["192.0.2.2", "192.0.2.3"]);
        // Up to date.
        assert!(
            apply(Some(&held), vec![soa(3)], "test", &origin())
                .unwrap()
                .is_none()
        );
        // From another serial, or removing what is not there: refused.
        let e = apply(
            Some(&held),
            vec![soa(5), soa(2), soa(5), a(3), soa(5)],
            "t",
            &origin(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("starts at serial 2"), "{e}");
        let e = apply(
            Some(&held),
            vec![soa(4), soa(3), a(9), soa(4), soa(4)],
            "t",
            &origin(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("does not hold"), "{e}");
        // Ending at another serial than the response announces (a later one, which would have
        // been held as the zone's and left it stuck): refused.
        let e = apply(
            Some(&held),
            vec![soa(5), soa(3), a(1), soa(786_438), a(2), soa(5)],
            "t",
            &origin(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("the differences end at serial 786438, the response announces 5"),
            "{e}"
        );
        // Added by one difference and removed by the next: gone, not an error.
        let seq = vec![soa(5), soa(3), soa(4), a(7), soa(4), a(7), soa(5), soa(5)];
        let next = apply(Some(&held), seq, "test", &origin()).unwrap().unwrap();
        assert_eq!(addresses(&next), ["192.0.2.1"]);
    }
}
