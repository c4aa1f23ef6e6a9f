//! The `cache` plugin's query path ([`Cache`]): looks each question up in the success and denial
//! stores, answers hits with their TTLs counted down, passes misses on and stores what comes
//! back, refreshes popular entries (prefetch) and serves stale answers (RFC 8767), and counts
//! all of it in the cache's metric families. Questions for names it never stores pass through.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RecordType};
use tokio::time::Instant;

use super::config::CacheConfig;
use super::metrics::{CacheInstruments, CacheMetrics, StoreInstruments};
use super::store::{Key, Kind, Lookup, Store, aged, classify, kind_of};
use crate::chain::{DetachedNext, Next, Plugin, Replay, Replayed, ReplyFuture, ZoneMark};
use crate::proto::{Question, Reply};

#[derive(Debug)]
struct Inner {
    config: CacheConfig,
    zones: Vec<Name>,
    no_success: Vec<Name>,
    no_denial: Vec<Name>,
    success: Store,
    denial: Store,
    metrics: OnceLock<CacheInstruments>,
}

/// The `cache` plugin in a chain. Clones share the stores.
#[derive(Debug, Clone)]
pub struct Cache {
    inner: Arc<Inner>,
}

fn names(zones: &[String]) -> Vec<Name> {
    zones
        .iter()
        .filter_map(|z| Name::from_ascii(z).ok().map(|n| n.to_lowercase()))
        .collect()
}

/// True when `reply` answers `q`: a NOERROR whose answer section holds a record of the name
/// asked, of the type asked or a CNAME (`prefer_positive`'s "actually answers the question").
fn answers_question(q: &Question, reply: &Reply) -> bool {
    let answers = match reply {
        Reply::Authoritative(a) if a.rcode == ResponseCode::NoError => &a.answers[..],
        Reply::Forwarded(f) if f.rcode == ResponseCode::NoError && !f.truncated => &f.answers[..],
        _ => return false,
    };
    answers
        .iter()
        .any(|r| r.name == q.name && (r.record_type() == q.qtype || r.record_type() == RecordType::CNAME))
}

/// True when `name` is in one of `zones`, in any case (`Name::zone_of` ignores it).
fn under(zones: &[Name], name: &Name) -> bool {
    zones.iter().any(|z| z.zone_of(name))
}

