//! The cache store: two capacity-bounded maps (success and denial), each split into shards
//! behind their own mutex, keyed by (lower-case name, type, class, DO, CD). An entry keeps the
//! reply as it was received and the time it was stored; TTLs are counted down when it is served.
//! An entry is one heap block (its key and its reply in wire form) and a 56-byte slot: 10,000
//! names cost about 3.4 MB with the traffic that brought them (`bench/forward.sh`).
//!
//! Eviction: when a shard is full, its expired entries go first, then an arbitrary one (the
//! table's iteration order, which the per-process random hash seed makes unpredictable). This is
//! CoreDNS's random eviction: O(1) bookkeeping, no LRU list to update on every hit, and good
//! enough for a cache whose entries all expire within minutes.

use std::cell::Cell;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use hashbrown::HashTable;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncodable, BinEncoder};
use tokio::time::Instant;

use super::config::{Prefetch, Section, ServeStale};
use super::metrics::StoreInstruments;
use crate::chain::{Lifetime, ZoneMark};
use crate::proto::{Answer, Failure, FlagEdit, Forwarded, Question, Reply};

/// Shards per store.
const SHARDS: usize = 64;

/// The most bytes of EDNS options a [`Key`] holds; a question carrying more is not cached.
const OPTIONS_MAX: usize = 64;

/// The longest [`Key`]: a name's 255 wire bytes, then type, class and the bits byte, then the
/// options.
const KEY_MAX: usize = 255 + 5 + OPTIONS_MAX;

/// What a cache entry is looked up by, in wire form: the lower-case name (labels with their
/// lengths; a parsed `Name` costs about three times the bytes), then the type and class
/// (big-endian) and a byte of the DO (bit 0) and CD (bit 1) bits, then the EDNS options the
/// question carries upstream (code, length and data each, as sent): an answer may depend on
/// them (a client's subnet, `rewrite edns0`'s `{client_ip}`), so one client's is never another
/// client's. Built on the stack, with its hash worked out once: the shard and the shard's table
/// are both chosen by it, and the success and denial stores share it.
#[derive(Clone)]
pub struct Key {
    bytes: [u8; KEY_MAX],
    len: usize,
    hash: u64,
}

impl Key {
    /// The key of `q`; `None` for a name longer than a name can be (never from a parsed one),
    /// or options that do not fit beside its name (`OPTIONS_MAX`: such a question is not cached).
    pub fn of(q: &Question) -> Option<Self> {
        let mut bytes = [0u8; KEY_MAX];
        let mut at = 0;
        for label in q.name.iter() {
            let end = at + 1 + label.len();
            let (len, rest) = bytes.get_mut(at..end)?.split_first_mut()?;
            *len = u8::try_from(label.len()).ok()?;
            rest.copy_from_slice(label);
            at = end;
        }
        // A label's length byte (at most 63) is never a letter: the name is lowered whole.
        lower_ascii(bytes.get_mut(..at)?);
        let [t0, t1] = u16::from(q.qtype).to_be_bytes();
        let [c0, c1] = u16::from(q.qclass).to_be_bytes();
        let bits = u8::from(q.dnssec_ok) | (u8::from(q.checking_disabled) << 1);
        bytes
            .get_mut(at..at + 6)?
            .copy_from_slice(&[0, t0, t1, c0, c1, bits]);
        let mut len = at + 6;
        for o in &q.edns_options {
            let data_len = u16::try_from(o.data.len()).ok()?;
            let option = bytes.get_mut(len..len + 4 + o.data.len())?;
            option[..2].copy_from_slice(&o.code.to_be_bytes());
            option[2..4].copy_from_slice(&data_len.to_be_bytes());
            option[4..].copy_from_slice(&o.data);
            len += 4 + o.data.len();
        }
        let hash = hash_key(bytes.get(..len)?);
        Some(Self { bytes, len, hash })
    }

    /// The key's bytes.
    fn bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

/// Lower-cases the ASCII letters of `bytes`, eight bytes at a time (the per-byte loop was a
/// third of a key's cost).
fn lower_ascii(bytes: &mut [u8]) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = bytes.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let low = x & !HIGH;
        // Per byte, the high bit of `low + (0x80 - c)` is set when `low >= c` (no carry leaves
        // a byte: `low` is at most 0x7f).
        let from_a = low + ONES * u64::from(0x80 - b'A');
        let past_z = low + ONES * u64::from(0x80 - b'Z' - 1);
        let upper = from_a & !past_z & !x & HIGH;
        chunk.copy_from_slice(&(x | (upper >> 2)).to_le_bytes());
    }
    chunks.into_remainder().make_ascii_lowercase();
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Key").field(&self.bytes()).finish()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for Key {}

/// The hash of a key's bytes: foldhash, seeded at random once per process. A client picks
/// the names it asks, but not the seed; and a shard holds a bounded number of entries, so even
/// names that collided would cost a bounded scan of one shard.
fn hash_key(bytes: &[u8]) -> u64 {
    static HASHER: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
    HASHER
        .get_or_init(foldhash::fast::RandomState::default)
        .hash_one(bytes)
}

/// The reply's kind in a [`Block`]'s head.
const AUTHORITATIVE: u8 = 0;
const FORWARDED: u8 = 1;
const RCODE: u8 = 2;
/// Flag bits in a [`Block`]'s head.
const RECURSION_AVAILABLE: u8 = 1;
const AUTHENTIC_DATA: u8 = 2;
const TRUNCATED: u8 = 4;
const CHASE_TARGET: u8 = 8;
/// The block ends with a [`ZoneMark`]: the plugin's index (1 byte) and the mark's value (8
/// bytes, little-endian).
const ZONE_MARK: u8 = 16;
/// The bytes of a [`ZoneMark`] at a block's end.
const MARK_LEN: usize = 9;

/// `bit` when `on`, else no bit.
fn flag(on: bool, bit: u8) -> u8 {
    if on { bit } else { 0 }
}

/// Bytes of a [`Block`]'s head after its key: kind, flags, rcode, the three section counts,
/// the header edit.
const HEAD: usize = 11;

/// A reply's header edit (`header`) in one byte: two bits a flag (AA, RA, RD), the low one
/// "edited", the high one its value.
fn edit_byte(edit: FlagEdit) -> u8 {
    [
        edit.authoritative,
        edit.recursion_available,
        edit.recursion_desired,
    ]
    .iter()
    .enumerate()
    .fold(0, |byte, (i, bit)| match bit {
        Some(on) => byte | (1 | u8::from(*on) << 1) << (2 * i),
        None => byte,
    })
}

/// The header edit [`edit_byte`] wrote.
fn edit_of(byte: u8) -> FlagEdit {
    let bit = |i: u8| (byte >> (2 * i) & 1 == 1).then_some(byte >> (2 * i + 1) & 1 == 1);
    FlagEdit {
        authoritative: bit(0),
        recursion_available: bit(1),
        recursion_desired: bit(2),
    }
}

