//! The `noaaaa` plugin's query path: an AAAA question in its zones that reaches it (no
//! authoritative plugin before it answered: it sits just before `forward`) gets NOERROR with no
//! records (NODATA), as a resolver would answer it, with no upstream exchange; every other
//! question passes on. In `auto` mode it does so only while the cluster has no Service with an
//! IPv6 address, read on each question from the `kubernetes` plugin's [`ClusterFamilies`]
//! (one atomic load), so it turns on and off as IPv6 Services come and go.
//!
//! Replay: in `always` mode its answer depends on the question alone; in `auto` mode an AAAA
//! answer in its zones depends on the cluster too, and is never memoized.

use std::sync::{Arc, Weak};
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RecordType};
use prometheus::{IntCounter, IntGauge};

use crate::chain::{Chain, Next, Now, Plugin, Replay, ReplyFuture};
use crate::plugin::kit::ClusterFamilies;
use crate::proto::{FlagEdit, Forwarded, Question, Reply};

/// When it answers AAAA questions itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Always.
    Always,
    /// While no Service in the cluster has an IPv6 address (and the cluster is known).
    Auto,
}

/// What decides, shared with the gauge's refresher task.
#[derive(Debug)]
struct State {
    mode: Mode,
    families: Option<ClusterFamilies>,
    active: Option<IntGauge>,
}

impl State {
    fn active(&self) -> bool {
        match self.mode {
            Mode::Always => true,
            Mode::Auto => self.families.as_ref().and_then(|f| f.0.has_ipv6()) == Some(false),
        }
    }

    fn show(&self) {
        if let Some(g) = &self.active {
            g.set(i64::from(self.active()));
        }
    }
}

/// The plugin. See the module docs.
#[derive(Debug)]
pub struct Noaaaa {
    zones: Vec<Name>,
    state: Arc<State>,
    answers: Option<IntCounter>,
}

impl Noaaaa {
    /// The plugin for `zones` in `mode`; `families` is what `auto` reads (without it, `auto`
    /// never answers).
    pub fn new(
        zones: Vec<Name>,
        mode: Mode,
        families: Option<ClusterFamilies>,
        metrics: Option<(IntCounter, IntGauge)>,
    ) -> Self {
        let (answers, active) = metrics.map_or((None, None), |(c, g)| (Some(c), Some(g)));
        let state = Arc::new(State {
            mode,
            families,
            active,
        });
        state.show();
        Self {
            zones,
            state,
            answers,
        }
    }

    fn covers(&self, q: &Question) -> bool {
        q.qtype == RecordType::AAAA && self.zones.iter().any(|z| z.zone_of(&q.name))
    }
}

/// NOERROR, no records, RA as a resolver sets it.
fn nodata() -> Reply {
    Reply::Forwarded(Forwarded {
        rcode: ResponseCode::NoError,
        recursion_available: true,
        authentic_data: false,
        truncated: false,
        flags: FlagEdit::KEEP,
        answers: Vec::new(),
        authority: Vec::new(),
        additional: Vec::new(),
    })
}

/// Refreshes the gauge every second while the plugin lives (it holds only a weak reference).
async fn refresh(state: Weak<State>) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        match state.upgrade() {
            Some(s) => s.show(),
            None => return,
        }
    }
}

impl Plugin for Noaaaa {
    fn name(&self) -> &'static str {
        "noaaaa"
    }

    fn replay(&self, q: &Question) -> Replay {
        if self.state.mode == Mode::Auto && self.covers(q) {
            Replay::Never
        } else {
            Replay::Same
        }
    }

    fn serve_now(&self, q: &Question, _next: &Next<'_>) -> Now {
        if !self.covers(q) || !self.state.active() {
            return Now::Pass;
        }
        if let Some(c) = &self.answers {
            c.inc();
        }
        Now::Reply(nodata())
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }

    /// The `active` gauge follows the cluster even while no AAAA question comes.
    fn start(&self, _chain: &Chain) {
        if self.state.mode == Mode::Auto
            && self.state.active.is_some()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(refresh(Arc::downgrade(&self.state)));
        }
    }
}
