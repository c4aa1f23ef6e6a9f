//! The answer memo: the wire-format responses the `kubernetes` plugin gave to UDP queries, kept
//! by the exact request bytes (all but the ID) and sent again while the cluster zones are
//! unchanged. It is PowerDNS's packet cache, for the cluster zone only.
//!
//! Why it is exact: a memoized response is a function of the request bytes and the cluster
//! zones alone. The server keeps a response only when every plugin the question visited
//! declared it replayable ([`crate::chain::Replay`]; the default is "never", so a plugin whose
//! answer depends on the client, the clock or a file is never replayed), no observer of the
//! block needs every question (`log`), and the rcode is not a failure. Every zone's change
//! counter ([`ChangeCounter`]) is read before the answer is made and must be the same when the
//! memo is read; any change to any zone makes every entry stale. A plugin that counts what it
//! passes on (the cache) is told of each replay. With `loadbalance` (replayed reordered), the
//! address records of a hit are shuffled on the wire, as the plugin shuffles them; a response
//! it would shuffle otherwise (SRV glue, a truncated answer) is not memoized.
//!
//! The memo holds at most [`MEMO_BYTES`]; when full it takes no more until the zone changes.
//! One memo per listen address (router), shared by its UDP workers; a reload builds a new one.
//!
//! Concurrency: every UDP worker inserts. The byte count must always be the cost of the entries
//! held (it is the memo's bound), so emptying the map and zeroing the count happen under the
//! write side of one lock and every insert (count, then map) under its read side: an insert
//! never straddles an emptying. Lookups take no lock.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use dashmap::DashMap;
use hickory_proto::op::{Metadata, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};
use rand::seq::SliceRandom;

use crate::proto::{ChangeCounter, shuffles};

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
}

/// A run of `count` address records of `len` bytes each, starting `at` bytes into the
/// response: the records `loadbalance` shuffles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shuffle {
    at: usize,
    count: usize,
    len: usize,
}

#[derive(Debug)]
struct Entry {
    /// The zones' generation it was made at.
    generation: u64,
    /// The response from byte 2 on (the ID is the request's).
    response: Box<[u8]>,
    info: MemoInfo,
}

#[derive(Debug)]
struct Inner {
    zones: Vec<Arc<dyn ChangeCounter>>,
    entries: DashMap<Box<[u8]>, Entry, foldhash::fast::RandomState>,
    bytes: AtomicUsize,
    /// The generation the held entries were made at; an insert at a newer one clears them.
    epoch: AtomicU64,
    /// Read side: one insert (its count and its map entry). Write side: emptying the map,
    /// zeroing `bytes` and moving `epoch`. Invariant: outside the write side, `bytes` is the
    /// cost of the entries held (or more, for an insert between its count and its entry).
    emptying: RwLock<()>,
    capacity: usize,
}

/// The memo of one listen address. The default is off (nothing is memoized).
#[derive(Debug, Clone, Default)]
pub struct AnswerMemo {
    inner: Option<Arc<Inner>>,
}

impl AnswerMemo {
    /// A memo valid while `zones` are unchanged; off when there are none.
    pub fn new(zones: Vec<Arc<dyn ChangeCounter>>) -> Self {
        Self::with_capacity(zones, MEMO_BYTES)
    }

    /// [`AnswerMemo::new`] holding at most `capacity` bytes.
    pub fn with_capacity(zones: Vec<Arc<dyn ChangeCounter>>, capacity: usize) -> Self {
        if zones.is_empty() {
            return Self::default();
        }
        Self {
            inner: Some(Arc::new(Inner {
                zones,
                entries: DashMap::with_hasher(foldhash::fast::RandomState::default()),
                bytes: AtomicUsize::new(0),
                epoch: AtomicU64::new(u64::MAX),
                emptying: RwLock::new(()),
                capacity,
            })),
        }
    }