impl Cache {
    /// The plugin for `config`.
    pub fn new(config: &CacheConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                zones: names(&config.zones),
                no_success: names(&config.disable_success),
                no_denial: names(&config.disable_denial),
                success: Store::new(config.success.capacity).keeping_ttl(config.keepttl),
                denial: Store::new(config.denial.capacity).keeping_ttl(config.keepttl),
                metrics: OnceLock::new(),
                config: config.clone(),
            }),
        }
    }

    /// Reports to `metrics` from now on, under `server` (`dns://:53`, as the prometheus plugin
    /// labels it), the cache's zones joined by `,` (CoreDNS's `zones` label) and an empty `view`.
    /// The label values are resolved here, once; the query path only bumps atomics. Entries
    /// already held are added to `coredns_cache_entries`. Only the first call takes effect.
    pub fn with_metrics(self, metrics: CacheMetrics, server: &str) -> Self {
        let zones = self.inner.config.zones.join(",");
        let m = metrics.instruments(server, &zones);
        let (success, denial) = (m.success.clone(), m.denial.clone());
        if self.inner.metrics.set(m).is_ok() {
            self.inner.success.attach(success);
            self.inner.denial.attach(denial);
        }
        self
    }

    fn metrics(&self) -> Option<&CacheInstruments> {
        self.inner.metrics.get()
    }

    fn store_metrics(&self, kind: Kind) -> Option<&StoreInstruments> {
        let m = self.metrics()?;
        Some(if kind == Kind::Success {
            &m.success
        } else {
            &m.denial
        })
    }

    /// Entries held in the success and denial stores (`coredns_cache_entries`).
    pub fn len(&self) -> (usize, usize) {
        (self.inner.success.len(), self.inner.denial.len())
    }

    fn stale_window(&self) -> Option<Duration> {
        self.inner.config.serve_stale.map(|s| s.duration)
    }

    /// Looks `key` up in the success store, then the denial store; gives which one answered.
    /// For a `probe` a fresh NXDOMAIN is the bare rcode. An entry whose zone mark no longer
    /// `holds` is gone.
    fn lookup(
        &self,
        key: &Key,
        now: Instant,
        probe: bool,
        holds: &dyn Fn(ZoneMark) -> bool,
    ) -> (Lookup, Kind) {
        let stale = self.inner.config.serve_stale.as_ref();
        let prefetch = self.inner.config.prefetch.as_ref();
        match self
            .inner
            .success
            .lookup_holding(key, now, stale, prefetch, false, holds)
        {
            Lookup::Miss => (
                self.inner
                    .denial
                    .lookup_holding(key, now, stale, prefetch, probe, holds),
                Kind::Denial,
            ),
            found => (found, Kind::Success),
        }
    }

    /// Stores `reply` for `q` if it may be cached; returns how long it is kept. A zone
    /// transfer never is (as CoreDNS's cache): it is made for the client `transfer` allowed.
    pub fn insert(&self, q: &Question, reply: &Reply, now: Instant) -> Option<Duration> {
        self.insert_marked(q, reply, now, None)
    }

    /// [`Cache::insert`], for a reply a plugin made from its zones: kept while `mark` holds
    /// (a changed cluster name is asked again, never served stale).
    fn insert_marked(
        &self,
        q: &Question,
        reply: &Reply,
        now: Instant,
        mark: Option<ZoneMark>,
    ) -> Option<Duration> {
        if matches!(q.qtype, RecordType::AXFR | RecordType::IXFR) {
            return None;
        }
        let c = &self.inner.config;
        let (kind, ttl) = classify(reply, &c.success, &c.denial, c.servfail)?;
        // Under `prefer_positive` only an answer to the question replaces a kept positive.
        if kind == Kind::Success && c.prefer_positive && !answers_question(q, reply) {
            return None;
        }
        // Zones match regardless of case (`Name::zone_of`).
        let name = &q.name;
        let stored = match kind {
            Kind::Success => !under(&self.inner.no_success, name),
            Kind::Denial => !under(&self.inner.no_denial, name),
            // A SERVFAIL never shadows an answer that serve-stale could still give.
            Kind::ServFail => c.serve_stale.is_none() && !under(&self.inner.no_denial, name),
        };
        if !stored {
            return None;
        }
        let key = Key::of(q)?;
        // Only an upstream's answer may be served stale: the cluster zone's answers (and any
        // other plugin's own) are in memory whenever the question comes, so an expired one is
        // never given in place of what the zone says now (a deleted Service stays deleted).
        let keep = match reply {
            Reply::Forwarded(_) => self.stale_window().unwrap_or_default(),
            _ => Duration::ZERO,
        };
        match kind {
            Kind::Success => {
                self.inner.denial.remove(&key);
                self.inner
                    .success
                    .insert_marked(&key, reply, ttl, now, keep, mark);
            }
            // `prefer_positive` keeps the last positive answer beside the denial.
            Kind::Denial => {
                if !c.prefer_positive {
                    self.inner.success.remove(&key);
                }
                self.inner.denial.insert_marked(&key, reply, ttl, now, keep, mark);
            }
            Kind::ServFail => {
                self.inner
                    .denial
                    .insert_marked(&key, reply, ttl, now, Duration::ZERO, mark);
            }
        }
        Some(ttl)
    }

    /// What the cache does with questions for `name` (in any case) whose answers it may
    /// not store (`disable success` and `disable denial` both cover it): `Some(true)`, it
    /// counts them as misses and passes them on; `Some(false)`, the name is outside its zones
    /// and it does nothing. `None`: it may store answers for that name.
    pub fn passes_through(&self, name: &Name) -> Option<bool> {
        if !under(&self.inner.zones, name) {
            return Some(false);
        }
        (under(&self.inner.no_success, name) && under(&self.inner.no_denial, name)).then_some(true)
    }

    /// Counts one question passed through without a lookup that could hit (see
    /// [`Cache::passes_through`]), as [`Cache::serve`] counts it: a request and a miss.
    pub fn count_pass_through(&self) {
        if let Some(m) = self.metrics() {
            m.requests.inc();
            m.misses.inc();
        }
    }

    /// Answers `q` from the cache, or from `next` (and caches that).
    pub async fn answer(&self, q: &Question, next: Next<'_>) -> Reply {
        match self.passes_through(&q.name) {
            Some(false) => return next.serve(q).await,
            // Nothing is ever stored for the name (kubeadm's `disable success` and `disable
            // denial` of the cluster zone): no key, no lookup, no store.
            Some(true) => {
                self.count_pass_through();
                return next.serve(q).await;
            }
            None => {}
        }
        // The key (344 bytes) goes out of scope before any await, so this future does not
        // carry it.
        let holds = |mark: ZoneMark| next.zone_mark_holds(mark, q);
        let Some((found, kind)) = Key::of(q).map(|key| self.lookup(&key, Instant::now(), q.probe, &holds))
        else {
            return next.serve(q).await;
        };
        if let Some(m) = self.metrics() {
            m.requests.inc();
        }
        // As CoreDNS: a stale entry within the serve-stale window is a hit too.
        if !matches!(found, Lookup::Miss)
            && let Some(s) = self.store_metrics(kind)
        {
            s.hits.inc();
        }
        match found {
            Lookup::Fresh {
                reply,
                prefetch,
                held,
            } => {
                if self.inner.config.prefetch.is_none() {
                    next.held_until(held);
                }
                if prefetch {
                    if let Some(m) = self.metrics() {
                        m.prefetch.inc();
                    }
                    tokio::spawn(self.clone().refresh(next.detach(), q.clone()));
                }
                reply
            }
            // Only the hit that starts a refresh waits for it (`verify`); while it is in
            // flight, or within a failed one's FAILURE_RECHECK, the stale answer goes out at once.
            Lookup::Stale {
                reply: stale,
                refresh,
            } => {
                if refresh && let Some(s) = self.inner.config.serve_stale {
                    let task = tokio::spawn(self.clone().refresh(next.detach(), q.clone()));
                    if !s.verify
                        && let Some(m) = self.metrics()
                    {
                        // CoreDNS's `immediate` mode refreshes through its prefetch path.
                        m.prefetch.inc();
                    }
                    let fresh = match (s.verify, s.verify_timeout) {
                        (false, _) => None,
                        (true, Some(timer)) => tokio::time::timeout(timer, task).await.ok(),
                        (true, None) => Some(task.await),
                    };
                    // Under `prefer_positive`, only a positive answer replaces a stale positive.
                    let keeps_positive = self.inner.config.prefer_positive && kind == Kind::Success;
                    if let Some(Ok(fresh)) = fresh
                        && !matches!(fresh.rcode(), ResponseCode::ServFail | ResponseCode::Refused)
                        && (!keeps_positive || answers_question(q, &fresh))
                    {
                        return fresh;
                    }
                }
                if let Some(m) = self.metrics() {
                    m.served_stale.inc();
                }
                stale
            }
            Lookup::Miss => {
                if let Some(m) = self.metrics() {
                    m.misses.inc();
                }
                // What the zones' plugins would answer from, taken before they answer.
                let marks = next.zone_marks(q);
                // A probe's reply may be an NXDOMAIN without its SOA: what is stored for
                // everyone is asked for whole.
                let reply = if q.probe {
                    next.serve(&q.clone().probing(false)).await
                } else {
                    next.serve(q).await
                };
                // What a plugin after the cache decided for this client (a transfer, a
                // `template` of its address, `kubernetes`'s `topology`) is no one else's.
                if next.decided_for_the_client() {
                    return reply;
                }
                let mark = marks.into_iter().find(|m| Some(m.plugin) == next.writer());
                match self.insert_marked(q, &reply, Instant::now(), mark) {
                    // The first answer already carries the TTLs later hits count down from.
                    Some(ttl) => aged(&reply, u32::try_from(ttl.as_secs()).unwrap_or(u32::MAX), 0, None),
                    None => reply,
                }
            }
        }
    }

    /// Asks the chain again and stores the answer (prefetch, stale refresh). When there is
    /// nothing to store, the entry may be refreshed again: at once while it is fresh, after
    /// `serve_stale`'s FAILURE_RECHECK once it is stale.
    async fn refresh(self, next: DetachedNext, q: Question) -> Reply {
        let served = next.serve(&q).await;
        let reply = served.reply;
        let now = Instant::now();
        // As on a miss: what the rest decided for this client is not stored for others.
        let stored = !served.for_client && self.insert_marked(&q, &reply, now, served.mark).is_some();
        // Under `prefer_positive` a kept positive answer is refreshed only by a positive one:
        // anything else is a failed refresh of it.
        let positive_kept = self.inner.config.prefer_positive && !answers_question(&q, &reply);
        if (!stored || positive_kept)
            && let Some(key) = Key::of(&q)
        {
            let recheck = self
                .inner
                .config
                .serve_stale
                .map(|s| s.failure_recheck)
                .unwrap_or_default();
            self.inner.success.refresh_failed(&key, now, recheck);
            if !stored {
                self.inner.denial.refresh_failed(&key, now, recheck);
            }
        }
        reply
    }
}

