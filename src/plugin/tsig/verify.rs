//! The check of signed requests and the signing of their responses (RFC 8945): the TSIG record
//! read from a request's wire form, its MAC verified over the request as the client signed it
//! (§4.3.3), the errors of §5.2 (BADKEY, BADSIG, BADTIME, each with NOTAUTH), and the TSIG
//! record of each response (§4.3.1; for the messages after the first of a zone transfer, over
//! the prior MAC, the message and the timers, §4.3.2 and §5.3.1).

use std::collections::HashMap;

use hickory_proto::op::{OpCode, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

use crate::chain::{RequestAuth, ResponseSigner, SignedRequest, Verdict};
use crate::plugin::kit::tsig::{
    ANY, Algorithm, BADTIME, FUDGE, TSIG, TsigRecord, alg_name, same, tsig_record, unix_now, variables,
    wire_name, with_len,
};

/// The TSIG error codes the server gives (RFC 8945 §3).
const BADSIG: u16 = 16;
const BADKEY: u16 = 17;

/// Which unsigned requests are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Require {
    /// `require all`.
    pub all_types: bool,
    /// `require QTYPE...`.
    pub types: Vec<RecordType>,
    /// `require_opcode all`.
    pub all_opcodes: bool,
    /// `require_opcode OPCODE...`.
    pub opcodes: Vec<OpCode>,
}

impl Require {
    /// True when an unsigned request of `qtype` and `opcode` is refused.
    pub fn applies(&self, qtype: RecordType, opcode: OpCode) -> bool {
        self.all_types || self.types.contains(&qtype) || self.all_opcodes || self.opcodes.contains(&opcode)
    }
}

/// The check of one block's requests (`tsig`).
#[derive(Debug)]
pub struct TsigAuth {
    zones: Vec<Name>,
    keys: HashMap<Name, Vec<u8>>,
    require: Require,
}

impl TsigAuth {
    /// The check of requests for names under `zones`, with `keys` (lower-case names).
    pub fn new(zones: Vec<Name>, keys: HashMap<Name, Vec<u8>>, require: Require) -> Self {
        Self { zones, keys, require }
    }

    fn reject(&self, t: &TsigRecord, algorithm: Algorithm, error: u16, now: u64) -> Verdict {
        let key = self.keys.get(&t.key).cloned().unwrap_or_default();
        Verdict::Reject(
            ResponseCode::NotAuth,
            Box::new(TsigSigner {
                key_name: t.key.clone(),
                key,
                algorithm,
                request_mac: t.mac.clone(),
                original_id: t.original_id,
                error,
                // BADTIME: the client's time signed, the server's time in other data (§5.2.3).
                time: (error == BADTIME).then_some(t.time),
                other: if error == BADTIME {
                    now.to_be_bytes()[2..].to_vec()
                } else {
                    Vec::new()
                },
                signs: error == BADTIME,
                prior: None,
            }),
        )
    }
}

impl RequestAuth for TsigAuth {
    fn check(&self, req: &SignedRequest<'_>, now: u64) -> Verdict {
        let t = match tsig_record(req.wire) {
            Err(_) => return Verdict::Rcode(ResponseCode::FormErr),
            Ok(t) => t,
        };
        let required = || self.require.applies(req.qtype, req.opcode);
        if t.is_none() && !required() {
            return Verdict::Pass;
        }
        if !self.zones.iter().any(|z| z.zone_of(req.name)) {
            return Verdict::Pass;
        }
        let Some(t) = t else {
            tracing::debug!(qtype = %req.qtype, "tsig: rejecting a request without TSIG");
            return Verdict::Rcode(ResponseCode::Refused);
        };
        let algorithm = Algorithm::from_name(&t.algorithm.to_ascii());
        let (Some(algorithm), Some(key)) = (algorithm, self.keys.get(&t.key)) else {
            // An unknown key or algorithm: BADKEY, unsigned (§5.2.1).
            return self.reject(&t, algorithm.unwrap_or(Algorithm::Sha256), BADKEY, now);
        };
        // The request as the client signed it: without its TSIG, ARCOUNT one less, its
        // original ID (§4.3.3).
        let mut signed = req.wire[..t.start].to_vec();
        if signed.len() < 12 {
            return Verdict::Rcode(ResponseCode::FormErr);
        }
        signed[..2].copy_from_slice(&t.original_id.to_be_bytes());
        let arcount = req.additional_count.saturating_sub(1);
        signed[10..12].copy_from_slice(&arcount.to_be_bytes());
        let want = algorithm.mac(
            key,
            &[
                &signed,
                &wire_name(&t.key),
                &variables(algorithm, t.time, t.fudge, t.error, &t.other),
            ],
        );
        // A MAC cut to at least half its length and 10 bytes is allowed (§5.2.2.3).
        let shortest = (algorithm.mac_len() / 2).max(10);
        let mac_ok =
            t.mac.len() >= shortest && t.mac.len() <= want.len() && same(&t.mac, &want[..t.mac.len()]);
        if !mac_ok {
            tracing::debug!(key = %t.key, "tsig: BADSIG");
            return self.reject(&t, algorithm, BADSIG, now);
        }
        if now.abs_diff(t.time) > u64::from(t.fudge) {
            tracing::debug!(key = %t.key, "tsig: BADTIME");
            return self.reject(&t, algorithm, BADTIME, now);
        }
        Verdict::Verified(Box::new(TsigSigner {
            key_name: t.key,
            key: key.clone(),
            algorithm,
            request_mac: t.mac,
            original_id: t.original_id,
            error: 0,
            time: None,
            other: Vec::new(),
            signs: true,
            prior: None,
        }))
    }
}

