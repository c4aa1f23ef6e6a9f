//! The `loop` plugin's query path ([`LoopDetect`]): one of our probe names coming back in
//! marks the upstream it was sent to as looping (through the chain's
//! [`Upstreams`]) and records it in the [`LoopStatus`]; the probes
//! start with the chain, and `/ready` reports a loop while one is known.

use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::Name;

use super::probe::{Probes, run_probes};
use super::status::LoopStatus;
use crate::chain::{Capabilities, Chain, Next, Plugin, Replay, ReplyFuture};
use crate::plugin::kit::Upstreams;
use crate::proto::{Question, Reply};

/// The `loop` plugin in a chain.
#[derive(Debug, Clone)]
pub struct LoopDetect {
    probes: Probes,
    status: Arc<LoopStatus>,
}

impl LoopDetect {
    /// The plugin for a block whose first zone is `zone`.
    pub fn new(zone: Name) -> Self {
        Self {
            probes: Probes::new(zone),
            status: Arc::new(LoopStatus::default()),
        }
    }

    /// The loop status.
    pub fn status(&self) -> &Arc<LoopStatus> {
        &self.status
    }

    /// The zone the probe names are made in.
    pub fn zone(&self) -> &Name {
        self.probes.zone()
    }

    /// If `name` is one of our probes, the index of the upstream it was sent to.
    pub fn probe_seen(&self, name: &Name) -> Option<usize> {
        self.probes.seen(name)
    }

    /// Registers a probe name for upstream `index`.
    pub fn register(&self, name: &Name, index: usize) {
        self.probes.register(name, index);
    }
}

impl Plugin for LoopDetect {
    fn name(&self) -> &'static str {
        "loop"
    }

    /// What it passes on or answers follows its probes (the clock), not who asks: never
    /// replayed from the memo, kept by a cache.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Never
    }

    /// One of our probes coming back marks the upstream it went to as looping and gets
    /// SERVFAIL; any other question goes on.
    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            if let Some(index) = self.probe_seen(&q.name) {
                if let Some(addr) = next
                    .offered::<Arc<dyn Upstreams>>()
                    .next()
                    .and_then(|u| u.mark_looping(index))
                {
                    self.status.record(addr);
                }
                return Reply::Rcode(ResponseCode::ServFail);
            }
            next.serve(q).await
        })
    }

    fn start(&self, chain: &Chain) {
        if chain.offered::<Arc<dyn Upstreams>>().next().is_some() {
            tokio::spawn(run_probes(self.probes.clone(), chain.clone()));
        }
    }

    /// What it found ([`LoopStatus`]), for whoever reads it (the tests).
    fn offers(self: Arc<Self>) -> Capabilities {
        Capabilities::default().with(self.status.clone())
    }

    fn not_ready(&self) -> Vec<String> {
        if !self.status.detected() {
            return Vec::new();
        }
        let upstreams: Vec<String> = self.status.upstreams().iter().map(|u| u.to_string()).collect();
        vec![format!("loop: forwarding loop through {}", upstreams.join(" "))]
    }
}
