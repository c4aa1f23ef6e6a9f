//! The fairness table: for each client key (an address, an address prefix or a namespace), two
//! token buckets (questions, and questions sent upstream) and the upstream exchanges it holds in
//! flight. One table per `fairness` directive, shared by every task that answers its block.
//!
//! Invariants:
//! - every read-modify-write of an entry happens under its shard's one lock (64 shards by key
//!   hash), so concurrent questions of one client never both take its last token;
//! - the table holds at most `max_clients` entries whatever the number of source addresses:
//!   a shard that is full is swept of idle entries (buckets full again, nothing in flight: such
//!   an entry is worth exactly a new one, so dropping it loses no state) at most every
//!   [`SWEEP_EVERY`]; a key that still finds no room is counted against its group's one
//!   overflow entry, so a flood of spoofed sources shares one budget;
//! - an entry with exchanges in flight is never swept: the [`Taken`] that gives them back
//!   ([`Table::give_back`]) finds it.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How often a full shard may be swept of idle entries.
pub const SWEEP_EVERY: Duration = Duration::from_millis(100);
const SHARDS: usize = 64;

/// What a key groups: one of the fixed label values of the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    /// One client address.
    Address,
    /// The address prefix of clients no pod index knows.
    Prefix,
    /// The namespace of a pod client.
    Namespace,
}

impl Group {
    /// Its label value.
    pub fn label(self) -> &'static str {
        match self {
            Self::Address => "address",
            Self::Prefix => "prefix",
            Self::Namespace => "namespace",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Address => 0,
            Self::Prefix => 1,
            Self::Namespace => 2,
        }
    }
}

/// A client key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    /// What it groups.
    pub group: Group,
    /// The address (IPv4 as its mapped IPv6 value), the masked prefix, or the namespace's hash.
    pub id: u128,
}

impl Key {
    /// The key of one address.
    pub fn address(ip: IpAddr) -> Self {
        Self {
            group: Group::Address,
            id: bits(ip),
        }
    }

    /// The key of the prefix `ip` is in (`v4` or `v6` leading bits kept).
    pub fn prefix(ip: IpAddr, v4: u8, v6: u8) -> Self {
        let id = match ip {
            IpAddr::V4(a) => {
                let keep = u32::from(v4.min(32));
                let mask = u32::MAX.checked_shl(32 - keep).unwrap_or(0);
                // The family is kept apart from IPv6 prefixes by the high bit.
                (1u128 << 127) | u128::from(u32::from(a) & mask)
            }
            IpAddr::V6(a) => {
                let keep = u32::from(v6.min(128));
                let mask = u128::MAX.checked_shl(128 - keep).unwrap_or(0);
                u128::from(a) & mask & !(1u128 << 127) | u128::from(keep == 0)
            }
        };
        Self {
            group: Group::Prefix,
            id,
        }
    }

    /// The key of a namespace (by a hash of its name).
    pub fn namespace(hash: u64) -> Self {
        Self {
            group: Group::Namespace,
            id: u128::from(hash),
        }
    }
}

fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// A token bucket's rate and size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Tokens added per second.
    pub per_second: f64,
    /// The most tokens it holds (and holds when new).
    pub burst: f64,
}

/// What one group's keys may spend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Questions.
    pub questions: Rate,
    /// Questions that need an upstream exchange.
    pub upstream: Rate,
    /// Upstream exchanges in flight.
    pub inflight: u32,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: u64,
}

impl Bucket {
    fn full(rate: Rate, now: u64) -> Self {
        Self {
            tokens: rate.burst,
            at: now,
        }
    }

    fn refill(&mut self, rate: Rate, now: u64) {
        let ms = now.saturating_sub(self.at);
        self.tokens = (self.tokens + ms as f64 * rate.per_second / 1000.0).min(rate.burst);
        self.at = now.max(self.at);
    }

