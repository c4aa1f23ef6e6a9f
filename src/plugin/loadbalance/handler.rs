//! The shuffle, applied to the answer and additional sections of every reply (the order rule
//! itself is [`crate::chain::reorder`], the order the answer memo replays `Reordered` answers in).

use crate::chain::{Next, Plugin, Replay, ReplyFuture, reorder};
use crate::proto::{Question, Reply};

/// The `loadbalance` plugin in a chain.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadBalance;

impl LoadBalance {
    /// Shuffles `reply` in place.
    pub fn shuffle(&self, reply: &mut Reply) {
        match reply {
            Reply::Authoritative(a) => {
                // Keeps the answers' one-owner mark: reordering does not change owners.
                a.answers.permute(reorder);
                reorder(&mut a.additional);
            }
            Reply::Forwarded(f) => {
                reorder(&mut f.answers);
                reorder(&mut f.additional);
            }
            Reply::Rcode(_) | Reply::Failed(_) | Reply::Dropped => {}
        }
    }
}

impl Plugin for LoadBalance {
    fn name(&self) -> &'static str {
        "loadbalance"
    }

    /// Its order is chance: a replay reorders the address records again.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Reordered
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            let mut reply = next.serve(q).await;
            self.shuffle(&mut reply);
            reply
        })
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
}
