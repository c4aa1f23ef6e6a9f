//! The bound at work: the rest of the chain's answer, or SERVFAIL once the timeout passed (the
//! unfinished answer is dropped, and with it any exchange with an upstream). A chain that never
//! awaits I/O after it answers at once and is not bounded.

use std::time::Duration;

use hickory_proto::op::ResponseCode;

use crate::chain::{Next, Now, Plugin, Replay, ReplyFuture};
use crate::proto::{Failure, Question, Reply};

/// The failure `errors` logs when the bound is reached.
pub const CANCELLED: &str = "context deadline exceeded (cancel)";

/// The `cancel` plugin in a chain.
#[derive(Debug, Clone, Copy)]
pub struct Cancel {
    timeout: Duration,
}

impl Cancel {
    /// The plugin bounding the rest of the chain by `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self { timeout }
    }
}

impl Plugin for Cancel {
    fn name(&self) -> &'static str {
        "cancel"
    }

    /// It changes no answer; when the bound is reached the reply is a failure, which is never
    /// replayed.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Same
    }

    /// Nothing after it awaits: the answer is at hand, no bound needed.
    fn serve_now(&self, _q: &Question, next: &Next<'_>) -> Now {
        if next.awaits_io() { Now::Later } else { Now::Pass }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        if !next.awaits_io() {
            return next.serve(q);
        }
        Box::pin(async move {
            match tokio::time::timeout(self.timeout, next.serve(q)).await {
                Ok(reply) => reply,
                Err(_) => Reply::Failed(Failure {
                    rcode: ResponseCode::ServFail,
                    reason: CANCELLED,
                }),
            }
        })
    }
}
