//! The minimal ANY answer (RFC 8482 section 4.2): one HINFO record at the asked name, CPU
//! "ANY obsoleted", OS "See RFC 8482", TTL 8482, as CoreDNS writes it. Other types go on.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::HINFO;
use hickory_proto::rr::{RData, Record, RecordType};

use crate::chain::{Next, Now, Plugin, Replay, ReplyFuture};
use crate::proto::{Answer, FlagEdit, Question, Reply};

/// The TTL of the HINFO answer (RFC 8482 suggests a long one; CoreDNS uses 8482 s).
pub const HINFO_TTL: u32 = 8482;

/// The `any` plugin in a chain.
#[derive(Debug, Clone, Copy, Default)]
pub struct MinimalAny;

impl MinimalAny {
    /// The reply to an ANY question for `q`'s name.
    pub fn answer(q: &Question) -> Reply {
        let hinfo = HINFO::new("ANY obsoleted".to_owned(), "See RFC 8482".to_owned());
        Reply::Authoritative(Answer {
            rcode: ResponseCode::NoError,
            answers: vec![Record::from_rdata(q.name.clone(), HINFO_TTL, RData::HINFO(hinfo))].into(),
            authority: Vec::new(),
            additional: Vec::new(),
            chase_target: None,
            flags: FlagEdit::KEEP,
        })
    }
}

impl Plugin for MinimalAny {
    fn name(&self) -> &'static str {
        "any"
    }

    /// The answer depends on the question alone.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Same
    }

    fn serve_now(&self, q: &Question, _next: &Next<'_>) -> Now {
        if q.qtype == RecordType::ANY {
            Now::Reply(Self::answer(q))
        } else {
            Now::Pass
        }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Transport;
    use hickory_proto::rr::{DNSClass, Name};

    #[test]
    fn the_hinfo_answer_keeps_the_name_as_asked() {
        let q = Question {
            name: Name::from_ascii("Foo.Example.").unwrap(),
            qtype: RecordType::ANY,
            qclass: DNSClass::IN,
            dnssec_ok: false,
            checking_disabled: false,
            recursion_desired: true,
            transport: Transport::Udp,
            client: "127.0.0.1:5353".parse().unwrap(),
            probe: false,
            edns_options: Vec::new(),
            server: None,
            metadata: None,
            visibility: Default::default(),
            ixfr_serial: None,
        };
        let Reply::Authoritative(a) = MinimalAny::answer(&q) else {
            panic!("authoritative")
        };
        assert_eq!(a.rcode, ResponseCode::NoError);
        assert_eq!(a.answers.len(), 1);
        let r = &a.answers[0];
        assert_eq!(r.name.to_string(), "Foo.Example.");
        assert_eq!(r.ttl, HINFO_TTL);
        let RData::HINFO(h) = &r.data else { panic!("HINFO") };
        assert_eq!(&*h.cpu, b"ANY obsoleted");
        assert_eq!(&*h.os, b"See RFC 8482");
    }
}
