//! [`Transfer`]: answers AXFR and IXFR questions for its zones, to allowed clients, with the
//! zone the authoritative plugin after it gives; passes every other question on unchanged.

use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RecordType};

use super::config::{Allowed, TransferConfig};
use crate::chain::{Next, Now, Plugin, Replay, ReplyFuture};
use crate::plugin::kit::{Notifier, ZoneTransfer};
use crate::proto::{Answer, Failure, FlagEdit, Question, Reply};

/// The `transfer` plugin of one server block.
#[derive(Debug)]
pub struct Transfer {
    zones: Vec<Name>,
    to: Vec<Allowed>,
    /// The block's NOTIFY sender, told who transferred (`notify transferred`).
    notifier: Option<Arc<Notifier>>,
}

impl Transfer {
    /// The plugin for `config`; it tells `notifier` of each secondary it gives a zone.
    pub fn new(config: &TransferConfig, notifier: Option<Arc<Notifier>>) -> Self {
        Self {
            zones: config.zone_names(),
            to: config.to.clone(),
            notifier,
        }
    }

    fn allowed(&self, q: &Question) -> bool {
        let ip = q.client.ip().to_canonical();
        self.to.iter().any(|a| match a {
            Allowed::Anyone => true,
            Allowed::Address(addr) => *addr == ip,
        })
    }

    /// Its reply to `q`, or `None` when `q` is not a transfer of one of its zones.
    fn answer(&self, q: &Question, next: &Next<'_>) -> Option<Reply> {
        if !matches!(q.qtype, RecordType::AXFR | RecordType::IXFR) {
            return None;
        }
        let zone = self.zones.iter().find(|z| z.zone_of(&q.name))?;
        // A transfer is of a zone, asked at its apex, by a client `to` allows.
        if *zone != q.name || !self.allowed(q) {
            return Some(Reply::Rcode(ResponseCode::Refused));
        }
        // An IXFR from a version the zone's journal reaches back to gets the differences
        // (RFC 1995); any other transfer the whole zone.
        let changes = || {
            let held = q.ixfr_serial.filter(|_| q.qtype == RecordType::IXFR)?;
            next.offered::<Arc<dyn ZoneTransfer>>()
                .find_map(|z| z.zone_changes(zone, held))
        };
        Some(
            match changes().or_else(|| {
                next.offered::<Arc<dyn ZoneTransfer>>()
                    .find_map(|z| z.zone_transfer(zone))
            }) {
                Some(records) => {
                    if let Some(n) = &self.notifier {
                        n.0.transferred_to(q.client.ip());
                    }
                    Reply::Authoritative(Answer {
                        rcode: ResponseCode::NoError,
                        answers: records.into(),
                        authority: Vec::new(),
                        additional: Vec::new(),
                        chase_target: None,
                        flags: FlagEdit::KEEP,
                    })
                }
                None => Reply::Failed(Failure {
                    rcode: ResponseCode::ServFail,
                    reason: "no plugin has the zone to transfer",
                }),
            },
        )
    }
}

impl Plugin for Transfer {
    fn name(&self) -> &'static str {
        "transfer"
    }

    /// A transfer, or its refusal, is decided by who asks (`to`): kept by no store, replayed
    /// to no one (a cache before it once gave an allowed secondary's zone to every client).
    /// Other questions pass through unchanged.
    fn replay(&self, q: &Question) -> Replay {
        if matches!(q.qtype, RecordType::AXFR | RecordType::IXFR) {
            Replay::Client
        } else {
            Replay::Same
        }
    }

    fn serve_now(&self, q: &Question, next: &Next<'_>) -> Now {
        self.answer(q, next).map_or(Now::Pass, Now::Reply)
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }
}
