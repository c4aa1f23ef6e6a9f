//! [`Secondary`]: answers the questions for its zones from the copy last transferred from a
//! primary, takes the primaries' NOTIFY (RFC 1996), offers its copies to `transfer` (with a
//! journal, so its own secondaries follow by IXFR), and runs one refresh task per zone
//! (`refresh.rs`).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, Record, RecordType};

use super::zones::{Inner, ZoneSlot};
use crate::chain::{Capabilities, Chain, Next, Plugin, Replay, ReplyFuture};
use crate::plugin::kit::tsig::TsigKey;
use crate::plugin::kit::{Notifier, ZoneTransfer, serve_held};
use crate::proto::{ChangeCounter, Failure, NotifyTaker, Question, Reply, ZoneNotified};

/// The `secondary` plugin of one server block. Cheap to clone.
#[derive(Clone)]
pub struct Secondary {
    pub(super) inner: Arc<Inner>,
}

impl fmt::Debug for Secondary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secondary")
            .field(
                "zones",
                &self
                    .inner
                    .zones
                    .iter()
                    .map(|z| z.held.origin().to_string())
                    .collect::<Vec<_>>(),
            )
            .field("primaries", &self.inner.primaries)
            .finish_non_exhaustive()
    }
}

impl Secondary {
    /// The plugin following `zones` from `primaries` (asked in that order), holding no zone
    /// until the first transfer, or the copies kept in `snapshots` (a folder) when there are
    /// sound ones, each with a journal of its versions when `journal` (someone may transfer
    /// it on); it tells `notifier` (the block's `transfer`) of each new version; it counts in
    /// `metrics` when given.
    pub fn new(
        zones: &[Name],
        primaries: &[SocketAddr],
        tsig: Option<TsigKey>,
        snapshots: Option<&Path>,
        journal: bool,
        notifier: Option<Arc<Notifier>>,
        metrics: Option<&super::SecondaryMetrics>,
    ) -> Self {
        let mut zones: Vec<Arc<ZoneSlot>> = zones
            .iter()
            .map(|origin| {
                Arc::new(ZoneSlot::open(
                    origin,
                    snapshots,
                    journal,
                    metrics.map(|m| m.zone(&origin.to_string())),
                ))
            })
            .collect();
        zones.sort_by_key(|z| std::cmp::Reverse(z.held.origin().num_labels()));
        Self {
            inner: Arc::new(Inner {
                zones,
                primaries: primaries.to_vec(),
                tsig,
                notifier,
                versions: Arc::default(),
                started: AtomicBool::new(false),
            }),
        }
    }

    /// The serial of the copy of `zone` held, if one is.
    pub fn serial(&self, zone: &Name) -> Option<u32> {
        let slot = self.inner.zones.iter().find(|z| z.held.origin() == zone)?;
        slot.held.current().map(|d| d.serial())
    }

    /// Its reply to `q`: `None` when the name is in none of its zones.
    pub fn answer(&self, q: &Question) -> Option<(Reply, Option<Name>)> {
        let slot = self
            .inner
            .zones
            .iter()
            .find(|z| z.held.origin().zone_of(&q.name))?;
        let zone = slot.held.current();
        let failed = |reason| {
            Some((
                Reply::Failed(Failure {
                    rcode: ResponseCode::ServFail,
                    reason,
                }),
                None,
            ))
        };
        let Some(zone) = zone else {
            return failed("secondary zone not transferred yet");
        };
        if slot.expired.load(Ordering::Relaxed) {
            return failed("secondary zone expired: no primary answered within the SOA's expire time");
        }
        // Transfers are the transfer plugin's; without it, refused (as CoreDNS).
        if matches!(q.qtype, RecordType::AXFR | RecordType::IXFR) {
            return Some((Reply::Rcode(ResponseCode::Refused), None));
        }
        Some(zone.reply(&q.name, q.qtype))
    }
}

impl Plugin for Secondary {
    fn name(&self) -> &'static str {
        "secondary"
    }

    /// Its answers follow transfers (not counted as a zone change), not who asks: never
    /// replayed from the memo, kept by a cache.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Never
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(serve_held(self.answer(q), q, next))
    }

    /// Its copies' change counter: what a cache or the memo kept of its answers goes when a
    /// new copy comes.
    fn zones(&self) -> Vec<Arc<dyn ChangeCounter>> {
        vec![self.inner.versions.clone()]
    }

    /// Starts one refresh task per zone: the first transfer now.
    fn start(&self, _chain: &Chain) {
        if self.inner.started.swap(true, Ordering::SeqCst) {
            return;
        }
        for i in 0..self.inner.zones.len() {
            tokio::spawn(super::refresh::follow(Arc::downgrade(&self.inner), i));
        }
    }

    /// Not ready while a zone has never been transferred.
    fn not_ready(&self) -> Vec<String> {
        self.inner
            .zones
            .iter()
            .filter(|z| z.held.current().is_none())
            .map(|z| format!("secondary: zone {} not transferred yet", z.held.origin()))
            .collect()
    }

    /// Its copies, for `transfer`, and the NOTIFY it takes from its primaries.
    fn offers(self: Arc<Self>) -> Capabilities {
        Capabilities::default()
            .with(self.clone() as Arc<dyn ZoneTransfer>)
            .with(NotifyTaker(self as Arc<dyn ZoneNotified>))
    }
}

impl ZoneTransfer for Secondary {
    /// The copy of the zone named exactly `zone`, whole.
    fn zone_transfer(&self, zone: &Name) -> Option<Vec<Record>> {
        self.inner
            .zones
            .iter()
            .find(|z| z.held.origin() == zone)?
            .held
            .transfer()
    }

    /// The differences since version `held` of `zone`, from its journal (IXFR).
    fn zone_changes(&self, zone: &Name, held: u32) -> Option<Vec<Record>> {
        self.inner
            .zones
            .iter()
            .find(|z| z.held.origin() == zone)?
            .held
            .changes(held)
    }
}

impl ZoneNotified for Secondary {
    /// A NOTIFY for one of its zones from one of its primaries wakes that zone's refresh task;
    /// from anyone else it is refused (RFC 1996 section 3.10).
    fn notified(&self, zone: &Name, from: IpAddr) -> Option<bool> {
        let slot = self.inner.zones.iter().find(|z| z.held.origin() == zone)?;
        let from = from.to_canonical();
        let known = self.inner.primaries.iter().any(|p| p.ip().to_canonical() == from);
        if let Some(m) = &slot.metrics {
            m.notify(known);
        }
        if known {
            slot.wake.notify_one();
        }
        Some(known)
    }
}
