//! Sync state: whether every watch of one `kubernetes` plugin has completed its first list, and
//! why the others are still waiting ([`SyncState`]). The watch tasks write it, each its own
//! entry; `/ready` and the pending-watches gauge read it.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One watch's state. Invariant: only the watch's own task writes it (`synced` goes from false
/// to true once; `failures` and `last_error` are set on each error and cleared on recovery);
/// `/ready` and tests only read it, and may see an error that is being cleared, which is
/// harmless (the next read is current).
#[derive(Debug)]
struct WatchStatus {
    /// `services`, `pods in testns`.
    name: String,
    /// Whether its first list has completed.
    synced: AtomicBool,
    /// Failed attempts since the last completed list or real event.
    failures: AtomicU32,
    /// The last error (one line, with its cause chain) and when the next attempt is due,
    /// while it keeps failing.
    last_error: Mutex<Option<(String, Instant)>>,
    /// Whether this watch is counted in the pending-watches gauge. Whoever swaps it from true to
    /// false (the first list, or the source's stop) takes it out of the gauge, so it is
    /// decremented exactly once however the two race.
    counted: AtomicBool,
}

/// Whether every watch of one `kubernetes` plugin has completed its first list, and why the
/// others are still waiting. Cheap to clone; `/ready` reads it.
#[derive(Debug, Clone)]
pub struct SyncState {
    inner: Arc<[WatchStatus]>,
    /// `cluster_dns_kubernetes_watches_pending`, when metrics are recorded.
    pending: Option<prometheus::IntGauge>,
}

impl SyncState {
    #[cfg(test)]
    pub(super) fn new(names: Vec<String>) -> Self {
        Self::counted(names, None)
    }

    /// A state whose unsynced watches are counted in `pending` until their first list.
    pub(super) fn counted(names: Vec<String>, pending: Option<prometheus::IntGauge>) -> Self {
        if let Some(g) = &pending {
            g.add(i64::try_from(names.len()).unwrap_or(0));
        }
        let counted = pending.is_some();
        Self {
            inner: names
                .into_iter()
                .map(|name| WatchStatus {
                    name,
                    synced: AtomicBool::new(false),
                    failures: AtomicU32::new(0),
                    last_error: Mutex::new(None),
                    counted: AtomicBool::new(counted),
                })
                .collect(),
            pending,
        }
    }

    /// Takes watch `w` out of the pending gauge, if it is still in it.
    fn uncount(&self, w: &WatchStatus) {
        if w.counted.swap(false, Ordering::AcqRel)
            && let Some(g) = &self.pending
        {
            g.dec();
        }
    }

    /// The source stopped: its watches no longer wait for anything.
    pub(super) fn release(&self) {
        for w in self.inner.iter() {
            self.uncount(w);
        }
    }

    /// True once every watch has completed its first list (it stays true through later errors
    /// and relists: the last-known zone keeps answering).
    pub fn is_synced(&self) -> bool {
        self.inner.iter().all(|w| w.synced.load(Ordering::Acquire))
    }

    /// True when every watch has completed its first list and none is failing now: what the
    /// zone says is what the API server says, within the watch delay.
    pub fn is_healthy(&self) -> bool {
        self.inner
            .iter()
            .all(|w| w.synced.load(Ordering::Acquire) && w.failures.load(Ordering::Acquire) == 0)
    }

    /// The watches that have not completed their first list, such as `services` or
    /// `endpointslices.discovery.k8s.io in testns`.
    pub fn pending(&self) -> Vec<String> {
        self.inner
            .iter()
            .filter(|w| !w.synced.load(Ordering::Acquire))
            .map(|w| w.name.clone())
            .collect()
    }

    /// One line per watch that has not completed its first list, saying why:
    /// `endpointslices.discovery.k8s.io: 403 Forbidden: ... (3 failed attempts)`, or
    /// `services: waiting for the first list` while no attempt has failed yet.
    pub fn waiting(&self) -> Vec<String> {
        self.inner
            .iter()
            .filter(|w| !w.synced.load(Ordering::Acquire))
            .map(|w| {
                let error = w.last_error.lock().map(|e| e.clone()).unwrap_or_default();
                match error {
                    Some((e, next)) => {
                        let n = w.failures.load(Ordering::Acquire);
                        let s = if n == 1 { "" } else { "s" };
                        let wait = next.saturating_duration_since(Instant::now()).as_secs_f32();
                        format!("{}: {e} ({n} failed attempt{s}, next in {wait:.0} s)", w.name)
                    }
                    None => format!("{}: waiting for the first list", w.name),
                }
            })
            .collect()
    }

    /// Failed attempts in a row of the watch named `watch` (0 after a success); `None` for an
    /// unknown name.
    pub fn failures(&self, watch: &str) -> Option<u32> {
        self.inner
            .iter()
            .find(|w| w.name == watch)
            .map(|w| w.failures.load(Ordering::Acquire))
    }

