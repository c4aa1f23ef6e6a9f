//! Writing records into a response with name compression (RFC 1035 §4.1.4), directly into the
//! output buffer.
//!
//! [`Suffixes`] is the compression table: every name suffix written so far, once, as a tree
//! (a suffix's parent is the suffix one label shorter, the root's children are top-level
//! labels), each with the offset of one place it was written. A name is looked up from its
//! last label towards its first, so finding the longest written suffix costs a walk of the
//! tree, not a comparison with every name in the message. Labels compare byte for byte:
//! a pointer always leads to the exact spelling it replaces, so the case the client asked
//! in is kept.
//!
//! Entries are only appended, each at the head of its parent's child list, so the entries a
//! record added can be taken back in reverse order when that record does not fit
//! ([`Suffixes::truncate`]).
//!
//! Which names are compressed is RFC 3597 §4's list, as hickory-proto and CoreDNS do it: the
//! owner, and the names in CNAME, NS, PTR, MX and SOA data. An SRV target is written in full
//! (RFC 2782) but recorded, so a later glue record's owner points at it. Record data of any
//! other type is written by hickory-proto.

use hickory_proto::ProtoError;
use hickory_proto::rr::{Name, RData, Record};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

/// How many suffixes one response records; names written after that are still compressed
/// against those recorded, and simply not recorded themselves.
const CAPACITY: usize = 128;
/// "No entry": the root as a parent, the end of a child list.
const NONE: u16 = u16::MAX;
/// A compression pointer holds a 14-bit offset.
const POINTER_LIMIT: usize = 0x4000;
/// Labels of a name kept on the stack while it is written.
const INLINE_LABELS: usize = 16;

#[derive(Debug, Clone, Copy)]
struct Suffix {
    /// Where the suffix's first label starts in the output.
    at: u16,
    parent: u16,
    first_child: u16,
    next_sibling: u16,
}

const EMPTY: Suffix = Suffix {
    at: 0,
    parent: NONE,
    first_child: NONE,
    next_sibling: NONE,
};

/// The compression table of one response (see the module comment).
#[derive(Debug)]
pub(super) struct Suffixes {
    list: [Suffix; CAPACITY],
    len: usize,
    root_first: u16,
    /// Where the question's name is written, whole (no pointer), when it is: most owners are
    /// the question itself and point there without a walk of the table.
    question_at: Option<u16>,
}

thread_local! {
    /// One table per thread, emptied for each response ([`Suffixes::with_empty`]): a new one
    /// would be a kilobyte to clear each time.
    static TABLE: std::cell::RefCell<Suffixes> = std::cell::RefCell::new(Suffixes::new());
}

impl Suffixes {
    pub(super) fn new() -> Self {
        Self {
            list: [EMPTY; CAPACITY],
            len: 0,
            root_first: NONE,
            question_at: None,
        }
    }

    /// Runs `f` with this thread's table, empty.
    pub(super) fn with_empty<T>(f: impl FnOnce(&mut Self) -> T) -> T {
        TABLE.with(|table| match table.try_borrow_mut() {
            Ok(mut table) => {
                table.truncate(0);
                f(&mut table)
            }
            // Only if `f` encoded a response inside another: a table of its own.
            Err(_) => f(&mut Self::new()),
        })
    }

    /// Entries recorded so far: a mark to [`truncate`](Self::truncate) back to.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Forgets every entry recorded after `len` (the output they point into was cut); at 0,
    /// the question too.
    pub(super) fn truncate(&mut self, len: usize) {
        if len == 0 {
            self.question_at = None;
        }
        while self.len > len {
            self.len -= 1;
            let s = self.list[self.len];
            // `s` is its parent's first child: everything added after it is gone already.
            match s.parent {
                NONE => self.root_first = s.next_sibling,
                p => self.list[usize::from(p)].first_child = s.next_sibling,
            }
        }
    }

