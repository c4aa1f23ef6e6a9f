//! The answer memo: the wire-format responses to UDP queries whose every visited plugin
//! declared them replayable, kept by the exact request bytes (all but the ID) and sent again
//! while what they were made from is unchanged. That is the cluster zone's answers
//! (`kubernetes`, `k8s_external`) while the zones are unchanged, the fixed answers of `any`,
//! `chaos`, `local`, `dns64` and `template`, and the `cache`'s hits until their entry expires
//! ([`crate::chain::Replay::Timed`]); never a forwarded, `hosts`, `file` or `rewrite` answer,
//! nor one decided for the client. It is PowerDNS's packet cache.
//!
//! Why it is exact: a memoized response is a function of the request bytes and the cluster
//! zones alone. The server keeps a response only when every plugin the question visited
//! declared it replayable ([`crate::chain::Replay`]; the default is "decided for this client", so
//! a plugin whose answer depends on the client, the clock or a file is never replayed), no observer of the
//! block needs every question (`log`), and the rcode is not a failure. Every zone's change
//! counter ([`ChangeCounter`]) is read before the answer is made, and the response is kept only
//! if it is unchanged once the answer is made.
//!
//! Responses made for a class of clients (`kubernetes`'s `topology`: what is near the client
//! pod's node and zone; [`crate::chain::Next::for_clients_of`]) are a function of the request
//! bytes, the zones and the class. Each is kept by the request bytes followed by its class, and
//! the request's own key holds a marker naming the plugin that classifies; a lookup that finds
//! the marker asks that plugin for the client's class now and replays only the response made
//! for the same class. A classed entry is never reached by a request's own bytes.
//!
//! What makes an entry stale: for a response made from one scope of the zones (one Service,
//! one address: [`MemoInfo::scope`]), a change to that scope or to the zones' structure
//! (namespaces); for any other response, any change. So a busy cluster's endpoint churn leaves
//! the entries of the names it does not touch in place. A scoped negative answer carries the
//! zone's SOA serial, which moves with every change: the memo writes the current serial into
//! it on each hit ([`MemoInfo::serial_at`]), so it stays the full path's bytes. The scoped
//! counters are read before the change counter is checked, and a zone moves its change counter
//! before its scoped ones, so a kept response is never newer than the counters it is kept
//! with. A plugin that counts what it
//! passes on (the cache) is told of each replay. With `loadbalance` (replayed reordered), the
//! address records of a hit are shuffled on the wire, as the plugin shuffles them; a response
//! it would shuffle otherwise (SRV glue, a truncated answer) is not memoized.
//!
//! The memo holds at most [`MEMO_BYTES`]; when an insert would go beyond, it is emptied first
//! (stale entries are replaced as their requests come again, and dropped then). What it holds
//! and how often it was emptied are exported per listen address
//! ([`crate::telemetry::memo`]: `cluster_dns_answer_memo_{bytes,entries,limit_bytes,emptied_total}`).
//! One memo per listen address (router), shared by its UDP workers; a reload builds a new one.
//!
//! Concurrency: every UDP worker inserts. The byte count must always be the cost of the entries
//! held (it is the memo's bound), so emptying the map and zeroing the count happen under the
//! write side of one lock and every insert (count, then map) under its read side: an insert
//! never straddles an emptying. Lookups take no lock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use dashmap::DashMap;
use hickory_proto::op::{Metadata, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};
use rand::seq::SliceRandom;

use tokio::time::Instant;

use crate::chain::{ClientClass, Lifetime, Replay};
use crate::proto::{ChangeCounter, Transport};
use crate::telemetry::memo::ListenerMemoMetrics;

/// The most the memo holds (request and response bytes plus a fixed cost per entry).
pub const MEMO_BYTES: usize = 24 << 20;
/// The cost counted per entry beyond its bytes (map slot, boxes, the entry itself).
const ENTRY_OVERHEAD: usize = 128;
/// Offset of the question's name: right after the header.
const QNAME_AT: usize = 12;

/// What a memo hit needs besides the bytes: where it was answered and what the observers
/// record.
#[derive(Debug, Clone, Copy)]
pub struct MemoInfo {
    /// The block that answered (index into the router).
    pub block: usize,
    /// Index of the zone that matched in the block's zones.
    pub zone: usize,
    /// The type asked.
    pub qtype: RecordType,
    /// The request's DO bit.
    pub dnssec_ok: bool,
    /// The rcode sent.
    pub rcode: ResponseCode,
    /// The response header as sent.
    pub response: Metadata,
    /// Records in the answer section.
    pub answers: usize,
    /// The plugins told of each replay (a [`crate::chain::ReplayPlan::counted`] set).
    pub counted: u32,
    /// The plugin that wrote the response (its `plugin` label).
    pub by: &'static str,
    /// The address records to shuffle (`loadbalance`).
    pub shuffle: Option<Shuffle>,
    /// The scope the response is made from ([`crate::chain::ReplayPlan::scope`]); `None`: any
    /// change makes it stale.
    pub scope: Option<u64>,
    /// Where the SOA serial of its authority section is, from the start of the response, for a
    /// scoped response that carries one.
    pub serial_at: Option<usize>,
    /// For a response a plugin wrote from its store (the cache's hit): how long it holds and
    /// how its TTLs count down ([`crate::chain::Replay::Timed`]).
    pub lifetime: Option<Lifetime>,
    /// The response is made from the zones, so their counters decide whether it is current.
    /// Always for a response without a lifetime; for one with, only when a plugin before the
    /// store read the zones.
    pub reads_zones: bool,
    /// For a response made for a class of clients ([`crate::chain::Next::for_clients_of`]):
    /// replayed only to clients the plugin puts in the same class.
    pub class: Option<ClientClass>,
}

