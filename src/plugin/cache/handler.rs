//! The cache store: two capacity-bounded maps (success and denial), each split into shards
//! behind their own mutex, keyed by (lower-case name, type, class, DO, CD). An entry keeps the
//! reply as it was received and the time it was stored; TTLs are counted down when it is served.
//!
//! Eviction: when a shard is full, its expired entries go first, then an arbitrary one (the
//! hash map's iteration order, which the per-process random hasher makes unpredictable). This is
//! CoreDNS's random eviction: O(1) bookkeeping, no LRU list to update on every hit, and good
//! enough for a cache whose entries all expire within minutes.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use tokio::time::Instant;

use super::metrics::StoreInstruments;
use super::setup::{Prefetch, Section};
use crate::chain::Lifetime;
use crate::proto::{Failure, Question, Reply};

/// The TTL of records served stale (RFC 8767 recommends 30 s).
pub const STALE_TTL: u32 = 30;
/// Shards per store.
const SHARDS: usize = 64;

/// What a cache entry is looked up by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    name: Name,
    qtype: RecordType,
    qclass: DNSClass,
    dnssec_ok: bool,
    checking_disabled: bool,
}

impl Key {
    /// The key of `q`.
    pub fn of(q: &Question) -> Self {
        Self {
            name: q.name.to_lowercase(),
            qtype: q.qtype,
            qclass: q.qclass,
            dnssec_ok: q.dnssec_ok,
            checking_disabled: q.checking_disabled,
        }
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
struct Entry {
    reply: Reply,
    stored: Instant,
    ttl: Duration,
    window_start: Instant,
    hits: u32,
    prefetching: bool,
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
    /// An expired entry within the serve-stale window, with TTLs set to [`STALE_TTL`].
    Stale(Reply),
    /// Nothing usable.
    Miss,
}

/// One bounded, sharded map.
#[derive(Debug)]
pub struct Store {
    shards: Vec<Mutex<HashMap<Key, Entry>>>,
    per_shard: usize,
    hasher: RandomState,
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

/// Sets every TTL to `min(ttl, entry_ttl) - elapsed` (or `fixed`).
pub fn aged(reply: &Reply, entry_ttl: u32, elapsed: u32, fixed: Option<u32>) -> Reply {
    let mut out = reply.clone();
    let adjust = |records: &mut Vec<Record>| {
        for r in records {
            r.ttl = fixed.unwrap_or_else(|| r.ttl.min(entry_ttl).saturating_sub(elapsed));
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
        Reply::Rcode(_) | Reply::Failed(_) => {}
    }
    out
}

impl Store {
    /// A store for at most `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        let shards = SHARDS.min(capacity.max(1));
        Self {
            shards: (0..shards).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: capacity.max(1).div_ceil(shards),
            hasher: RandomState::new(),
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

    fn shard(&self, key: &Key) -> Option<&Mutex<HashMap<Key, Entry>>> {
        let h = self.hasher.hash_one(key);
        let n = self.shards.len().max(1);
        self.shards.get(usize::try_from(h % n as u64).unwrap_or(0))
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map(|m| m.len()).unwrap_or(0))
            .sum()
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores `reply` for `ttl`, evicting to stay within capacity. `keep_for` is how long past
    /// expiry entries stay (the serve-stale window).
    pub fn insert(&self, key: Key, reply: Reply, ttl: Duration, now: Instant, keep_for: Duration) {
        let Some(shard) = self.shard(&key) else { return };
        let Ok(mut map) = shard.lock() else { return };
        let before = map.len();
        if !map.contains_key(&key) && map.len() >= self.per_shard {
            map.retain(|_, e| now.saturating_duration_since(e.stored) < e.ttl + keep_for);
            if map.len() >= self.per_shard
                && let Some(victim) = map.keys().next().cloned()
            {
                map.remove(&victim);
                self.evictions.fetch_add(1, Ordering::Relaxed);
                if let Some(m) = self.metrics.get() {
                    m.evictions.inc();
                }
            }
        }
        map.insert(
            key,
            Entry {
                reply,
                stored: now,
                ttl,
                window_start: now,
                hits: 0,
                prefetching: false,
            },
        );
        let after = map.len();
        drop(map);
        self.entries_changed(gauge_delta(after) - gauge_delta(before));
    }

    /// Removes `key`.
    pub fn remove(&self, key: &Key) {
        if let Some(shard) = self.shard(key)
            && let Ok(mut map) = shard.lock()
            && map.remove(key).is_some()
        {
            drop(map);
            self.entries_changed(-1);
        }
    }

    /// Looks `key` up at `now`. Entries older than their TTL plus `stale_for` are removed.
    pub fn lookup(
        &self,
        key: &Key,
        now: Instant,
        stale_for: Option<Duration>,
        prefetch: Option<&Prefetch>,
    ) -> Lookup {
        let Some(shard) = self.shard(key) else {
            return Lookup::Miss;
        };
        let Ok(mut map) = shard.lock() else {
            return Lookup::Miss;
        };
        let Some(e) = map.get_mut(key) else {
            return Lookup::Miss;
        };
        let age = now.saturating_duration_since(e.stored);
        if age < e.ttl {
            let entry_ttl = u32::try_from(e.ttl.as_secs()).unwrap_or(u32::MAX);
            let elapsed = if self.keep_ttl {
                0
            } else {
                u32::try_from(age.as_secs()).unwrap_or(u32::MAX)
            };
            let mut due = false;
            if let Some(p) = prefetch {
                if now.saturating_duration_since(e.window_start) > p.duration {
                    e.window_start = now;
                    e.hits = 0;
                }
                e.hits = e.hits.saturating_add(1);
                let remaining = e.ttl.saturating_sub(age);
                if !e.prefetching
                    && e.hits >= p.amount
                    && remaining <= e.ttl.mul_f64(f64::from(p.percentage) / 100.0)
                {
                    e.prefetching = true;
                    due = true;
                }
            }
            return Lookup::Fresh {
                reply: aged(&e.reply, entry_ttl, elapsed, None),
                prefetch: due,
                held: Lifetime {
                    stored: e.stored,
                    expires: e.stored + e.ttl,
                    aged_by: (!self.keep_ttl).then_some(elapsed),
                },
            };
        }
        match stale_for {
            Some(window) if age < e.ttl + window => Lookup::Stale(aged(&e.reply, 0, 0, Some(STALE_TTL))),
            _ => {
                map.remove(key);
                drop(map);
                self.entries_changed(-1);
                Lookup::Miss
            }
        }
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

/// Sorts `reply` into a store and gives how long to keep it, or `None` when it must not be
/// cached. Cluster answers keep at most their own smallest TTL (so a change in the zone shows
/// after that TTL, whatever the cache's cap); forwarded ones are clamped to `[min_ttl, max_ttl]`.
pub fn classify(
    reply: &Reply,
    success: &Section,
    denial: &Section,
    servfail: Duration,
) -> Option<(Kind, Duration)> {
    let kind_of = |rcode: ResponseCode, empty: bool| match rcode {
        ResponseCode::NoError if !empty => Some(Kind::Success),
        ResponseCode::NoError | ResponseCode::NXDomain => Some(Kind::Denial),
        ResponseCode::ServFail => Some(Kind::ServFail),
        _ => None,
    };
    match reply {
        Reply::Rcode(ResponseCode::ServFail)
        | Reply::Failed(Failure {
            rcode: ResponseCode::ServFail,
            ..
        }) => (!servfail.is_zero()).then_some((Kind::ServFail, servfail)),
        Reply::Rcode(_) | Reply::Failed(_) => None,
        Reply::Authoritative(a) => {
            let kind = kind_of(a.rcode, a.answers.is_empty())?;
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
            let kind = kind_of(f.rcode, f.answers.is_empty())?;
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
    use crate::proto::Forwarded;
    use hickory_proto::rr::rdata::A;
    use std::net::Ipv4Addr;

    fn a_reply(ttl: u32) -> Reply {
        let n = Name::from_ascii("www.example.com.").unwrap();
        Reply::Forwarded(Forwarded {
            rcode: ResponseCode::NoError,
            recursion_available: true,
            authentic_data: false,
            truncated: false,
            answers: vec![Record::from_rdata(
                n,
                ttl,
                RData::A(A(Ipv4Addr::new(192, 0, 2, 1))),
            )],
            authority: Vec::new(),
            additional: Vec::new(),
        })
    }

    fn key(name: &str) -> Key {
        Key::of(&Question::new(Name::from_ascii(name).unwrap(), RecordType::A))
    }

    fn section(cap: usize) -> Section {
        Section {
            capacity: cap,
            max_ttl: Duration::from_secs(30),
            min_ttl: Duration::from_secs(5),
        }
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
        s.insert(key("www.example.com."), r, ttl, Instant::now(), Duration::ZERO);
        tokio::time::advance(Duration::from_secs(12)).await;
        match s.lookup(&key("WWW.example.com."), Instant::now(), None, None) {
            Lookup::Fresh { reply, .. } => assert_eq!(reply.answers()[0].ttl, 18),
            other => panic!("{other:?}"),
        }
        tokio::time::advance(Duration::from_secs(18)).await;
        assert!(matches!(
            s.lookup(&key("www.example.com."), Instant::now(), None, None),
            Lookup::Miss
        ));
        assert!(s.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn keepttl_serves_the_stored_ttl_until_the_entry_goes() {
        let s = Store::new(10).keeping_ttl(true);
        let r = a_reply(300);
        let (_, ttl) = classify(&r, &section(10), &section(10), Duration::from_secs(5)).unwrap();
        s.insert(key("www.example.com."), r, ttl, Instant::now(), Duration::ZERO);
        tokio::time::advance(Duration::from_secs(12)).await;
        match s.lookup(&key("www.example.com."), Instant::now(), None, None) {
            Lookup::Fresh { reply, .. } => assert_eq!(reply.answers()[0].ttl, 30, "capped, not aged"),
            other => panic!("{other:?}"),
        }
        tokio::time::advance(Duration::from_secs(18)).await;
        assert!(matches!(
            s.lookup(&key("www.example.com."), Instant::now(), None, None),
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
            key("a.example."),
            a_reply(10),
            Duration::from_secs(10),
            Instant::now(),
            Duration::from_secs(60),
        );
        let now = Instant::now();
        assert!(matches!(
            s.lookup(&key("a.example."), now, None, Some(&p)),
            Lookup::Fresh { prefetch: false, .. }
        ));
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(matches!(
            s.lookup(&key("a.example."), Instant::now(), None, Some(&p)),
            Lookup::Fresh { prefetch: true, .. }
        ));
        // Only one prefetch is started per entry.
        assert!(matches!(
            s.lookup(&key("a.example."), Instant::now(), None, Some(&p)),
            Lookup::Fresh { prefetch: false, .. }
        ));
        tokio::time::advance(Duration::from_secs(10)).await;
        match s.lookup(
            &key("a.example."),
            Instant::now(),
            Some(Duration::from_secs(60)),
            None,
        ) {
            Lookup::Stale(r) => assert_eq!(r.answers()[0].ttl, STALE_TTL),
            other => panic!("{other:?}"),
        }
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(matches!(
            s.lookup(
                &key("a.example."),
                Instant::now(),
                Some(Duration::from_secs(60)),
                None
            ),
            Lookup::Miss
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn capacity_is_bounded() {
        let s = Store::new(100);
        for i in 0..1000 {
            s.insert(
                key(&format!("n{i}.example.")),
                a_reply(60),
                Duration::from_secs(60),
                Instant::now(),
                Duration::ZERO,
            );
        }
        assert!(s.len() <= 100 + SHARDS, "{}", s.len());
        assert!(s.evictions.load(Ordering::Relaxed) >= 800);
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
        });
        assert_ne!(key_do, Key::of(&Question::new(Name::root(), RecordType::A)));
    }
}