/// An entry's key and reply in one heap block, so an entry is one allocation besides its
/// slot in the shard's table (a parsed `Record` with its names and rdata costs about ten times
/// its wire bytes, and every separate long-lived allocation made amid a burst of misses pins
/// the page it shares with their short-lived ones). Layout:
///
/// - the key's length (2 bytes, little-endian), then the [`Key`];
/// - the head: the reply's kind, its flags (RA, AD, TC, and whether an ExternalName target
///   follows), its rcode (2 bytes) and the number of records in the answer, authority and
///   additional sections (2 bytes each), all big-endian, and its header edit ([`edit_byte`]);
/// - an authoritative answer's ExternalName target outside the zones, in wire form (rare);
/// - the records, one after the other, names compressed within this part;
/// - for a reply a plugin made from its zones, its [`ZoneMark`] ([`MARK_LEN`] bytes, flag
///   [`ZONE_MARK`]): the entry holds only while the mark does.
///
/// A shard's table finds it by its key's hash and compares its key's bytes.
#[derive(Debug)]
struct Block(Box<[u8]>);

thread_local! {
    /// Where a block is encoded before it is copied to an allocation of its exact size (an
    /// encoder's growing buffer, shrunk in place, would leave a freed tail behind each entry).
    /// It keeps the capacity of the largest reply its thread stored: at most one message,
    /// 64 KiB.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Block {
    /// The block of `key` and `reply` (with `mark`), or `None` when its records cannot be
    /// encoded.
    fn of(key: &Key, reply: &Reply, mark: Option<ZoneMark>) -> Option<Self> {
        let (kind, flags, rcode, external, sections): (u8, u8, ResponseCode, _, [&[Record]; 3]) = match reply
        {
            Reply::Authoritative(a) => (
                AUTHORITATIVE,
                flag(a.chase_target.is_some(), CHASE_TARGET),
                a.rcode,
                a.chase_target.as_ref(),
                [&a.answers, &a.authority, &a.additional],
            ),
            Reply::Forwarded(f) => (
                FORWARDED,
                flag(f.recursion_available, RECURSION_AVAILABLE)
                    | flag(f.authentic_data, AUTHENTIC_DATA)
                    | flag(f.truncated, TRUNCATED),
                f.rcode,
                None,
                [&f.answers, &f.authority, &f.additional],
            ),
            Reply::Rcode(r) => (RCODE, 0, *r, None, [&[], &[], &[]]),
            Reply::Failed(f) => (RCODE, 0, f.rcode, None, [&[], &[], &[]]),
            // Nothing was sent: nothing to keep.
            Reply::Dropped | Reply::Truncated => return None,
        };
        let flags = flags | flag(mark.is_some(), ZONE_MARK);
        let mark = match mark {
            Some(m) => {
                let mut bytes = [0u8; MARK_LEN];
                bytes[0] = u8::try_from(m.plugin).ok()?;
                bytes[1..].copy_from_slice(&m.value.to_le_bytes());
                Some(bytes)
            }
            None => None,
        };
        let edit = edit_byte(match reply {
            Reply::Authoritative(a) => a.flags,
            Reply::Forwarded(f) => f.flags,
            _ => FlagEdit::KEEP,
        });
        let key_len = u16::try_from(key.len).ok()?;
        let mut counts = [0u8; 6];
        for (c, records) in counts.chunks_exact_mut(2).zip(sections) {
            c.copy_from_slice(&u16::try_from(records.len()).ok()?.to_be_bytes());
        }
        let target = external.map(|t| t.to_bytes()).transpose().ok()?;
        SCRATCH.with(|scratch| {
            let mut records = scratch.try_borrow_mut().ok()?;
            records.clear();
            // The records' names are compressed against offsets from where they start.
            let mut encoder = BinEncoder::new(&mut records);
            for r in sections.iter().flat_map(|s| s.iter()) {
                r.emit(&mut encoder).ok()?;
            }
            let target = target.as_deref().unwrap_or_default();
            let mark = mark.as_ref().map_or(&[][..], |m| &m[..]);
            let mut block =
                Vec::with_capacity(2 + key.len + HEAD + target.len() + records.len() + mark.len());
            block.extend_from_slice(&key_len.to_le_bytes());
            block.extend_from_slice(key.bytes());
            block.extend_from_slice(&[kind, flags]);
            block.extend_from_slice(&u16::from(rcode).to_be_bytes());
            block.extend_from_slice(&counts);
            block.push(edit);
            block.extend_from_slice(target);
            block.extend_from_slice(&records);
            block.extend_from_slice(mark);
            Some(Self(block.into_boxed_slice()))
        })
    }

    fn key_len(&self) -> usize {
        self.0
            .first_chunk::<2>()
            .map_or(0, |l| usize::from(u16::from_le_bytes(*l)))
    }

    /// The [`Key`]'s bytes.
    fn key(&self) -> &[u8] {
        self.0.get(2..2 + self.key_len()).unwrap_or_default()
    }

    /// The [`ZoneMark`] it was stored with, if any.
    fn mark(&self) -> Option<ZoneMark> {
        let flags = *self.0.get(2 + self.key_len() + 1)?;
        if flags & ZONE_MARK == 0 {
            return None;
        }
        let at = self.0.len().checked_sub(MARK_LEN)?;
        let bytes = self.0.get(at..)?;
        Some(ZoneMark {
            plugin: usize::from(*bytes.first()?),
            value: u64::from_le_bytes(bytes.get(1..)?.try_into().ok()?),
        })
    }

    /// The stored reply's rcode.
    fn rcode(&self) -> Option<ResponseCode> {
        let at = 2 + self.key_len() + 2;
        let word = self.0.get(at..at + 2)?;
        Some(u16::from_be_bytes([*word.first()?, *word.get(1)?]).into())
    }

    /// True when the stored reply came from an upstream (`forward`): only those may be served
    /// stale. A plugin's own answers (the cluster zone's) are asked again once they expire.
    fn forwarded(&self) -> bool {
        self.0.get(2 + self.key_len()) == Some(&FORWARDED)
    }

    /// The reply again, every TTL set to `min(ttl, entry_ttl) - elapsed` (or `fixed`); `None`
    /// if its records do not decode (they always should: they were encoded here).
    fn unpack(&self, entry_ttl: u32, elapsed: u32, fixed: Option<u32>) -> Option<Reply> {
        let at = 2 + self.key_len();
        let head = self.0.get(at..at + HEAD)?;
        let word = |i: usize| head.get(i..i + 2).map(|w| u16::from_be_bytes([w[0], w[1]]));
        let (kind, flags) = (*head.first()?, *head.get(1)?);
        let rcode = self.rcode()?;
        let counts = [word(4)?, word(6)?, word(8)?];
        let edit = edit_of(*head.get(10)?);
        let end = self
            .0
            .len()
            .checked_sub(if flags & ZONE_MARK != 0 { MARK_LEN } else { 0 })?;
        let rest = self.0.get(at + HEAD..end)?;
        let mut decoder = BinDecoder::new(rest);
        let chase_target = if flags & CHASE_TARGET != 0 {
            Some(Name::read(&mut decoder).ok()?)
        } else {
            None
        };
        let records = rest.get(decoder.index()..)?;
        let mut reply = match kind {
            AUTHORITATIVE => Reply::Authoritative(Answer {
                rcode,
                answers: Vec::new().into(),
                authority: Vec::new(),
                additional: Vec::new(),
                chase_target,
                flags: edit,
            }),
            FORWARDED => Reply::Forwarded(Forwarded {
                rcode,
                recursion_available: flags & RECURSION_AVAILABLE != 0,
                authentic_data: flags & AUTHENTIC_DATA != 0,
                truncated: flags & TRUNCATED != 0,
                flags: edit,
                answers: Vec::new(),
                authority: Vec::new(),
                additional: Vec::new(),
            }),
            _ => return Some(Reply::Rcode(rcode)),
        };
        let mut decoder = BinDecoder::new(records);
        let mut read = |n: u16| -> Option<Vec<Record>> {
            (0..n)
                .map(|_| {
                    let mut r = Record::read(&mut decoder).ok()?;
                    r.ttl = aged_ttl(r.ttl, entry_ttl, elapsed, fixed);
                    Some(r)
                })
                .collect()
        };
        let [an, ns, ar] = counts;
        match &mut reply {
            Reply::Authoritative(a) => {
                a.answers = read(an)?.into();
                a.authority = read(ns)?;
                a.additional = read(ar)?;
            }
            Reply::Forwarded(f) => {
                f.answers = read(an)?;
                f.authority = read(ns)?;
                f.additional = read(ar)?;
            }
            Reply::Rcode(_) | Reply::Failed(_) | Reply::Dropped | Reply::Truncated => {}
        }
        Some(reply)
    }
}

