//! Stage 2 of the answer path, route: the server blocks that share one listen address, the
//! one that takes a question chosen by the longest zone that matches it
//! ([`Router::route_question`]), and the cell a reload swaps the whole table through. Also
//! which block's observers see a request, routed or not.

use std::borrow::Cow;
use std::sync::Arc;

use arc_swap::ArcSwap;
use hickory_proto::rr::Name;

use super::memo;
use super::observe::Observers;
use crate::chain::Chain;
use crate::proto::{QueryMetadata, Question};
use crate::telemetry::BlockMetrics;

/// One server block as the router sees it: its zones (lower-case, absolute), its chain and
/// what it observes of each request.
#[derive(Debug, Clone)]
pub struct BlockRoute {
    /// The block's zones.
    pub zones: Vec<Name>,
    /// Its plugins.
    pub chain: Chain,
    /// The largest UDP payload it advertises and fills (`bufsize`; 1232 by default).
    pub udp_payload: u16,
    /// Which questions it takes (`view`); every question its zones cover when `None`.
    pub view: Option<Arc<dyn crate::chain::BlockFilter>>,
    /// Its questions get metadata for names under these zones (`metadata`); `None`: none.
    pub metadata: Option<Vec<Name>>,
    /// Its check of signed requests (`tsig`).
    pub auth: Option<Arc<dyn crate::chain::RequestAuth>>,
    /// A plugin of its chain answers zone transfers (`transfer`).
    pub transfers: bool,
    /// Its `prometheus`, `log` and `errors`.
    pub observers: Observers,
}

impl BlockRoute {
    /// The block's metadata about `q` (a block with `metadata`): its plugins' for a name under
    /// the metadata zones, and its view's name; empty otherwise, for plugins to add to.
    fn metadata_of(&self, q: &Question) -> QueryMetadata {
        let md = QueryMetadata::default();
        if self
            .metadata
            .as_ref()
            .is_some_and(|zones| zones.iter().any(|z| z.zone_of(&q.name)))
        {
            self.chain.collect_metadata(q, &md);
            if let Some(v) = &self.view {
                md.set("view/name", v.name());
            }
        }
        md
    }
}

/// The server blocks that share one listen address, routed by the longest matching zone.
#[derive(Debug, Clone, Default)]
pub struct Router {
    /// The blocks.
    pub blocks: Vec<BlockRoute>,
    /// Responses to UDP queries that may be sent again: cluster answers while the zones are
    /// unchanged, a store's (the cache's) until its entry expires (off by default; see
    /// [`Router::with_memo`]).
    pub memo: memo::AnswerMemo,
}

/// The environment variable that turns the answer memo off (`off`).
pub const ANSWER_MEMO_ENV: &str = "CLUSTER_DNS_ANSWER_MEMO";

fn memo_turned_off() -> bool {
    std::env::var(ANSWER_MEMO_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("off"))
}

impl Router {
    /// `blocks`, with the answer memo on (see [`Router::with_memo`]).
    pub fn new(blocks: Vec<BlockRoute>) -> Self {
        Self {
            blocks,
            memo: memo::AnswerMemo::default(),
        }
        .with_memo()
    }

    /// This router with a new answer memo, kept current by the change counters of the zones its
    /// blocks' plugins answer from ([`crate::chain::Plugin::zones`]) and by the lifetimes of
    /// stored replies; off with a `view` or `CLUSTER_DNS_ANSWER_MEMO=off`.
    pub fn with_memo(mut self) -> Self {
        // A view routes by more than the request bytes (the client's address): no memo. And
        // none when the operator turned it off (to measure the full path).
        if self.blocks.iter().any(|b| b.view.is_some()) || memo_turned_off() {
            self.memo = memo::AnswerMemo::default();
            return self;
        }
        let mut zones: Vec<Arc<dyn crate::proto::ChangeCounter>> = Vec::new();
        for z in self.blocks.iter().flat_map(|b| b.chain.zones()) {
            if !zones
                .iter()
                .any(|have| std::ptr::addr_eq(Arc::as_ptr(have), Arc::as_ptr(&z)))
            {
                zones.push(z);
            }
        }
        self.memo = memo::AnswerMemo::new(zones);
        self
    }

