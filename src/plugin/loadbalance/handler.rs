//! The shuffle, applied to the answer and additional sections of every reply (the order rule
//! itself is [`crate::chain::reorder`], the order the answer memo replays `Reordered` answers in),
//! then `prefer`'s networks first; or, with the `weighted` policy, one address record drawn
//! by weight first ([`Weighted::order`]).

use std::sync::Arc;

use hickory_proto::rr::{RData, Record, RecordType};

use super::weighted::Weighted;
use crate::chain::{Chain, Next, Plugin, Replay, ReplyFuture, reorder};
use crate::corefile::Cidr;
use crate::proto::{Question, Reply};

/// The `loadbalance` plugin in a chain.
#[derive(Debug, Clone, Default)]
pub struct LoadBalance {
    /// `prefer`'s networks, in order.
    prefer: Vec<Cidr>,
    /// The `weighted` policy, in place of the shuffle.
    weighted: Option<Arc<Weighted>>,
}

/// The question types whose replies the `weighted` policy orders, as CoreDNS's.
fn is_transfer(qtype: RecordType) -> bool {
    matches!(qtype, RecordType::AXFR | RecordType::IXFR)
}

fn weighs(qtype: RecordType) -> bool {
    matches!(qtype, RecordType::A | RecordType::AAAA | RecordType::SRV)
}

impl LoadBalance {
    /// The plugin; address records in the `prefer` networks go first, in their order.
    pub fn new(prefer: Vec<Cidr>) -> Self {
        Self {
            prefer,
            weighted: None,
        }
    }

    /// The plugin with the `weighted` policy.
    pub fn weighted(weighted: Weighted) -> Self {
        Self {
            prefer: Vec::new(),
            weighted: Some(Arc::new(weighted)),
        }
    }

    /// Starts the task that checks the weight file every `reload` period (none when zero or
    /// without the weighted policy). It holds a weak reference: it ends with the plugin.
    pub fn start_reload(&self) {
        let Some(w) = &self.weighted else {
            return;
        };
        if w.reload.is_zero() {
            return;
        }
        tokio::spawn(crate::plugin::kit::reload_every(
            Arc::downgrade(w),
            w.reload,
            "loadbalance",
            |w: &Weighted| {
                w.reload_if_changed();
            },
        ));
    }

    /// Orders the reply to `q` in place: the weighted policy for A, AAAA and SRV questions
    /// (other replies are left as they are), else the shuffle. A zone transfer is left as it
    /// is (as CoreDNS's loadbalance leaves AXFR and IXFR): its order is the protocol's, the
    /// SOA first and last (RFC 5936), the differences in sequence (RFC 1995).
    pub fn balance(&self, q: &Question, reply: &mut Reply) {
        if is_transfer(q.qtype) {
            return;
        }
        let Some(w) = &self.weighted else {
            self.shuffle(reply);
            return;
        };
        if !weighs(q.qtype) {
            return;
        }
        match reply {
            Reply::Authoritative(a) => {
                a.answers.permute(|r| w.order(r));
                w.order(&mut a.additional);
            }
            Reply::Forwarded(f) => {
                w.order(&mut f.answers);
                w.order(&mut f.additional);
            }
            Reply::Rcode(_) | Reply::Failed(_) | Reply::Dropped | Reply::Truncated => {}
        }
    }

    /// Shuffles `reply` in place.
    pub fn shuffle(&self, reply: &mut Reply) {
        match reply {
            Reply::Authoritative(a) => {
                // Keeps the answers' one-owner mark: reordering does not change owners.
                a.answers.permute(|r| self.order(r));
                self.order(&mut a.additional);
            }
            Reply::Forwarded(f) => {
                self.order(&mut f.answers);
                self.order(&mut f.additional);
            }
            Reply::Rcode(_) | Reply::Failed(_) | Reply::Dropped | Reply::Truncated => {}
        }
    }

    /// [`reorder`], then (with `prefer`) a stable sort of the address records by the first
    /// preferred network each is in (CoreDNS's grouping: the first network's addresses, then
    /// the second's, ..., then the rest, each group in its shuffled order).
    fn order(&self, records: &mut [Record]) {
        reorder(records);
        if self.prefer.is_empty() {
            return;
        }
        let rank = |r: &Record| {
            let ip = match &r.data {
                RData::A(a) => a.0.into(),
                RData::AAAA(a) => a.0.into(),
                _ => return None,
            };
            Some(
                self.prefer
                    .iter()
                    .position(|c| c.contains(ip))
                    .unwrap_or(self.prefer.len()),
            )
        };
        // `reorder` put the address records in one run.
        let Some(start) = records.iter().position(|r| rank(r).is_some()) else {
            return;
        };
        let end = records[start..]
            .iter()
            .position(|r| rank(r).is_none())
            .map_or(records.len(), |n| start + n);
        records[start..end].sort_by_key(|r| rank(r));
    }
}

