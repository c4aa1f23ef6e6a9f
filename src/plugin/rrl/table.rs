//! The `rrl` plugin's account table: one token bucket per account key (a 64-bit keyed hash of
//! client prefix, category and, for most categories, name and type), at most `max-table-size`
//! of them, the least recently used evicted first.
//!
//! A bucket holds up to `rate` credits (one second's allowance) and is credited `rate` per
//! second; each response debits one. While the balance is negative the account is limited. The
//! debt is bounded by `window × rate`, so a source that stops is answered again within
//! `window` seconds (BIND's and the external CoreDNS plugin's account rules). A bucket that
//! has recharged fully is the same as a new one, so evicting it loses nothing; evicting a busy
//! one resets it, which is why the least recently used goes first.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// No node (the ends of the recency list).
const NIL: usize = usize::MAX;

/// What an account says of one more response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within its allowance.
    Allowed,
    /// Over it: the response is limited, and this is its `n`th limited response since the
    /// account was made (1 first): every `slip-ratio`th one slips.
    Limited(u64),
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Credits (negative: debt).
    balance: f64,
    /// When it was last credited.
    at: Instant,
    /// Limited responses so far.
    limited: u64,
}

#[derive(Debug)]
struct Node {
    key: u64,
    bucket: Bucket,
    /// Toward the most recently used.
    newer: usize,
    /// Toward the least recently used.
    older: usize,
}

/// The table's state. Invariant: `index` and the live nodes of the recency list hold the same
/// keys, `index[k]` is the slot of the node of key `k`, and their number is at most `cap`;
/// `free` lists the slots of `nodes` no key uses. All of it is read and written under the one
/// mutex of [`Table`], so the invariant holds between any two calls.
#[derive(Debug)]
struct Inner {
    index: HashMap<u64, usize, foldhash::fast::RandomState>,
    nodes: Vec<Node>,
    free: Vec<usize>,
    newest: usize,
    oldest: usize,
    cap: usize,
    evicted: u64,
}

impl Inner {
    fn unlink(&mut self, at: usize) {
        let (newer, older) = (self.nodes[at].newer, self.nodes[at].older);
        match newer {
            NIL => self.newest = older,
            n => self.nodes[n].older = older,
        }
        match older {
            NIL => self.oldest = newer,
            o => self.nodes[o].newer = newer,
        }
    }

    fn push_newest(&mut self, at: usize) {
        self.nodes[at].newer = NIL;
        self.nodes[at].older = self.newest;
        if self.newest != NIL {
            self.nodes[self.newest].newer = at;
        }
        self.newest = at;
        if self.oldest == NIL {
            self.oldest = at;
        }
    }