/// A run of `count` address records of `len` bytes each, starting `at` bytes into the
/// response: the records `loadbalance` shuffles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shuffle {
    at: usize,
    count: usize,
    len: usize,
}

/// What an entry is to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The response to the request bytes it is kept by.
    Plain,
    /// No response: the request's responses are made for classes of clients, each kept by
    /// the request bytes followed by its class ([`classed_key`]). Its info names the plugin
    /// that classifies.
    Marker,
    /// The response to the request for clients of this class; reached only through its
    /// request's marker (a request whose own bytes end as a class's would is another request).
    Classed(u64),
}

/// The longest key of a classed response (request bytes but the ID, then 8 bytes of class);
/// longer requests are not memoized for classes.
const CLASSED_KEY_MAX: usize = 512;

/// The key of the response to the request keyed `key` for clients of `class`, in `buf`.
fn classed_key<'b>(key: &[u8], class: u64, buf: &'b mut [u8; CLASSED_KEY_MAX]) -> Option<&'b [u8]> {
    let len = key.len() + 8;
    let out = buf.get_mut(..len)?;
    out[..key.len()].copy_from_slice(key);
    out[key.len()..].copy_from_slice(&class.to_be_bytes());
    Some(out)
}

#[derive(Debug)]
struct Entry {
    /// Plain, or a class's response, or the marker of a request answered by class.
    role: Role,
    /// The counter it was made at: the zones' generation, or for a scoped response their
    /// structure generation.
    generation: u64,
    /// For a scoped response, the scope's counter it was made at.
    scope_generation: u64,
    /// The response from byte 2 on (the ID is the request's). In a response with a lifetime
    /// that ages, its TTLs are as the store took them in (not yet counted down).
    response: Box<[u8]>,
    /// Where the TTLs to count down are in `response` (a response with a lifetime that ages).
    ttl_at: Box<[u16]>,
    info: MemoInfo,
}

#[derive(Debug)]
struct Inner {
    zones: Vec<Arc<dyn ChangeCounter>>,
    entries: DashMap<Box<[u8]>, Entry, foldhash::fast::RandomState>,
    bytes: AtomicUsize,
    /// Read side: one insert (its count and its map entry). Write side: emptying the map and
    /// zeroing `bytes`. Invariant: outside the write side, `bytes` is the cost of the entries
    /// held (or more, for an insert between its count and its entry).
    emptying: RwLock<()>,
    capacity: usize,
    /// Entries held: counted as `bytes` is (an insert that adds one, an emptying that zeroes
    /// it), for the metrics.
    count: AtomicUsize,
    /// The listener's series, once attached ([`AnswerMemo::attach`]).
    metrics: OnceLock<ListenerMemoMetrics>,
}

/// The memo of one listen address. The default is off (nothing is memoized).
#[derive(Debug, Clone, Default)]
pub struct AnswerMemo {
    inner: Option<Arc<Inner>>,
}

impl AnswerMemo {
    /// A memo of responses made from `zones` (whose change counters make them stale) and of
    /// responses from plugins' stores (which hold until their lifetime ends).
    pub fn new(zones: Vec<Arc<dyn ChangeCounter>>) -> Self {
        Self::with_capacity(zones, MEMO_BYTES)
    }

    /// [`AnswerMemo::new`] holding at most `capacity` bytes.
    pub fn with_capacity(zones: Vec<Arc<dyn ChangeCounter>>, capacity: usize) -> Self {
        Self {
            inner: Some(Arc::new(Inner {
                zones,
                entries: DashMap::with_hasher(foldhash::fast::RandomState::default()),
                bytes: AtomicUsize::new(0),
                emptying: RwLock::new(()),
                capacity,
                count: AtomicUsize::new(0),
                metrics: OnceLock::new(),
            })),
        }
    }

    /// Reports what it holds to `metrics` from now on (only the first call takes effect).
    pub fn attach(&self, metrics: ListenerMemoMetrics) {
        if let Some(inner) = self.inner.as_ref()
            && inner.metrics.set(metrics).is_ok()
        {
            inner.report();
        }
    }

    /// True when it memoizes.
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// True when it may keep a response sent over `protocol`: it memoizes, and only UDP
    /// responses (the others are not replayed).
    pub fn may_keep(&self, protocol: Transport) -> bool {
        self.is_on() && matches!(protocol, Transport::Udp)
    }