    /// When the watch named `watch` is next due to retry by its schedule (it may retry
    /// earlier: after a refused connection, as soon as the API server's port accepts one);
    /// `None` while it is not failing.
    pub fn next_retry(&self, watch: &str) -> Option<Instant> {
        let w = self.inner.iter().find(|w| w.name == watch)?;
        w.last_error.lock().ok()?.as_ref().map(|(_, next)| *next)
    }

    pub(super) fn mark(&self, index: usize) -> bool {
        if let Some(w) = self.inner.get(index) {
            w.synced.store(true, Ordering::Release);
            self.uncount(w);
        }
        self.is_synced()
    }

    /// Records a failed attempt of watch `index`; returns the failures in a row.
    pub(super) fn fail(&self, index: usize, error: &str) -> u32 {
        let Some(w) = self.inner.get(index) else { return 0 };
        if let Ok(mut e) = w.last_error.lock() {
            *e = Some((error.to_owned(), Instant::now()));
        }
        w.failures.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Watch `index`'s next attempt is due at `at`.
    pub(super) fn retry_at(&self, index: usize, at: Instant) {
        if let Some(w) = self.inner.get(index)
            && let Ok(mut e) = w.last_error.lock()
            && let Some((_, next)) = e.as_mut()
        {
            *next = at;
        }
    }

    /// Watch `index` succeeded: clears its failures; returns how many there were.
    pub(super) fn recover(&self, index: usize) -> u32 {
        let Some(w) = self.inner.get(index) else { return 0 };
        if let Ok(mut e) = w.last_error.lock() {
            *e = None;
        }
        w.failures.swap(0, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The pending-watches gauge is decremented exactly once per watch, whether its first list
    /// or the source's stop comes first, even when they race on different threads.
    #[test]
    fn pending_gauge_counts_each_watch_out_once() {
        let gauge = prometheus::IntGauge::new("pending", "test").unwrap();
        let s = SyncState::counted(vec!["a".into(), "b".into(), "c".into()], Some(gauge.clone()));
        assert_eq!(gauge.get(), 3);
        s.mark(0);
        s.mark(0);
        assert_eq!(gauge.get(), 2);
        s.release();
        assert_eq!(gauge.get(), 0);
        s.mark(1);
        assert_eq!(gauge.get(), 0);
        for _ in 0..200 {
            let s = SyncState::counted((0..8).map(|i| format!("w{i}")).collect(), Some(gauge.clone()));
            std::thread::scope(|scope| {
                for i in 0..8 {
                    let s = &s;
                    scope.spawn(move || s.mark(i));
                }
                scope.spawn(|| s.release());
            });
            assert_eq!(gauge.get(), 0);
        }
    }

    #[test]
    fn sync_state_waits_for_every_watch() {
        let s = SyncState::new(vec!["a".into(), "b".into()]);
        assert!(!s.is_synced());
        assert!(!s.mark(1));
        assert_eq!(s.pending(), ["a"]);
        assert!(s.mark(0));
        assert!(s.clone().is_synced());
    }

    /// Every watch task writes its own entry while `/ready` reads them all: on a multi-threaded
    /// runtime, readers always see whole lines, and the final state is each writer's last.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sync_state_under_concurrent_watch_tasks() {
        let s = SyncState::new((0..4).map(|i| format!("w{i}")).collect());
        let mut tasks = Vec::new();
        for i in 0..4 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0..2000u32 {
                    assert_eq!(s.fail(i, &format!("error {}", n % 3)), n % 50 + 1);
                    if n % 50 == 49 {
                        s.recover(i);
                    }
                    tokio::task::yield_now().await;
                }
                s.fail(i, "last");
                s.mark(i);
            }));
        }
        let reader = {
            let s = s.clone();
            tokio::spawn(async move {
                while !s.is_synced() {
                    for line in s.waiting() {
                        assert!(
                            line.ends_with("waiting for the first list")
                                || line.contains(": error ")
                                || line.contains(": last ("),
                            "{line}"
                        );
                    }
                    tokio::task::yield_now().await;
                }
            })
        };
        for t in tasks {
            t.await.unwrap();
        }
        reader.await.unwrap();
        assert!(s.waiting().is_empty());
        assert_eq!(s.failures("w2"), Some(1));
        assert_eq!(s.failures("nope"), None);
    }

    #[test]
    fn waiting_says_why_each_watch_waits() {
        let s = SyncState::new(vec!["services".into(), "pods".into()]);
        assert_eq!(
            s.waiting(),
            [
                "services: waiting for the first list",
                "pods: waiting for the first list"
            ]
        );
        s.fail(0, "401 Unauthorized");
        s.fail(0, "401 Unauthorized");
        s.fail(1, "refused");
        s.retry_at(0, Instant::now() + Duration::from_millis(2400));
        assert_eq!(
            s.waiting(),
            [
                "services: 401 Unauthorized (2 failed attempts, next in 2 s)",
                "pods: refused (1 failed attempt, next in 0 s)"
            ]
        );
        assert!(s.next_retry("services").is_some());
        assert_eq!(s.recover(0), 2);
        assert_eq!(s.next_retry("services"), None);
        s.mark(0);
        assert_eq!(s.waiting(), ["pods: refused (1 failed attempt, next in 0 s)"]);
    }
}
