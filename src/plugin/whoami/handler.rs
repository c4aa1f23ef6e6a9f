//! The `whoami` plugin's handler (see [`super`]).

use std::net::IpAddr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, SRV};
use hickory_proto::rr::{Name, RData, Record};

use crate::chain::{Next, Now, Plugin, Replay, ReplyFuture};
use crate::proto::{Answer, FlagEdit, Question, Reply, Transport};

/// The plugin.
#[derive(Debug, Clone, Copy)]
pub struct WhoAmI;

impl WhoAmI {
    /// The reply to `q`: the client's address and port in the additional section.
    pub fn answer(q: &Question) -> Reply {
        let owner = q.name.clone();
        let addr = match q.client.ip() {
            IpAddr::V4(v4) => RData::A(A(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => RData::A(A(v4)),
                None => RData::AAAA(AAAA(v6)),
            },
        };
        let transport = match q.transport {
            Transport::Udp => "_udp",
            _ => "_tcp",
        };
        let mut additional = vec![Record::from_rdata(owner.clone(), 0, addr)];
        if let Ok(srv_owner) = Name::from_ascii(transport).and_then(|t| t.append_domain(&owner)) {
            let srv = SRV::new(0, 0, q.client.port(), Name::root());
            additional.push(Record::from_rdata(srv_owner, 0, RData::SRV(srv)));
        }
        Reply::Authoritative(Answer {
            rcode: ResponseCode::NoError,
            answers: Vec::new().into(),
            authority: Vec::new(),
            additional,
            chase_target: None,
            flags: FlagEdit::KEEP,
        })
    }
}

impl Plugin for WhoAmI {
    fn name(&self) -> &'static str {
        "whoami"
    }

    /// Its answer is the client's address: kept for and replayed to no other client.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Client
    }

    fn serve_now(&self, q: &Question, _next: &Next<'_>) -> Now {
        Now::Reply(Self::answer(q))
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }
}