/// Which store a reply goes to, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A positive answer.
    Success,
    /// NXDOMAIN or NODATA.
    Denial,
    /// SERVFAIL (kept in the denial store).
    ServFail,
}

#[derive(Debug)]
/// An entry's times and prefetch count: 40 bytes, beside its [`Block`] in the shard's table.
struct Entry {
    stored: Instant,
    /// How long it holds, in nanoseconds.
    ttl: u64,
    /// When the prefetch window of `hits` began, in nanoseconds after `stored`; once the
    /// entry is stale, the time before which it is not refreshed again (a failed refresh's
    /// FAILURE_RECHECK). (Cells: a hit updates them under the shard's lock, through the map's
    /// shared borrow of the entry beside its block.)
    window: Cell<u64>,
    hits: Cell<u32>,
    /// A refresh (prefetch or stale) of this entry is in flight: no other is started. Cleared
    /// by the refresh's answer replacing the entry, or by [`Store::refresh_failed`].
    prefetching: Cell<bool>,
}

/// `d` in nanoseconds, saturated.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Entry {
    fn ttl(&self) -> Duration {
        Duration::from_nanos(self.ttl)
    }

    fn window_start(&self) -> Instant {
        self.stored + Duration::from_nanos(self.window.get())
    }
}

/// The result of a lookup.
#[derive(Debug)]
pub enum Lookup {
    /// A fresh entry, TTLs counted down; `prefetch` when it should be refreshed now.
    Fresh {
        /// The reply to send.
        reply: Reply,
        /// Refresh it in the background.
        prefetch: bool,
        /// How long the entry holds, and how its TTLs were counted down.
        held: Lifetime,
    },
    /// An expired entry within the serve-stale window, with TTLs set to its RESPONSE_TTL.
    Stale {
        /// The stale reply.
        reply: Reply,
        /// Refresh it now: no refresh is in flight, and no failed one asked to wait.
        refresh: bool,
    },
    /// Nothing usable.
    Miss,
}

/// One shard of a [`Store`]: its entries, and a time before which none of them has expired.
///
/// Invariant: `expiry_floor` is at most the earliest `stored + ttl` among `entries` (an insert
/// lowers it to its own, a sweep sets it to the earliest of the entries it keeps, a removal
/// leaves it a lower bound), or `None` when no entry can expire. A full shard sweeps its
/// expired entries only once the floor has passed, not on every insert.
#[derive(Debug, Default)]
struct Shard {
    /// Each entry's block and times, found by its key's [`Key::hash`].
    entries: HashTable<(Block, Entry)>,
    expiry_floor: Option<Instant>,
}

/// Lowers `floor` to when an entry stored at `stored` for `ttl` expires (an expiry past what
/// an `Instant` can hold never comes, and leaves it as it is).
fn lower_floor(floor: &mut Option<Instant>, stored: Instant, ttl: Duration) {
    if let Some(at) = stored.checked_add(ttl) {
        *floor = Some(floor.map_or(at, |f| f.min(at)));
    }
}

/// One bounded, sharded map.
#[derive(Debug)]
pub struct Store {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
    /// Entries evicted to make room (`coredns_cache_evictions_total`).
    pub evictions: AtomicU64,
    /// The metric series the entry count and evictions are reported to, once attached.
    metrics: OnceLock<StoreInstruments>,
    /// `keepttl`: hits carry the TTLs as stored, not counted down.
    keep_ttl: bool,
}

fn min_record_ttl<'a>(records: impl Iterator<Item = &'a Record>) -> Option<u32> {
    records
        .filter(|r| r.record_type() != RecordType::OPT)
        .map(|r| r.ttl)
        .min()
}

/// A record's TTL as served: `min(ttl, entry_ttl) - elapsed`, or `fixed`.
fn aged_ttl(ttl: u32, entry_ttl: u32, elapsed: u32, fixed: Option<u32>) -> u32 {
    fixed.unwrap_or_else(|| ttl.min(entry_ttl).saturating_sub(elapsed))
}

/// Sets every TTL to `min(ttl, entry_ttl) - elapsed` (or `fixed`).
pub fn aged(reply: &Reply, entry_ttl: u32, elapsed: u32, fixed: Option<u32>) -> Reply {
    let mut out = reply.clone();
    let adjust = |records: &mut Vec<Record>| {
        for r in records {
            r.ttl = aged_ttl(r.ttl, entry_ttl, elapsed, fixed);
        }
    };
    match &mut out {
        Reply::Authoritative(a) => {
            adjust(&mut a.answers);
            adjust(&mut a.authority);
            adjust(&mut a.additional);
        }
        Reply::Forwarded(f) => {
            adjust(&mut f.answers);
            adjust(&mut f.authority);
            adjust(&mut f.additional);
        }
        Reply::Rcode(_) | Reply::Failed(_) | Reply::Dropped | Reply::Truncated => {}
    }
    out
}

