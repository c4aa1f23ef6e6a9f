//! The `cache` plugin: positive and negative caching of what the rest of the chain answers, with
//! TTLs counted down on the way out, capacity-bounded stores, SERVFAIL held a few seconds at
//! most, prefetch of popular entries and RFC 8767 serve-stale. See this folder's README.
//!
//! Cluster answers are cached too (as in CoreDNS with a bare `cache 30`), but never longer than
//! their own smallest TTL, so a change in the zone is visible once the TTL the client was given
//! has run out.

pub mod handler;
pub mod setup;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::Name;
use tokio::time::Instant;

use self::handler::{Key, Kind, Lookup, Store, classify};
pub use self::setup::CacheConfig;
use super::{Chain, Question, Reply};

/// How long a `serve_stale verify` lookup waits for the upstream before answering stale (RFC
/// 8767's client response timer, 1.8 s as it suggests).
pub const STALE_CLIENT_TIMEOUT: Duration = Duration::from_millis(1800);

/// Counters of one cache (exported as metrics by issue 5).
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Fresh hits (`coredns_cache_hits_total`).
    pub hits: AtomicU64,
    /// Misses (`coredns_cache_misses_total`).
    pub misses: AtomicU64,
    /// Prefetches started (`coredns_cache_prefetch_total`).
    pub prefetches: AtomicU64,
    /// Stale answers served (`coredns_cache_served_stale_total`).
    pub served_stale: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    config: CacheConfig,
    zones: Vec<Name>,
    no_success: Vec<Name>,
    no_denial: Vec<Name>,
    success: Store,
    denial: Store,
    stats: CacheStats,
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

fn under(zones: &[Name], lower: &Name) -> bool {
    zones.iter().any(|z| z.zone_of(lower))
}

impl Cache {
    /// The plugin for `config`.
    pub fn new(config: &CacheConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                zones: names(&config.zones),
                no_success: names(&config.disable_success),
                no_denial: names(&config.disable_denial),
                success: Store::new(config.success.capacity),
                denial: Store::new(config.denial.capacity),
                stats: CacheStats::default(),
                config: config.clone(),
            }),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &CacheStats {
        &self.inner.stats
    }

    /// Entries held in the success and denial stores (`coredns_cache_entries`).
    pub fn len(&self) -> (usize, usize) {
        (self.inner.success.len(), self.inner.denial.len())
    }

    fn stale_window(&self) -> Option<Duration> {
        self.inner.config.serve_stale.map(|s| s.duration)
    }

    fn lookup(&self, key: &Key, now: Instant) -> Lookup {
        let stale = self.stale_window();
        let prefetch = self.inner.config.prefetch.as_ref();
        match self.inner.success.lookup(key, now, stale, prefetch) {
            Lookup::Miss => self.inner.denial.lookup(key, now, stale, prefetch),
            found => found,
        }
    }

    /// Stores `reply` for `q` if it may be cached; returns how long it is kept.
    pub fn insert(&self, q: &Question, reply: &Reply, now: Instant) -> Option<Duration> {
        let c = &self.inner.config;
        let (kind, ttl) = classify(reply, &c.success, &c.denial, c.servfail)?;
        let lower = q.name.to_lowercase();
        let key = Key::of(q);
        let keep = self.stale_window().unwrap_or_default();
        match kind {
            Kind::Success if !under(&self.inner.no_success, &lower) => {
                self.inner.denial.remove(&key);
                self.inner.success.insert(key, reply.clone(), ttl, now, keep);
            }
            Kind::Denial if !under(&self.inner.no_denial, &lower) => {
                self.inner.success.remove(&key);
                self.inner.denial.insert(key, reply.clone(), ttl, now, keep);
            }
            // A SERVFAIL never shadows an answer that serve-stale could still give.
            Kind::ServFail if c.serve_stale.is_none() && !under(&self.inner.no_denial, &lower) => {
                self.inner
                    .denial
                    .insert(key, reply.clone(), ttl, now, Duration::ZERO);
            }
            _ => return None,
        }
        Some(ttl)
    }

    /// Answers `q` from the cache, or from the chain from stage `next` on (and caches that).
    pub async fn serve(&self, chain: &Chain, next: usize, q: &Question) -> Reply {
        let lower = q.name.to_lowercase();
        if !under(&self.inner.zones, &lower) {
            return chain.serve_from(next, q).await;
        }
        let key = Key::of(q);
        match self.lookup(&key, Instant::now()) {
            Lookup::Fresh { reply, prefetch } => {
                self.inner.stats.hits.fetch_add(1, Ordering::Relaxed);
                if prefetch {
                    self.inner.stats.prefetches.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(self.clone().refresh(chain.clone(), next, q.clone()));
                }
                reply
            }
            Lookup::Stale(stale) => {
                let refresh = tokio::spawn(self.clone().refresh(chain.clone(), next, q.clone()));
                let verify = self.inner.config.serve_stale.is_some_and(|s| s.verify);
                if verify
                    && let Ok(Ok(fresh)) = tokio::time::timeout(STALE_CLIENT_TIMEOUT, refresh).await
                    && !matches!(fresh.rcode(), ResponseCode::ServFail | ResponseCode::Refused)
                {
                    return fresh;
                }
                self.inner.stats.served_stale.fetch_add(1, Ordering::Relaxed);
                stale
            }
            Lookup::Miss => {
                self.inner.stats.misses.fetch_add(1, Ordering::Relaxed);
                let reply = chain.serve_from(next, q).await;
                match self.insert(q, &reply, Instant::now()) {
                    // The first answer already carries the TTLs later hits count down from.
                    Some(ttl) => {
                        handler::aged(&reply, u32::try_from(ttl.as_secs()).unwrap_or(u32::MAX), 0, None)
                    }
                    None => reply,
                }
            }
        }
    }

    /// Asks the chain again and stores the answer (prefetch, stale refresh).
    async fn refresh(self, chain: Chain, next: usize, q: Question) -> Reply {
        let reply = chain.serve_from(next, &q).await;
        self.insert(&q, &reply, Instant::now());
        reply
    }
}
