//! A zone's journal: the differences between its successive versions (RFC 1995, incremental
//! zone transfer), shared by `file` (a reload that reads a later serial) and `kubernetes` (each
//! transfer of a later serial). Each step records what it removed and added; an IXFR from a
//! serial the journal reaches back to is answered with the differences since
//! ([`Journal::since`]), any other with the whole zone. Bounded: at most
//! [`MAX_CHANGES`] versions and [`MAX_RECORDS`] records of differences, the oldest dropped first
//! (a secondary further behind gets the whole zone, as RFC 1995 section 4 allows).

use std::collections::{HashSet, VecDeque};

use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::{RData, Record};
use hickory_proto::serialize::binary::BinEncodable;

/// The most versions a journal keeps.
pub const MAX_CHANGES: usize = 64;
/// The most records (removed and added, all versions) a journal keeps.
pub const MAX_RECORDS: usize = 100_000;

/// One version's differences from the one before.
#[derive(Debug, Clone)]
struct Change {
    /// The SOA of the version before.
    from: Record,
    /// The SOA of this version.
    to: Record,
    removed: Vec<Record>,
    added: Vec<Record>,
}

impl Change {
    fn records(&self) -> usize {
        self.removed.len() + self.added.len()
    }
}

/// The serial of a SOA record (0 for anything else, which a journal never holds).
fn serial(soa: &Record) -> u32 {
    match &soa.data {
        RData::SOA(SOA { serial, .. }) => *serial,
        _ => 0,
    }
}

/// The differences of one zone's versions, oldest first. Invariant: each change's `from` is
/// the `to` of the change before it (a reload that is not a later serial of the same zone
/// clears the journal), so the changes from any kept serial on lead to the current version.
#[derive(Debug, Default)]
pub struct Journal {
    changes: VecDeque<Change>,
    records: usize,
}

impl Journal {
    /// Records the step from `before` to `after`, whole transfers (SOA first and last) of a
    /// zone and of a later version of it.
    pub fn record(&mut self, before: &[Record], after: &[Record]) {
        if before.len() < 2 || after.len() < 2 {
            return;
        }
        fn body(all: &[Record]) -> &[Record] {
            all.get(1..all.len().saturating_sub(1)).unwrap_or_default()
        }
        let (from, to) = (before[0].clone(), after[0].clone());
        let (before, after) = (body(before), body(after));
        // The zone's records compared as sets of their wire form (owner as written, TTL,
        // class, type, data), each encoded once; the apex SOA is the version marker, not a
        // difference. Only the records that differ are copied.
        let key = |r: &Record| r.to_bytes().unwrap_or_else(|_| r.to_string().into_bytes());
        let (before_keys, after_keys): (Vec<Vec<u8>>, Vec<Vec<u8>>) =
            (before.iter().map(key).collect(), after.iter().map(key).collect());
        fn set(keys: &[Vec<u8>]) -> HashSet<&[u8]> {
            keys.iter().map(Vec::as_slice).collect()
        }
        let (had, has) = (set(&before_keys), set(&after_keys));
        let only = |records: &[Record], keys: &[Vec<u8>], other: &HashSet<&[u8]>| -> Vec<Record> {
            records
                .iter()
                .zip(keys)
                .filter(|(_, k)| !other.contains(k.as_slice()))
                .map(|(r, _)| r.clone())
                .collect()
        };
        let removed = only(before, &before_keys, &has);
        let added = only(after, &after_keys, &had);
        if self
            .changes
            .back()
            .is_some_and(|c| serial(&c.to) != serial(&from))
        {
            self.clear();
        }
        let change = Change {
            from,
            to,
            removed,
            added,
        };
        self.records += change.records();
        self.changes.push_back(change);
        while self.changes.len() > MAX_CHANGES || self.records > MAX_RECORDS {
            let Some(gone) = self.changes.pop_front() else {
                break;
            };
            self.records -= gone.records();
        }
    }