    fn take(&mut self, rate: Rate, now: u64) -> bool {
        self.refill(rate, now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    questions: Bucket,
    upstream: Bucket,
    inflight: u32,
    /// Questions refused so far (a slip is every Nth of them).
    denials: u32,
}

impl Entry {
    fn new(l: &Limits, now: u64) -> Self {
        Self {
            questions: Bucket::full(l.questions, now),
            upstream: Bucket::full(l.upstream, now),
            inflight: 0,
            denials: 0,
        }
    }

    /// Idle: nothing in flight and both buckets full again (worth exactly a new entry).
    fn idle(&mut self, l: &Limits, now: u64) -> bool {
        self.questions.refill(l.questions, now);
        self.upstream.refill(l.upstream, now);
        self.inflight == 0
            && self.questions.tokens >= l.questions.burst
            && self.upstream.tokens >= l.upstream.burst
    }
}

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<Key, Entry>,
    swept_at: Option<u64>,
}

/// Where a key's entry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Map(Key),
    Overflow(Group),
}

/// Why a question was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denied {
    /// The group whose budget was spent.
    pub group: Group,
    /// True when it was the upstream exchanges in flight, not a rate.
    pub inflight: bool,
    /// How many questions that key has been refused, this one included.
    pub denials: u32,
}

/// Counts of what happened to the table, for its metrics.
#[derive(Debug, Default)]
pub struct TableStats {
    /// Keys that found the table full and were counted against an overflow entry.
    pub overflowed: AtomicU64,
}

/// The table. See the module docs.
#[derive(Debug)]
pub struct Table {
    shards: Box<[Mutex<Shard>]>,
    overflow: [Mutex<Option<Entry>>; 3],
    limits: [Limits; 3],
    per_shard: usize,
    hasher: foldhash::fast::RandomState,
    start: Instant,
    /// What the table did.
    pub stats: TableStats,
    /// The keys held (all tables), and the overflow counter, when exported.
    gauge: Option<prometheus::IntGauge>,
    overflow_counter: Option<prometheus::IntCounter>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The in-flight places a question took ([`Table::take_upstream`]); it gives them back with
/// [`Table::give_back`], once.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "places taken must be given back"]
pub struct Taken {
    slots: [Option<Slot>; 2],
}

impl Table {
    /// A table of at most `max_clients` keys (rounded up to a multiple of the shard count),
    /// with the limits of the address, prefix and namespace groups.
    pub fn new(max_clients: usize, address: Limits, prefix: Limits, namespace: Limits) -> Self {
        let shards = (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect();
        Self {
            shards,
            overflow: [Mutex::new(None), Mutex::new(None), Mutex::new(None)],
            limits: [address, prefix, namespace],
            per_shard: max_clients.div_ceil(SHARDS).max(1),
            hasher: foldhash::fast::RandomState::default(),
            start: Instant::now(),
            stats: TableStats::default(),
            gauge: None,
            overflow_counter: None,
        }
    }

    /// The same table, keeping `clients` (added to and taken from as keys come and go) and
    /// `overflow` up to date.
    pub fn with_metrics(
        mut self,
        clients: Option<prometheus::IntGauge>,
        overflow: Option<prometheus::IntCounter>,
    ) -> Self {
        self.gauge = clients;
        self.overflow_counter = overflow;
        self
    }

    /// The most keys it holds.
    pub fn capacity(&self) -> usize {
        self.per_shard * SHARDS
    }

    /// The keys it holds now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).map.len()).sum()
    }

    /// True when it holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn shard(&self, key: &Key) -> &Mutex<Shard> {
        let h = self.hasher.hash_one(key);
        // SHARDS is a power of two.
        &self.shards[(h as usize) & (SHARDS - 1)]
    }

