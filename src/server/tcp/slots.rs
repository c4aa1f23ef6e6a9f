//! The connection slots of one listener ([`Slots`]): at most `max` connections at once, and
//! within the process-wide ceiling across listeners. At the limit, the connection that has
//! waited longest with no query in flight is evicted to admit the new one; only when every
//! connection has a query in flight is the new one refused.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::telemetry::tcp::ListenerTcpMetrics;

/// Descriptors held by TCP connections across every listener of the process, so several
/// listeners together stay below the open-file limit too.
static OPEN_ACROSS_LISTENERS: AtomicUsize = AtomicUsize::new(0);

/// The connections of one listener and the order they started waiting.
///
/// Invariant (all under the one mutex): `open` holds exactly the admitted connections that were
/// neither evicted nor ended, so `open.len() <= max`; `waiting` holds `(since, id)` for exactly
/// the entries of `open` whose `waiting` is `Some(since)` (no query in flight), `since` from
/// the same counter as ids, so the first of `waiting` is the connection that has waited
/// longest. Each entry of `open` is counted once in `OPEN_ACROSS_LISTENERS`.
#[derive(Debug)]
pub struct Slots {
    max: usize,
    state: Mutex<SlotState>,
    /// The open gauge follows `open` (changed under the same lock).
    metrics: Option<ListenerTcpMetrics>,
}

#[derive(Debug, Default)]
struct SlotState {
    next: u64,
    open: HashMap<u64, SlotEntry>,
    waiting: BTreeSet<(u64, u64)>,
}

#[derive(Debug)]
struct SlotEntry {
    evict: Arc<Notify>,
    waiting: Option<u64>,
}

/// What [`Slots::admit`] decided.
#[derive(Debug)]
pub enum Admission {
    /// Admitted; `evicted` when the connection waiting longest was closed to make room.
    Admitted {
        /// The new connection's slot.
        slot: Slot,
        /// A connection was evicted for it.
        evicted: bool,
    },
    /// At the limit with every connection busy: the new one is to be closed.
    Refused,
}

impl Slots {
    /// Room for `max` connections (and within `process_max` across the process).
    pub fn new(max: usize, metrics: Option<ListenerTcpMetrics>) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            state: Mutex::new(SlotState::default()),
            metrics,
        })
    }

    fn gauge(&self, opened: bool) {
        if let Some(m) = &self.metrics {
            if opened { m.opened() } else { m.gone() }
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // The state is consistent at every unlock (no panics inside); keep serving after one.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// The limit.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Admits a new connection (waiting, as it has sent nothing yet). At the listener's limit,
    /// or when the process holds `process_max` TCP connections, the connection that has waited
    /// longest is told to close and its slot goes to the new one; with none waiting, refused.
    pub fn admit(self: &Arc<Self>, process_max: usize) -> Admission {
        let mut st = self.lock();
        let mut evicted = false;
        if st.open.len() >= self.max || OPEN_ACROSS_LISTENERS.load(Ordering::Acquire) >= process_max {
            let Some((since, victim)) = st.waiting.pop_first() else {
                return Admission::Refused;
            };
            debug_assert!(since <= st.next);
            if let Some(entry) = st.open.remove(&victim) {
                OPEN_ACROSS_LISTENERS.fetch_sub(1, Ordering::AcqRel);
                self.gauge(false);
                entry.evict.notify_one();
            }
            evicted = true;
        }
        let id = st.next;
        st.next += 1;
        let evict = Arc::new(Notify::new());
        st.open.insert(
            id,
            SlotEntry {
                evict: evict.clone(),
                waiting: Some(id),
            },
        );
        st.waiting.insert((id, id));
        OPEN_ACROSS_LISTENERS.fetch_add(1, Ordering::AcqRel);
        self.gauge(true);
        drop(st);
        Admission::Admitted {
            slot: Slot {
                slots: self.clone(),
                id,
                evict,
            },
            evicted,
        }
    }
}

/// One admitted connection's place in its listener's [`Slots`]; leaves it when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    id: u64,
    evict: Arc<Notify>,
}

