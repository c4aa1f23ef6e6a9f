//! The `acl` plugin's decisions. A question in a policy's zones is checked against that
//! policy's rules in order; the first rule whose types and sources match decides. Policies are
//! checked in file order and the first decision stands; no matching rule allows the question.
//! Allow: down the chain; block: REFUSED; filter: NOERROR with no records; drop: no reply.
//!
//! Replay: a decision depends on the client's address, so nothing in a policy's zones is
//! memoized; questions outside every policy's zones pass through and may be.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::Name;
use prometheus::IntCounter;

use super::config::{AclConfig, Action};
use super::metrics::AclMetrics;
use crate::chain::{Next, Now, Plugin, Replay, ReplyFuture};
use crate::proto::{Question, Reply};

/// One policy as built: its zones, rules and the counters of its zone (resolved once).
#[derive(Debug)]
struct BuiltPolicy {
    zones: Vec<Name>,
    rules: Vec<super::Rule>,
    /// Counters by action, for each of the policy's zones: `[zone][action]`.
    counters: Vec<[Option<IntCounter>; 4]>,
}

/// The plugin. See the module docs.
#[derive(Debug)]
pub struct Acl {
    policies: Vec<BuiltPolicy>,
}

fn slot(action: Action) -> usize {
    match action {
        Action::Allow => 0,
        Action::Block => 1,
        Action::Filter => 2,
        Action::Drop => 3,
    }
}

impl Acl {
    /// The plugin for `config`, counting into `metrics` under the block's `server` label.
    pub fn new(config: AclConfig, metrics: Option<&AclMetrics>, server: &str) -> Self {
        let policies = config
            .policies
            .into_iter()
            .map(|p| {
                let counters = p
                    .zones
                    .iter()
                    .map(|z| {
                        let zone = z.to_string();
                        [Action::Allow, Action::Block, Action::Filter, Action::Drop]
                            .map(|a| metrics.map(|m| m.counter(a, server, &zone)))
                    })
                    .collect();
                BuiltPolicy {
                    zones: p.zones,
                    rules: p.rules,
                    counters,
                }
            })
            .collect();
        Self { policies }
    }

    /// The decision for `q`, with the counter it goes to; `None` when no policy covers it.
    fn decide(&self, q: &Question) -> Option<(Action, Option<&IntCounter>)> {
        let client = q.client.ip();
        let mut covered = None;
        for p in &self.policies {
            let Some(zone_at) = p
                .zones
                .iter()
                .enumerate()
                .filter(|(_, z)| z.zone_of(&q.name))
                .max_by_key(|(_, z)| z.num_labels())
                .map(|(i, _)| i)
            else {
                continue;
            };
            let counters = p.counters.get(zone_at);
            if let Some(rule) = p.rules.iter().find(|r| r.matches(q.qtype, client)) {
                let counter = counters.and_then(|c| c[slot(rule.action)].as_ref());
                return Some((rule.action, counter));
            }
            covered.get_or_insert((Action::Allow, counters.and_then(|c| c[0].as_ref())));
        }
        covered
    }
}

impl Plugin for Acl {
    fn name(&self) -> &'static str {
        "acl"
    }

    fn replay(&self, q: &Question) -> Replay {
        if self
            .policies
            .iter()
            .any(|p| p.zones.iter().any(|z| z.zone_of(&q.name)))
        {
            Replay::Client
        } else {
            Replay::Same
        }
    }

    fn serve_now(&self, q: &Question, _next: &Next<'_>) -> Now {
        let Some((action, counter)) = self.decide(q) else {
            return Now::Pass;
        };
        if let Some(c) = counter {
            c.inc();
        }
        Now::Reply(match action {
            Action::Allow => return Now::Pass,
            Action::Block => Reply::Rcode(ResponseCode::Refused),
            Action::Filter => Reply::Rcode(ResponseCode::NoError),
            Action::Drop => Reply::Dropped,
        })
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }
}