    /// Runs `f` on the entry of `key` (made when missing, room permitting); `None` when the
    /// table had no room and the key went to its group's overflow entry (the caller then asks
    /// [`Table::with_overflow`]).
    fn with_key<R>(&self, key: Key, now: u64, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let limits = &self.limits[key.group.index()];
        let mut shard = lock(self.shard(&key));
        if let Some(e) = shard.map.get_mut(&key) {
            return Some(f(e));
        }
        if shard.map.len() >= self.per_shard {
            let due = shard
                .swept_at
                .is_none_or(|at| now.saturating_sub(at) >= SWEEP_EVERY.as_millis() as u64);
            if due {
                shard.swept_at = Some(now);
                let limits = self.limits;
                let before = shard.map.len();
                shard.map.retain(|k, e| !e.idle(&limits[k.group.index()], now));
                if let Some(g) = &self.gauge {
                    g.sub(i64::try_from(before - shard.map.len()).unwrap_or(0));
                }
            }
            if shard.map.len() >= self.per_shard {
                return None;
            }
        }
        if let Some(g) = &self.gauge {
            g.inc();
        }
        let e = shard.map.entry(key).or_insert_with(|| Entry::new(limits, now));
        Some(f(e))
    }

    fn with_overflow<R>(&self, group: Group, now: u64, f: impl FnOnce(&mut Entry) -> R) -> R {
        self.stats.overflowed.fetch_add(1, Ordering::Relaxed);
        if let Some(c) = &self.overflow_counter {
            c.inc();
        }
        let limits = &self.limits[group.index()];
        let mut o = lock(&self.overflow[group.index()]);
        f(o.get_or_insert_with(|| Entry::new(limits, now)))
    }

    fn with_slot(&self, slot: Slot, f: impl FnOnce(&mut Entry)) {
        match slot {
            Slot::Map(key) => {
                // Present: an entry with exchanges in flight is never swept.
                if let Some(e) = lock(self.shard(&key)).map.get_mut(&key) {
                    f(e);
                }
            }
            Slot::Overflow(g) => {
                if let Some(e) = lock(&self.overflow[g.index()]).as_mut() {
                    f(e);
                }
            }
        }
    }

    /// Takes one question token from each of `keys`, in order: `Err` at the first whose
    /// bucket is empty (the tokens of the keys before it stay spent).
    pub fn take_question(&self, keys: &[Key]) -> Result<(), Denied> {
        let now = self.now();
        for key in keys {
            let rate = self.limits[key.group.index()].questions;
            let judge = |e: &mut Entry| {
                if e.questions.take(rate, now) {
                    None
                } else {
                    e.denials = e.denials.wrapping_add(1);
                    Some(e.denials)
                }
            };
            let denied = match self.with_key(*key, now, judge) {
                Some(d) => d,
                None => self.with_overflow(key.group, now, judge),
            };
            if let Some(denials) = denied {
                return Err(Denied {
                    group: key.group,
                    inflight: false,
                    denials,
                });
            }
        }
        Ok(())
    }

    /// Takes one upstream token and one in-flight place from each of `keys` (at most two),
    /// to be given back with [`Table::give_back`]. `Err` at the first key over its rate or its
    /// in-flight limit; nothing stays taken then.
    pub fn take_upstream(&self, keys: &[Key]) -> Result<Taken, Denied> {
        let now = self.now();
        let mut held = Taken { slots: [None, None] };
        for (i, key) in keys.iter().take(2).enumerate() {
            let l = self.limits[key.group.index()];
            let judge = |e: &mut Entry| {
                if e.inflight >= l.inflight {
                    e.denials = e.denials.wrapping_add(1);
                    return Err((true, e.denials));
                }
                if !e.upstream.take(l.upstream, now) {
                    e.denials = e.denials.wrapping_add(1);
                    return Err((false, e.denials));
                }
                e.inflight += 1;
                Ok(())
            };
            let (slot, verdict) = match self.with_key(*key, now, judge) {
                Some(v) => (Slot::Map(*key), v),
                None => (
                    Slot::Overflow(key.group),
                    self.with_overflow(key.group, now, judge),
                ),
            };
            match verdict {
                Ok(()) => held.slots[i] = Some(slot),
                Err((inflight, denials)) => {
                    self.give_back(held);
                    return Err(Denied {
                        group: key.group,
                        inflight,
                        denials,
                    });
                }
            }
        }
        Ok(held)
    }

