//! The state a `secondary` shares between its query path (`handler`) and its refresh tasks
//! (`refresh`): each zone's copy, journal and wake-up, and the primaries.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::Notify;

use super::metrics::ZoneInstruments;
use crate::plugin::kit::{HeldZone, Notifier};
use crate::proto::ChangeCounter;

/// One zone followed from the primaries.
///
/// Invariant: `held` is replaced by the zone's one refresh task alone, only with a version of
/// a later serial ([`HeldZone`]'s own invariant covers its journal). `expired` is set by that
/// task when no primary answered for the SOA's expire interval, and cleared by its next
/// success.
pub(super) struct ZoneSlot {
    pub(super) held: HeldZone,
    pub(super) expired: AtomicBool,
    /// Wakes the refresh task: a NOTIFY came, or the plugin is going away.
    pub(super) wake: Arc<Notify>,
    pub(super) metrics: Option<ZoneInstruments>,
}

/// The change counter of a plugin's copies ([`ChangeCounter`]): the answer memo and a cache
/// before the plugin drop what they kept of its answers when it moves, so a name a new
/// version changed is never answered stale on an agent (issue 46).
///
/// Invariant: moved by a refresh task after it replaced a copy, never before; only moves
/// forward.
#[derive(Debug, Default)]
pub(super) struct Versions(AtomicU64);

impl Versions {
    /// A copy was replaced.
    pub(super) fn moved(&self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

impl ChangeCounter for Versions {
    fn generation(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// What one plugin holds: its zones (longest first) and where they come from.
pub(super) struct Inner {
    pub(super) zones: Vec<Arc<ZoneSlot>>,
    pub(super) primaries: Vec<SocketAddr>,
    pub(super) notifier: Option<Arc<Notifier>>,
    /// Moves with every new copy of any of its zones.
    pub(super) versions: Arc<Versions>,
    /// The refresh tasks were started.
    pub(super) started: AtomicBool,
}

impl Drop for Inner {
    /// The refresh tasks wake and find the plugin gone.
    fn drop(&mut self) {
        for z in &self.zones {
            z.wake.notify_one();
        }
    }
}