/// Signs the responses to one signed request.
#[derive(Debug)]
struct TsigSigner {
    key_name: Name,
    key: Vec<u8>,
    algorithm: Algorithm,
    request_mac: Vec<u8>,
    original_id: u16,
    error: u16,
    /// The time signed, when it is not the time of signing (BADTIME: the client's).
    time: Option<u64>,
    other: Vec<u8>,
    /// False for BADKEY and BADSIG: the record goes without a MAC (§5.3.2).
    signs: bool,
    /// The MAC of the message signed before, for the next of a transfer.
    prior: Option<Vec<u8>>,
}

impl TsigSigner {
    fn mac_of(&self, msg: &[u8], time: u64) -> Vec<u8> {
        match &self.prior {
            // A later message of a transfer: prior MAC, message, timers (§4.3.2).
            Some(prior) => {
                let mut timers = time.to_be_bytes()[2..].to_vec();
                timers.extend_from_slice(&FUDGE.to_be_bytes());
                self.algorithm.mac(&self.key, &[&with_len(prior), msg, &timers])
            }
            None => self.algorithm.mac(
                &self.key,
                &[
                    &with_len(&self.request_mac),
                    msg,
                    &wire_name(&self.key_name),
                    &variables(self.algorithm, time, FUDGE, self.error, &self.other),
                ],
            ),
        }
    }
}

impl ResponseSigner for TsigSigner {
    fn overhead(&self) -> usize {
        wire_name(&self.key_name).len()
            + 10
            + wire_name(&alg_name(self.algorithm)).len()
            + 16
            + self.algorithm.mac_len()
            + self.other.len()
    }

    fn sign(&mut self, msg: &mut Vec<u8>) -> Result<(), String> {
        if msg.len() < 12 {
            return Err("the message has no header".into());
        }
        let time = self.time.unwrap_or_else(unix_now);
        let mac = if self.signs {
            self.mac_of(msg, time)
        } else {
            Vec::new()
        };
        let mut rdata = wire_name(&alg_name(self.algorithm));
        rdata.extend_from_slice(&time.to_be_bytes()[2..]);
        rdata.extend_from_slice(&FUDGE.to_be_bytes());
        rdata.extend_from_slice(&u16::try_from(mac.len()).unwrap_or(0).to_be_bytes());
        rdata.extend_from_slice(&mac);
        rdata.extend_from_slice(&self.original_id.to_be_bytes());
        rdata.extend_from_slice(&self.error.to_be_bytes());
        rdata.extend_from_slice(&u16::try_from(self.other.len()).unwrap_or(0).to_be_bytes());
        rdata.extend_from_slice(&self.other);
        let arcount = u16::from_be_bytes([msg[10], msg[11]])
            .checked_add(1)
            .ok_or("the additional section is full")?;
        msg[10..12].copy_from_slice(&arcount.to_be_bytes());
        msg.extend_from_slice(&wire_name(&self.key_name));
        msg.extend_from_slice(&TSIG.to_be_bytes());
        msg.extend_from_slice(&ANY.to_be_bytes());
        msg.extend_from_slice(&0u32.to_be_bytes());
        msg.extend_from_slice(&u16::try_from(rdata.len()).unwrap_or(0).to_be_bytes());
        msg.extend_from_slice(&rdata);
        self.prior = Some(mac);
        Ok(())
    }
}