    /// Gives back the in-flight places `taken` holds.
    pub fn give_back(&self, taken: Taken) {
        for slot in taken.slots.into_iter().flatten() {
            self.with_slot(slot, |e| e.inflight = e.inflight.saturating_sub(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn limits(q: f64, up: f64, inflight: u32) -> Limits {
        Limits {
            questions: Rate {
                per_second: q,
                burst: q,
            },
            upstream: Rate {
                per_second: up,
                burst: up,
            },
            inflight,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_group_addresses_and_keep_families_apart() {
        assert_eq!(
            Key::prefix(ip("10.1.2.3"), 24, 56),
            Key::prefix(ip("10.1.2.200"), 24, 56)
        );
        assert_ne!(
            Key::prefix(ip("10.1.2.3"), 24, 56),
            Key::prefix(ip("10.1.3.3"), 24, 56)
        );
        assert_eq!(
            Key::prefix(ip("10.1.2.3"), 0, 0),
            Key::prefix(ip("192.168.0.1"), 0, 0)
        );
        assert_ne!(Key::prefix(ip("0.0.0.0"), 0, 0), Key::prefix(ip("::"), 0, 0));
        assert_eq!(
            Key::prefix(ip("fd00::1"), 24, 56),
            Key::prefix(ip("fd00::ff:1"), 24, 56)
        );
        assert_ne!(
            Key::prefix(ip("fd00:0:0:100::1"), 24, 56),
            Key::prefix(ip("fd00::1"), 24, 56)
        );
        // Mapped IPv4 and IPv4 are one address.
        assert_eq!(Key::address(ip("10.0.0.1")), Key::address(ip("::ffff:10.0.0.1")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_bucket_refills_at_its_rate_and_never_past_its_burst() {
        let t = Table::new(
            100,
            limits(10.0, 5.0, 2),
            limits(100.0, 50.0, 10),
            limits(100.0, 50.0, 10),
        );
        let k = [Key::address(ip("10.0.0.1"))];
        for _ in 0..10 {
            t.take_question(&k).unwrap();
        }
        let d = t.take_question(&k).unwrap_err();
        assert_eq!((d.group, d.inflight, d.denials), (Group::Address, false, 1));
        tokio::time::advance(Duration::from_millis(200)).await;
        t.take_question(&k).unwrap();
        t.take_question(&k).unwrap();
        assert!(t.take_question(&k).is_err());
        // A long rest refills to the burst, not past it.
        tokio::time::advance(Duration::from_secs(60)).await;
        for _ in 0..10 {
            t.take_question(&k).unwrap();
        }
        assert_eq!(t.take_question(&k).unwrap_err().denials, 3);
        // Another client is not touched.
        t.take_question(&[Key::address(ip("10.0.0.2"))]).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn in_flight_places_are_held_until_dropped_and_a_denial_holds_nothing() {
        let t = Table::new(
            100,
            limits(100.0, 100.0, 2),
            limits(100.0, 100.0, 3),
            limits(100.0, 100.0, 3),
        );
        let a = Key::address(ip("10.0.0.1"));
        let b = Key::address(ip("10.0.0.2"));
        let p = Key::prefix(ip("10.0.0.1"), 24, 56);
        let h1 = t.take_upstream(&[a, p]).unwrap();
        let h2 = t.take_upstream(&[a, p]).unwrap();
        let d = t.take_upstream(&[a, p]).unwrap_err();
        assert_eq!((d.group, d.inflight), (Group::Address, true));
        // The prefix has one place left: b takes it, then the prefix is full for b too.
        let h3 = t.take_upstream(&[b, p]).unwrap();
        let d = t.take_upstream(&[b, p]).unwrap_err();
        assert_eq!((d.group, d.inflight), (Group::Prefix, true));
        // b's own place taken by the refused question was given back.
        t.give_back(h1);
        let h4 = t.take_upstream(&[b, p]).unwrap();
        for h in [h2, h3, h4] {
            t.give_back(h);
        }
        let both = [
            t.take_upstream(&[a, p]).unwrap(),
            t.take_upstream(&[a, p]).unwrap(),
        ];
        for h in both {
            t.give_back(h);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_stays_bounded_and_idle_entries_make_room() {
        let t = Table::new(128, limits(5.0, 5.0, 1), limits(5.0, 5.0, 1), limits(5.0, 5.0, 1));
        let cap = t.capacity();
        for i in 0..10_000u32 {
            let a = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            let _ = t.take_question(&[Key::address(a)]);
        }
        assert!(t.len() <= cap, "{} > {cap}", t.len());
        assert!(t.stats.overflowed.load(Ordering::Relaxed) > 0);
        // The overflow entry is one budget for them all: it ran dry.
        let a = IpAddr::V4(std::net::Ipv4Addr::from(0x0b00_0000));
        // Once the entries are idle again, a sweep makes room for a new key of its own.
        tokio::time::advance(Duration::from_secs(2)).await;
        for _ in 0..5 {
            t.take_question(&[Key::address(a)]).unwrap();
        }
        assert!(t.take_question(&[Key::address(a)]).is_err());
        assert!(t.len() <= cap);
    }

    #[tokio::test(start_paused = true)]
    async fn an_entry_with_exchanges_in_flight_is_not_swept() {
        let t = Table::new(64, limits(5.0, 5.0, 1), limits(5.0, 5.0, 1), limits(5.0, 5.0, 1));
        let a = Key::address(ip("10.9.9.9"));
        let held = t.take_upstream(&[a]).unwrap();
        tokio::time::advance(Duration::from_secs(5)).await;
        for i in 0..5000u32 {
            let _ = t.take_question(&[Key::address(IpAddr::V4(std::net::Ipv4Addr::from(
                0x0a00_0000 + i,
            )))]);
            tokio::time::advance(SWEEP_EVERY).await;
        }
        // Its place is still held, then given back.
        assert!(t.take_upstream(&[a]).unwrap_err().inflight);
        t.give_back(held);
        let again = t.take_upstream(&[a]).unwrap();
        t.give_back(again);
    }

    /// Many tasks on four threads take one client's tokens and places at once: never more
    /// admitted than the bucket held, and every place given back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_questions_never_take_more_than_the_bucket_holds() {
        // A rate so slow that nothing refills during the test.
        let slow = Limits {
            questions: Rate {
                per_second: 0.001,
                burst: 1000.0,
            },
            upstream: Rate {
                per_second: 0.001,
                burst: 1_000_000.0,
            },
            inflight: 16,
        };
        let t = Arc::new(Table::new(1024, slow, slow, slow));
        let admitted = Arc::new(AtomicU64::new(0));
        let peak = Arc::new(AtomicU64::new(0));
        let now_in = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for i in 0..400u32 {
            let (t, admitted, peak, now_in) = (t.clone(), admitted.clone(), peak.clone(), now_in.clone());
            tasks.push(tokio::spawn(async move {
                let keys = [Key::address(ip("10.0.0.7")), Key::prefix(ip("10.0.0.7"), 24, 56)];
                for _ in 0..5 {
                    if t.take_question(&keys).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    if let Ok(h) = t.take_upstream(&keys) {
                        let n = now_in.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        if i % 2 == 0 {
                            tokio::task::yield_now().await;
                        }
                        now_in.fetch_sub(1, Ordering::SeqCst);
                        t.give_back(h);
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(admitted.load(Ordering::Relaxed), 1000);
        assert!(peak.load(Ordering::SeqCst) <= 16);
        // Every place was given back.
        let keys = [Key::address(ip("10.0.0.7"))];
        let held: Vec<_> = (0..16).map(|_| t.take_upstream(&keys).unwrap()).collect();
        assert!(t.take_upstream(&keys).unwrap_err().inflight);
        for h in held {
            t.give_back(h);
        }
    }
}
