//! The answers, as CoreDNS 1.14.7's *local* writes them: every record with TTL 604800 and
//! the server's RD, neither AA nor RA; an SOA `localhost. root.localhost. 1 0 0 0 604800` at the
//! name asked (or at the zone) for the empty answers.

use std::net::{Ipv4Addr, Ipv6Addr};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, NS, PTR, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use prometheus::IntCounter;

use crate::chain::{Next, Now, Plugin, Replay, Replayed, ReplyFuture};
use crate::proto::{Answer, FlagEdit, Question, Records, Reply};

/// The TTL of every record it writes (a week, as CoreDNS's).
pub const TTL: u32 = 604_800;

/// The zones it answers whole, lower-case.
const ZONES: [&str; 4] = [
    "localhost.",
    "0.in-addr.arpa.",
    "127.in-addr.arpa.",
    "255.in-addr.arpa.",
];

/// The one reverse name with a record.
const LOOPBACK_PTR: &str = "1.0.0.127.in-addr.arpa.";

/// The `local` plugin in a chain.
#[derive(Debug, Clone)]
pub struct Local {
    /// `localhost.<domain>` is localhost too.
    localhost_prefix: bool,
    /// `coredns_local_localhost_requests_total`, when metrics are exported.
    counter: Option<IntCounter>,
}

/// `localhost.` as a name.
fn localhost() -> Name {
    Name::from_ascii("localhost.").unwrap_or_default()
}

/// The SOA record of `origin`.
fn soa(origin: &Name) -> Record {
    let localhost = localhost();
    let mbox = Name::from_ascii("root.localhost.").unwrap_or_default();
    let soa = SOA::new(localhost, mbox, 1, 0, 0, 0, TTL);
    Record::from_rdata(origin.clone(), TTL, RData::SOA(soa))
}

/// An answer of `data` at the name asked (no AA, as CoreDNS's).
fn answer(q: &Question, data: RData) -> Reply {
    let mut a = Answer::empty(ResponseCode::NoError);
    a.answers = Records::with_owner(&q.name, TTL, [data]);
    a.flags = a.flags.then(FlagEdit {
        authoritative: Some(false),
        ..FlagEdit::KEEP
    });
    Reply::Authoritative(a)
}

/// An empty answer with `rcode` and the SOA of `origin`.
fn empty(rcode: ResponseCode, origin: &Name) -> Reply {
    let mut a = Answer::empty(rcode);
    a.authority = vec![soa(origin)];
    a.flags = a.flags.then(FlagEdit {
        authoritative: Some(false),
        ..FlagEdit::KEEP
    });
    Reply::Authoritative(a)
}

/// The loopback address answer of the question's type, or NODATA with the SOA of the name.
fn loopback(q: &Question) -> Reply {
    match q.qtype {
        RecordType::A => answer(q, RData::A(A(Ipv4Addr::LOCALHOST))),
        RecordType::AAAA => answer(q, RData::AAAA(AAAA(Ipv6Addr::LOCALHOST))),
        _ => empty(ResponseCode::NoError, &q.name),
    }
}

impl Local {
    /// The plugin, with the legacy prefix on or off, counting in `counter`.
    pub fn new(localhost_prefix: bool, counter: Option<IntCounter>) -> Self {
        Self {
            localhost_prefix,
            counter,
        }
    }

    /// `name` (lower-case, absolute) is a non-apex localhost name: under `.localhost.`, or
    /// `localhost.<domain>` with the prefix on.
    fn special(&self, name: &str) -> bool {
        name.len() > ZONES[0].len()
            && (name.ends_with(".localhost.") || (self.localhost_prefix && name.starts_with("localhost.")))
    }

    /// Its reply to `q`, or `None` when `q` is not a local name.
    pub fn answer(&self, q: &Question) -> Option<Reply> {
        let name = lower(&q.name);
        if self.special(&name) {
            tracing::debug!(qname = %q.name, qtype = %q.qtype, client = %q.client.ip(), "intercepting localhost query");
            if let Some(c) = &self.counter {
                c.inc();
            }
            return Some(loopback(q));
        }
        let zone = ZONES
            .iter()
            .find(|z| name == **z || name.strip_suffix(**z).is_some_and(|rest| rest.ends_with('.')))?;
        // The zone as the client spelt it.
        let origin = q.name.trim_to(zone.matches('.').count());
        let reply = match (name.as_str(), q.qtype) {
            ("localhost.", RecordType::A | RecordType::AAAA) => loopback(q),
            (apex, t) if apex == *zone => match t {
                RecordType::SOA => answer(q, soa(&q.name).data),
                RecordType::NS => answer(q, RData::NS(NS(localhost()))),
                _ => empty(ResponseCode::NoError, &q.name),
            },
            (LOOPBACK_PTR, RecordType::PTR) => answer(q, RData::PTR(PTR(localhost()))),
            (LOOPBACK_PTR, _) => empty(ResponseCode::NoError, &origin),
            _ => empty(ResponseCode::NXDomain, &origin),
        };
        Some(reply)
    }
}