impl Plugin for Cache {
    fn name(&self) -> &'static str {
        "cache"
    }

    /// Names it never stores (`disable success` and `disable denial`, as kubeadm's Corefile
    /// has for the cluster zone) it passes on, and a replay is counted as that pass-through
    /// would be. Names it may store: a fresh hit may be replayed until the entry expires, its
    /// TTLs counted down as the cache counts them, and each replay counted as a hit. Not with
    /// `prefetch`, which must see every hit of an entry to decide when to refresh it.
    fn replay(&self, q: &Question) -> Replay {
        match self.passes_through(&q.name) {
            Some(true) => Replay::Counted,
            Some(false) => Replay::Same,
            None if self.inner.config.prefetch.is_none() => Replay::Timed,
            None => Replay::Never,
        }
    }

    fn replayed(&self, replay: Replayed) {
        if !replay.from_store {
            self.count_pass_through();
            return;
        }
        if let Some(m) = self.metrics() {
            m.requests.inc();
        }
        // Failures are never replayed: the kind is that of the store the hit came from.
        if let Some(kind) = kind_of(replay.rcode, replay.answers > 0)
            && let Some(s) = self.store_metrics(kind)
        {
            s.hits.inc();
        }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(self.answer(q, next))
    }
}

#[cfg(test)]
mod tests;
