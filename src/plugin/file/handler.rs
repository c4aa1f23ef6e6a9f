//! [`File`]: answers the questions for its zones from their [`ZoneData`], and keeps each zone
//! in step with its file (a background task checks every `reload` period and reads the file
//! again when its SOA serial grew, or with `reload_by_mtime` when its modification time
//! changed; a file that no longer parses leaves the zone as it was, with a warning), and tells
//! the block's secondaries through its `Notifier` (NOTIFY) when a zone is loaded or reloaded.
//! Each zone ([`HeldZone`]) keeps a journal of its versions' differences, for IXFR.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, Record, RecordType};

use super::config::{FileConfig, ZoneFile};
use crate::chain::{Capabilities, Chain, Next, Plugin, Replay, ReplyFuture};
use crate::plugin::kit::ZoneData;
use crate::plugin::kit::{Fallthrough, HeldZone, Notifier, ZoneTransfer, serial_after, serve_held};
use crate::proto::{Failure, Question, Reply};

/// One file and its zones.
struct Watched {
    file: ZoneFile,
    slots: Vec<Arc<HeldZone>>,
    /// The modification time at the last read (`reload_by_mtime`). Only the reload task uses it.
    mtime: Mutex<Option<SystemTime>>,
    /// When it was last checked. Only the reload task uses it.
    checked: Mutex<Instant>,
    /// Who tells the block's secondaries (`transfer`'s NOTIFY), when the block has one.
    notifier: Option<Arc<Notifier>>,
}

struct Inner {
    files: Vec<Watched>,
    /// Every zone, longest origin first (the most specific zone answers).
    zones: Vec<Arc<HeldZone>>,
    fallthrough: Fallthrough,
    reload_started: AtomicBool,
    notifier: Option<Arc<Notifier>>,
}

