//! The `rrl` plugin's query path. It wraps the rest of the chain (it sits early, as the
//! external CoreDNS plugin does) and judges the reply to each UDP question in its zones:
//! 1. with `requests-per-second`, the client prefix's request account is debited first, and a
//!    limited request gets no answer from the chain at all;
//! 2. the reply is categorised (responses: answers; nodata; nxdomains; referrals: no answer, NS
//!    in authority; errors: any other rcode) and the account of (client prefix, category,
//!    name, type) is debited; nxdomains and referrals count under the zone the authority
//!    section names (the SOA or NS owner), errors under the prefix alone (BIND's keys);
//! 3. a limited response goes out as a truncated empty reply (TC=1: a real client retries
//!    over TCP) every `slip-ratio`th time, and is dropped (no reply, as `acl`'s `drop`)
//!    otherwise; with `report-only` it is sent and counted.
//!
//! Questions over TCP, TLS, HTTPS and QUIC are never limited (the transport proves the
//! source address). Replay: a reply depends on the client and the clock, so nothing in its
//! zones is memoized.

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::time::Instant;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RecordType};

use super::RrlConfig;
use super::category::Category;
use super::metrics::{Action, BlockCounters, RrlMetrics};
use super::table::{Table, Verdict};
use crate::chain::{Next, Now, Plugin, Replay, ReplyFuture};
use crate::proto::{FlagEdit, Forwarded, Question, Reply, Transport};

/// The plugin. See the module docs.
#[derive(Debug)]
pub struct Rrl {
    config: RrlConfig,
    table: Table,
    /// Keys of the accounts (seeded per process: a client cannot aim at another's account).
    hasher: foldhash::fast::RandomState,
    counters: Option<BlockCounters>,
}

impl Rrl {
    /// The plugin for `config`, counting into `metrics` under the block's `server` label.
    pub fn new(config: RrlConfig, metrics: Option<&RrlMetrics>, server: &str) -> Self {
        let counters = metrics.map(|m| m.block(server));
        if let Some(c) = &counters {
            c.entries.set(0);
        }
        Self {
            table: Table::new(config.max_table),
            config,
            hasher: foldhash::fast::RandomState::default(),
            counters,
        }
    }

    fn covers(&self, q: &Question) -> bool {
        matches!(q.transport, Transport::Udp) && self.config.zones.iter().any(|z| z.zone_of(&q.name))
    }

    /// The client's prefix, as one number with its family in the top bit of the length.
    fn prefix(&self, client: IpAddr) -> (u128, u8) {
        match client {
            IpAddr::V4(a) => {
                let bits = self.config.ipv4_prefix;
                let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
                (u128::from(u32::from(a) & mask), bits)
            }
            IpAddr::V6(a) => {
                let bits = self.config.ipv6_prefix;
                let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
                (u128::from(a) & mask, 0x80 | bits)
            }
        }
    }

    /// The account key of a response of `category` to `q` (`owner`: the zone the authority
    /// section names, for nxdomains and referrals).
    fn key(&self, q: &Question, category: Category, owner: Option<&Name>) -> u64 {
        let (prefix, family) = self.prefix(q.client.ip());
        let mut bytes: Vec<u8> = Vec::with_capacity(64);
        bytes.extend_from_slice(&prefix.to_be_bytes());
        bytes.push(family);
        bytes.push(category as u8);
        if !matches!(category, Category::Errors | Category::Requests) {
            bytes.extend_from_slice(&u16::from(q.qtype).to_be_bytes());
            for label in owner.unwrap_or(&q.name).iter() {
                bytes.push(u8::try_from(label.len()).unwrap_or(u8::MAX));
                bytes.extend(label.iter().map(u8::to_ascii_lowercase));
            }
        }
        self.hasher.hash_one(&bytes)
    }

    /// Debits the account; what to do with the response (`None`: send it).
    fn judge(&self, key: u64, category: Category) -> Option<Action> {
        let rate = f64::from(self.config.rates[category.slot()]);
        if rate == 0.0 {
            return None;
        }
        let (verdict, len, evicted) =
            self.table
                .debit(key, rate, f64::from(self.config.window), Instant::now());
        if let Some(c) = &self.counters {
            c.entries.set(i64::try_from(len).unwrap_or(i64::MAX));
            if evicted {
                c.evictions.inc();
            }
        }
        let Verdict::Limited(n) = verdict else {
            return None;
        };
        let action = if self.config.report_only {
            Action::Reported
        } else if self.config.slip > 0 && n % u64::from(self.config.slip) == 0 {
            Action::Slipped
        } else {
            Action::Dropped
        };
        if let Some(c) = &self.counters {
            c.responses[category.slot()][action as usize].inc();
        }
        Some(action)
    }
}