    /// True when it memoizes.
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
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
        let inner = self.inner.as_ref()?;
        let key = req.get(2..)?;
        if req.len() < QNAME_AT {
            return None;
        }
        let generation = inner.generation();
        let entry = inner.entries.get(key)?;
        if entry.generation != generation {
            return None;
        }
        out.clear();
        out.extend_from_slice(&req[..2]);
        out.extend_from_slice(&entry.response);
        let info = entry.info;
        drop(entry);
        if let Some(s) = info.shuffle {
            shuffle(out, s);
        }
        Some(info)
    }

    /// Keeps `response` (the whole message as sent) for `req`, made at `generation`. Nothing
    /// is kept if the zones changed since, or the memo is full.
    pub fn insert(&self, req: &[u8], generation: u64, response: &[u8], info: MemoInfo) {
        let Some(inner) = self.inner.as_ref() else {
            return;
        };
        let (Some(key), Some(body)) = (req.get(2..), response.get(2..)) else {
            return;
        };
        if req.len() < QNAME_AT || inner.generation() != generation {
            return;
        }
        let mut held = inner.emptying.read().unwrap_or_else(PoisonError::into_inner);
        let epoch = inner.epoch.load(Ordering::Acquire);
        if epoch != generation {
            // An answer made at an older generation than the entries held is stale: never let
            // it empty the memo of newer ones (`u64::MAX` is the empty memo's epoch).
            if epoch != u64::MAX && generation < epoch {
                return;
            }
            drop(held);
            {
                let _emptying = inner.emptying.write().unwrap_or_else(PoisonError::into_inner);
                if inner.epoch.load(Ordering::Acquire) != generation {
                    inner.entries.clear();
                    inner.bytes.store(0, Ordering::Release);
                    inner.epoch.store(generation, Ordering::Release);
                }
            }
            held = inner.emptying.read().unwrap_or_else(PoisonError::into_inner);
            if inner.epoch.load(Ordering::Acquire) != generation {
                return;
            }
        }
        let cost = key.len() + body.len() + ENTRY_OVERHEAD;
        if inner.bytes.fetch_add(cost, Ordering::AcqRel) + cost > inner.capacity {
            inner.bytes.fetch_sub(cost, Ordering::AcqRel);
            return;
        }
        let old = inner.entries.insert(
            key.into(),
            Entry {
                generation,
                response: body.into(),
                info,
            },
        );
        if let Some(old) = old {
            inner
                .bytes
                .fetch_sub(old.response.len() + key.len() + ENTRY_OVERHEAD, Ordering::AcqRel);
        }
        drop(held);
    }

    /// The bytes counted against the capacity, and the cost of the entries really held.
    #[cfg(test)]
    fn accounting(&self) -> (usize, usize) {
        let Some(inner) = self.inner.as_ref() else {
            return (0, 0);
        };
        let _emptying = inner.emptying.write().unwrap_or_else(PoisonError::into_inner);
        let held = inner
            .entries
            .iter()
            .map(|e| e.key().len() + e.value().response.len() + ENTRY_OVERHEAD)
            .sum();
        (inner.bytes.load(Ordering::Acquire), held)
    }
}

impl Inner {
    fn generation(&self) -> u64 {
        self.zones
            .iter()
            .map(|z| z.generation())
            .fold(0, u64::wrapping_add)
    }
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
    if shuffles(additional) {
        return Err(());
    }
    if !shuffles(answers) {
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
        }
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
    fn a_full_memo_takes_no_more_until_the_zone_changes() {
        let zone = Arc::new(Zone::default());
        let memo = AnswerMemo::with_capacity(
            vec![zone.clone() as Arc<dyn ChangeCounter>],
            2 * (REQ.len() * 2 + ENTRY_OVERHEAD),
        );
        let g = memo.generation();
        for name in [b'a', b'b', b'c'] {
            let mut q = REQ.to_vec();
            q[13] = name;
            memo.insert(&q, g, &q, info());
        }
        assert_eq!(memo.len(), 2);
        zone.change();
        let g = memo.generation();
        memo.insert(REQ, g, REQ, info());
        assert_eq!(memo.len(), 1, "the stale entries were not dropped");
    }

    #[test]
    fn no_zones_no_memo() {
        let memo = AnswerMemo::new(Vec::new());
        assert!(!memo.is_on());
        memo.insert(REQ, 0, REQ, info());
        assert!(memo.lookup(REQ, &mut Vec::new()).is_none());
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
        let zone = Arc::new(Zone::default());
        let memo = AnswerMemo::new(vec![zone.clone() as Arc<dyn ChangeCounter>]);
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
                        memo.insert(&q, g, &q, info());
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
                        zone.change();
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