impl Slot {
    /// A query is in flight: this connection may not be evicted. False when it already was.
    pub fn busy(&self) -> bool {
        let mut st = self.slots.lock();
        let st = &mut *st;
        let Some(entry) = st.open.get_mut(&self.id) else {
            return false;
        };
        if let Some(since) = entry.waiting.take() {
            st.waiting.remove(&(since, self.id));
        }
        true
    }

    /// Nothing in flight any more: this connection waits again, as the newest.
    pub fn waiting(&self) {
        let mut st = self.slots.lock();
        let st = &mut *st;
        let since = st.next;
        let Some(entry) = st.open.get_mut(&self.id) else {
            return;
        };
        if let Some(old) = entry.waiting.replace(since) {
            st.waiting.remove(&(old, self.id));
        }
        st.next += 1;
        st.waiting.insert((since, self.id));
    }

    /// Completes when this connection is evicted.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut st = self.slots.lock();
        if let Some(entry) = st.open.remove(&self.id) {
            if let Some(since) = entry.waiting {
                st.waiting.remove(&(since, self.id));
            }
            OPEN_ACROSS_LISTENERS.fetch_sub(1, Ordering::AcqRel);
            self.slots.gauge(false);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use tokio::task::JoinSet;

    use super::*;
    use crate::server::tcp::budget::{Budget, Reservation};

    #[test]
    fn at_the_limit_the_longest_waiting_goes_and_busy_ones_stay() {
        let slots = Slots::new(3, None);
        let admit = |s: &Arc<Slots>| match s.admit(usize::MAX) {
            Admission::Admitted { slot, evicted } => (slot, evicted),
            Admission::Refused => panic!("refused"),
        };
        let (a, _) = admit(&slots);
        let (b, _) = admit(&slots);
        let (c, _) = admit(&slots);
        // a is busy: b has waited longest.
        assert!(a.busy());
        let (d, evicted) = admit(&slots);
        assert!(evicted);
        assert!(!b.busy(), "b was evicted");
        assert_eq!(slots.open(), 3);
        // c goes back to waiting after d: c is newer than d now.
        assert!(c.busy());
        c.waiting();
        let (e, evicted) = admit(&slots);
        assert!(evicted);
        assert!(!d.busy(), "d waited longer than c");
        assert!(c.busy());
        assert!(e.busy());
        // All busy: the next is refused.
        assert!(matches!(slots.admit(usize::MAX), Admission::Refused));
        drop(a);
        assert_eq!(slots.open(), 2);
        drop(b);
        assert_eq!(slots.open(), 2);
    }

    /// Many tasks admitting, turning busy and waiting, and leaving at once on a multi-threaded
    /// runtime: the limit always holds, and everything is given back at the end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn slots_and_budget_hold_under_concurrent_writers() {
        let slots = Slots::new(16, None);
        let budget = Budget::new(10_000);
        let mut tasks = JoinSet::new();
        for t in 0..8u64 {
            let slots = slots.clone();
            let budget = budget.clone();
            tasks.spawn(async move {
                let mut held = Vec::new();
                for i in 0..2_000u64 {
                    if let Admission::Admitted { slot, .. } = slots.admit(usize::MAX) {
                        if (i + t) % 3 == 0 {
                            slot.busy();
                        }
                        held.push(slot);
                    }
                    assert!(slots.open() <= 16);
                    if i % 5 == 0 {
                        held.truncate(held.len() / 2);
                        if let Some(s) = held.last() {
                            s.waiting();
                        }
                    }
                    let mut r = Reservation::new(budget.clone());
                    if r.resize(usize::try_from(i % 3_000).unwrap()) {
                        assert!(budget.used() <= 10_000);
                    }
                    tokio::task::yield_now().await;
                }
            });
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
        assert_eq!(slots.open(), 0);
        assert_eq!(budget.used(), 0);
        let st = slots.lock();
        assert!(st.waiting.is_empty());
    }
}