    /// True when it can write the zone's current SOA serial into a replayed response (it
    /// follows exactly one zone).
    pub fn patches_serials(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| i.zones.len() == 1)
    }

    /// The zones' generation now (read before making an answer to insert).
    pub fn generation(&self) -> u64 {
        self.inner.as_ref().map_or(0, |i| i.generation())
    }

    /// Number of entries held (current or stale).
    pub fn len(&self) -> usize {
        self.inner.as_ref().map_or(0, |i| i.entries.len())
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the memoized response to `req` into `out` (cleared first) if there is a current
    /// one.
    pub fn lookup(&self, req: &[u8], out: &mut Vec<u8>) -> Option<MemoInfo> {
        self.lookup_for(req, out, |_| None)
    }

    /// [`AnswerMemo::lookup`] for a client that `classify` puts in a class, for a request whose
    /// responses are made for classes of clients (given the marker's info: which block and
    /// plugin classify; `None`: no class, a miss).
    pub fn lookup_for(
        &self,
        req: &[u8],
        out: &mut Vec<u8>,
        classify: impl FnOnce(&MemoInfo) -> Option<u64>,
    ) -> Option<MemoInfo> {
        let inner = self.inner.as_ref()?;
        let key = req.get(2..)?;
        if req.len() < QNAME_AT {
            return None;
        }
        let found = inner.entries.get(key)?;
        let entry = match found.role {
            Role::Plain => found,
            Role::Classed(_) => return None,
            Role::Marker => {
                let marker = found.info;
                drop(found);
                inner.classed(key, &marker, classify)?
            }
        };
        // For a response from a store: the whole seconds since it took the response in (how
        // the store counts TTLs down), or a miss once the store's entry expired.
        let elapsed = match entry.info.lifetime {
            None => None,
            Some(held) => {
                let now = Instant::now();
                if now >= held.expires {
                    return None;
                }
                Some(u32::try_from(now.saturating_duration_since(held.stored).as_secs()).unwrap_or(u32::MAX))
            }
        };
        let current = match entry.info.scope {
            _ if !entry.info.reads_zones => true,
            None => entry.generation == inner.generation(),
            Some(scope) => {
                entry.generation == inner.structure_generation()
                    && entry.scope_generation == inner.scope_generation(scope)
            }
        };
        if !current {
            return None;
        }
        out.clear();
        out.extend_from_slice(&req[..2]);
        out.extend_from_slice(&entry.response);
        if let Some(elapsed) = elapsed {
            for &at in entry.ttl_at.iter() {
                if let Some(w) = word(out, usize::from(at)) {
                    *w = u32::from_be_bytes(*w).saturating_sub(elapsed).to_be_bytes();
                }
            }
        }
        let info = entry.info;
        drop(entry);
        if let Some(s) = info.shuffle {
            shuffle(out, s);
        }
        if let Some(at) = info.serial_at
            && let Some(serial) = inner.serial()
            && let Some(w) = word(out, at)
        {
            *w = serial.to_be_bytes();
        }
        Some(info)
    }

    /// Keeps `response` (the whole message as sent) for `req`, made at `generation` (read
    /// before the answer was made). Nothing is kept if the zones changed since.
    pub fn insert(&self, req: &[u8], generation: u64, response: &[u8], info: MemoInfo) {
        let Some(inner) = self.inner.as_ref() else {
            return;
        };
        let (Some(key), Some(body)) = (req.get(2..), response.get(2..)) else {
            return;
        };
        if req.len() < QNAME_AT {
            return;
        }
        // The finer counters first, then the check that nothing changed since `generation`
        // (see the module docs for why this order).
        let (entry_generation, scope_generation) = match info.scope {
            None => (generation, 0),
            Some(scope) => (inner.structure_generation(), inner.scope_generation(scope)),
        };
        if inner.generation() != generation {
            return;
        }
        let mut body: Box<[u8]> = body.into();
        let mut ttl_at: Box<[u16]> = Box::default();
        if let Some(Lifetime {
            aged_by: Some(aged_by),
            ..
        }) = info.lifetime
        {
            // Kept as the store took them in; each hit counts them down again.
            let Some(at) = unaged(response, &mut body, aged_by) else {
                return;
            };
            ttl_at = at;
        }
        let entry = Entry {
            role: Role::Plain,
            generation: entry_generation,
            scope_generation,
            response: body,
            ttl_at,
            info,
        };
        match info.class {
            None => inner.put(key, entry),
            Some(class) => inner.put_classed(key, entry, class),
        }
    }

    /// The bytes counted against the capacity, and the cost of the entries really held.
    #[cfg(test)]
    fn accounting(&self) -> (usize, usize) {
        let Some(inner) = self.inner.as_ref() else {
            return (0, 0);
        };
        let _emptying = inner.emptying.write().unwrap_or_else(PoisonError::into_inner);
        let held = inner.entries.iter().map(|e| e.value().cost(e.key().len())).sum();
        assert_eq!(
            inner.count.load(Ordering::Acquire),
            inner.entries.len(),
            "the entry count is not the entries held"
        );
        (inner.bytes.load(Ordering::Acquire), held)
    }
}

impl Entry {
    /// What it counts against the capacity, with a key of `key_len` bytes.
    fn cost(&self, key_len: usize) -> usize {
        key_len + self.response.len() + 2 * self.ttl_at.len() + ENTRY_OVERHEAD
    }
}

/// Where the TTL of each record of `msg` (a whole DNS message) is, from its first byte; the
/// OPT pseudo-record's is not a TTL and is left out. `None` when `msg` does not parse that far.
pub fn ttl_offsets(msg: &[u8]) -> Option<Vec<u16>> {
    let count = |at: usize| -> Option<usize> {
        Some(usize::from(u16::from_be_bytes([
            *msg.get(at)?,
            *msg.get(at + 1)?,
        ])))
    };
    let questions = count(4)?;
    let records = count(6)? + count(8)? + count(10)?;
    let mut at = QNAME_AT;
    for _ in 0..questions {
        at = skip_name(msg, at)? + 4;
    }
    let mut offsets = Vec::with_capacity(records);
    for _ in 0..records {
        at = skip_name(msg, at)?;
        let rtype = u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]);
        let rdlen = count(at + 8)?;
        if rtype != u16::from(RecordType::OPT) {
            offsets.push(u16::try_from(at + 4).ok()?);
        }
        at += 10 + rdlen;
    }
    (at <= msg.len()).then_some(offsets)
}

/// The offset just past the name that starts at `at` in `msg`.
fn skip_name(msg: &[u8], at: usize) -> Option<usize> {
    super::request::name_end(msg, at).map(|(end, _)| end)
}

/// Where the TTLs of `response` are (from its start), each in `body` (the response past its
/// ID) raised by `aged_by`: back to what the store took in, as each hit counts them down again.
/// `None` when a TTL cannot be found or was counted down to nothing (which TTL it had cannot
/// be told).
fn unaged(response: &[u8], body: &mut [u8], aged_by: u32) -> Option<Box<[u16]>> {
    let at = ttl_offsets(response)?;
    for &a in &at {
        let w = usize::from(a).checked_sub(2).and_then(|i| word(body, i))?;
        let ttl = u32::from_be_bytes(*w);
        if ttl == 0 {
            return None;
        }
        *w = ttl.saturating_add(aged_by).to_be_bytes();
    }
    Some(at.into())
}

