//! The `fairness` plugin's query path ([`Fairness`]): every question takes a token from its
//! client address's bucket and from its namespace's (a pod client) or its address prefix's
//! (any other client); a question `forward` would send upstream also takes an upstream token
//! and an in-flight place ([`Share`], the block's [`crate::plugin::kit::UpstreamShare`]). A question
//! over its client's share is answered at once (REFUSED over TCP; over UDP a truncated reply
//! every `slip`th time and nothing otherwise), so it never waits behind or ahead of anyone
//! else's. Answers from the cluster zone (memory) only spend the first budget, so a client
//! whose upstream share is spent still gets them.

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use super::config::FairnessConfig;
use super::metrics::{Decision, Decisions};
use super::table::{Denied, Key, Table, Taken};
use crate::chain::{Next, Now, Plugin, Replay, ReplyFuture};
use crate::plugin::kit::{ClientDirectory, Refusal, UpstreamShare, UpstreamTicket};
use crate::proto::{Question, Reply};

/// What the plugin and the block's upstream share hold together: the configuration, the
/// table, who clients are and the counters (the last two set once, when the block is built).
pub struct Shared {
    config: FairnessConfig,
    table: Table,
    directory: OnceLock<Option<Arc<dyn ClientDirectory>>>,
    decisions: OnceLock<Decisions>,
    names: foldhash::fast::FixedState,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// A new table for `config`.
    pub fn new(
        config: FairnessConfig,
        clients: Option<prometheus::IntGauge>,
        overflow: Option<prometheus::IntCounter>,
    ) -> Self {
        let grouped = config.grouped();
        let table =
            Table::new(config.max_clients, config.address, grouped, grouped).with_metrics(clients, overflow);
        Self {
            config,
            table,
            directory: OnceLock::new(),
            decisions: OnceLock::new(),
            names: foldhash::fast::FixedState::default(),
        }
    }

    /// Sets who clients are and the block's counters (at build; later calls change nothing).
    pub fn bind(&self, directory: Option<Arc<dyn ClientDirectory>>, decisions: Option<Decisions>) {
        let _ = self.directory.set(directory);
        if let Some(d) = decisions {
            let _ = self.decisions.set(d);
        }
    }

    /// The table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// A client's keys: its address, then its namespace when it is a pod the directory knows,
    /// else its address prefix.
    fn keys(&self, client: IpAddr) -> [Key; 2] {
        let group = self
            .directory
            .get()
            .and_then(Option::as_ref)
            .and_then(|d| d.namespace_of(client))
            .map(|ns| Key::namespace(self.names.hash_one(&*ns)))
            .unwrap_or_else(|| Key::prefix(client, self.config.prefix.0, self.config.prefix.1));
        [Key::address(client), group]
    }

    fn count(&self, upstream: bool, decision: Decision, denied: Option<Denied>) {
        if let Some(d) = self.decisions.get() {
            d.count(upstream, decision, denied);
        }
    }

    /// What an over-share question gets, counted.
    fn verdict(&self, q: &Question, denied: Denied, upstream: bool) -> Refusal {
        let (refusal, decision) = if q.over_stream() || self.config.refuse {
            (Refusal::Refused, Decision::Refused)
        } else if self.config.slip > 0 && denied.denials.is_multiple_of(self.config.slip) {
            (Refusal::Truncated, Decision::Slipped)
        } else {
            (Refusal::Dropped, Decision::Dropped)
        };
        self.count(upstream, decision, Some(denied));
        refusal
    }

    /// Takes a question's tokens: `None` when admitted, else the reply it gets.
    fn judge(&self, q: &Question) -> Option<Reply> {
        match self.table.take_question(&self.keys(q.client.ip())) {
            Ok(()) => {
                self.count(false, Decision::Admitted, None);
                None
            }
            Err(denied) => Some(self.verdict(q, denied, false).reply()),
        }
    }
}

/// The plugin in the chain.
#[derive(Debug, Clone)]
pub struct Fairness {
    shared: Arc<Shared>,
}

impl Fairness {
    /// The plugin over `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

impl Plugin for Fairness {
    fn name(&self) -> &'static str {
        "fairness"
    }

    /// An admitted question's answer is the rest of the chain's, which the answer memo may
    /// replay to anyone: a replay costs less than weighing it. An over-share reply forbids
    /// its own replay.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Same
    }

    fn serve_now(&self, q: &Question, next: &Next<'_>) -> Now {
        match self.shared.judge(q) {
            None => Now::Pass,
            Some(reply) => {
                next.for_this_client_only();
                Now::Reply(reply)
            }
        }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }
}

/// The block's [`UpstreamShare`]: what `forward` asks before it sends a question on.
#[derive(Debug, Clone)]
pub struct Share {
    shared: Arc<Shared>,
}

impl Share {
    /// The share over `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

/// What an admitted upstream question holds: its places in flight, in the shared table,
/// given back when it is dropped (the exchange ended, or the client went away).
struct Places {
    shared: Arc<Shared>,
    taken: Option<Taken>,
}

impl Drop for Places {
    fn drop(&mut self) {
        if let Some(t) = self.taken.take() {
            self.shared.table.give_back(t);
        }
    }
}

impl UpstreamShare for Share {
    fn admit(&self, q: &Question) -> Result<UpstreamTicket, Refusal> {
        // autopath's tries (probes) cost the upstream as much as the client's own questions.
        let s = &self.shared;
        let keys = s.keys(q.client.ip());
        match s.table.take_upstream(&keys) {
            Ok(taken) => {
                s.count(true, Decision::Admitted, None);
                Ok(UpstreamTicket::holding(Box::new(Places {
                    shared: s.clone(),
                    taken: Some(taken),
                })))
            }
            Err(denied) => Err(s.verdict(q, denied, true)),
        }
    }
}