    /// Forgets every change (the zone was replaced by one that does not follow it).
    pub fn clear(&mut self) {
        self.changes.clear();
        self.records = 0;
    }

    /// Versions kept.
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// True when no version is kept.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The answer to an IXFR from a secondary that holds version `held`, when the journal
    /// reaches back to it and it is not the current one (RFC 1995 section 4): the current
    /// SOA; then for each version since, the SOA before it, the records it removed, its own
    /// SOA and the records it added; then the current SOA again. `None` otherwise.
    pub fn since(&self, held: u32) -> Option<Vec<Record>> {
        let first = self.changes.iter().position(|c| serial(&c.from) == held)?;
        let current = self.changes.back()?.to.clone();
        let mut out = vec![current.clone()];
        for c in self.changes.iter().skip(first) {
            out.push(c.from.clone());
            out.extend(c.removed.iter().cloned());
            out.push(c.to.clone());
            out.extend(c.added.iter().cloned());
        }
        out.push(current);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Name;
    use hickory_proto::rr::rdata::{A, TXT};

    /// A transfer of `example.org.` at `serial`: SOA, www's address, `extra` TXT names, SOA.
    fn zone(serial: u32, www: &str, extra: &str) -> Vec<Record> {
        let n = |s: &str| Name::from_ascii(s).unwrap();
        let soa = Record::from_rdata(
            n("example.org."),
            300,
            RData::SOA(SOA::new(
                n("ns.example.org."),
                n("hm.example.org."),
                serial,
                7200,
                3600,
                1209600,
                300,
            )),
        );
        let mut out = vec![soa.clone()];
        out.push(Record::from_rdata(
            n("www.example.org."),
            300,
            RData::A(A(www.parse().unwrap())),
        ));
        if !extra.is_empty() {
            out.push(Record::from_rdata(
                n(extra),
                300,
                RData::TXT(TXT::new(vec!["hello".to_owned()])),
            ));
        }
        out.push(soa);
        out
    }

    fn shown(rs: &[Record]) -> Vec<String> {
        rs.iter()
            .map(|r| match &r.data {
                RData::SOA(s) => format!("SOA {}", s.serial),
                _ => format!("{} {}", r.name, r.data),
            })
            .collect()
    }

    #[test]
    fn differences_since_a_held_serial_in_rfc_1995_order() {
        let mut j = Journal::default();
        let (v1, v2, v3) = (
            zone(1, "192.0.2.10", ""),
            zone(2, "192.0.2.20", ""),
            zone(3, "192.0.2.20", "new.example.org."),
        );
        j.record(&v1, &v2);
        j.record(&v2, &v3);
        assert_eq!(
            shown(&j.since(1).unwrap()),
            [
                "SOA 3",
                "SOA 1",
                "www.example.org. 192.0.2.10",
                "SOA 2",
                "www.example.org. 192.0.2.20",
                "SOA 2",
                "SOA 3",
                "new.example.org. hello",
                "SOA 3",
            ]
        );
        assert_eq!(shown(&j.since(2).unwrap()).len(), 5);
        // Not reached back to, or the current version: no differences.
        assert!(j.since(0).is_none());
        assert!(j.since(3).is_none());
        // A version that does not follow the last one starts the journal again.
        j.record(&zone(7, "192.0.2.1", ""), &zone(8, "192.0.2.2", ""));
        assert_eq!(j.len(), 1);
        assert!(j.since(1).is_none());
        assert!(j.since(7).is_some());
    }

    #[test]
    fn it_keeps_at_most_its_bound_of_versions() {
        let mut j = Journal::default();
        for s in 1..=(MAX_CHANGES as u32 + 10) {
            j.record(&zone(s, "192.0.2.1", ""), &zone(s + 1, "192.0.2.2", ""));
        }
        assert_eq!(j.len(), MAX_CHANGES);
        assert!(j.since(1).is_none(), "the oldest were dropped");
        assert!(j.since(11).is_some());
    }
}