    /// The slot of `key`'s node, made (evicting the least recently used when full) if new, and
    /// moved to the newest end.
    fn touch(&mut self, key: u64, fresh: Bucket) -> usize {
        if let Some(&at) = self.index.get(&key) {
            self.unlink(at);
            self.push_newest(at);
            return at;
        }
        if self.index.len() >= self.cap && self.oldest != NIL {
            let old = self.oldest;
            self.unlink(old);
            self.index.remove(&self.nodes[old].key);
            self.free.push(old);
            self.evicted += 1;
        }
        let node = Node {
            key,
            bucket: fresh,
            newer: NIL,
            older: NIL,
        };
        let at = match self.free.pop() {
            Some(at) => {
                self.nodes[at] = node;
                at
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.index.insert(key, at);
        self.push_newest(at);
        at
    }
}

/// The bounded account table. See the module docs; shared by the UDP workers and tasks of a
/// server block (one mutex, held for a few hundred nanoseconds per question).
#[derive(Debug)]
pub struct Table {
    inner: Mutex<Inner>,
}

impl Table {
    /// An empty table of at most `cap` accounts (at least one).
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Self {
            inner: Mutex::new(Inner {
                index: HashMap::with_hasher(foldhash::fast::RandomState::default()),
                nodes: Vec::new(),
                free: Vec::new(),
                newest: NIL,
                oldest: NIL,
                cap,
                evicted: 0,
            }),
        }
    }

    /// Debits account `key` (allowance `rate` a second, debt at most `window` seconds of it)
    /// for one response at `now`: what it says, the table's size after, and whether this call
    /// evicted an account to stay within the bound.
    pub fn debit(&self, key: u64, rate: f64, window: f64, now: Instant) -> (Verdict, usize, bool) {
        let mut t = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let fresh = Bucket {
            balance: rate,
            at: now,
            limited: 0,
        };
        let before = t.evicted;
        let at = t.touch(key, fresh);
        let evicted = t.evicted != before;
        let b = &mut t.nodes[at].bucket;
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.at = b.at.max(now);
        b.balance = (b.balance + elapsed * rate).min(rate) - 1.0;
        let verdict = if b.balance < 0.0 {
            b.balance = b.balance.max(-window * rate);
            b.limited += 1;
            Verdict::Limited(b.limited)
        } else {
            Verdict::Allowed
        };
        (verdict, t.index.len(), evicted)
    }

    /// How many accounts it holds.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .index
            .len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks the invariant (tests).
    #[cfg(test)]
    fn consistent(&self) -> bool {
        let t = self.inner.lock().unwrap();
        let mut seen = 0;
        let mut at = t.newest;
        let mut newer = NIL;
        while at != NIL {
            let n = &t.nodes[at];
            if n.newer != newer || t.index.get(&n.key) != Some(&at) {
                return false;
            }
            seen += 1;
            newer = at;
            at = n.older;
        }
        newer == t.oldest && seen == t.index.len() && seen <= t.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_bucket_allows_its_rate_then_limits_and_recharges() {
        let t = Table::new(10);
        let t0 = Instant::now();
        let v: Vec<Verdict> = (0..5).map(|_| t.debit(1, 2.0, 5.0, t0).0).collect();
        assert_eq!(
            v,
            [
                Verdict::Allowed,
                Verdict::Allowed,
                Verdict::Limited(1),
                Verdict::Limited(2),
                Verdict::Limited(3)
            ]
        );
        // Balance -3 (debt bounded at -10); 2 a second: 2 s later it is +1, minus one.
        assert_eq!(
            t.debit(1, 2.0, 5.0, t0 + Duration::from_secs(2)).0,
            Verdict::Allowed
        );
        // Another key is its own account.
        assert_eq!(t.debit(2, 2.0, 5.0, t0).0, Verdict::Allowed);
    }

    #[test]
    fn debt_is_bounded_by_the_window() {
        let t = Table::new(10);
        let t0 = Instant::now();
        for _ in 0..1000 {
            t.debit(1, 1.0, 3.0, t0);
        }
        // At most 3 s of debt: answered again 4 s later whatever was sent.
        assert_eq!(
            t.debit(1, 1.0, 3.0, t0 + Duration::from_secs(4)).0,
            Verdict::Allowed
        );
    }

    #[test]
    fn the_least_recently_used_is_evicted_at_the_bound() {
        let t = Table::new(3);
        let t0 = Instant::now();
        for k in 1..=3 {
            t.debit(k, 1.0, 1.0, t0);
        }
        // 1 is used again, so 2 is the oldest and goes when 4 comes.
        assert!(matches!(t.debit(1, 1.0, 1.0, t0).0, Verdict::Limited(_)));
        let (_, len, evicted) = t.debit(4, 1.0, 1.0, t0);
        assert_eq!((len, evicted), (3, true));
        assert!(
            matches!(t.debit(1, 1.0, 1.0, t0).0, Verdict::Limited(_)),
            "1 kept"
        );
        assert_eq!(t.debit(2, 1.0, 1.0, t0).0, Verdict::Allowed, "2 was new again");
        assert!(t.consistent());
    }

    /// Concurrent writers on a multi-threaded runtime: the bound and the list hold.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_writers_keep_the_bound_and_the_list() {
        let t = Arc::new(Table::new(500));
        let tasks: Vec<_> = (0..8u64)
            .map(|w| {
                let t = t.clone();
                tokio::spawn(async move {
                    for i in 0..5_000u64 {
                        let (_, len, _) = t.debit((i % 900) * 8 + w, 5.0, 15.0, Instant::now());
                        assert!(len <= 500);
                        if i % 512 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(t.len(), 500);
        assert!(t.consistent());
    }
}