/// A query type's name as `require` lists it.
pub fn qtype_of(text: &str) -> Option<RecordType> {
    match text {
        "IXFR" => return Some(RecordType::IXFR),
        "AXFR" => return Some(RecordType::AXFR),
        _ => {}
    }
    if let Some(n) = text.strip_prefix("TYPE") {
        return n.parse::<u16>().ok().map(RecordType::from);
    }
    let t: RecordType = text.parse().ok()?;
    (!matches!(t, RecordType::Unknown(_))).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::kit::tsig::{TsigError, TsigKey};
    use hickory_proto::op::{Message, Query};

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn auth() -> TsigAuth {
        TsigAuth {
            zones: vec![Name::root()],
            keys: HashMap::from([(Name::from_ascii("k.").unwrap(), KEY.to_vec())]),
            require: Require::default(),
        }
    }

    fn key() -> TsigKey {
        TsigKey {
            name: Name::from_ascii("k.").unwrap(),
            algorithm: Algorithm::Sha256,
            secret: KEY.to_vec(),
        }
    }

    /// A query for `a.example.` A signed with KEY at `time` (the client side's TSIG), where
    /// its additional section starts, and the request's MAC.
    fn signed_with_mac(time: u64) -> (Vec<u8>, usize, Vec<u8>) {
        let mut m = Message::query();
        m.metadata.id = 7;
        m.add_query(Query::query(
            Name::from_ascii("a.example.").unwrap(),
            RecordType::A,
        ));
        let mut wire = m.to_vec().unwrap();
        let additional_at = wire.len();
        let mac = key().sign(&mut wire, time).unwrap();
        (wire, additional_at, mac)
    }

    fn signed(time: u64) -> (Vec<u8>, usize) {
        let (wire, at, _) = signed_with_mac(time);
        (wire, at)
    }

    fn check(wire: &[u8], additional_at: usize, count: u16, now: u64) -> Verdict {
        let name = Name::from_ascii("a.example.").unwrap();
        auth().check(
            &SignedRequest {
                wire,
                additional_at,
                additional_count: count,
                name: &name,
                qtype: RecordType::A,
                opcode: OpCode::Query,
            },
            now,
        )
    }

    #[test]
    fn time_outside_the_fudge_is_badtime_and_signed() {
        let (wire, at) = signed(1_000_000);
        assert!(matches!(check(&wire, at, 1, 1_000_300), Verdict::Verified(_)));
        let Verdict::Reject(rcode, mut signer) = check(&wire, at, 1, 1_000_301) else {
            panic!("BADTIME")
        };
        assert_eq!(rcode, ResponseCode::NotAuth);
        let mut reply = wire[..at].to_vec();
        let before = reply.len();
        signer.sign(&mut reply).unwrap();
        assert_eq!(reply.len() - before, signer.overhead(), "overhead is exact");
        // The error, and the server's time in other data (6 bytes): the record ends with them.
        let tail = &reply[reply.len() - 10..];
        assert_eq!(tail[..2], BADTIME.to_be_bytes());
        assert_eq!(tail[2..4], [0, 6]);
        assert_eq!(tail[4..], 1_000_301u64.to_be_bytes()[2..]);
        // A flipped bit of the request is BADSIG.
        let mut bad = wire.clone();
        // (The question's type: the request still parses.)
        bad[at - 3] ^= 1;
        assert!(matches!(
            check(&bad, at, 1, 1_000_000),
            Verdict::Reject(ResponseCode::NotAuth, _)
        ));
    }

    #[test]
    fn a_tsig_that_is_not_last_is_malformed() {
        let (mut wire, at) = signed(1_000_000);
        // Another record after the TSIG.
        wire.extend_from_slice(&[0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0]);
        wire[11] = 2;
        assert!(matches!(
            check(&wire, at, 2, 1_000_000),
            Verdict::Rcode(ResponseCode::FormErr)
        ));
        // Cut short.
        let (wire, at) = signed(1_000_000);
        assert!(matches!(
            check(&wire[..wire.len() - 3], at, 1, 1_000_000),
            Verdict::Rcode(ResponseCode::FormErr)
        ));
    }

    /// The client side (`secondary`'s) checks what this side signs: a transfer's three
    /// messages, the later ones over the prior MAC; a changed byte, a message signed with the
    /// MAC of another request, or an unsigned last message fail.
    #[test]
    fn the_client_side_checks_a_signed_transfer() {
        let now = 1_000_000;
        let (wire, at, request_mac) = signed_with_mac(now);
        let Verdict::Verified(mut signer) = check(&wire, at, 1, now) else {
            panic!("the client's signature verifies")
        };
        // The request's header and question, without its TSIG, as a response.
        let mut base = wire[..at].to_vec();
        base[2] |= 0x80;
        base[11] = 0;
        let messages: Vec<Vec<u8>> = (0..3u8)
            .map(|i| {
                let mut m = base.clone();
                m[3] |= i << 4;
                signer.sign(&mut m).unwrap();
                m
            })
            .collect();
        let at_time = unix_now();
        let mut ok = key().response_check(request_mac.clone());
        for m in &messages {
            ok.message(m, at_time).unwrap();
        }
        ok.finish().unwrap();

        let mut flipped = key().response_check(request_mac.clone());
        flipped.message(&messages[0], at_time).unwrap();
        let mut bad = messages[1].clone();
        bad[at - 3] ^= 1;
        assert_eq!(flipped.message(&bad, at_time), Err(TsigError::BadSignature));

        let mut other_request = key().response_check(vec![0; 32]);
        assert_eq!(
            other_request.message(&messages[0], at_time),
            Err(TsigError::BadSignature)
        );

        let mut unsigned_last = key().response_check(request_mac.clone());
        unsigned_last.message(&messages[0], at_time).unwrap();
        unsigned_last.message(&base, at_time).unwrap();
        assert_eq!(unsigned_last.finish(), Err(TsigError::Unsigned));
        let mut unsigned_first = key().response_check(request_mac.clone());
        assert_eq!(unsigned_first.message(&base, at_time), Err(TsigError::Unsigned));
        let late = key()
            .response_check(request_mac)
            .message(&messages[0], at_time + 301);
        assert!(matches!(late, Err(TsigError::BadTime { .. })), "{late:?}");
    }
}
