//! The `dns64` plugin's answers (RFC 6147 section 5.1). For an AAAA question of class IN from
//! an IPv6 client (any client with `allow_ipv4`):
//!
//! 1. the question goes down the chain; a reply that is not NOERROR (NXDOMAIN included, RFC 6147
//!    5.1.2), or that holds AAAA records, is the answer (with `translate_all` this step is
//!    skipped and records are synthesized whatever AAAA records exist);
//! 2. otherwise the same name's A records are asked down the chain, and each becomes an AAAA
//!    record of the prefix with the IPv4 address embedded (RFC 6052 section 2.2), with the
//!    smaller of the A record's TTL and the first reply's SOA minimum (RFC 6147 5.1.7, 600 s
//!    when there was no SOA); CNAMEs on the way are kept (5.1.3);
//! 3. when there are no A records either, the first reply is the answer.
//!
//! Replay: an AAAA answer depends on the client's address family, so it is never memoized.

use std::net::{Ipv4Addr, Ipv6Addr};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::AAAA;
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use prometheus::IntCounter;

use super::config::Dns64Config;
use crate::chain::{Next, Plugin, Replay, ReplyFuture};
use crate::proto::{Question, Reply};

/// The synthesized TTL when the AAAA reply had no SOA to take a minimum from.
const DEFAULT_TTL: u32 = 600;

/// The plugin. See the module docs.
#[derive(Debug)]
pub struct Dns64 {
    config: Dns64Config,
    translated: Option<IntCounter>,
}

/// `v4` embedded in `prefix` of length `len` (RFC 6052 section 2.2): the four octets fill the
/// bytes after the prefix, skipping byte 8 (bits 64 to 71), which stays zero.
pub fn embed(prefix: Ipv6Addr, len: u8, v4: Ipv4Addr) -> Ipv6Addr {
    let mut bytes = prefix.octets();
    let mut at = usize::from(len / 8);
    for b in v4.octets() {
        if at == 8 {
            at += 1;
        }
        if let Some(slot) = bytes.get_mut(at) {
            *slot = b;
        }
        at += 1;
    }
    Ipv6Addr::from(bytes)
}

/// The records and sections a reply holds, for the kinds that carry them.
fn sections(reply: &mut Reply) -> Option<(&mut Vec<Record>, &mut Vec<Record>, &mut Vec<Record>)> {
    match reply {
        Reply::Authoritative(a) => Some((&mut a.answers, &mut a.authority, &mut a.additional)),
        Reply::Forwarded(f) => Some((&mut f.answers, &mut f.authority, &mut f.additional)),
        Reply::Rcode(_) | Reply::Failed(_) | Reply::Dropped | Reply::Truncated => None,
    }
}

/// The TTL cap from the negative reply's SOA (RFC 6147 5.1.7): the smaller of its TTL and its
/// MINIMUM.
fn soa_cap(reply: &Reply) -> u32 {
    let authority = match reply {
        Reply::Authoritative(a) => &a.authority,
        Reply::Forwarded(f) => &f.authority,
        Reply::Rcode(_) | Reply::Failed(_) | Reply::Dropped | Reply::Truncated => return DEFAULT_TTL,
    };
    authority
        .iter()
        .find_map(|r| match &r.data {
            RData::SOA(soa) => Some(r.ttl.min(soa.minimum)),
            _ => None,
        })
        .unwrap_or(DEFAULT_TTL)
}

impl Dns64 {
    /// The plugin for `config`, counting translated answers in `translated`.
    pub fn new(config: Dns64Config, translated: Option<IntCounter>) -> Self {
        Self { config, translated }
    }

    fn intercepts(&self, q: &Question) -> bool {
        q.qtype == RecordType::AAAA
            && q.qclass == DNSClass::IN
            && (self.config.allow_ipv4 || q.client.is_ipv6())
    }

    /// `a_reply` (the A records of the name) as the AAAA answer, or `None` when it has no A
    /// records.
    fn synthesize(&self, mut a_reply: Reply, cap: u32) -> Option<Reply> {
        if a_reply.rcode() != ResponseCode::NoError {
            return None;
        }
        let (answers, authority, additional) = sections(&mut a_reply)?;
        if !answers.iter().any(|r| r.record_type() == RecordType::A) {
            return None;
        }
        for r in answers.iter_mut() {
            if let RData::A(a) = &r.data {
                let v6 = embed(self.config.prefix, self.config.prefix_len, a.0);
                *r = Record::from_rdata(r.name.clone(), r.ttl.min(cap), RData::AAAA(AAAA(v6)));
            }
        }
        authority.clear();
        additional.clear();
        Some(a_reply)
    }
}

impl Plugin for Dns64 {
    fn name(&self) -> &'static str {
        "dns64"
    }

    /// Other types pass through as they are; AAAA answers depend on the client's family.
    fn replay(&self, q: &Question) -> Replay {
        if q.qtype == RecordType::AAAA {
            Replay::Client
        } else {
            Replay::Same
        }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        if !self.intercepts(q) {
            return next.serve(q);
        }
        Box::pin(async move {
            let (first, cap) = if self.config.translate_all {
                (None, DEFAULT_TTL)
            } else {
                let reply = next.serve(q).await;
                let has_aaaa = reply
                    .answers()
                    .iter()
                    .any(|r| r.record_type() == RecordType::AAAA);
                if reply.rcode() != ResponseCode::NoError || has_aaaa {
                    return reply;
                }
                let cap = soa_cap(&reply);
                (Some(reply), cap)
            };
            let mut a_question = q.clone();
            a_question.qtype = RecordType::A;
            let a_reply = next.serve(&a_question).await;
            match self.synthesize(a_reply, cap) {
                Some(reply) => {
                    if let Some(c) = &self.translated {
                        c.inc();
                    }
                    reply
                }
                None => match first {
                    Some(reply) => reply,
                    // translate_all and no A records: the AAAA question as asked.
                    None => next.serve(q).await,
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_6052_embedding_for_every_prefix_length() {
        // RFC 6052 section 2.4's table, for 192.0.2.33.
        let v4 = Ipv4Addr::new(192, 0, 2, 33);
        for (prefix, len, want) in [
            ("2001:db8::", 32, "2001:db8:c000:221::"),
            ("2001:db8:100::", 40, "2001:db8:1c0:2:21::"),
            ("2001:db8:122::", 48, "2001:db8:122:c000:2:2100::"),
            ("2001:db8:122:300::", 56, "2001:db8:122:3c0:0:221::"),
            ("2001:db8:122:344::", 64, "2001:db8:122:344:c0:2:2100:0"),
            ("2001:db8:122:344::", 96, "2001:db8:122:344::192.0.2.33"),
            ("64:ff9b::", 96, "64:ff9b::192.0.2.33"),
        ] {
            let got = embed(prefix.parse().unwrap(), len, v4);
            assert_eq!(got, want.parse::<Ipv6Addr>().unwrap(), "/{len}");
        }
    }
}