impl Plugin for LoadBalance {
    fn name(&self) -> &'static str {
        "loadbalance"
    }

    /// Its order is chance: a replay reorders the address records again. With `prefer`, the
    /// memo's reorder would lose the preferred networks' place: A and AAAA answers are made
    /// afresh each time.
    fn replay(&self, q: &Question) -> Replay {
        if is_transfer(q.qtype) {
            return Replay::Same;
        }
        if self.weighted.is_some() {
            // The draw is chance, the weights a file: the orders it makes are never replayed;
            // the replies it leaves alone are.
            return if weighs(q.qtype) {
                Replay::Never
            } else {
                Replay::Same
            };
        }
        if !self.prefer.is_empty() && matches!(q.qtype, RecordType::A | RecordType::AAAA | RecordType::ANY) {
            Replay::Never
        } else {
            Replay::Reordered
        }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            let mut reply = next.serve(q).await;
            self.balance(q, &mut reply);
            reply
        })
    }

    fn start(&self, _chain: &Chain) {
        self.start_reload();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, CNAME};
    use hickory_proto::rr::{Name, RData};
    use hickory_proto::rr::{Record, RecordType};
    use std::collections::BTreeSet;
    use std::net::Ipv4Addr;

    #[test]
    fn cname_stays_first_and_every_order_shows_up() {
        let n = Name::from_ascii("a.example.").unwrap();
        let mut base = vec![Record::from_rdata(n.clone(), 5, RData::CNAME(CNAME(n.clone())))];
        base.extend(
            (1..=3).map(|i| Record::from_rdata(n.clone(), 5, RData::A(A(Ipv4Addr::new(10, 0, 0, i))))),
        );
        let mut seen = BTreeSet::new();
        for _ in 0..200 {
            let mut r = base.clone();
            reorder(&mut r);
            assert_eq!(r[0].record_type(), RecordType::CNAME);
            assert_eq!(r.len(), 4);
            seen.insert(format!(
                "{:?}",
                r.iter().map(|x| x.data.clone()).collect::<Vec<_>>()
            ));
        }
        assert_eq!(seen.len(), 6, "all 3! orders of the A records appear");
    }

    /// A zone transfer keeps its order: the SOA first and last, a CNAME where the zone put it
    /// (it once came first, and Knot, NSD and `secondary` refused the transfer).
    #[test]
    fn a_zone_transfer_is_never_reordered() {
        use crate::proto::{Answer, FlagEdit, Question};
        use hickory_proto::op::ResponseCode;
        use hickory_proto::rr::rdata::SOA;
        let apex = Name::from_ascii("cluster.local.").unwrap();
        let soa = Record::from_rdata(
            apex.clone(),
            30,
            RData::SOA(SOA::new(apex.clone(), apex.clone(), 7, 7200, 1800, 86400, 30)),
        );
        let n = Name::from_ascii("ext.ns.svc.cluster.local.").unwrap();
        let mut records = vec![soa.clone()];
        records.extend(
            (1..=3).map(|i| Record::from_rdata(apex.clone(), 30, RData::A(A(Ipv4Addr::new(10, 0, 0, i))))),
        );
        records.push(Record::from_rdata(n.clone(), 30, RData::CNAME(CNAME(n.clone()))));
        records.push(soa);
        let lb = LoadBalance::new(Vec::new());
        for qtype in [RecordType::AXFR, RecordType::IXFR] {
            let q = Question::new(apex.clone(), qtype);
            assert_eq!(lb.replay(&q), Replay::Same);
            for _ in 0..50 {
                let mut reply = Reply::Authoritative(Answer {
                    rcode: ResponseCode::NoError,
                    answers: records.clone().into(),
                    authority: Vec::new(),
                    additional: Vec::new(),
                    chase_target: None,
                    flags: FlagEdit::KEEP,
                });
                lb.balance(&q, &mut reply);
                let Reply::Authoritative(a) = reply else {
                    unreachable!()
                };
                assert_eq!(a.answers.to_vec(), records, "{qtype}");
            }
        }
    }

    #[test]
    fn preferred_networks_go_first_in_their_order() {
        let n = Name::from_ascii("a.example.").unwrap();
        let lb = LoadBalance::new(
            ["192.168.1.0/24", "10.9.20.0/24"]
                .iter()
                .map(|c| Cidr::parse(c).unwrap())
                .collect(),
        );
        let mut base = vec![Record::from_rdata(n.clone(), 5, RData::CNAME(CNAME(n.clone())))];
        for ip in ["10.0.0.1", "10.9.20.1", "192.168.1.1", "10.0.0.2", "10.9.20.2"] {
            base.push(Record::from_rdata(n.clone(), 5, RData::A(A(ip.parse().unwrap()))));
        }
        let mut seen = BTreeSet::new();
        for _ in 0..200 {
            let mut r = base.clone();
            lb.order(&mut r);
            let ips: Vec<String> = r
                .iter()
                .filter_map(|x| match &x.data {
                    RData::A(a) => Some(a.0.to_string()),
                    _ => None,
                })
                .collect();
            assert_eq!(r[0].record_type(), RecordType::CNAME);
            assert_eq!(ips[0], "192.168.1.1");
            assert_eq!(
                BTreeSet::from([&ips[1], &ips[2]]),
                BTreeSet::from([&"10.9.20.1".to_owned(), &"10.9.20.2".to_owned()])
            );
            seen.insert(ips);
        }
        assert_eq!(seen.len(), 4, "each group still shuffled: {seen:?}");
    }
}