impl Store {
    /// A store for at most `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        let shards = SHARDS.min(capacity.max(1));
        Self {
            shards: (0..shards).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: capacity.max(1).div_ceil(shards),
            evictions: AtomicU64::new(0),
            metrics: OnceLock::new(),
            keep_ttl: false,
        }
    }

    /// This store with `keepttl` on or off: with it, a hit carries the TTLs as they were
    /// stored (the entry still goes at its TTL).
    #[must_use]
    pub fn keeping_ttl(mut self, keep: bool) -> Self {
        self.keep_ttl = keep;
        self
    }

    /// Reports this store's entry count and evictions to `m` from now on (the entries it holds
    /// already are added to the gauge). Only the first call takes effect.
    pub fn attach(&self, m: StoreInstruments) {
        if self.metrics.set(m).is_ok()
            && let Some(m) = self.metrics.get()
        {
            m.entries.add(gauge_delta(self.len()));
        }
    }

    /// Moves the entries gauge by `delta` entries (a no-op without metrics).
    fn entries_changed(&self, delta: i64) {
        if delta != 0
            && let Some(m) = self.metrics.get()
        {
            m.entries.add(delta);
        }
    }

    fn shard(&self, key: &Key) -> Option<&Mutex<Shard>> {
        // Bits the shard's table does not choose buckets or tags by (its low bits, its top 7).
        let n = self.shards.len().max(1);
        self.shards
            .get(usize::try_from((key.hash >> 40) % n as u64).unwrap_or(0))
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map(|m| m.entries.len()).unwrap_or(0))
            .sum()
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`Store::insert_marked`] without a mark (the store's own tests).
    #[cfg(test)]
    pub fn insert(&self, key: &Key, reply: &Reply, ttl: Duration, now: Instant, keep_for: Duration) {
        self.insert_marked(key, reply, ttl, now, keep_for, None);
    }

    /// [`Store::lookup_holding`] with every mark holding (the store's own tests).
    #[cfg(test)]
    pub fn lookup(
        &self,
        key: &Key,
        now: Instant,
        stale: Option<&ServeStale>,
        prefetch: Option<&Prefetch>,
        probe: bool,
    ) -> Lookup {
        self.lookup_holding(key, now, stale, prefetch, probe, &|_| true)
    }

    /// Stores `reply` for `ttl`, evicting to stay within capacity. `keep_for` is how long past
    /// expiry entries stay (the serve-stale window).
    ///
    /// `mark`: the reply was made from a plugin's zones, and holds only while the mark does
    /// ([`Store::lookup_holding`]'s `holds`).
    pub fn insert_marked(
        &self,
        key: &Key,
        reply: &Reply,
        ttl: Duration,
        now: Instant,
        keep_for: Duration,
        mark: Option<ZoneMark>,
    ) {
        let Some(block) = Block::of(key, reply, mark) else {
            return;
        };
        let Some(shard) = self.shard(key) else { return };
        let Ok(mut shard) = shard.lock() else { return };
        let Shard {
            entries: map,
            expiry_floor,
        } = &mut *shard;
        let before = map.len();
        // `insert` keeps an equal key already there: take it out first, so the new block (the
        // same key, the new reply) is the one kept; a name stored again then needs no room.
        remove_from(map, key.hash, key.bytes());
        if map.len() >= self.per_shard {
            // An entry is expired once `now >= stored + ttl + keep_for`: none is before the
            // floor plus `keep_for`.
            if expiry_floor
                .and_then(|f| f.checked_add(keep_for))
                .is_some_and(|f| now >= f)
            {
                *expiry_floor = None;
                map.retain(|(_, e)| {
                    let keep = now.saturating_duration_since(e.stored) < e.ttl() + keep_for;
                    if keep {
                        lower_floor(expiry_floor, e.stored, e.ttl());
                    }
                    keep
                });
            }
            if map.len() >= self.per_shard
                && let Some(victim) = map.iter().next().map(|(b, _)| b.key().to_vec())
            {
                remove_from(map, hash_key(&victim), &victim);
                self.evictions.fetch_add(1, Ordering::Relaxed);
                if let Some(m) = self.metrics.get() {
                    m.evictions.inc();
                }
            }
        }
        let entry = Entry {
            stored: now,
            ttl: nanos(ttl),
            window: Cell::new(0),
            hits: Cell::new(0),
            prefetching: Cell::new(false),
        };
        map.insert_unique(key.hash, (block, entry), |(b, _)| hash_key(b.key()));
        lower_floor(expiry_floor, now, ttl);
        let after = map.len();
        drop(shard);
        self.entries_changed(gauge_delta(after) - gauge_delta(before));
    }

    /// A refresh of `key` started by [`Store::lookup_holding`] brought nothing to store: another may
    /// start, once the entry is stale, no sooner than `recheck` after `now`.
    pub fn refresh_failed(&self, key: &Key, now: Instant, recheck: Duration) {
        let Some(shard) = self.shard(key) else {
            return;
        };
        let Ok(shard) = shard.lock() else {
            return;
        };
        if let Some((_, e)) = shard.entries.find(key.hash, |(b, _)| b.key() == key.bytes()) {
            e.prefetching.set(false);
            if now.saturating_duration_since(e.stored) >= e.ttl() {
                e.window
                    .set(nanos(now.saturating_duration_since(e.stored) + recheck));
            }
        }
    }

    /// Removes `key`.
    pub fn remove(&self, key: &Key) {
        if let Some(shard) = self.shard(key)
            && let Ok(mut shard) = shard.lock()
            && remove_from(&mut shard.entries, key.hash, key.bytes())
        {
            drop(shard);
            self.entries_changed(-1);
        }
    }

    /// Looks `key` up at `now`. Entries older than their TTL plus the `stale` window are
    /// removed, and so is an entry whose [`ZoneMark`] no longer `holds` (the zone changed what
    /// its plugin answers). For a `probe` ([`Question::probe`]) a fresh NXDOMAIN is the bare
    /// rcode, not decoded.
    pub fn lookup_holding(
        &self,
        key: &Key,
        now: Instant,
        stale: Option<&ServeStale>,
        prefetch: Option<&Prefetch>,
        probe: bool,
        holds: &dyn Fn(ZoneMark) -> bool,
    ) -> Lookup {
        let Some(shard) = self.shard(key) else {
            return Lookup::Miss;
        };
        let Ok(mut shard) = shard.lock() else {
            return Lookup::Miss;
        };
        let Some((block, e)) = shard.entries.find(key.hash, |(b, _)| b.key() == key.bytes()) else {
            return Lookup::Miss;
        };
        let mark = block.mark();
        if mark.is_some_and(|m| !holds(m)) {
            remove_from(&mut shard.entries, key.hash, key.bytes());
            drop(shard);
            self.entries_changed(-1);
            return Lookup::Miss;
        }
        let age = now.saturating_duration_since(e.stored);
        let ttl = e.ttl();
        if age < ttl {
            let entry_ttl = u32::try_from(ttl.as_secs()).unwrap_or(u32::MAX);
            let elapsed = if self.keep_ttl {
                0
            } else {
                u32::try_from(age.as_secs()).unwrap_or(u32::MAX)
            };
            let mut due = false;
            if let Some(p) = prefetch {
                if now.saturating_duration_since(e.window_start()) > p.duration {
                    e.window.set(nanos(age));
                    e.hits.set(0);
                }
                e.hits.set(e.hits.get().saturating_add(1));
                let remaining = ttl.saturating_sub(age);
                if !e.prefetching.get()
                    && e.hits.get() >= p.amount
                    && remaining <= ttl.mul_f64(f64::from(p.percentage) / 100.0)
                {
                    e.prefetching.set(true);
                    due = true;
                }
            }
            let reply = if probe && block.rcode() == Some(ResponseCode::NXDomain) {
                Reply::Rcode(ResponseCode::NXDomain)
            } else {
                let Some(reply) = block.unpack(entry_ttl, elapsed, None) else {
                    return Lookup::Miss;
                };
                reply
            };
            return Lookup::Fresh {
                reply,
                prefetch: due,
                held: Lifetime {
                    stored: e.stored,
                    expires: e.stored + ttl,
                    aged_by: (!self.keep_ttl).then_some(elapsed),
                    made_from: mark.map(|m| m.plugin),
                },
            };
        }
        match stale {
            Some(stale) if age < ttl + stale.duration && block.forwarded() => {
                match block.unpack(0, 0, Some(stale.response_ttl)) {
                    Some(reply) => {
                        let refresh = !e.prefetching.get() && now >= e.window_start();
                        e.prefetching.set(e.prefetching.get() || refresh);
                        Lookup::Stale { reply, refresh }
                    }
                    None => Lookup::Miss,
                }
            }
            _ => {
                remove_from(&mut shard.entries, key.hash, key.bytes());
                drop(shard);
                self.entries_changed(-1);
                Lookup::Miss
            }
        }
    }
}

