//! Several `forward` directives in one block ([`Forwards`]): each takes the questions under its
//! FROM in the order written, and a reply whose rcode its `next` lists goes to the following
//! `forward` instead (CoreDNS hands it to its next plugin only when that is a `forward`), and so
//! does a NOERROR reply without answers (NODATA) under `next_on_nodata`.

use std::sync::Arc;

use crate::chain::{Capabilities, Next, Plugin, Replay, ReplyFuture};
use crate::plugin::kit::Upstreams;
use crate::proto::{Question, Reply};

use super::Forward;

/// A block's `forward` directives as one plugin in the chain.
#[derive(Debug, Clone)]
pub struct Forwards {
    forwards: Vec<Forward>,
}

impl Forwards {
    /// The plugin for `forwards`, in the order written.
    pub fn new(forwards: Vec<Forward>) -> Self {
        Self { forwards }
    }

    /// The directives, in the order written.
    pub fn forwards(&self) -> &[Forward] {
        &self.forwards
    }
}

impl Plugin for Forwards {
    fn name(&self) -> &'static str {
        "forward"
    }

    fn awaits_io(&self) -> bool {
        true
    }

    /// As one `forward`'s ([`Forward`]'s `replay`): the upstreams' answers are kept by a cache,
    /// never replayed from the memo.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Never
    }

    /// The first `forward` that handles the name answers, unless its upstream's rcode is in
    /// its `next` and another `forward` follows; names none handles go on down the chain.
    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            let count = self.forwards.len();
            for (i, forward) in self.forwards.iter().enumerate() {
                if !forward.handles(&q.name) {
                    continue;
                }
                if let Some(denied) = super::handler::denied_by_policy(q) {
                    next.for_this_client_only();
                    return denied;
                }
                let reply = match forward.admit(q) {
                    Ok(ticket) => forward.serve_admitted(q, ticket).await,
                    Err(refusal) => {
                        // Decided for this client alone: no store keeps it.
                        next.for_this_client_only();
                        return refusal.reply();
                    }
                };
                let passed_on = match &reply {
                    Reply::Forwarded(f) => {
                        let nodata = forward.next_on_nodata()
                            && f.rcode == hickory_proto::op::ResponseCode::NoError
                            && f.answers.is_empty();
                        i + 1 < count && (nodata || forward.next_rcodes().contains(&f.rcode))
                    }
                    _ => false,
                };
                if !passed_on {
                    return reply;
                }
            }
            next.serve(q).await
        })
    }

    /// The loop probes go to the first `forward`'s upstreams (the questions `loop` sends are
    /// for the block's zone, which the first `forward` handling it answers).
    fn offers(self: Arc<Self>) -> Capabilities {
        match self.forwards.first() {
            Some(f) => Capabilities::default().with(Arc::new(f.clone()) as Arc<dyn Upstreams>),
            None => Capabilities::default(),
        }
    }
}
