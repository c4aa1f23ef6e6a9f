//! Which replies lose their authority and additional sections: CoreDNS's `response.Typify`
//! "NoError" class, i.e. NOERROR with answer records, or NOERROR with neither an SOA (NODATA)
//! nor an NS (a delegation) in the authority section. Everything else passes unchanged.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Record, RecordType};

use crate::chain::{Next, Plugin, Replay, ReplyFuture};
use crate::proto::{Question, Reply};

/// True when a reply with this rcode and these sections is a plain positive answer.
fn is_positive(rcode: ResponseCode, answers: &[Record], authority: &[Record]) -> bool {
    rcode == ResponseCode::NoError
        && (!answers.is_empty()
            || !authority
                .iter()
                .any(|r| matches!(r.record_type(), RecordType::SOA | RecordType::NS)))
}

/// `reply` with its authority and additional sections emptied when it is positive.
pub fn minimize(reply: Reply) -> Reply {
    match reply {
        Reply::Authoritative(mut a) if is_positive(a.rcode, &a.answers, &a.authority) => {
            a.authority.clear();
            a.additional.clear();
            Reply::Authoritative(a)
        }
        Reply::Forwarded(mut f) if is_positive(f.rcode, &f.answers, &f.authority) => {
            f.authority.clear();
            f.additional.clear();
            Reply::Forwarded(f)
        }
        other => other,
    }
}

/// The `minimal` plugin in a chain.
#[derive(Debug, Clone, Copy, Default)]
pub struct Minimal;

impl Plugin for Minimal {
    fn name(&self) -> &'static str {
        "minimal"
    }

    /// What it does depends on the reply alone.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Same
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move { minimize(next.serve(q).await) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Answer;
    use hickory_proto::rr::rdata::{A, NS, SOA};
    use hickory_proto::rr::{Name, RData};

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    fn a() -> Record {
        Record::from_rdata(name("a.example."), 5, RData::A(A::new(192, 0, 2, 1)))
    }

    fn ns() -> Record {
        Record::from_rdata(name("sub.example."), 5, RData::NS(NS(name("ns.sub.example."))))
    }

    fn soa() -> Record {
        let soa = SOA::new(name("ns.example."), name("h.example."), 1, 2, 3, 4, 5);
        Record::from_rdata(name("example."), 5, RData::SOA(soa))
    }

    fn reply(rcode: ResponseCode, answers: Vec<Record>, authority: Vec<Record>) -> Reply {
        Reply::Authoritative(Answer {
            rcode,
            answers: answers.into(),
            authority,
            additional: vec![a()],
            chase_target: None,
            flags: crate::proto::FlagEdit::KEEP,
        })
    }

    fn sections(r: &Reply) -> (usize, usize, usize) {
        let Reply::Authoritative(a) = r else {
            panic!("authoritative")
        };
        (a.answers.len(), a.authority.len(), a.additional.len())
    }

    #[test]
    fn positive_answers_lose_authority_and_additional() {
        let r = minimize(reply(ResponseCode::NoError, vec![a()], vec![ns()]));
        assert_eq!(sections(&r), (1, 0, 0));
        // NOERROR without answers, SOA or NS (whoami's answer) is positive too, as in CoreDNS.
        let r = minimize(reply(ResponseCode::NoError, Vec::new(), Vec::new()));
        assert_eq!(sections(&r), (0, 0, 0));
    }

    #[test]
    fn negative_answers_and_delegations_pass_unchanged() {
        for (rcode, authority) in [
            (ResponseCode::NoError, vec![soa()]),
            (ResponseCode::NXDomain, vec![soa()]),
            (ResponseCode::NoError, vec![ns()]),
            (ResponseCode::ServFail, Vec::new()),
        ] {
            let kept = authority.len();
            let r = minimize(reply(rcode, Vec::new(), authority));
            assert_eq!(sections(&r), (0, kept, 1), "{rcode:?}");
        }
    }
}
