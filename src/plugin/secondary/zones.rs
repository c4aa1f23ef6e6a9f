//! The state a `secondary` shares between its query path (`handler`) and its refresh tasks
//! (`refresh`): each zone's copy, journal and wake-up, and the primaries.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::sync::Notify;

use super::metrics::ZoneInstruments;
use crate::plugin::kit::{HeldZone, Notifier};

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

/// What one plugin holds: its zones (longest first) and where they come from.
pub(super) struct Inner {
    pub(super) zones: Vec<Arc<ZoneSlot>>,
    pub(super) primaries: Vec<SocketAddr>,
    pub(super) notifier: Option<Arc<Notifier>>,
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