    /// Records the uncompressed name that starts at `at` in `out` (the question's name,
    /// written as sent), into an empty table. A name that holds a pointer, or runs past `out`,
    /// is not recorded; of a name of more than [`INLINE_LABELS`] labels, the last ones are.
    pub(super) fn record_question(&mut self, out: &[u8], at: usize) {
        debug_assert_eq!(self.len, 0, "the question is the first name recorded");
        // Where each label starts, the last ones kept when there are more.
        let mut starts = [0usize; INLINE_LABELS];
        let mut n = 0;
        let mut pos = at;
        loop {
            match out.get(pos) {
                Some(0) => break,
                Some(&l) if l & 0xC0 == 0 => {
                    starts[n % INLINE_LABELS] = pos;
                    n += 1;
                    pos += 1 + usize::from(l);
                }
                _ => return,
            }
        }
        let last_first = (n.saturating_sub(INLINE_LABELS)..n).rev();
        self.add_labels(NONE, last_first.map(|i| starts[i % INLINE_LABELS]));
        self.question_at = u16::try_from(at)
            .ok()
            .filter(|at| usize::from(*at) < POINTER_LIMIT);
    }

    /// True when `name` is spelt exactly as the question written at `at` in `out`: one pass
    /// over its labels, comparing each with the written one.
    fn is_question(out: &[u8], at: u16, name: &Name) -> bool {
        let mut pos = usize::from(at);
        for label in name.iter() {
            let Some(&len) = out.get(pos) else {
                return false;
            };
            let len = usize::from(len);
            if len != label.len() || out.get(pos + 1..pos + 1 + len) != Some(label) {
                return false;
            }
            pos += 1 + len;
        }
        out.get(pos) == Some(&0)
    }

    /// Records labels written at `starts` (given from the name's last label to its first)
    /// under `parent`: each label's parent is the one after it. Stops at the first that
    /// cannot be recorded, since the labels before it would have no parent.
    fn add_labels(&mut self, mut parent: u16, starts: impl Iterator<Item = usize>) {
        for start in starts {
            match self.add(start, parent) {
                Some(added) => parent = added,
                None => return,
            }
        }
    }

    fn child(&self, out: &[u8], parent: u16, label: &[u8]) -> Option<u16> {
        let mut c = match parent {
            NONE => self.root_first,
            p => self.list[usize::from(p)].first_child,
        };
        while c != NONE {
            let s = &self.list[usize::from(c)];
            let written = label_at(out, s.at);
            // Most siblings differ in length or first byte: no call to compare the rest.
            if written.len() == label.len() && written.first() == label.first() && written == label {
                return Some(c);
            }
            c = s.next_sibling;
        }
        None
    }

    fn add(&mut self, at: usize, parent: u16) -> Option<u16> {
        if self.len == CAPACITY || at >= POINTER_LIMIT {
            return None;
        }
        let at = u16::try_from(at).ok()?;
        let index = u16::try_from(self.len).ok()?;
        let head = match parent {
            NONE => &mut self.root_first,
            p => &mut self.list[usize::from(p)].first_child,
        };
        let next_sibling = std::mem::replace(head, index);
        self.list[self.len] = Suffix {
            at,
            parent,
            first_child: NONE,
            next_sibling,
        };
        self.len += 1;
        Some(index)
    }

    /// The longest suffix of `labels` already recorded: how many labels it has, and its entry.
    fn longest(&self, out: &[u8], labels: &[&[u8]]) -> (usize, u16) {
        let mut parent = NONE;
        let mut matched = 0;
        for label in labels.iter().rev() {
            match self.child(out, parent, label) {
                Some(found) => {
                    parent = found;
                    matched += 1;
                }
                None => break,
            }
        }
        (matched, parent)
    }