/// `name` lower-case and absolute, as text.
fn lower(name: &Name) -> String {
    let mut s = name.to_lowercase().to_ascii();
    if !s.ends_with('.') {
        s.push('.');
    }
    s
}

impl Plugin for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    /// The answer depends on the question alone; a counted one is counted again when the
    /// memo sends it again.
    fn replay(&self, q: &Question) -> Replay {
        if self.special(&lower(&q.name)) {
            Replay::Counted
        } else {
            Replay::Same
        }
    }

    fn replayed(&self, _replay: Replayed) {
        if let Some(c) = &self.counter {
            c.inc();
        }
    }

    fn serve_now(&self, q: &Question, _next: &Next<'_>) -> Now {
        match self.answer(q) {
            Some(reply) => Now::Reply(reply),
            None => Now::Pass,
        }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rcode, answer and authority of the reply to `name`/`qtype`, as text.
    fn ask(local: &Local, name: &str, qtype: RecordType) -> Option<(ResponseCode, Vec<String>, Vec<String>)> {
        let q = Question::new(Name::from_ascii(name).unwrap(), qtype);
        let Reply::Authoritative(a) = local.answer(&q)? else {
            panic!("authoritative")
        };
        assert_eq!(a.flags.authoritative, Some(false));
        let show = |rs: &[Record]| {
            rs.iter()
                .map(|r| format!("{} {} {}", r.name, r.ttl, r.data))
                .collect()
        };
        Some((a.rcode, show(&a.answers), show(&a.authority)))
    }

    fn soa_of(origin: &str) -> String {
        format!("{origin} 604800 localhost. root.localhost. 1 0 0 0 604800")
    }

    #[test]
    fn localhost_names_have_loopback_addresses() {
        let l = Local::new(true, None);
        for name in [
            "localhost.",
            "foo.localhost.",
            "LocalHost.Example.Com.",
            "a.b.localhost.",
        ] {
            let (rcode, answers, _) = ask(&l, name, RecordType::A).unwrap();
            assert_eq!(
                (rcode, answers),
                (ResponseCode::NoError, vec![format!("{name} 604800 127.0.0.1")])
            );
            let (_, answers, _) = ask(&l, name, RecordType::AAAA).unwrap();
            assert_eq!(answers, vec![format!("{name} 604800 ::1")]);
        }
        // Other types under .localhost.: NODATA with an SOA at the name.
        assert_eq!(
            ask(&l, "foo.localhost.", RecordType::MX).unwrap(),
            (ResponseCode::NoError, vec![], vec![soa_of("foo.localhost.")])
        );
        // Without the legacy prefix, localhost.<domain> goes on; .localhost. names do not.
        let strict = Local::new(false, None);
        assert!(ask(&strict, "localhost.example.com.", RecordType::A).is_none());
        assert!(ask(&strict, "foo.localhost.", RecordType::A).is_some());
        assert!(ask(&l, "localhostx.", RecordType::A).is_none());
        assert!(ask(&l, "example.com.", RecordType::A).is_none());
    }

    #[test]
    fn the_reverse_zones_are_empty_but_for_the_loopback_ptr() {
        let l = Local::new(true, None);
        assert_eq!(
            ask(&l, "1.0.0.127.in-addr.arpa.", RecordType::PTR).unwrap().1,
            ["1.0.0.127.in-addr.arpa. 604800 localhost."]
        );
        assert_eq!(
            ask(&l, "1.0.0.127.in-addr.arpa.", RecordType::A).unwrap(),
            (ResponseCode::NoError, vec![], vec![soa_of("127.in-addr.arpa.")])
        );
        assert_eq!(
            ask(&l, "2.0.0.127.IN-ADDR.arpa.", RecordType::PTR).unwrap(),
            (ResponseCode::NXDomain, vec![], vec![soa_of("127.IN-ADDR.arpa.")])
        );
        assert_eq!(
            ask(&l, "0.in-addr.arpa.", RecordType::A).unwrap(),
            (ResponseCode::NoError, vec![], vec![soa_of("0.in-addr.arpa.")])
        );
        assert_eq!(
            ask(&l, "255.in-addr.arpa.", RecordType::NS).unwrap().1,
            ["255.in-addr.arpa. 604800 localhost."]
        );
        assert_eq!(
            ask(&l, "localhost.", RecordType::SOA).unwrap().1,
            [soa_of("localhost.")]
        );
        // ip6.arpa is not intercepted (CoreDNS's known bug, kept).
        assert!(
            ask(
                &l,
                "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa.",
                RecordType::PTR
            )
            .is_none()
        );
        assert!(ask(&l, "10.in-addr.arpa.", RecordType::PTR).is_none());
    }
}
