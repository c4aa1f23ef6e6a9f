//! The state a `secondary` shares between its query path (`handler`) and its refresh tasks
//! (`refresh`): each zone's copy, journal and wake-up, and the primaries.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hickory_proto::rr::Name;
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
    /// Where its copy is kept on disk (`snapshot`), if anywhere.
    pub(super) snapshot: Option<PathBuf>,
    /// The Unix time (seconds) a primary last confirmed the copy held (or the snapshot it came
    /// from was written); 0 while none did. Written by the refresh task only.
    pub(super) confirmed: AtomicU64,
}

impl ZoneSlot {
    /// Zone `origin`, holding the copy kept in `snapshots` when there is a sound one there (a
    /// damaged one is logged and not served), with a journal when `journal`; counted in
    /// `metrics`.
    pub(super) fn open(
        origin: &Name,
        snapshots: Option<&Path>,
        journal: bool,
        metrics: Option<ZoneInstruments>,
    ) -> Self {
        let snapshot = snapshots.map(|dir| super::snapshot::path_of(dir, origin));
        let mut held = None;
        let mut confirmed = 0;
        if let Some(path) = &snapshot {
            match super::snapshot::read(path, origin) {
                Ok((zone, when)) => {
                    confirmed = when.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                    let age = SystemTime::now()
                        .duration_since(when)
                        .unwrap_or_default()
                        .as_secs();
                    tracing::info!(zone = %origin, serial = zone.serial(), records = zone.records(), age_seconds = age,
                        "secondary: serving the zone's snapshot, last confirmed by a primary {age} s ago, until a primary answers");
                    if let Some(m) = &metrics {
                        m.serial(zone.serial());
                        m.confirmed(confirmed, true);
                    }
                    held = Some(Arc::new(zone));
                }
                Err(super::snapshot::SnapshotError::Missing(_)) => {}
                Err(e) => tracing::error!(zone = %origin, "secondary: {e}"),
            }
        }
        Self {
            held: if journal {
                HeldZone::new(origin.clone(), held)
            } else {
                HeldZone::new(origin.clone(), held).without_journal()
            },
            expired: AtomicBool::new(false),
            wake: Arc::new(Notify::new()),
            metrics,
            snapshot,
            confirmed: AtomicU64::new(confirmed),
        }
    }
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
    /// The key its requests are signed with, and its primaries' responses checked against.
    pub(super) tsig: Option<crate::plugin::kit::tsig::TsigKey>,
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