/// The four bytes at `at` of `buf` (a TTL or a SOA serial, big-endian), if it holds them.
fn word(buf: &mut [u8], at: usize) -> Option<&mut [u8; 4]> {
    buf.get_mut(at..at.checked_add(4)?)?.try_into().ok()
}

impl Inner {
    /// The response to the request keyed `key` made for the class `classify` puts the client
    /// in, given the request's marker. Out of line, and through `try_get` (a shard being
    /// written is a miss), so the plain lookup keeps the one inlined `get` it had before
    /// classes.
    #[inline(never)]
    fn classed(
        &self,
        key: &[u8],
        marker: &MemoInfo,
        classify: impl FnOnce(&MemoInfo) -> Option<u64>,
    ) -> Option<dashmap::mapref::one::Ref<'_, Box<[u8]>, Entry>> {
        let class = classify(marker)?;
        let mut buf = [0u8; CLASSED_KEY_MAX];
        let entry = self
            .entries
            .try_get(classed_key(key, class, &mut buf)?)
            .try_unwrap()?;
        (entry.role == Role::Classed(class)).then_some(entry)
    }

    /// Keeps `entry` by `key`, within the capacity (emptying the memo first when it would go
    /// beyond).
    fn put(&self, key: &[u8], entry: Entry) {
        let cost = entry.cost(key.len());
        if cost > self.capacity {
            return;
        }
        let mut held = self.emptying.read().unwrap_or_else(PoisonError::into_inner);
        if self.bytes.fetch_add(cost, Ordering::AcqRel) + cost > self.capacity {
            self.bytes.fetch_sub(cost, Ordering::AcqRel);
            drop(held);
            {
                let _emptying = self.emptying.write().unwrap_or_else(PoisonError::into_inner);
                self.entries.clear();
                self.bytes.store(0, Ordering::Release);
                self.count.store(0, Ordering::Release);
            }
            if let Some(m) = self.metrics.get() {
                m.emptied();
            }
            held = self.emptying.read().unwrap_or_else(PoisonError::into_inner);
            if self.bytes.fetch_add(cost, Ordering::AcqRel) + cost > self.capacity {
                self.bytes.fetch_sub(cost, Ordering::AcqRel);
                return;
            }
        }
        let old = self.entries.insert(key.into(), entry);
        match old {
            Some(old) => {
                self.bytes.fetch_sub(old.cost(key.len()), Ordering::AcqRel);
            }
            None => {
                self.count.fetch_add(1, Ordering::AcqRel);
            }
        }
        drop(held);
        self.report();
    }

    /// Keeps `entry`, made for a class of clients: by the request's `key` and the `class`,
    /// and the request's marker says so (and which plugin classifies).
    fn put_classed(&self, key: &[u8], entry: Entry, class: ClientClass) {
        let (generation, scope_generation, info) = (entry.generation, entry.scope_generation, entry.info);
        let mut buf = [0u8; CLASSED_KEY_MAX];
        let Some(classed) = classed_key(key, class.class, &mut buf) else {
            return;
        };
        self.put(
            classed,
            Entry {
                role: Role::Classed(class.class),
                ..entry
            },
        );
        // Looked for after the classed put, which may have emptied the memo. (`try_get`: a
        // shard being written reads as unmarked, and the marker is put again.)
        let marked = self.entries.try_get(key).try_unwrap().is_some_and(|e| {
            e.role == Role::Marker
                && e.info.block == info.block
                && e.info.class.map(|c| c.plugin) == Some(class.plugin)
        });
        if !marked {
            let marker = Entry {
                role: Role::Marker,
                generation,
                scope_generation,
                response: Box::default(),
                ttl_at: Box::default(),
                info,
            };
            self.put(key, marker);
        }
    }

    /// Sets the listener's gauges to what it holds now (a no-op before metrics are attached).
    fn report(&self) {
        if let Some(m) = self.metrics.get() {
            m.set(
                self.bytes.load(Ordering::Acquire),
                self.count.load(Ordering::Acquire),
                self.capacity,
            );
        }
    }

    fn generation(&self) -> u64 {
        self.zones
            .iter()
            .map(|z| z.generation())
            .fold(0, u64::wrapping_add)
    }

    fn structure_generation(&self) -> u64 {
        self.zones
            .iter()
            .map(|z| z.structure_generation())
            .fold(0, u64::wrapping_add)
    }

    fn scope_generation(&self, scope: u64) -> u64 {
        self.zones
            .iter()
            .map(|z| z.scope_generation(scope))
            .fold(0, u64::wrapping_add)
    }

    /// The SOA serial to write into scoped negative answers: the one zone's (the memo keeps
    /// none of them when it has several: see `memo_info`).
    fn serial(&self) -> Option<u32> {
        match self.zones.as_slice() {
            [zone] => zone.serial(),
            _ => None,
        }
    }
}

/// Where the serial of `soa` sits in `response` (from its first byte): the SOA's last 20 rdata
/// bytes (serial, refresh, retry, expire, minimum) found exactly once, else `None`.
pub fn serial_offset(response: &[u8], soa: &hickory_proto::rr::rdata::SOA) -> Option<usize> {
    let mut tail = [0u8; 20];
    tail[..4].copy_from_slice(&soa.serial.to_be_bytes());
    tail[4..8].copy_from_slice(&soa.refresh.to_be_bytes());
    tail[8..12].copy_from_slice(&soa.retry.to_be_bytes());
    tail[12..16].copy_from_slice(&soa.expire.to_be_bytes());
    tail[16..].copy_from_slice(&soa.minimum.to_be_bytes());
    let mut found = response
        .windows(tail.len())
        .enumerate()
        .filter(|(_, w)| *w == tail)
        .map(|(i, _)| i);
    let at = found.next()?;
    found.next().is_none().then_some(at)
}