    /// Writes `name` at the end of `out`: its labels up to the longest suffix already written,
    /// then a pointer to it (`compress`), or every label (`!compress`). The new labels are
    /// recorded either way.
    pub(super) fn write_name(&mut self, out: &mut Vec<u8>, name: &Name, compress: bool) {
        // The question itself (most owners): a pointer to it, nothing new to record.
        if compress
            && let Some(at) = self.question_at
            && Self::is_question(out, at, name)
        {
            out.extend_from_slice(&(0xC000 | at).to_be_bytes());
            return;
        }
        // The labels, once (hickory-proto's iterator is dear backwards); names of more labels
        // than fit on the stack are rare and take a `Vec`.
        let mut inline: [&[u8]; INLINE_LABELS] = [&[]; INLINE_LABELS];
        let mut spilled: Vec<&[u8]> = Vec::new();
        let mut n = 0;
        for label in name.iter() {
            if n == INLINE_LABELS {
                spilled = name.iter().collect();
                break;
            }
            inline[n] = label;
            n += 1;
        }
        let labels: &[&[u8]] = if spilled.is_empty() {
            &inline[..n]
        } else {
            &spilled
        };
        let (matched, parent) = self.longest(out, labels);
        let own = labels.len() - matched;
        let pointer = compress && matched > 0;
        let written = if pointer { own } else { labels.len() };
        let first = out.len();
        for label in &labels[..written] {
            // A label of a parsed `Name` is at most 63 bytes.
            out.push(u8::try_from(label.len()).unwrap_or(63));
            out.extend_from_slice(label);
        }
        if pointer {
            // 0xC000 | offset: a compression pointer. Recorded offsets are below 0x4000.
            let at = self.list[usize::from(parent)].at;
            out.extend_from_slice(&(0xC000 | at).to_be_bytes());
        } else {
            out.push(0);
        }
        // The name's own labels, from the last; where each starts follows from the lengths of
        // those before it.
        let end = first + labels[..own].iter().map(|l| 1 + l.len()).sum::<usize>();
        let last_first = labels[..own].iter().rev().scan(end, |end, label| {
            *end -= 1 + label.len();
            Some(*end)
        });
        self.add_labels(parent, last_first);
    }

    /// Two bytes that stand for the owner a record written at `at` in `out` starts with, in a
    /// later record of the same owner: that owner's pointer when it was written as one, else a
    /// pointer to its first label. `None` for the root, and for an owner out of a pointer's
    /// reach.
    pub(super) fn owner_pointer(out: &[u8], at: usize) -> Option<[u8; 2]> {
        match *out.get(at..at + 2)? {
            [0, _] => None,
            [hi, lo] if hi & 0xC0 == 0xC0 => Some([hi, lo]),
            _ => {
                let at = u16::try_from(at)
                    .ok()
                    .filter(|at| usize::from(*at) < POINTER_LIMIT)?;
                Some((0xC000 | at).to_be_bytes())
            }
        }
    }

    /// Writes `r` at the end of `out`: owner, type, class, TTL, length and data. The owner is
    /// `owner` when given (an [`owner_pointer`](Self::owner_pointer) to an earlier record of the
    /// same owner), else `r`'s name, compressed.
    pub(super) fn write_record(
        &mut self,
        out: &mut Vec<u8>,
        r: &Record,
        owner: Option<[u8; 2]>,
    ) -> Result<(), ProtoError> {
        match owner {
            Some(pointer) => out.extend_from_slice(&pointer),
            None => self.write_name(out, &r.name, true),
        }
        out.extend_from_slice(&u16::from(r.record_type()).to_be_bytes());
        out.extend_from_slice(&u16::from(r.dns_class).to_be_bytes());
        out.extend_from_slice(&r.ttl.to_be_bytes());
        let length_at = out.len();
        out.extend_from_slice(&[0, 0]);
        match &r.data {
            RData::A(a) => out.extend_from_slice(&a.0.octets()),
            RData::AAAA(a) => out.extend_from_slice(&a.0.octets()),
            RData::CNAME(n) => self.write_name(out, &n.0, true),
            RData::PTR(n) => self.write_name(out, &n.0, true),
            RData::NS(n) => self.write_name(out, &n.0, true),
            RData::MX(mx) => {
                out.extend_from_slice(&mx.preference.to_be_bytes());
                self.write_name(out, &mx.exchange, true);
            }
            RData::SRV(srv) => {
                out.extend_from_slice(&srv.priority.to_be_bytes());
                out.extend_from_slice(&srv.weight.to_be_bytes());
                out.extend_from_slice(&srv.port.to_be_bytes());
                self.write_name(out, &srv.target, false);
            }
            RData::SOA(soa) => {
                self.write_name(out, &soa.mname, true);
                self.write_name(out, &soa.rname, true);
                out.extend_from_slice(&soa.serial.to_be_bytes());
                out.extend_from_slice(&soa.refresh.to_be_bytes());
                out.extend_from_slice(&soa.retry.to_be_bytes());
                out.extend_from_slice(&soa.expire.to_be_bytes());
                out.extend_from_slice(&soa.minimum.to_be_bytes());
            }
            // An update's empty data (RFC 2136) is written as length 0, as hickory-proto does.
            RData::Update0(_) => {}
            other => {
                let at = u32::try_from(out.len())
                    .map_err(|_| ProtoError::Message("response longer than 4 GiB"))?;
                let mut enc = BinEncoder::with_offset(out, at);
                other.emit(&mut enc)?;
            }
        }
        let length = u16::try_from(out.len() - length_at - 2)
            .map_err(|_| ProtoError::Message("record data longer than 65535 bytes"))?;
        out[length_at..length_at + 2].copy_from_slice(&length.to_be_bytes());
        Ok(())
    }
}