/// The zone the authority section names (its SOA for an NXDOMAIN, its NS for a referral).
fn authority_owner(reply: &Reply, rtype: RecordType) -> Option<&Name> {
    let authority = match reply {
        Reply::Authoritative(a) => &a.authority,
        Reply::Forwarded(f) => &f.authority,
        _ => return None,
    };
    authority
        .iter()
        .find(|r| r.record_type() == rtype)
        .map(|r| &r.name)
}

/// `reply` as a slip: its rcode and header bits, TC=1, every section empty.
pub fn slipped(reply: &Reply) -> Reply {
    let (rcode, edit, ra) = match reply {
        Reply::Authoritative(a) => (
            a.rcode,
            FlagEdit {
                authoritative: Some(true),
                ..FlagEdit::KEEP
            }
            .then(a.flags),
            false,
        ),
        Reply::Forwarded(f) => (f.rcode, f.flags, f.recursion_available),
        other => (other.rcode(), FlagEdit::KEEP, false),
    };
    Reply::Forwarded(Forwarded {
        rcode,
        recursion_available: ra,
        authentic_data: false,
        truncated: true,
        flags: edit,
        answers: Vec::new(),
        authority: Vec::new(),
        additional: Vec::new(),
    })
}

/// What a limited response becomes (`None`: it is sent as it is).
fn act(action: Option<Action>, reply: Reply) -> Reply {
    match action {
        Some(Action::Slipped) => slipped(&reply),
        Some(Action::Dropped) => Reply::Dropped,
        None | Some(Action::Reported) => reply,
    }
}

impl Plugin for Rrl {
    fn name(&self) -> &'static str {
        "rrl"
    }

    /// Its answers in its zones depend on the client's address and on the clock.
    fn replay(&self, q: &Question) -> Replay {
        if self.config.zones.iter().any(|z| z.zone_of(&q.name)) {
            Replay::Client
        } else {
            Replay::Same
        }
    }

    fn serve_now(&self, q: &Question, _next: &Next<'_>) -> Now {
        if self.covers(q) { Now::Later } else { Now::Pass }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        if !self.covers(q) {
            return next.serve(q);
        }
        Box::pin(async move {
            if self.config.rates[Category::Requests.slot()] > 0 {
                let key = self.key(q, Category::Requests, None);
                match self.judge(key, Category::Requests) {
                    Some(Action::Dropped) => {
                        next.claim();
                        return Reply::Dropped;
                    }
                    Some(Action::Slipped) => {
                        next.claim();
                        return slipped(&Reply::Rcode(ResponseCode::NoError));
                    }
                    Some(Action::Reported) | None => {}
                }
            }
            let reply = next.serve(q).await;
            let Some(category) = Category::of(&reply) else {
                return reply;
            };
            let owner = match category {
                Category::Nxdomains => authority_owner(&reply, RecordType::SOA),
                Category::Referrals => authority_owner(&reply, RecordType::NS),
                _ => None,
            };
            let key = self.key(q, category, owner);
            let action = self.judge(key, category);
            if matches!(action, Some(Action::Slipped | Action::Dropped)) {
                next.claim();
            }
            act(action, reply)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Answer;
    use hickory_proto::rr::{RData, Record};

    #[test]
    fn replies_are_categorised_as_bind_does() {
        let name = Name::from_ascii("a.example.org.").unwrap();
        let a = Record::from_rdata(name.clone(), 5, RData::A("192.0.2.1".parse().unwrap()));
        let mut answer = Answer::empty(ResponseCode::NoError);
        answer.answers = vec![a].into();
        assert_eq!(
            Category::of(&Reply::Authoritative(answer)),
            Some(Category::Responses)
        );
        let empty = Answer::empty(ResponseCode::NoError);
        assert_eq!(Category::of(&Reply::Authoritative(empty)), Some(Category::Nodata));
        let nx = Answer::empty(ResponseCode::NXDomain);
        assert_eq!(Category::of(&Reply::Authoritative(nx)), Some(Category::Nxdomains));
        assert_eq!(
            Category::of(&Reply::Rcode(ResponseCode::ServFail)),
            Some(Category::Errors)
        );
        assert_eq!(Category::of(&Reply::Dropped), None);
        let ns = Record::from_rdata(
            Name::from_ascii("example.org.").unwrap(),
            5,
            RData::NS(hickory_proto::rr::rdata::NS(name)),
        );
        let referral = Reply::Forwarded(Forwarded {
            rcode: ResponseCode::NoError,
            recursion_available: false,
            authentic_data: false,
            truncated: false,
            flags: FlagEdit::KEEP,
            answers: Vec::new(),
            authority: vec![ns],
            additional: Vec::new(),
        });
        assert_eq!(Category::of(&referral), Some(Category::Referrals));
        let Reply::Forwarded(slip) = slipped(&referral) else {
            panic!("a slip is a truncated reply");
        };
        assert!(slip.truncated && slip.authority.is_empty() && slip.rcode == ResponseCode::NoError);
    }
}
