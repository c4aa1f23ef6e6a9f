//! Stage 4 of the answer path, walk: asks the routed block's chain for its reply to the
//! question, with a replay plan only when the memo may keep the response. A panicking plugin
//! costs one SERVFAIL, counted in `coredns_panics_total`, never the listener.

use std::panic::AssertUnwindSafe;

use futures::FutureExt as _;
use hickory_proto::op::ResponseCode;

use super::route::Router;
use crate::chain::{Answered, Chain};
use crate::proto::{Question, Reply};

/// `chain`'s answer to `question`, one of `router`'s blocks' (the memo and the metrics are
/// the router's).
pub(super) async fn walk(router: &Router, chain: &Chain, question: &Question) -> Answered {
    // Only a response the memo may keep needs a replay plan (whose scope asks each
    // plugin what its answer read).
    let plan = router.memo.may_keep(question.transport);
    match AssertUnwindSafe(chain.serve_planned(question, plan))
        .catch_unwind()
        .await
    {
        Ok(answered) => answered,
        Err(_) => panicked(router, question),
    }
}

/// The answer when a plugin panicked on `question`: SERVFAIL, by no plugin, counted and logged.
fn panicked(router: &Router, question: &Question) -> Answered {
    if let Some(m) = router.any_metrics() {
        m.metrics().panic();
    }
    tracing::error!(qname = %question.name, qtype = %question.qtype, "a plugin panicked; answered SERVFAIL");
    Answered {
        reply: Reply::Rcode(ResponseCode::ServFail),
        by: "",
        replay: None,
    }
}