/// The label whose length byte is at `at` in `out` (a recorded suffix: always in bounds).
fn label_at(out: &[u8], at: u16) -> &[u8] {
    let at = usize::from(at);
    let len = out.get(at).map_or(0, |l| usize::from(*l));
    out.get(at + 1..at + 1 + len).unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, CNAME, SOA, SRV};
    use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
    use std::net::Ipv4Addr;

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    /// Reads the name at `at` in `out`, following pointers (hickory-proto's decoder).
    fn read_at(out: &[u8], at: usize) -> Name {
        let mut d = BinDecoder::new(out);
        d.read_slice(at).unwrap();
        Name::read(&mut d).unwrap()
    }

    /// The two bytes for a later record of the same owner: its pointer when the owner was
    /// written as one, a pointer to its labels otherwise; nothing for the root or past the
    /// reach of a pointer, where the owner is written again.
    #[test]
    fn an_owner_is_pointed_at_as_it_was_written() {
        let mut t = Suffixes::new();
        let mut out = vec![0u8; 12];
        let at = out.len();
        t.write_name(&mut out, &n("web.ns.svc.cluster.local."), true);
        assert_eq!(Suffixes::owner_pointer(&out, at), Some([0xC0, 12]));
        let again = out.len();
        t.write_name(&mut out, &n("web.ns.svc.cluster.local."), true);
        assert_eq!(out.len() - again, 2);
        assert_eq!(Suffixes::owner_pointer(&out, again), Some([0xC0, 12]));
        let partly = out.len();
        t.write_name(&mut out, &n("db.ns.svc.cluster.local."), true);
        let p = Suffixes::owner_pointer(&out, partly).unwrap();
        let pointed = usize::from(u16::from_be_bytes(p) & 0x3FFF);
        assert_eq!(pointed, partly);
        assert!(read_at(&out, pointed).eq_case(&n("db.ns.svc.cluster.local.")));
        let root = out.len();
        t.write_name(&mut out, &Name::root(), true);
        assert_eq!(Suffixes::owner_pointer(&out, root), None);

        let mut far = vec![0u8; POINTER_LIMIT];
        let mut t = Suffixes::new();
        t.write_name(&mut far, &n("web.ns.svc.cluster.local."), true);
        assert_eq!(Suffixes::owner_pointer(&far, POINTER_LIMIT), None);
        assert_eq!(Suffixes::owner_pointer(&far, far.len()), None);
    }

    #[test]
    fn names_point_at_their_longest_written_suffix() {
        let mut out = vec![0u8; 12];
        let mut t = Suffixes::new();
        t.write_name(&mut out, &n("web.ns.svc.cluster.local."), true);
        // The same name again: a pointer to it.
        let again = out.len();
        t.write_name(&mut out, &n("web.ns.svc.cluster.local."), true);
        assert_eq!(&out[again..], &[0xC0, 12]);
        // A name under it: one label, then the pointer.
        let under = out.len();
        t.write_name(&mut out, &n("p-0.web.ns.svc.cluster.local."), true);
        assert_eq!(&out[under..], &[3, b'p', b'-', b'0', 0xC0, 12]);
        // A sibling: its own labels up to the shared suffix `ns.svc.cluster.local.`.
        let sibling = out.len();
        t.write_name(&mut out, &n("db.ns.svc.cluster.local."), true);
        assert_eq!(&out[sibling..], &[2, b'd', b'b', 0xC0, 16]);
        // Another spelling is not the same name to the table: the case is kept.
        let upper = out.len();
        t.write_name(&mut out, &n("Web.ns.svc.cluster.local."), true);
        assert_eq!(&out[upper..], &[3, b'W', b'e', b'b', 0xC0, 16]);
        for (at, name) in [
            (12, "web.ns.svc.cluster.local."),
            (again, "web.ns.svc.cluster.local."),
            (under, "p-0.web.ns.svc.cluster.local."),
            (sibling, "db.ns.svc.cluster.local."),
            (upper, "Web.ns.svc.cluster.local."),
        ] {
            assert!(read_at(&out, at).eq_case(&n(name)), "{name}");
        }
    }

    #[test]
    fn an_uncompressed_name_is_written_whole_and_pointed_at_later() {
        let mut out = vec![0u8; 12];
        let mut t = Suffixes::new();
        t.write_name(&mut out, &n("_http._tcp.web.ns.svc.cluster.local."), true);
        let target = out.len();
        t.write_name(&mut out, &n("p-0.web.ns.svc.cluster.local."), false);
        assert_eq!(out.len() - target, "p-0.web.ns.svc.cluster.local.".len() + 1);
        let glue = out.len();
        t.write_name(&mut out, &n("p-0.web.ns.svc.cluster.local."), true);
        assert_eq!(&out[glue..], &(0xC000 | target as u16).to_be_bytes());
        assert!(read_at(&out, glue).eq_case(&n("p-0.web.ns.svc.cluster.local.")));
    }

    #[test]
    fn truncate_forgets_the_names_of_a_record_taken_back() {
        let mut out = vec![0u8; 12];
        let mut t = Suffixes::new();
        t.write_name(&mut out, &n("web.ns.svc.cluster.local."), true);
        let (mark, cut) = (t.len(), out.len());
        t.write_name(&mut out, &n("other.example.org."), true);
        t.write_name(&mut out, &n("p-0.web.ns.svc.cluster.local."), true);
        t.truncate(mark);
        out.truncate(cut);
        // Nothing may point into the bytes that were cut: written in full, then recorded anew.
        let at = out.len();
        t.write_name(&mut out, &n("other.example.org."), true);
        assert_eq!(out.len() - at, "other.example.org.".len() + 1);
        let at = out.len();
        t.write_name(&mut out, &n("p-0.web.ns.svc.cluster.local."), true);
        assert_eq!(&out[at..], &[3, b'p', b'-', b'0', 0xC0, 12]);
        let at = out.len();
        t.write_name(&mut out, &n("www.example.org."), true);
        assert!(read_at(&out, at).eq_case(&n("www.example.org.")));
        assert_eq!(out.len() - at, 6);
    }

    #[test]
    fn a_full_table_still_compresses_against_what_it_holds() {
        let mut out = vec![0u8; 12];
        let mut t = Suffixes::new();
        t.write_name(&mut out, &n("ns.svc.cluster.local."), true);
        for i in 0..2 * CAPACITY {
            let name = n(&format!("e{i}.ns.svc.cluster.local."));
            let at = out.len();
            t.write_name(&mut out, &name, true);
            assert!(read_at(&out, at).eq_case(&name));
        }
        assert_eq!(t.len(), CAPACITY);
        let at = out.len();
        t.write_name(&mut out, &n("last.ns.svc.cluster.local."), true);
        assert_eq!(&out[at..], &[4, b'l', b'a', b's', b't', 0xC0, 12]);
    }

    #[test]
    fn records_read_back_as_written() {
        let owner = n("_http._tcp.web.ns.svc.cluster.local.");
        let target = n("p-0.web.ns.svc.cluster.local.");
        let records = [
            Record::from_rdata(owner.clone(), 5, RData::SRV(SRV::new(0, 100, 80, target.clone()))),
            Record::from_rdata(target.clone(), 5, RData::A(A(Ipv4Addr::new(10, 0, 0, 1)))),
            Record::from_rdata(owner.clone(), 5, RData::CNAME(CNAME(n("x.example.org.")))),
            Record::from_rdata(
                n("cluster.local."),
                5,
                RData::SOA(SOA::new(
                    n("ns.dns.cluster.local."),
                    n("hostmaster.cluster.local."),
                    7,
                    7200,
                    1800,
                    86400,
                    5,
                )),
            ),
        ];
        let mut out = vec![0u8; 12];
        let mut t = Suffixes::new();
        for r in &records {
            t.write_record(&mut out, r, None).unwrap();
        }
        let mut d = BinDecoder::new(&out);
        d.read_slice(12).unwrap();
        for r in &records {
            let got = Record::read(&mut d).unwrap();
            assert_eq!(&got, r);
            assert!(got.name.eq_case(&r.name));
        }
        assert!(d.is_empty());
    }

    #[test]
    fn the_question_is_recorded_up_to_its_last_labels() {
        // 20 labels: the last 16 are recorded, so a name under those 16 points into it.
        let long = n("a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.");
        let mut out = vec![0u8; 12];
        let mut t = Suffixes::new();
        t.write_name(&mut out, &long, false);
        let mut fresh = Suffixes::new();
        fresh.record_question(&out, 12);
        assert_eq!(fresh.len(), INLINE_LABELS);
        let at = out.len();
        fresh.write_name(&mut out, &n("x.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t."), true);
        assert_eq!(&out[at..at + 2], &[1, b'x']);
        assert!(read_at(&out, at).eq_case(&n("x.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.")));
        assert_eq!(out.len() - at, 4);
        // A question that holds a pointer is not recorded.
        let mut ptr = vec![0u8; 12];
        ptr.extend_from_slice(&[1, b'a', 0xC0, 12]);
        let mut none = Suffixes::new();
        none.record_question(&ptr, 12);
        assert_eq!(none.len(), 0);
    }

    /// An owner spelt exactly as the question is a pointer to it; one that differs in case
    /// or in a label is not (the pointer must lead to its exact spelling), and a later name
    /// under the question still points into it. A new table forgets the question.
    #[test]
    fn the_question_spelt_exactly_is_pointed_at_directly() {
        let q = n("web.NS.svc.cluster.local.");
        let mut out = vec![0u8; 12];
        Suffixes::new().write_name(&mut out, &q, false);
        let mut t = Suffixes::new();
        t.record_question(&out, 12);
        let at = out.len();
        t.write_name(&mut out, &q, true);
        assert_eq!(&out[at..], &[0xC0, 12]);
        for other in [
            "web.ns.svc.cluster.local.",
            "web.NS.svc.cluster.local.x.",
            "NS.svc.cluster.local.",
        ] {
            let at = out.len();
            t.write_name(&mut out, &n(other), true);
            assert_ne!(&out[at..], &[0xC0, 12], "{other}");
            assert!(read_at(&out, at).eq_case(&n(other)), "{other}");
        }
        let at = out.len();
        t.write_name(&mut out, &n("x.web.NS.svc.cluster.local."), true);
        assert_eq!(&out[at..], &[1, b'x', 0xC0, 12]);
        t.truncate(0);
        let at = out.len();
        t.write_name(&mut out, &q, true);
        assert_eq!(out.len() - at, 1 + q.len(), "written whole");
    }

    #[test]
    fn the_thread_table_starts_empty_each_time() {
        let first = Suffixes::with_empty(|t| {
            let mut out = vec![0u8; 12];
            t.write_name(&mut out, &n("web.ns.svc.cluster.local."), true);
            t.len()
        });
        assert_eq!(first, 5);
        assert_eq!(Suffixes::with_empty(|t| t.len()), 0);
        // Nested use gets a table of its own.
        Suffixes::with_empty(|outer| {
            let mut out = vec![0u8; 12];
            outer.write_name(&mut out, &n("a.example."), true);
            assert_eq!(Suffixes::with_empty(|inner| inner.len()), 0);
            assert_eq!(outer.len(), 2);
        });
    }
}
