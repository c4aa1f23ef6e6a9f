//! [`HeldZone`]: one authoritative zone as a plugin serves it (`file`, `secondary`): the
//! version answering now and the journal of the versions before it, replaced whole by the one
//! task that reads (or transfers) the zone; and [`serve_held`], how such a plugin's answer goes
//! out (a CNAME leading out of the zone chased through the chain).

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use hickory_proto::rr::{Name, Record};

use super::{Journal, ZoneData};
use crate::chain::Next;
use crate::proto::{Question, Reply};

/// One zone and what serves it now.
///
/// Invariant: the version is replaced whole, under its write lock, by the zone's one reading
/// task ([`HeldZone::replace`]); a question reads one version from start to end. The journal
/// is written by that task alone, under its lock, before the version is replaced, so an IXFR
/// answer read from it is one consistent run of versions, at most one version ahead.
#[derive(Debug)]
pub struct HeldZone {
    origin: Name,
    data: RwLock<Option<Arc<ZoneData>>>,
    /// `None` for a zone no one transfers from this server (no journal kept).
    journal: Option<Mutex<Journal>>,
}

impl HeldZone {
    /// Zone `origin`, serving `data` (none yet: `None`).
    pub fn new(origin: Name, data: Option<Arc<ZoneData>>) -> Self {
        Self {
            origin,
            data: RwLock::new(data),
            journal: Some(Mutex::new(Journal::default())),
        }
    }

    /// The same zone keeping no journal, for a server no one transfers it from: each new
    /// version then costs no copy of the one before (IXFR gets the whole zone).
    #[must_use]
    pub fn without_journal(mut self) -> Self {
        self.journal = None;
        self
    }

    /// The zone's name.
    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// The version answering now, if one is held.
    pub fn current(&self) -> Option<Arc<ZoneData>> {
        self.data.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Serves `fresh` from now on. When `follows` (it is a later version of the one held),
    /// the journal records the differences; otherwise it starts again (no difference leads
    /// to `fresh`). Only the zone's reading task calls this.
    pub fn replace(&self, fresh: ZoneData, follows: bool) {
        if let Some(journal) = &self.journal {
            let old = self.current();
            let mut journal = journal.lock().unwrap_or_else(PoisonError::into_inner);
            match old {
                Some(old) if follows => journal.record(&old.transfer(), &fresh.transfer()),
                _ => journal.clear(),
            }
        }
        *self.data.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(fresh));
    }

    /// The version held, whole, for an AXFR.
    pub fn transfer(&self) -> Option<Vec<Record>> {
        Some(self.current()?.transfer())
    }

    /// The differences since version `held`, for an IXFR, when the journal reaches back to it.
    pub fn changes(&self, held: u32) -> Option<Vec<Record>> {
        self.journal
            .as_ref()?
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .since(held)
    }
}

/// A zone-serving plugin's reply to `q` going out: its `answer` (with the target of a CNAME
/// that leads out of the zone, chased through the chain), or `next`'s when it has none.
pub async fn serve_held(answer: Option<(Reply, Option<Name>)>, q: &Question, next: Next<'_>) -> Reply {
    match answer {
        None => next.serve(q).await,
        Some((Reply::Authoritative(answer), Some(target))) => next.chase(answer, target, q).await,
        Some((reply, _)) => reply,
    }
}
