//! The rules at work: the question the rest of the chain is asked gets the `query` rules' RD
//! bit, and each reply it gives carries the `response` rules as a header edit
//! ([`crate::proto::FlagEdit`]) that the server applies when it encodes the reply, that the
//! cache keeps with the reply and that the answer memo keeps in the bytes it sends again.

use crate::chain::{Next, Plugin, Replay, ReplyFuture};
use crate::proto::{FlagEdit, Question, Reply};

/// The `header` plugin in a chain.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// The RD bit of the question the rest of the chain is asked, when a rule sets it.
    query_rd: Option<bool>,
    /// What the reply gets: the question's RD (which a reply echoes) then the `response`
    /// rules.
    reply: FlagEdit,
}

impl Header {
    /// The plugin of the `query` rules' edit and the `response` rules' one.
    pub fn new(query: FlagEdit, response: FlagEdit) -> Self {
        let echoed = FlagEdit {
            recursion_desired: query.recursion_desired,
            ..FlagEdit::KEEP
        };
        Self {
            query_rd: query.recursion_desired,
            reply: echoed.then(response),
        }
    }

    /// `reply` with the header edit; the server's own failures and bare rcodes keep the
    /// server's flags (CoreDNS's server writes those past the plugin).
    pub fn edit(&self, reply: Reply) -> Reply {
        match reply {
            Reply::Authoritative(mut a) => {
                a.flags = a.flags.then(self.reply);
                Reply::Authoritative(a)
            }
            Reply::Forwarded(mut f) => {
                f.flags = f.flags.then(self.reply);
                Reply::Forwarded(f)
            }
            other => other,
        }
    }
}

impl Plugin for Header {
    fn name(&self) -> &'static str {
        "header"
    }

    /// What it does depends on the request bytes and the reply alone, and the edit is in the
    /// reply the memo keeps.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Same
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            let reply = match self.query_rd {
                Some(rd) if rd != q.recursion_desired => {
                    let mut asked = q.clone();
                    asked.recursion_desired = rd;
                    next.serve(&asked).await
                }
                _ => next.serve(q).await,
            };
            self.edit(reply)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Answer, Failure};
    use hickory_proto::op::ResponseCode;

    fn config(query_rd: Option<bool>, response: FlagEdit) -> (FlagEdit, FlagEdit) {
        let query = FlagEdit {
            recursion_desired: query_rd,
            ..FlagEdit::KEEP
        };
        (query, response)
    }

    fn header((query, response): (FlagEdit, FlagEdit)) -> Header {
        Header::new(query, response)
    }

    fn answer() -> Reply {
        Reply::Authoritative(Answer::empty(ResponseCode::NoError))
    }

    #[test]
    fn answers_carry_the_response_rules_and_the_query_rd() {
        let set_ra = FlagEdit {
            recursion_available: Some(true),
            ..FlagEdit::KEEP
        };
        let Reply::Authoritative(a) = header(config(Some(false), set_ra)).edit(answer()) else {
            panic!("authoritative")
        };
        assert_eq!(
            a.flags,
            FlagEdit {
                recursion_available: Some(true),
                recursion_desired: Some(false),
                ..FlagEdit::KEEP
            }
        );
        // A response rule on RD wins over the question's.
        let set_rd = FlagEdit {
            recursion_desired: Some(true),
            ..FlagEdit::KEEP
        };
        let Reply::Authoritative(a) = header(config(Some(false), set_rd)).edit(answer()) else {
            panic!("authoritative")
        };
        assert_eq!(a.flags.recursion_desired, Some(true));
    }

    #[test]
    fn failures_keep_the_server_flags() {
        let h = header(config(
            None,
            FlagEdit {
                authoritative: Some(true),
                ..FlagEdit::KEEP
            },
        ));
        let failed = Reply::Failed(Failure {
            rcode: ResponseCode::ServFail,
            reason: "x",
        });
        assert_eq!(h.edit(failed.clone()), failed);
        assert_eq!(
            h.edit(Reply::Rcode(ResponseCode::Refused)),
            Reply::Rcode(ResponseCode::Refused)
        );
    }
}