    /// The chain of the block whose zone is the longest suffix of `name` (compared
    /// case-insensitively, so the client's spelling will do).
    pub fn route(&self, name: &Name) -> Option<&Chain> {
        self.route_zone(name).map(|(_, c)| c)
    }

    /// The longest matching zone and its block's chain.
    pub fn route_zone(&self, name: &Name) -> Option<(&Name, &Chain)> {
        self.route_block(name).map(|(_, z, b)| (z, &b.chain))
    }

    /// The index of the block whose zone is the longest suffix of `name`, that zone and the
    /// block (the first such block, views not considered).
    pub fn route_block(&self, name: &Name) -> Option<(usize, &Name, &BlockRoute)> {
        self.longest(name, |_| true).map(|(i, z, b)| (i, &b.zones[z], b))
    }

    /// The block that takes `q`: the longest zone that covers its name among the blocks whose
    /// view (if any) admits it; of blocks with the same zone, the first in the Corefile. The
    /// block's index, the zone's index in its zones, and the block.
    /// When the block has `metadata`, `q` leaves with the block's metadata about it (and a
    /// view's filter is shown the metadata its block would make, as CoreDNS collects it
    /// before each view's filter).
    pub fn route_question(&self, q: &mut Question) -> Option<(usize, usize, &BlockRoute)> {
        let found = self.longest(&q.name, |b| match &b.view {
            None => true,
            Some(v) if b.metadata.is_none() => v.admits(q),
            Some(v) => {
                let mut with = q.clone();
                with.metadata = Some(b.metadata_of(q));
                v.admits(&with)
            }
        });
        if let Some((_, _, b)) = found
            && b.metadata.is_some()
        {
            q.metadata = Some(b.metadata_of(q));
        }
        found
    }

    fn longest(
        &self,
        name: &Name,
        admits: impl Fn(&BlockRoute) -> bool,
    ) -> Option<(usize, usize, &BlockRoute)> {
        let mut best: Option<(usize, usize, &BlockRoute)> = None;
        for (i, b) in self.blocks.iter().enumerate() {
            for (zi, z) in b.zones.iter().enumerate() {
                if z.zone_of(name)
                    && best.is_none_or(|(_, bz, bb)| z.num_labels() > bb.zones[bz].num_labels())
                    && admits(b)
                {
                    best = Some((i, zi, b));
                }
            }
        }
        best
    }

    /// The metrics of the first block that has them (`prometheus`): they count what no block
    /// answered (a request no block took, a plugin's panic).
    pub(super) fn any_metrics(&self) -> Option<&BlockMetrics> {
        self.blocks.iter().find_map(|b| b.observers.metrics.as_ref())
    }

    /// Who observes a request answered by `block` (its index and the index of the zone that
    /// matched; `None`: no block took it), and the zone it is reported under: the block's
    /// observers. A request no block took is counted (metrics only) under the zone `dropped`,
    /// by the first block of the address that has metrics. `None` when nobody observes it.
    pub(super) fn observers_of(
        &self,
        block: Option<(usize, usize)>,
    ) -> Option<(Cow<'_, Observers>, Option<&Name>)> {
        let routed = block.and_then(|(i, zone)| {
            let b = self.blocks.get(i)?;
            Some((b, b.zones.get(zone)?))
        });
        match routed {
            Some((b, zone)) => (!b.observers.is_empty()).then_some((Cow::Borrowed(&b.observers), Some(zone))),
            None => {
                let fallback = Observers {
                    metrics: Some(self.any_metrics()?.clone()),
                    ..Observers::default()
                };
                Some((Cow::Owned(fallback), None))
            }
        }
    }

    /// True when some block's chain may await I/O while answering (a plugin declares it); the
    /// UDP workers answer the others without a task.
    pub fn may_await_io(&self) -> bool {
        self.blocks.iter().any(|b| b.chain.awaits_io())
    }
}

/// The routing table of one listen address, swapped whole when the Corefile is reloaded; a
/// request in flight keeps the table it started with.
pub type RouterCell = Arc<ArcSwap<Router>>;

/// A new cell holding `router`.
pub fn router_cell(router: Router) -> RouterCell {
    Arc::new(ArcSwap::from_pointee(router))
}
