//! The shuffle itself, applied to the answer and additional sections of every reply.

use hickory_proto::rr::{Record, RecordType};
use rand::seq::SliceRandom;

use crate::proto::Reply;

/// The `loadbalance` plugin in a chain.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadBalance;

fn is_addr(r: &Record) -> bool {
    matches!(r.record_type(), RecordType::A | RecordType::AAAA)
}

fn is_mx(r: &Record) -> bool {
    r.record_type() == RecordType::MX
}

/// True when [`shuffle_records`] may change `records`: two or more A/AAAA, or two or more MX.
pub fn shuffles(records: &[Record]) -> bool {
    records.iter().filter(|r| is_addr(r)).count() >= 2 || records.iter().filter(|r| is_mx(r)).count() >= 2
}

/// Reorders `records`: CNAMEs first, then the records that are not shuffled in their order,
/// then the A/AAAA records shuffled, then the MX records shuffled.
pub fn shuffle_records(records: &mut Vec<Record>) {
    if !shuffles(records) {
        return;
    }
    let mut cnames = Vec::new();
    let mut rest = Vec::new();
    let mut addrs = Vec::new();
    let mut mxs = Vec::new();
    for r in records.drain(..) {
        if r.record_type() == RecordType::CNAME {
            cnames.push(r);
        } else if is_addr(&r) {
            addrs.push(r);
        } else if is_mx(&r) {
            mxs.push(r);
        } else {
            rest.push(r);
        }
    }
    let mut rng = rand::rng();
    addrs.shuffle(&mut rng);
    mxs.shuffle(&mut rng);
    records.extend(cnames);
    records.extend(rest);
    records.extend(addrs);
    records.extend(mxs);
}

impl LoadBalance {
    /// Shuffles `reply` in place.
    pub fn shuffle(&self, reply: &mut Reply) {
        match reply {
            Reply::Authoritative(a) => {
                shuffle_records(&mut a.answers);
                shuffle_records(&mut a.additional);
            }
            Reply::Forwarded(f) => {
                shuffle_records(&mut f.answers);
                shuffle_records(&mut f.additional);
            }
            Reply::Rcode(_) | Reply::Failed(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, CNAME};
    use hickory_proto::rr::{Name, RData};
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
            shuffle_records(&mut r);
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