/// The `file` plugin of one server block. Cheap to clone.
#[derive(Clone)]
pub struct File {
    inner: Arc<Inner>,
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("File")
            .field(
                "zones",
                &self
                    .inner
                    .zones
                    .iter()
                    .map(|z| z.origin().to_string())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

fn mtime_of(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl Watched {
    /// [`Watched::reload_if_changed`] once its `reload` period has passed since the last check.
    fn check_if_due(&self) {
        let reload = self.file.reload;
        let mut checked = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
        // A tick may come a little early for a file of its own period: 10 ms of slack.
        if reload.is_zero() || checked.elapsed() + Duration::from_millis(10) < reload {
            return;
        }
        *checked = Instant::now();
        drop(checked);
        self.reload_if_changed();
    }

    /// Reads the file again if it changed; true when a zone was replaced.
    fn reload_if_changed(&self) -> bool {
        let path = &self.file.path;
        if self.file.by_mtime {
            let now = mtime_of(path);
            let mut last = self.mtime.lock().unwrap_or_else(PoisonError::into_inner);
            if now.is_none() || *last == now {
                return false;
            }
            *last = now;
        }
        let mut replaced = false;
        for slot in &self.slots {
            let current = slot.current();
            let fresh = match ZoneData::read(path, slot.origin()) {
                Ok(z) => z,
                Err(e) => {
                    // A missing file keeps what is served; so does a broken one.
                    if current.is_some() {
                        tracing::warn!("file: zone {} not reloaded: {e}", slot.origin());
                    }
                    continue;
                }
            };
            let newer = match &current {
                None => true,
                Some(_) if self.file.by_mtime => true,
                Some(old) => serial_after(fresh.serial(), old.serial()),
            };
            if newer {
                tracing::info!(zone = %slot.origin(), serial = fresh.serial(), records = fresh.records(), "file: zone reloaded");
                // Not a later version (`reload_by_mtime`): no difference leads to it.
                let follows = current
                    .as_ref()
                    .is_some_and(|old| serial_after(fresh.serial(), old.serial()));
                slot.replace(fresh, follows);
                replaced = true;
                if let Some(n) = &self.notifier {
                    n.0.zone_changed(slot.origin());
                }
            }
        }
        replaced
    }
}

impl File {
    /// The plugin for `config`, serving what setup read; it tells `notifier` (the block's
    /// `transfer`) when a zone is loaded or reloaded.
    pub fn new(config: &FileConfig, notifier: Option<Arc<Notifier>>) -> Self {
        let mut zones: Vec<Arc<HeldZone>> = Vec::new();
        let files = config
            .files
            .iter()
            .map(|file| {
                let slots: Vec<Arc<HeldZone>> = file
                    .zones
                    .iter()
                    .map(|(origin, data)| Arc::new(HeldZone::new(origin.clone(), data.clone())))
                    .collect();
                for s in &slots {
                    if !zones.iter().any(|z| z.origin() == s.origin()) {
                        zones.push(s.clone());
                    }
                }
                Watched {
                    mtime: Mutex::new(mtime_of(&file.path)),
                    checked: Mutex::new(Instant::now()),
                    notifier: notifier.clone(),
                    file: file.clone(),
                    slots,
                }
            })
            .collect();
        zones.sort_by_key(|z| std::cmp::Reverse(z.origin().num_labels()));
        let fallthrough = Fallthrough::new(config.fallthrough.as_deref());
        Self {
            inner: Arc::new(Inner {
                files,
                zones,
                fallthrough,
                reload_started: AtomicBool::new(false),
                notifier,
            }),
        }
    }

    /// Checks every file now and reads again those that changed; true when a zone was
    /// replaced. (The reload task calls this.)
    pub fn reload_now(&self) -> bool {
        self.inner
            .files
            .iter()
            .fold(false, |any, w| w.reload_if_changed() | any)
    }

    /// Starts one task per file with a non-zero `reload`; each holds only a weak reference and
    /// ends once the plugin is dropped.
    fn start_reload(&self) {
        if self.inner.reload_started.swap(true, Ordering::SeqCst) {
            return;
        }
        // One task for all files, at the shortest period; a file with a longer one is checked
        // when its own period has passed.
        let Some(every) = self
            .inner
            .files
            .iter()
            .map(|w| w.file.reload)
            .filter(|r| !r.is_zero())
            .min()
        else {
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(crate::plugin::kit::reload_every(
            weak,
            every,
            "file",
            |inner: &Inner| {
                for w in &inner.files {
                    w.check_if_due();
                }
            },
        ));
    }

    fn falls_through(&self, name: &Name) -> bool {
        self.inner.fallthrough.covers(name)
    }

    /// Its reply to `q`: `None` when the name is in none of its zones (or NXDOMAIN falls
    /// through).
    pub fn answer(&self, q: &Question) -> Option<(Reply, Option<Name>)> {
        let slot = self.inner.zones.iter().find(|z| z.origin().zone_of(&q.name))?;
        let Some(zone) = slot.current() else {
            return Some((
                Reply::Failed(Failure {
                    rcode: ResponseCode::ServFail,
                    reason: "zone file not loaded",
                }),
                None,
            ));
        };
        // Transfers are the transfer plugin's; without it, refused (as CoreDNS).
        if matches!(q.qtype, RecordType::AXFR | RecordType::IXFR) {
            return Some((Reply::Rcode(ResponseCode::Refused), None));
        }
        let (reply, chase) = zone.reply(&q.name, q.qtype);
        if let Reply::Authoritative(a) = &reply
            && a.rcode == ResponseCode::NXDomain
            && a.answers.is_empty()
            && self.falls_through(&q.name)
        {
            return None;
        }
        Some((reply, chase))
    }
}

impl Plugin for File {
    fn name(&self) -> &'static str {
        "file"
    }

    /// Its answers follow a file it reloads (not counted as a zone change), not who asks:
    /// never replayed from the memo, kept by a cache.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Never
    }

    /// Its answers follow the file, which is read again: never replayed (the default).
    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(serve_held(self.answer(q), q, next))
    }

    /// Starts the reload task, and tells the block's secondaries (NOTIFY) of every zone it
    /// serves, as CoreDNS does at start.
    fn start(&self, _chain: &Chain) {
        self.start_reload();
        if let Some(n) = &self.inner.notifier {
            for slot in &self.inner.zones {
                if slot.current().is_some() {
                    n.0.zone_changed(slot.origin());
                }
            }
        }
    }

    /// Its zones, whole, for `transfer`.
    fn offers(self: Arc<Self>) -> Capabilities {
        Capabilities::default().with(self as Arc<dyn ZoneTransfer>)
    }
}

impl ZoneTransfer for File {
    /// One version of the zone named exactly `zone`, whole (`transfer`).
    fn zone_transfer(&self, zone: &Name) -> Option<Vec<Record>> {
        self.inner.zones.iter().find(|z| z.origin() == zone)?.transfer()
    }

    /// The differences since version `held` of the zone named exactly `zone`, from its journal
    /// (an IXFR, RFC 1995).
    fn zone_changes(&self, zone: &Name, held: u32) -> Option<Vec<Record>> {
        self.inner
            .zones
            .iter()
            .find(|z| z.origin() == zone)?
            .changes(held)
    }
}