/// Shuffles the fixed-size records `s` names in `out`, in place.
fn shuffle(out: &mut [u8], s: Shuffle) {
    let Some(run) = out.get_mut(s.at..s.at + s.count * s.len) else {
        return;
    };
    // At most 64 records are shuffled per response (a UDP answer holds at most 76 A records).
    let mut order: [u8; 64] = std::array::from_fn(|i| i as u8);
    let n = s.count.min(64);
    order[..n].shuffle(&mut rand::rng());
    let mut copy = [0u8; 64 * 28];
    let bytes = n * s.len;
    copy[..bytes].copy_from_slice(&run[..bytes]);
    for (dst, &src) in order[..n].iter().enumerate() {
        let src = usize::from(src);
        run[dst * s.len..(dst + 1) * s.len].copy_from_slice(&copy[src * s.len..(src + 1) * s.len]);
    }
}

/// How `loadbalance` would shuffle an encoded response, for the memo: `Ok(None)` when it
/// would not change it, `Ok(Some)` when the answer section is a run of A (or AAAA) records
/// owned by the question's name and written as a pointer to it (the form `fit` writes), and
/// `Err(())` when it would shuffle in another way (the response is not memoized).
#[allow(clippy::result_unit_err)]
pub fn shuffle_plan(
    response: &[u8],
    question_len: usize,
    truncated: bool,
    answers: &[Record],
    additional: &[Record],
) -> Result<Option<Shuffle>, ()> {
    if Replay::reorders(additional) {
        return Err(());
    }
    if !Replay::reorders(answers) {
        return Ok(None);
    }
    let addrs = answers
        .iter()
        .filter(|r| matches!(r.data, RData::A(_) | RData::AAAA(_)))
        .count();
    if truncated || addrs != answers.len() || addrs > 64 {
        return Err(());
    }
    let len = match answers[0].data {
        RData::A(_) => 16,
        _ => 28,
    };
    if answers
        .iter()
        .any(|r| std::mem::discriminant(&r.data) != std::mem::discriminant(&answers[0].data))
    {
        return Err(());
    }
    let at = QNAME_AT + question_len;
    let run = response.get(at..at + addrs * len).ok_or(())?;
    // Each record starts with a pointer to the question's name (0xC00C).
    if run.chunks(len).all(|r| r.starts_with(&[0xC0, QNAME_AT as u8])) {
        Ok(Some(Shuffle {
            at,
            count: addrs,
            len,
        }))
    } else {
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, AtomicU64};

    use super::*;
    use hickory_proto::op::MessageType;

    /// A zone that only counts its changes.
    #[derive(Debug, Default)]
    struct Zone(AtomicU64);

    impl Zone {
        fn change(&self) {
            self.0.fetch_add(1, Ordering::AcqRel);
        }
    }

    impl ChangeCounter for Zone {
        fn generation(&self) -> u64 {
            self.0.load(Ordering::Acquire)
        }
    }

    fn info() -> MemoInfo {
        MemoInfo {
            block: 0,
            zone: 0,
            qtype: RecordType::A,
            dnssec_ok: false,
            rcode: ResponseCode::NoError,
            response: Metadata::new(0, MessageType::Response, hickory_proto::op::OpCode::Query),
            answers: 1,
            counted: 0,
            by: "kubernetes",
            shuffle: None,
            scope: None,
            serial_at: None,
            lifetime: None,
            reads_zones: true,
            class: None,
        }
    }

    /// A zone with finer counters: eight scopes, a structure counter and a serial, bumped in
    /// the order the cluster zone bumps them (the change counter first).
    #[derive(Debug, Default)]
    struct ScopedZone {
        all: AtomicU64,
        structure: AtomicU64,
        scopes: [AtomicU64; 8],
        serial: AtomicU32,
    }

    impl ScopedZone {
        fn change_scope(&self, key: u64) {
            self.serial.fetch_add(1, Ordering::SeqCst);
            self.all.fetch_add(1, Ordering::SeqCst);
            self.scopes[(key % 8) as usize].fetch_add(1, Ordering::SeqCst);
        }
        fn change_structure(&self) {
            self.all.fetch_add(1, Ordering::SeqCst);
            self.structure.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl ChangeCounter for ScopedZone {
        fn generation(&self) -> u64 {
            self.all.load(Ordering::SeqCst)
        }
        fn structure_generation(&self) -> u64 {
            self.structure.load(Ordering::SeqCst)
        }
        fn scope_generation(&self, key: u64) -> u64 {
            self.scopes[(key % 8) as usize].load(Ordering::SeqCst)
        }
        fn serial(&self) -> Option<u32> {
            Some(self.serial.load(Ordering::SeqCst))
        }
    }

    fn scoped(scope: u64) -> MemoInfo {
        MemoInfo {
            scope: Some(scope),
            ..info()
        }
    }

    fn named(name: u8) -> Vec<u8> {
        let mut q = REQ.to_vec();
        q[13] = name;
        q
    }

    /// A response made from one scope stays through changes to other scopes; a change to its
    /// own scope or to the structure makes it stale; an unscoped one goes with any change.
    #[test]
    fn a_scoped_entry_survives_changes_elsewhere_only() {
        let zone = Arc::new(ScopedZone::default());
        let memo = AnswerMemo::new(vec![zone.clone() as Arc<dyn ChangeCounter>]);
        let put = |q: &[u8], info: MemoInfo| memo.insert(q, memo.generation(), q, info);
        let hit = |q: &[u8]| memo.lookup(q, &mut Vec::new()).is_some();
        put(&named(b'a'), scoped(1));
        put(&named(b'b'), scoped(2));
        put(&named(b'c'), info());
        assert!(hit(&named(b'a')) && hit(&named(b'b')) && hit(&named(b'c')));
        zone.change_scope(2);
        assert!(hit(&named(b'a')), "a change to another scope made it stale");
        assert!(!hit(&named(b'b')), "served after its own scope changed");
        assert!(!hit(&named(b'c')), "an unscoped entry served after a change");
        put(&named(b'b'), scoped(2));
        assert!(hit(&named(b'b')));
        zone.change_structure();
        assert!(
            !hit(&named(b'a')) && !hit(&named(b'b')),
            "served after a structure change"
        );
    }

    /// A scoped response with a SOA gets the zone's serial of the moment on each hit.
    #[test]
    fn a_scoped_negative_answer_carries_the_current_serial() {
        let zone = Arc::new(ScopedZone::default());
        zone.serial.store(0x0102_0304, Ordering::SeqCst);
        let memo = AnswerMemo::new(vec![zone.clone() as Arc<dyn ChangeCounter>]);
        let mut resp = REQ.to_vec();
        let at = resp.len();
        resp.extend_from_slice(&0x0102_0304u32.to_be_bytes());
        let info = MemoInfo {
            serial_at: Some(at),
            ..scoped(1)
        };
        memo.insert(REQ, memo.generation(), &resp, info);
        zone.change_scope(2);
        let mut out = Vec::new();
        assert!(memo.lookup(REQ, &mut out).is_some());
        assert_eq!(&out[at..], &0x0102_0305u32.to_be_bytes());
        assert_eq!(&out[2..at], &resp[2..at]);
    }

    #[test]
    fn the_serial_is_found_once_or_not_at_all() {
        use hickory_proto::rr::rdata::SOA;
        let soa = SOA::new(
            hickory_proto::rr::Name::root(),
            hickory_proto::rr::Name::root(),
            7,
            7200,
            1800,
            86400,
            30,
        );
        let tail: Vec<u8> = [7u32, 7200, 1800, 86400, 30]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let mut msg = vec![9u8; 40];
        msg.extend_from_slice(&tail);
        assert_eq!(serial_offset(&msg, &soa), Some(40));
        msg.extend_from_slice(&tail);
        assert_eq!(serial_offset(&msg, &soa), None, "twice: ambiguous");
        assert_eq!(serial_offset(&[0u8; 40], &soa), None);
    }

    const REQ: &[u8] = &[0xAB, 0xCD, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'a', 0, 0, 1, 0, 1];

    #[test]
    fn a_hit_takes_the_request_id_and_a_zone_change_makes_it_stale() {
        let zone = Arc::new(Zone::default());
        let memo = AnswerMemo::new(vec![zone.clone() as Arc<dyn ChangeCounter>]);
        let g = memo.generation();
        let mut resp = REQ.to_vec();
        resp[2] |= 0x80;
        memo.insert(REQ, g, &resp, info());
        let mut other = REQ.to_vec();
        other[0] = 0x11;
        other[1] = 0x22;
        let mut out = Vec::new();
        assert!(memo.lookup(&other, &mut out).is_some());
        assert_eq!(&out[..2], &[0x11, 0x22]);
        assert_eq!(&out[2..], &resp[2..]);
        // Another question misses.
        let mut q = REQ.to_vec();
        q[13] = b'b';
        assert!(memo.lookup(&q, &mut out).is_none());
        zone.change();
        assert!(
            memo.lookup(&other, &mut out).is_none(),
            "served after the zone changed"
        );
    }

    /// A response made for a class of clients is replayed to clients of that class alone,
    /// each class keeps its own, a plain lookup (no class) misses, and a request whose own
    /// bytes end as a classed key does not reach the classed response.
    #[test]
    fn a_classed_response_is_replayed_to_its_class_only() {
        let zone = Arc::new(Zone::default());
        let memo = AnswerMemo::new(vec![zone.clone() as Arc<dyn ChangeCounter>]);
        let classed = |class: u64, note: u8| MemoInfo {
            class: Some(ClientClass {
                plugin: 3,
                class,
                note,
            }),
            ..info()
        };
        let answer = |last: u8| {
            let mut r = REQ.to_vec();
            r[2] |= 0x80;
            r.push(last);
            r
        };
        let g = memo.generation();
        memo.insert(REQ, g, &answer(1), classed(7, 1));
        memo.insert(REQ, g, &answer(2), classed(8, 2));
        let mut out = Vec::new();
        let hit = memo.lookup_for(REQ, &mut out, |m| {
            assert_eq!(m.class.map(|c| c.plugin), Some(3));
            Some(7)
        });
        assert_eq!(hit.and_then(|i| i.class).map(|c| c.note), Some(1));
        assert_eq!(out.last(), Some(&1));
        assert!(memo.lookup_for(REQ, &mut out, |_| Some(8)).is_some());
        assert_eq!(out.last(), Some(&2));
        assert!(
            memo.lookup_for(REQ, &mut out, |_| Some(9)).is_none(),
            "another class"
        );
        assert!(memo.lookup_for(REQ, &mut out, |_| None).is_none(), "no class");
        assert!(memo.lookup(REQ, &mut out).is_none(), "no classifier");
        let mut forged = REQ.to_vec();
        forged.extend_from_slice(&7u64.to_be_bytes());
        assert!(
            memo.lookup_for(&forged, &mut out, |_| Some(7)).is_none(),
            "the classed key's bytes"
        );
        // Two classes' responses and the marker; a plain response replaces the marker.
        assert_eq!(memo.len(), 3);
        let (counted, held) = memo.accounting();
        assert_eq!(counted, held);
        memo.insert(REQ, g, &answer(3), info());
        assert!(memo.lookup(REQ, &mut out).is_some());
        assert_eq!(out.last(), Some(&3));
        zone.change();
        assert!(memo.lookup_for(REQ, &mut out, |_| Some(7)).is_none(), "stale");
    }

    #[test]
    fn an_answer_made_before_a_change_is_not_kept() {
        let zone = Arc::new(Zone::default());
        let memo = AnswerMemo::new(vec![zone.clone() as Arc<dyn ChangeCounter>]);
        let g = memo.generation();
        zone.change();
        memo.insert(REQ, g, REQ, info());
        assert!(memo.is_empty());
    }

    #[test]
    fn a_full_memo_empties_itself_for_the_next_answer() {
        let zone = Arc::new(Zone::default());
        let memo = AnswerMemo::with_capacity(
            vec![zone.clone() as Arc<dyn ChangeCounter>],
            2 * (REQ.len() * 2 + ENTRY_OVERHEAD),
        );
        let g = memo.generation();
        for name in [b'a', b'b'] {
            memo.insert(&named(name), g, &named(name), info());
        }
        assert_eq!(memo.len(), 2);
        memo.insert(&named(b'c'), g, &named(b'c'), info());
        assert_eq!(memo.len(), 1, "full: emptied, then the new answer kept");
        assert!(memo.lookup(&named(b'c'), &mut Vec::new()).is_some());
        let (counted, held) = memo.accounting();
        assert_eq!(counted, held);
    }

    /// A response with an A record (TTL `ttl`), a SOA in the authority section (TTL `ttl`)
    /// and an OPT, as the server sends them.
    fn response_with_ttls(ttl: u32) -> Vec<u8> {
        use hickory_proto::op::{Edns, Message, Query};
        use hickory_proto::rr::rdata::{A, SOA};
        use hickory_proto::rr::{Name, RData, Record};
        use hickory_proto::serialize::binary::BinEncodable;
        let name = Name::from_ascii("a.example.").unwrap();
        let mut m = Message::new(0xABCD, MessageType::Response, hickory_proto::op::OpCode::Query);
        m.add_query(Query::query(name.clone(), RecordType::A));
        m.add_answer(Record::from_rdata(
            name.clone(),
            ttl,
            RData::A(A::new(192, 0, 2, 1)),
        ));
        let soa = SOA::new(name.clone(), name.clone(), 1, 2, 3, 4, 5);
        m.add_authority(Record::from_rdata(name, ttl, RData::SOA(soa)));
        m.set_edns(Edns::new());
        m.to_bytes().unwrap()
    }

    fn ttls(msg: &[u8]) -> Vec<u32> {
        ttl_offsets(msg)
            .unwrap()
            .iter()
            .map(|&at| {
                let at = usize::from(at);
                u32::from_be_bytes(msg[at..at + 4].try_into().unwrap())
            })
            .collect()
    }

    #[test]
    fn the_ttls_of_a_message_are_found_and_the_opts_left_out() {
        let msg = response_with_ttls(0x0102_0304);
        assert_eq!(ttls(&msg), vec![0x0102_0304; 2], "A and SOA, not the OPT");
        assert_eq!(ttl_offsets(&msg[..msg.len() - 1]), None, "cut short");
        assert_eq!(ttl_offsets(&msg[..5]), None);
    }

    /// A response from a store (the cache) counts its TTLs down as the store would, whatever
    /// the zones do, and goes when the store's entry expires. No zones are needed for it.
    #[tokio::test(start_paused = true)]
    async fn a_timed_entry_counts_its_ttls_down_and_ends_with_its_lifetime() {
        let zone = Arc::new(Zone::default());
        for zones in [vec![zone.clone() as Arc<dyn ChangeCounter>], Vec::new()] {
            let memo = AnswerMemo::new(zones);
            assert!(memo.is_on());
            let stored = Instant::now();
            tokio::time::advance(std::time::Duration::from_millis(4_500)).await;
            // The store answered 4 whole seconds after taking it in, with TTL 30: 26.
            let info = MemoInfo {
                by: "cache",
                lifetime: Some(Lifetime {
                    stored,
                    expires: stored + std::time::Duration::from_secs(30),
                    aged_by: Some(4),
                    made_from: None,
                }),
                reads_zones: false,
                ..info()
            };
            memo.insert(REQ, memo.generation(), &response_with_ttls(26), info);
            let mut out = Vec::new();
            assert!(memo.lookup(REQ, &mut out).is_some());
            assert_eq!(ttls(&out), vec![26, 26]);
            assert_eq!(&out[..2], &REQ[..2], "the request's ID");
            zone.change();
            tokio::time::advance(std::time::Duration::from_secs(10)).await;
            assert!(memo.lookup(REQ, &mut out).is_some(), "gone with a zone change");
            assert_eq!(ttls(&out), vec![16, 16], "14.5 s after it was stored");
            tokio::time::advance(std::time::Duration::from_millis(15_499)).await;
            assert!(memo.lookup(REQ, &mut out).is_some());
            assert_eq!(ttls(&out), vec![1, 1]);
            tokio::time::advance(std::time::Duration::from_millis(1)).await;
            assert!(memo.lookup(REQ, &mut out).is_none(), "served past its lifetime");
        }
    }

    /// `keepttl`: the TTLs go out as stored; the lifetime still ends the entry.
    #[tokio::test(start_paused = true)]
    async fn a_timed_entry_that_keeps_its_ttls() {
        let memo = AnswerMemo::new(Vec::new());
        let stored = Instant::now();
        let info = MemoInfo {
            lifetime: Some(Lifetime {
                stored,
                expires: stored + std::time::Duration::from_secs(5),
                aged_by: None,
                made_from: None,
            }),
            reads_zones: false,
            ..info()
        };
        memo.insert(REQ, 0, &response_with_ttls(300), info);
        tokio::time::advance(std::time::Duration::from_secs(4)).await;
        let mut out = Vec::new();
        assert!(memo.lookup(REQ, &mut out).is_some());
        assert_eq!(ttls(&out), vec![300, 300]);
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        assert!(memo.lookup(REQ, &mut out).is_none());
    }

    /// The gauges follow what the memo holds, and an emptying to stay within the bound is
    /// counted.
    #[test]
    fn what_it_holds_is_exported() {
        let registry = prometheus::Registry::new();
        let families = crate::telemetry::memo::MemoMetrics::register(&registry).unwrap();
        let zone = Arc::new(Zone::default());
        let capacity = 2 * (REQ.len() * 2 + ENTRY_OVERHEAD);
        let memo = AnswerMemo::with_capacity(vec![zone as Arc<dyn ChangeCounter>], capacity);
        memo.attach(families.listener("dns://:53"));
        let g = memo.generation();
        let value = |family: &str| -> String {
            let text = crate::telemetry::render_registry(&registry);
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{family}{{server=\"dns://:53\"}} ")))
                .unwrap_or_else(|| panic!("no {family} in {text}"))
                .to_owned()
        };
        assert_eq!(value("cluster_dns_answer_memo_entries"), "0");
        assert_eq!(value("cluster_dns_answer_memo_limit_bytes"), capacity.to_string());
        memo.insert(&named(b'a'), g, &named(b'a'), info());
        memo.insert(&named(b'b'), g, &named(b'b'), info());
        assert_eq!(value("cluster_dns_answer_memo_entries"), "2");
        let two = 2 * ((REQ.len() - 2) * 2 + ENTRY_OVERHEAD);
        assert_eq!(value("cluster_dns_answer_memo_bytes"), two.to_string());
        assert_eq!(value("cluster_dns_answer_memo_emptied_total"), "0");
        memo.insert(&named(b'c'), g, &named(b'c'), info());
        assert_eq!(value("cluster_dns_answer_memo_entries"), "1");
        assert_eq!(value("cluster_dns_answer_memo_emptied_total"), "1");
        let (counted, held) = memo.accounting();
        assert_eq!(value("cluster_dns_answer_memo_bytes"), counted.to_string());
        assert_eq!(counted, held);
    }

    #[test]
    fn shuffling_keeps_every_record_whole() {
        let mut out: Vec<u8> = (0..12u8).collect();
        for i in 0..5u8 {
            out.extend_from_slice(&[0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 10, 0, 0, i]);
        }
        let s = Shuffle {
            at: 12,
            count: 5,
            len: 16,
        };
        let mut seen_other_order = false;
        for _ in 0..50 {
            let mut o = out.clone();
            shuffle(&mut o, s);
            assert_eq!(&o[..12], &out[..12]);
            let mut last: Vec<u8> = o[12..].chunks(16).map(|r| r[15]).collect();
            assert!(o[12..].chunks(16).all(|r| r[..15] == out[12..27]));
            seen_other_order |= last != [0, 1, 2, 3, 4];
            last.sort_unstable();
            assert_eq!(last, [0, 1, 2, 3, 4]);
        }
        assert!(seen_other_order);
    }

    /// UDP workers insert while the zone changes under them (a multi-threaded runtime, four
    /// inserting tasks, one changing the zone): the byte count stays the cost of what is held,
    /// so the bound holds. Before inserts and emptying were ordered by one lock, an insert that
    /// straddled an emptying left its bytes uncounted or counted twice.
    #[test]
    fn concurrent_inserts_across_zone_changes_keep_the_count_exact() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let zone = Arc::new(ScopedZone::default());
        // Room for a dozen entries: inserts keep filling it, so it empties under them too.
        let memo = AnswerMemo::with_capacity(
            vec![zone.clone() as Arc<dyn ChangeCounter>],
            12 * (2 * (REQ.len() + 4) + ENTRY_OVERHEAD),
        );
        rt.block_on(async {
            let mut tasks = Vec::new();
            for t in 0..4u8 {
                let memo = memo.clone();
                tasks.push(tokio::spawn(async move {
                    for i in 0..20_000u32 {
                        let mut q = REQ.to_vec();
                        q[13] = b'a' + t;
                        // Four distinct names per task, so inserts also replace entries.
                        q.extend_from_slice(&(i % 4).to_be_bytes());
                        let g = memo.generation();
                        // Plain and scoped responses, and responses for classes of clients
                        // (a marker and a classed entry each) of the same requests.
                        let info = match i % 3 {
                            0 => scoped(u64::from(i % 4)),
                            1 => info(),
                            _ => MemoInfo {
                                class: Some(ClientClass {
                                    plugin: 0,
                                    class: u64::from(i % 5),
                                    note: 0,
                                }),
                                ..scoped(u64::from(i % 4))
                            },
                        };
                        memo.insert(&q, g, &q, info);
                        if i.is_multiple_of(64) {
                            tokio::task::yield_now().await;
                        }
                    }
                }));
            }
            let changer = {
                let zone = zone.clone();
                tokio::spawn(async move {
                    for i in 0..5_000u32 {
                        if i % 8 == 0 {
                            zone.change_structure();
                        } else {
                            zone.change_scope(u64::from(i));
                        }
                        if i.is_multiple_of(16) {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            };
            for t in tasks {
                t.await.unwrap();
            }
            changer.await.unwrap();
        });
        let (counted, held) = memo.accounting();
        assert_eq!(counted, held, "the byte count drifted from the entries held");
    }
}