/// Takes the entry of `key` (hashed to `hash`) out of `table`; true when there was one.
fn remove_from(table: &mut HashTable<(Block, Entry)>, hash: u64, key: &[u8]) -> bool {
    match table.find_entry(hash, |(b, _)| b.key() == key) {
        Ok(found) => {
            found.remove();
            true
        }
        Err(_) => false,
    }
}

impl Drop for Store {
    /// A store going away (its cache replaced by a Corefile reload) takes its entries out of
    /// the gauge.
    fn drop(&mut self) {
        let held = self.len();
        self.entries_changed(-gauge_delta(held));
    }
}

/// An entry count as a gauge step.
fn gauge_delta(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The store a reply of `rcode` goes to, with `answered` when its answer section has records;
/// `None` for an rcode that is never cached.
pub fn kind_of(rcode: ResponseCode, answered: bool) -> Option<Kind> {
    match rcode {
        ResponseCode::NoError if answered => Some(Kind::Success),
        ResponseCode::NoError | ResponseCode::NXDomain => Some(Kind::Denial),
        ResponseCode::ServFail => Some(Kind::ServFail),
        _ => None,
    }
}

/// Sorts `reply` into a store and gives how long to keep it, or `None` when it must not be
/// cached. Cluster answers keep at most their own smallest TTL (so a change in the zone shows
/// after that TTL, whatever the cache's cap); forwarded ones are clamped to `[min_ttl, max_ttl]`.
pub fn classify(
    reply: &Reply,
    success: &Section,
    denial: &Section,
    servfail: Duration,
) -> Option<(Kind, Duration)> {
    match reply {
        Reply::Rcode(ResponseCode::ServFail)
        | Reply::Failed(Failure {
            rcode: ResponseCode::ServFail,
            ..
        }) => (!servfail.is_zero()).then_some((Kind::ServFail, servfail)),
        Reply::Rcode(_) | Reply::Failed(_) | Reply::Dropped | Reply::Truncated => None,
        Reply::Authoritative(a) => {
            let kind = kind_of(a.rcode, !a.answers.is_empty())?;
            if kind == Kind::ServFail {
                // The zone is not synced yet: never hold that past the sync.
                return None;
            }
            let cap = if kind == Kind::Success {
                success.max_ttl
            } else {
                denial.max_ttl
            };
            let own = min_record_ttl(a.answers.iter().chain(&a.authority))?;
            let d = Duration::from_secs(u64::from(own)).min(cap);
            (!d.is_zero()).then_some((kind, d))
        }
        Reply::Forwarded(f) => {
            if f.truncated {
                return None;
            }
            let kind = kind_of(f.rcode, !f.answers.is_empty())?;
            let d = match kind {
                Kind::ServFail => return (!servfail.is_zero()).then_some((Kind::ServFail, servfail)),
                Kind::Success => {
                    let own = min_record_ttl(f.answers.iter()).unwrap_or(0);
                    Duration::from_secs(u64::from(own)).clamp(success.min_ttl, success.max_ttl)
                }
                Kind::Denial => {
                    // RFC 2308: min(SOA TTL, SOA MINIMUM).
                    let soa = f.authority.iter().find_map(|r| match &r.data {
                        RData::SOA(s) => Some(r.ttl.min(s.minimum)),
                        _ => None,
                    });
                    let own = Duration::from_secs(u64::from(soa.unwrap_or(0)));
                    own.clamp(denial.min_ttl, denial.max_ttl)
                }
            };
            (!d.is_zero()).then_some((kind, d))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::A;
    use std::net::Ipv4Addr;

    fn a_reply(ttl: u32) -> Reply {
        a_reply_for("www.example.com.", ttl)
    }

    fn a_reply_for(name: &str, ttl: u32) -> Reply {
        let n = Name::from_ascii(name).unwrap();
        Reply::Forwarded(Forwarded {
            rcode: ResponseCode::NoError,
            recursion_available: true,
            authentic_data: false,
            truncated: false,
            flags: FlagEdit::KEEP,
            answers: vec![Record::from_rdata(
                n,
                ttl,
                RData::A(A(Ipv4Addr::new(192, 0, 2, 1))),
            )],
            authority: Vec::new(),
            additional: Vec::new(),
        })
    }

    /// An entry gives back exactly the reply it was given: every section, the names as the
    /// upstream spelled them, the flags and rcode, only the TTLs counted down.
    #[test]
    fn a_packed_reply_unpacks_to_the_same_records() {
        use hickory_proto::rr::rdata::{CNAME, SOA, SRV, TXT};
        let n = |s: &str| Name::from_ascii(s).unwrap();
        let answers = vec![
            Record::from_rdata(
                n("WWW.Example.com."),
                300,
                RData::CNAME(CNAME(n("edge.example.NET."))),
            ),
            Record::from_rdata(
                n("edge.example.NET."),
                60,
                RData::A(A(Ipv4Addr::new(192, 0, 2, 9))),
            ),
            Record::from_rdata(
                n("edge.example.NET."),
                60,
                RData::TXT(TXT::new(vec!["a b".into()])),
            ),
        ];
        let authority = vec![Record::from_rdata(
            n("example.NET."),
            3600,
            RData::SOA(SOA::new(
                n("ns.example.NET."),
                n("host.example.NET."),
                7,
                1,
                2,
                3,
                4,
            )),
        )];
        let additional = vec![Record::from_rdata(
            n("_x._tcp.example.NET."),
            10,
            RData::SRV(SRV::new(1, 2, 53, n("edge.example.NET."))),
        )];
        let forwarded = Reply::Forwarded(Forwarded {
            rcode: ResponseCode::NoError,
            recursion_available: true,
            authentic_data: true,
            truncated: false,
            // `header`'s edit is kept with the reply.
            flags: FlagEdit {
                authoritative: Some(true),
                recursion_available: None,
                recursion_desired: Some(false),
            },
            answers: answers.clone(),
            authority: authority.clone(),
            additional: additional.clone(),
        });
        let authoritative = Reply::Authoritative(Answer {
            rcode: ResponseCode::NXDomain,
            answers: answers.into(),
            authority,
            additional,
            chase_target: Some(n("edge.example.NET.")),
            flags: FlagEdit {
                authoritative: Some(false),
                recursion_available: Some(true),
                recursion_desired: None,
            },
        });
        for reply in [forwarded, authoritative] {
            let packed = Block::of(&key("www.example.com."), &reply, None).unwrap();
            assert_eq!(packed.key(), key("WWW.example.com.").bytes());
            assert_eq!(packed.unpack(u32::MAX, 0, None).unwrap(), reply);
            assert_eq!(packed.unpack(30, 5, None).unwrap(), aged(&reply, 30, 5, None));
            assert_eq!(
                packed.unpack(0, 0, Some(30)).unwrap(),
                aged(&reply, 0, 0, Some(30))
            );
        }
        let failed = Reply::Failed(Failure {
            rcode: ResponseCode::ServFail,
            reason: "x",
        });
        assert_eq!(
            Block::of(&key("x."), &failed, None).unwrap().unpack(30, 0, None),
            Some(Reply::Rcode(ResponseCode::ServFail))
        );
    }

    /// Every byte value, at every place in a word and in the tail, lowers as
    /// `make_ascii_lowercase` lowers it.
    #[test]
    fn lowering_eight_bytes_at_a_time_is_ascii_lowering() {
        for b in 0..=255u8 {
            for len in 1..=19 {
                for at in 0..len {
                    let mut got: Vec<u8> = (0..len).map(|i| b"Az@[`{Q9"[i % 8]).collect();
                    got[at] = b;
                    let mut want = got.clone();
                    want.make_ascii_lowercase();
                    lower_ascii(&mut got);
                    assert_eq!(got, want, "byte {b:#x} at {at} of {len}");
                }
            }
        }
    }

    /// A key is the lower-cased name in wire form, then type, class and bits, for any name
    /// up to the longest there is: random labels of any bytes, compared with hickory-proto's
    /// own encoding of the lower-cased name.
    #[test]
    fn a_key_is_the_lower_cased_wire_name_for_any_name() {
        let mut made = 0;
        for round in 0..3000 {
            let mut name = Name::root();
            let labels = rand::random_range(1..=40);
            for _ in 0..labels {
                let label: Vec<u8> = (0..rand::random_range(1..=63)).map(|_| rand::random()).collect();
                match name.clone().append_label(label.as_slice()) {
                    Ok(longer) => name = longer,
                    Err(_) => break,
                }
            }
            let q = Question {
                dnssec_ok: round % 2 == 0,
                ..Question::new(name.clone(), RecordType::SRV)
            };
            let key = Key::of(&q).expect("every name has a key");
            let mut want = name.to_lowercase().to_bytes().unwrap();
            want.extend_from_slice(&[0, 33, 0, 1, u8::from(round % 2 == 0)]);
            assert_eq!(key.bytes(), want.as_slice(), "{name:?}");
            assert_eq!(key.hash, hash_key(&want));
            made += usize::from(want.len() > 250);
        }
        assert!(made > 0, "some names were near the longest");
    }

    #[test]
    fn keys_ignore_case_and_tell_types_and_bits_apart() {
        assert_eq!(key("WWW.Example.COM."), key("www.example.com."));
        assert_ne!(key("www.example.com."), key("www.example.co."));
        assert_ne!(key("ab.c."), key("a.bc."));
        let aaaa = Key::of(&Question::new(n_("www.example.com."), RecordType::AAAA)).unwrap();
        assert_ne!(aaaa, key("www.example.com."));
    }

    /// The EDNS options a question carries upstream are part of its key (a client's subnet,
    /// `rewrite edns0`'s `{client_ip}`); a question with more than the key holds is not cached.
    #[test]
    fn keys_tell_the_options_a_question_carries_apart() {
        let with = |opts: &[(u16, &[u8])]| {
            let mut q = Question::new(n_("www.example.com."), RecordType::A);
            q.edns_options = opts
                .iter()
                .map(|(code, data)| crate::proto::EdnsOpt {
                    code: *code,
                    data: data.to_vec(),
                })
                .collect();
            Key::of(&q)
        };
        let a = with(&[(0xffee, &[127, 0, 0, 2])]).unwrap();
        let b = with(&[(0xffee, &[127, 0, 0, 3])]).unwrap();
        assert_ne!(a, b);
        assert_ne!(a, key("www.example.com."));
        assert_eq!(with(&[]).unwrap(), key("www.example.com."));
        assert_ne!(
            with(&[(1, &[2, 3])]).unwrap(),
            with(&[(1, &[2]), (3, &[])]).unwrap()
        );
        // Room for OPTIONS_MAX bytes of options beside the longest name; a short name leaves
        // more, but never a key past KEY_MAX.
        assert!(with(&[(8, &[0; OPTIONS_MAX - 4])]).is_some());
        assert!(with(&[(8, &[0; KEY_MAX])]).is_none());
    }

    fn n_(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    fn key(name: &str) -> Key {
        Key::of(&Question::new(Name::from_ascii(name).unwrap(), RecordType::A)).unwrap()
    }

    fn section(cap: usize) -> Section {
        Section {
            capacity: cap,
            max_ttl: Duration::from_secs(30),
            min_ttl: Duration::from_secs(5),
        }
    }

    /// A store's slot is the block's pointer and the entry's times: 56 bytes, where a key and
    /// a packed reply held inline took 120.
    #[test]
    fn a_slot_is_56_bytes() {
        assert_eq!(std::mem::size_of::<(Block, Entry)>(), 56);
    }

    /// An entry kept with a zone mark is served while the mark holds, and is gone (a miss,
    /// and no longer counted) once it does not: the zone changed what its plugin answers.
    #[tokio::test(start_paused = true)]
    async fn an_entry_whose_zone_mark_no_longer_holds_is_gone() {
        let s = Store::new(10);
        let ttl = Duration::from_secs(30);
        let mark = ZoneMark { plugin: 3, value: 41 };
        let k = key("web.ns.svc.cluster.local.");
        s.insert_marked(&k, &a_reply(30), ttl, Instant::now(), Duration::ZERO, Some(mark));
        let now = Instant::now();
        let holds = |m: ZoneMark| m == mark;
        match s.lookup_holding(&k, now, None, None, false, &holds) {
            Lookup::Fresh { reply, held, .. } => {
                assert_eq!(
                    reply,
                    aged(&a_reply(30), 30, 0, None),
                    "the mark is not part of the reply"
                );
                assert_eq!(held.made_from, Some(3));
            }
            other => panic!("{other:?}"),
        }
        let moved = |m: ZoneMark| m.value == 42;
        assert!(matches!(
            s.lookup_holding(&k, now, None, None, false, &moved),
            Lookup::Miss
        ));
        assert_eq!(s.len(), 0);
        assert!(matches!(
            s.lookup_holding(&k, now, None, None, false, &holds),
            Lookup::Miss
        ));
    }

    /// Storing a name again replaces its reply, not only its times: the map keeps the block
    /// it already has for an equal key unless the old one is taken out.
    #[tokio::test(start_paused = true)]
    async fn storing_a_name_again_replaces_its_reply() {
        let s = Store::new(10);
        let ttl = Duration::from_secs(30);
        s.insert(
            &key("www.example.com."),
            &a_reply(300),
            ttl,
            Instant::now(),
            Duration::ZERO,
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        s.insert(
            &key("www.example.com."),
            &a_reply(20),
            ttl,
            Instant::now(),
            Duration::ZERO,
        );
        assert_eq!(s.len(), 1);
        match s.lookup(&key("www.example.com."), Instant::now(), None, None, false) {
            Lookup::Fresh { reply, held, .. } => {
                assert_eq!(reply.answers()[0].ttl, 20, "the second reply, stored just now");
                assert_eq!(held.stored, Instant::now());
            }
            other => panic!("{other:?}"),
        }
    }

    /// A probe's hit on an NXDOMAIN is the bare rcode; an ask that is not a probe, and a
    /// probe's hit on anything else, get the whole reply.
    #[tokio::test(start_paused = true)]
    async fn a_probe_gets_a_stored_nxdomain_as_its_rcode_alone() {
        use hickory_proto::rr::rdata::SOA;
        // Room for both names whatever the shard: a store of 10 has ten one-entry shards, and
        // with the hash seeded per process the two names shared one in about a run of ten.
        let s = Store::new(1000);
        let ttl = Duration::from_secs(30);
        let zone = n_("cluster.local.");
        let soa = SOA::new(
            zone.clone(),
            n_("hostmaster.cluster.local."),
            1,
            7200,
            1800,
            86400,
            5,
        );
        let nx = Reply::Authoritative(Answer {
            rcode: ResponseCode::NXDomain,
            answers: Vec::new().into(),
            authority: vec![Record::from_rdata(zone, 5, RData::SOA(soa))],
            additional: Vec::new(),
            chase_target: None,
            flags: FlagEdit::KEEP,
        });
        let positive = a_reply(300);
        for (name, reply) in [("nx.svc.cluster.local.", &nx), ("www.example.com.", &positive)] {
            s.insert(&key(name), reply, ttl, Instant::now(), Duration::ZERO);
        }
        let get = |name: &str, probe: bool| match s.lookup(&key(name), Instant::now(), None, None, probe) {
            Lookup::Fresh { reply, .. } => reply,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            get("nx.svc.cluster.local.", true),
            Reply::Rcode(ResponseCode::NXDomain)
        );
        let Reply::Authoritative(full) = get("nx.svc.cluster.local.", false) else {
            panic!("the stored answer")
        };
        assert_eq!(full.rcode, ResponseCode::NXDomain);
        assert_eq!(full.authority.len(), 1, "with its SOA");
        assert_eq!(get("www.example.com.", true).answers().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_counts_down_then_expires() {
        let s = Store::new(10);
        let r = a_reply(300);
        let (kind, ttl) = classify(&r, &section(10), &section(10), Duration::from_secs(5)).unwrap();
        assert_eq!(
            (kind, ttl),
            (Kind::Success, Duration::from_secs(30)),
            "capped by cache 30"
        );
        s.insert(&key("www.example.com."), &r, ttl, Instant::now(), Duration::ZERO);
        tokio::time::advance(Duration::from_secs(12)).await;
        match s.lookup(&key("WWW.example.com."), Instant::now(), None, None, false) {
            Lookup::Fresh { reply, .. } => assert_eq!(reply.answers()[0].ttl, 18),
            other => panic!("{other:?}"),
        }
        tokio::time::advance(Duration::from_secs(18)).await;
        assert!(matches!(
            s.lookup(&key("www.example.com."), Instant::now(), None, None, false),
            Lookup::Miss
        ));
        assert!(s.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn keepttl_serves_the_stored_ttl_until_the_entry_goes() {
        let s = Store::new(10).keeping_ttl(true);
        let r = a_reply(300);
        let (_, ttl) = classify(&r, &section(10), &section(10), Duration::from_secs(5)).unwrap();
        s.insert(&key("www.example.com."), &r, ttl, Instant::now(), Duration::ZERO);
        tokio::time::advance(Duration::from_secs(12)).await;
        match s.lookup(&key("www.example.com."), Instant::now(), None, None, false) {
            Lookup::Fresh { reply, .. } => assert_eq!(reply.answers()[0].ttl, 30, "capped, not aged"),
            other => panic!("{other:?}"),
        }
        tokio::time::advance(Duration::from_secs(18)).await;
        assert!(matches!(
            s.lookup(&key("www.example.com."), Instant::now(), None, None, false),
            Lookup::Miss
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn stale_window_and_prefetch() {
        let s = Store::new(10);
        let p = Prefetch {
            amount: 2,
            duration: Duration::from_secs(60),
            percentage: 50,
        };
        s.insert(
            &key("a.example."),
            &a_reply(10),
            Duration::from_secs(10),
            Instant::now(),
            Duration::from_secs(60),
        );
        let now = Instant::now();
        assert!(matches!(
            s.lookup(&key("a.example."), now, None, Some(&p), false),
            Lookup::Fresh { prefetch: false, .. }
        ));
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(matches!(
            s.lookup(&key("a.example."), Instant::now(), None, Some(&p), false),
            Lookup::Fresh { prefetch: true, .. }
        ));
        // Only one prefetch is started per entry.
        assert!(matches!(
            s.lookup(&key("a.example."), Instant::now(), None, Some(&p), false),
            Lookup::Fresh { prefetch: false, .. }
        ));
        // The prefetch brought nothing: the next refresh may start at once.
        s.refresh_failed(&key("a.example."), Instant::now(), Duration::from_secs(20));
        tokio::time::advance(Duration::from_secs(10)).await;
        let stale = ServeStale {
            duration: Duration::from_secs(60),
            verify: false,
            verify_timeout: None,
            response_ttl: 7,
            failure_recheck: Duration::from_secs(20),
        };
        let get = || match s.lookup(&key("a.example."), Instant::now(), Some(&stale), None, false) {
            Lookup::Stale { reply, refresh } => {
                assert_eq!(reply.answers()[0].ttl, 7, "RESPONSE_TTL");
                Some(refresh)
            }
            Lookup::Miss => None,
            other => panic!("{other:?}"),
        };
        assert_eq!(get(), Some(true), "the first stale hit refreshes");
        assert_eq!(get(), Some(false), "one refresh at a time");
        // That refresh failed: none for FAILURE_RECHECK, then one again.
        s.refresh_failed(&key("a.example."), Instant::now(), stale.failure_recheck);
        tokio::time::advance(Duration::from_secs(19)).await;
        assert_eq!(get(), Some(false), "within FAILURE_RECHECK");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(get(), Some(true), "after FAILURE_RECHECK");
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(get(), None, "past the stale window");
    }

    #[tokio::test(start_paused = true)]
    async fn capacity_is_bounded() {
        let s = Store::new(100);
        for i in 0..1000 {
            s.insert(
                &key(&format!("n{i}.example.")),
                &a_reply(60),
                Duration::from_secs(60),
                Instant::now(),
                Duration::ZERO,
            );
        }
        assert!(s.len() <= 100 + SHARDS, "{}", s.len());
        assert!(s.evictions.load(Ordering::Relaxed) >= 800);
    }

    /// A full shard makes room from its expired entries first and evicts a live one only
    /// when none has expired; entries within the serve-stale window count as live.
    #[tokio::test(start_paused = true)]
    async fn a_full_shard_sweeps_expired_entries_before_it_evicts() {
        let s = Store::new(1);
        let (short, long) = (Duration::from_secs(5), Duration::from_secs(60));
        let at = Instant::now;
        s.insert(&key("a.example."), &a_reply(60), short, at(), Duration::ZERO);
        tokio::time::advance(Duration::from_secs(6)).await;
        s.insert(&key("b.example."), &a_reply(60), long, at(), Duration::ZERO);
        assert_eq!(s.evictions.load(Ordering::Relaxed), 0, "a had expired: swept");
        s.insert(&key("c.example."), &a_reply(60), short, at(), Duration::ZERO);
        assert_eq!(s.evictions.load(Ordering::Relaxed), 1, "b was live: evicted");
        tokio::time::advance(Duration::from_secs(6)).await;
        // c expired a second ago, but a serve-stale window of 10 s keeps it.
        let stale = Duration::from_secs(10);
        s.insert(&key("d.example."), &a_reply(60), long, at(), stale);
        assert_eq!(
            s.evictions.load(Ordering::Relaxed),
            2,
            "c was within its stale window"
        );
        tokio::time::advance(Duration::from_secs(61)).await;
        s.insert(&key("e.example."), &a_reply(60), long, at(), Duration::ZERO);
        assert_eq!(s.evictions.load(Ordering::Relaxed), 2, "d had expired: swept");
        assert_eq!(s.len(), 1);
    }

    /// Eight tasks on four threads store 500 names each into a store of 256 while reading
    /// each other's: no entry is lost (every name stored is held or counted evicted, each
    /// shard's count and eviction done under its lock), none is held past the bound, and a
    /// lookup never gives another name's reply (an entry's key and reply are one block).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_writers_lose_no_entry_and_mix_no_replies() {
        let s = std::sync::Arc::new(Store::new(256));
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                let s = s.clone();
                tokio::spawn(async move {
                    for i in 0..500 {
                        let name = format!("n{t}-{i}.example.");
                        let ttl = Duration::from_secs(600);
                        s.insert(&key(&name), &a_reply_for(&name, 60), ttl, Instant::now(), ttl);
                        let other = format!("n{}-{}.example.", (t + 1) % 8, i / 2);
                        let now = Instant::now();
                        if let Lookup::Fresh { reply, .. } = s.lookup(&key(&other), now, None, None, false) {
                            assert!(reply.answers()[0].name.eq_case(&n_(&other)), "{other}");
                        }
                        if i % 16 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let held = s.len();
        assert!(held <= 256, "{held}");
        let evicted = usize::try_from(s.evictions.load(Ordering::Relaxed)).unwrap();
        assert_eq!(held + evicted, 8 * 500);
    }

    #[test]
    fn what_is_cached() {
        let (sec, den) = (section(1), section(1));
        assert_eq!(
            classify(
                &Reply::Rcode(ResponseCode::Refused),
                &sec,
                &den,
                Duration::from_secs(5)
            ),
            None
        );
        assert_eq!(
            classify(
                &Reply::Rcode(ResponseCode::ServFail),
                &sec,
                &den,
                Duration::from_secs(5)
            ),
            Some((Kind::ServFail, Duration::from_secs(5)))
        );
        assert_eq!(
            classify(&Reply::Rcode(ResponseCode::ServFail), &sec, &den, Duration::ZERO),
            None
        );
        // Short upstream TTLs are raised to the 5 s minimum.
        assert_eq!(
            classify(&a_reply(1), &sec, &den, Duration::ZERO),
            Some((Kind::Success, Duration::from_secs(5)))
        );
        let key_do = Key::of(&Question {
            dnssec_ok: true,
            ..Question::new(Name::root(), RecordType::A)
        })
        .unwrap();
        assert_ne!(
            key_do,
            Key::of(&Question::new(Name::root(), RecordType::A)).unwrap()
        );
    }
}
