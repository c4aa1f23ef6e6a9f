//! TSIG (RFC 8945) as the plugins share it. Its MACs (§6): HMAC (RFC 2104) over SHA-1,
//! SHA-224, SHA-256, SHA-384 and SHA-512, by the algorithm names TSIG records carry; SHA-2
//! comes from `sha2`, SHA-1 from `ring` (both already in the tree), HMAC itself is written out
//! here (RFC 2104 §2). The digest's parts (the TSIG variables, §4.3.3). And its client side
//! ([`TsigKey`]): a request signed (§5.1), and each message of its response checked (§5.3),
//! a zone transfer's later messages over the prior MAC with at most 99 unsigned between
//! signed ones (§5.3.1). The server side (a signed request checked, its response signed) is
//! the `tsig` plugin's.

use hickory_proto::rr::Name;
use hickory_proto::serialize::binary::{BinDecodable as _, BinDecoder, BinEncodable as _};

/// TSIG's record type and class (ANY).
pub const TSIG: u16 = 250;
/// The class of a TSIG record.
pub const ANY: u16 = 255;
/// The TSIG error BADTIME (RFC 8945 §3).
pub const BADTIME: u16 = 18;
/// The fudge of the signatures made here, as dig and CoreDNS use.
pub const FUDGE: u16 = 300;
/// The most messages of a response that may come unsigned in a row (RFC 8945 §5.3.1).
const MAX_UNSIGNED: usize = 99;

/// A TSIG algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// `hmac-sha1.`
    Sha1,
    /// `hmac-sha224.`
    Sha224,
    /// `hmac-sha256.`
    Sha256,
    /// `hmac-sha384.`
    Sha384,
    /// `hmac-sha512.`
    Sha512,
}

impl Algorithm {
    /// The algorithm of a TSIG record's algorithm name (lower-case, absolute).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "hmac-sha1." => Self::Sha1,
            "hmac-sha224." => Self::Sha224,
            "hmac-sha256." => Self::Sha256,
            "hmac-sha384." => Self::Sha384,
            "hmac-sha512." => Self::Sha512,
            _ => return None,
        })
    }

    /// Its name as TSIG records carry it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha1 => "hmac-sha1.",
            Self::Sha224 => "hmac-sha224.",
            Self::Sha256 => "hmac-sha256.",
            Self::Sha384 => "hmac-sha384.",
            Self::Sha512 => "hmac-sha512.",
        }
    }

    /// The hash's block size in bytes.
    fn block(self) -> usize {
        match self {
            Self::Sha1 | Self::Sha224 | Self::Sha256 => 64,
            Self::Sha384 | Self::Sha512 => 128,
        }
    }

    /// The MAC's length in bytes.
    pub fn mac_len(self) -> usize {
        match self {
            Self::Sha1 => 20,
            Self::Sha224 => 28,
            Self::Sha256 => 32,
            Self::Sha384 => 48,
            Self::Sha512 => 64,
        }
    }

    /// The hash of the concatenation of `parts`.
    fn hash(self, parts: &[&[u8]]) -> Vec<u8> {
        fn all<D: sha2::Digest>(parts: &[&[u8]]) -> Vec<u8> {
            let mut d = D::new();
            for p in parts {
                d.update(p);
            }
            d.finalize().to_vec()
        }
        match self {
            Self::Sha1 => {
                let mut c = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
                for p in parts {
                    c.update(p);
                }
                c.finish().as_ref().to_vec()
            }
            Self::Sha224 => all::<sha2::Sha224>(parts),
            Self::Sha256 => all::<sha2::Sha256>(parts),
            Self::Sha384 => all::<sha2::Sha384>(parts),
            Self::Sha512 => all::<sha2::Sha512>(parts),
        }
    }

    /// HMAC with `key` over the concatenation of `parts` (RFC 2104 §2).
    pub fn mac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        let block = self.block();
        let mut k = if key.len() > block {
            self.hash(&[key])
        } else {
            key.to_vec()
        };
        k.resize(block, 0);
        let ipad: Vec<u8> = k.iter().map(|b| b ^ 0x36).collect();
        let opad: Vec<u8> = k.iter().map(|b| b ^ 0x5c).collect();
        let mut inner_parts = Vec::with_capacity(parts.len() + 1);
        inner_parts.push(ipad.as_slice());
        inner_parts.extend_from_slice(parts);
        let inner = self.hash(&inner_parts);
        self.hash(&[&opad, &inner])
    }
}

/// True when `a` and `b` are equal, in a time that does not depend on where they differ.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A name's canonical wire form (lower-case, uncompressed).
pub fn wire_name(name: &Name) -> Vec<u8> {
    name.to_lowercase().to_bytes().unwrap_or_default()
}

/// The name an algorithm's TSIG records carry.
pub fn alg_name(algorithm: Algorithm) -> Name {
    Name::from_ascii(algorithm.name()).unwrap_or_else(|_| Name::root())
}

/// The TSIG variables of a digest (RFC 8945 §4.3.3) after the key name: class, TTL, algorithm,
/// time, fudge, error and other data.
pub fn variables(algorithm: Algorithm, time: u64, fudge: u16, error: u16, other: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(&ANY.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(&wire_name(&alg_name(algorithm)));
    v.extend_from_slice(&time.to_be_bytes()[2..]);
    v.extend_from_slice(&fudge.to_be_bytes());
    v.extend_from_slice(&error.to_be_bytes());
    v.extend_from_slice(&u16::try_from(other.len()).unwrap_or(0).to_be_bytes());
    v.extend_from_slice(other);
    v
}

/// `mac` with its length before it, as a digest covers a request's or a prior MAC.
pub fn with_len(mac: &[u8]) -> Vec<u8> {
    let mut v = u16::try_from(mac.len()).unwrap_or(0).to_be_bytes().to_vec();
    v.extend_from_slice(mac);
    v
}

/// The seconds since the epoch, as TSIG times are.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why a signed exchange failed on the client's side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TsigError {
    /// A message that had to be signed was not (the first, or the last, of a response).
    #[error("a response message is not signed")]
    Unsigned,
    /// The MAC does not verify.
    #[error("a response message's signature does not verify")]
    BadSignature,
    /// Signed with another key or algorithm than the request's.
    #[error("a response message is signed with key {key} ({algorithm}), not the request's")]
    OtherKey {
        /// The key it names.
        key: String,
        /// The algorithm it names.
        algorithm: String,
    },
    /// Signed at a time further from ours than its fudge.
    #[error("a response message was signed {skew}s from this clock, beyond its fudge of {fudge}s")]
    BadTime {
        /// Seconds between its time and ours.
        skew: u64,
        /// Its fudge.
        fudge: u16,
    },
    /// The primary reports a TSIG error (16 BADSIG, 17 BADKEY, 18 BADTIME...).
    #[error("the server reports TSIG error {0} (16 BADSIG, 17 BADKEY, 18 BADTIME)")]
    ServerError(u16),
    /// More than 99 messages in a row came unsigned.
    #[error("more than {MAX_UNSIGNED} response messages in a row are unsigned")]
    TooManyUnsigned,
    /// A TSIG record that does not parse, or is not the last record.
    #[error("a response message's TSIG record is malformed")]
    Malformed,
}

/// A message's TSIG record, read from its wire form.
#[derive(Debug)]
pub struct TsigRecord {
    /// Where the record starts in the message.
    pub start: usize,
    /// The key's name (lower-case).
    pub key: Name,
    /// The algorithm's name (lower-case).
    pub algorithm: Name,
    /// Time signed, in seconds since the epoch.
    pub time: u64,
    /// The seconds of error allowed in `time`.
    pub fudge: u16,
    /// The MAC.
    pub mac: Vec<u8>,
    /// The message's ID when it was signed.
    pub original_id: u16,
    /// The TSIG error.
    pub error: u16,
    /// Other data (the server's time, with BADTIME).
    pub other: Vec<u8>,
}

/// The TSIG record of `msg`, when its last record is one: `Ok(None)` when it has none;
/// `Err` when one does not parse or is not last.
pub fn tsig_record(msg: &[u8]) -> Result<Option<TsigRecord>, TsigError> {
    let bad = |_| TsigError::Malformed;
    let mut d = BinDecoder::new(msg);
    let mut counts = [0u16; 4];
    d.read_slice(4).map_err(bad)?;
    for c in &mut counts {
        *c = d.read_u16().map_err(bad)?.unverified();
    }
    for _ in 0..counts[0] {
        Name::read(&mut d).map_err(bad)?;
        d.read_slice(4).map_err(bad)?;
    }
    let records = usize::from(counts[1]) + usize::from(counts[2]) + usize::from(counts[3]);
    for i in 0..records {
        let start = d.index();
        let owner = Name::read(&mut d).map_err(bad)?;
        let rtype = d.read_u16().map_err(bad)?.unverified();
        let class = d.read_u16().map_err(bad)?.unverified();
        d.read_u32().map_err(bad)?;
        let rdlen = usize::from(d.read_u16().map_err(bad)?.unverified());
        if rtype != TSIG {
            d.read_slice(rdlen).map_err(bad)?;
            continue;
        }
        if i + 1 != records || class != ANY {
            return Err(TsigError::Malformed);
        }
        let rdata_at = d.index();
        let algorithm = Name::read(&mut d).map_err(bad)?;
        let time = d
            .read_slice(6)
            .map_err(bad)?
            .unverified()
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let fudge = d.read_u16().map_err(bad)?.unverified();
        let mac_len = usize::from(d.read_u16().map_err(bad)?.unverified());
        let mac = d.read_slice(mac_len).map_err(bad)?.unverified().to_vec();
        let original_id = d.read_u16().map_err(bad)?.unverified();
        let error = d.read_u16().map_err(bad)?.unverified();
        let other_len = usize::from(d.read_u16().map_err(bad)?.unverified());
        let other = d.read_slice(other_len).map_err(bad)?.unverified().to_vec();
        if d.index() != rdata_at + rdlen {
            return Err(TsigError::Malformed);
        }
        return Ok(Some(TsigRecord {
            start,
            key: owner.to_lowercase(),
            algorithm: algorithm.to_lowercase(),
            time,
            fudge,
            mac,
            original_id,
            error,
            other,
        }));
    }
    Ok(None)
}

/// A TSIG key a client signs its requests with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TsigKey {
    /// Its name (lower-case, absolute).
    pub name: Name,
    /// Its algorithm.
    pub algorithm: Algorithm,
    /// Its secret.
    pub secret: Vec<u8>,
}

impl TsigKey {
    /// Signs `msg` (a whole message without TSIG) at `now`: its TSIG record appended and
    /// counted in ARCOUNT. The MAC is given back: the response's first signature covers it.
    pub fn sign(&self, msg: &mut Vec<u8>, now: u64) -> Result<Vec<u8>, TsigError> {
        if msg.len() < 12 {
            return Err(TsigError::Malformed);
        }
        let key = wire_name(&self.name);
        let mac = self.algorithm.mac(
            &self.secret,
            &[msg, &key, &variables(self.algorithm, now, FUDGE, 0, &[])],
        );
        let mut rdata = wire_name(&alg_name(self.algorithm));
        rdata.extend_from_slice(&now.to_be_bytes()[2..]);
        rdata.extend_from_slice(&FUDGE.to_be_bytes());
        rdata.extend_from_slice(&with_len(&mac));
        rdata.extend_from_slice(&msg[..2]);
        rdata.extend_from_slice(&[0, 0, 0, 0]);
        let arcount = u16::from_be_bytes([msg[10], msg[11]])
            .checked_add(1)
            .ok_or(TsigError::Malformed)?;
        msg[10..12].copy_from_slice(&arcount.to_be_bytes());
        msg.extend_from_slice(&key);
        msg.extend_from_slice(&TSIG.to_be_bytes());
        msg.extend_from_slice(&ANY.to_be_bytes());
        msg.extend_from_slice(&0u32.to_be_bytes());
        msg.extend_from_slice(
            &u16::try_from(rdata.len())
                .map_err(|_| TsigError::Malformed)?
                .to_be_bytes(),
        );
        msg.extend_from_slice(&rdata);
        Ok(mac)
    }

    /// The check of the response to a request this key signed with `request_mac`.
    pub fn response_check(&self, request_mac: Vec<u8>) -> ResponseCheck {
        ResponseCheck {
            key: self.clone(),
            prior: request_mac,
            first: true,
            unsigned: Vec::new(),
            unsigned_count: 0,
        }
    }
}

/// The check of one response's messages, in order (RFC 8945 §5.3): the first must be signed
/// over the request's MAC; later ones (a zone transfer's) over the prior MAC, with at most 99
/// unsigned in a row, and the last signed ([`ResponseCheck::finish`]).
#[derive(Debug)]
pub struct ResponseCheck {
    key: TsigKey,
    /// The MAC the next signature covers: the request's, then the last verified.
    prior: Vec<u8>,
    first: bool,
    /// The unsigned messages since the last signed one, as their digest covers them.
    unsigned: Vec<u8>,
    unsigned_count: usize,
}

impl ResponseCheck {
    /// Checks `msg`, the next message of the response, at `now`.
    pub fn message(&mut self, msg: &[u8], now: u64) -> Result<(), TsigError> {
        let Some(t) = tsig_record(msg)? else {
            if self.first {
                return Err(TsigError::Unsigned);
            }
            self.unsigned_count += 1;
            if self.unsigned_count > MAX_UNSIGNED {
                return Err(TsigError::TooManyUnsigned);
            }
            self.unsigned.extend_from_slice(msg);
            return Ok(());
        };
        if t.key != self.key.name.to_lowercase()
            || Algorithm::from_name(&t.algorithm.to_ascii()) != Some(self.key.algorithm)
        {
            return Err(TsigError::OtherKey {
                key: t.key.to_string(),
                algorithm: t.algorithm.to_string(),
            });
        }
        if t.error != 0 {
            return Err(TsigError::ServerError(t.error));
        }
        // The message as it was signed: without its TSIG, ARCOUNT one less, its original ID.
        let mut signed = msg[..t.start].to_vec();
        if signed.len() < 12 {
            return Err(TsigError::Malformed);
        }
        signed[..2].copy_from_slice(&t.original_id.to_be_bytes());
        let arcount = u16::from_be_bytes([signed[10], signed[11]]).saturating_sub(1);
        signed[10..12].copy_from_slice(&arcount.to_be_bytes());
        let (alg, secret) = (self.key.algorithm, &self.key.secret);
        let want = if self.first {
            alg.mac(
                secret,
                &[
                    &with_len(&self.prior),
                    &signed,
                    &wire_name(&t.key),
                    &variables(alg, t.time, t.fudge, t.error, &t.other),
                ],
            )
        } else {
            let mut timers = t.time.to_be_bytes()[2..].to_vec();
            timers.extend_from_slice(&t.fudge.to_be_bytes());
            alg.mac(
                secret,
                &[&with_len(&self.prior), &self.unsigned, &signed, &timers],
            )
        };
        // A MAC cut to at least half its length and 10 bytes is allowed (§5.2.2.3).
        let shortest = (alg.mac_len() / 2).max(10);
        if t.mac.len() < shortest || t.mac.len() > want.len() || !same(&t.mac, &want[..t.mac.len()]) {
            return Err(TsigError::BadSignature);
        }
        if now.abs_diff(t.time) > u64::from(t.fudge) {
            return Err(TsigError::BadTime {
                skew: now.abs_diff(t.time),
                fudge: t.fudge,
            });
        }
        self.prior = t.mac;
        self.first = false;
        self.unsigned.clear();
        self.unsigned_count = 0;
        Ok(())
    }

    /// The response is complete: its last message must have been signed.
    pub fn finish(&self) -> Result<(), TsigError> {
        if self.first || self.unsigned_count > 0 {
            return Err(TsigError::Unsigned);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// RFC 4231 test case 2 (SHA-224 to SHA-512) and RFC 2202 test case 2 (SHA-1): key "Jefe".
    #[test]
    fn published_test_vectors() {
        let data: &[&[u8]] = &[b"what do ya want ", b"for nothing?"];
        assert_eq!(
            hex(&Algorithm::Sha1.mac(b"Jefe", data)),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        );
        assert_eq!(
            hex(&Algorithm::Sha224.mac(b"Jefe", data)),
            "a30e01098bc6dbbf45690f3a7e9e6d0f8bbea2a39e6148008fd05e44"
        );
        assert_eq!(
            hex(&Algorithm::Sha256.mac(b"Jefe", data)),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&Algorithm::Sha384.mac(b"Jefe", data)),
            "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649"
        );
        assert_eq!(
            hex(&Algorithm::Sha512.mac(b"Jefe", data)),
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
        );
        // A key longer than the block is hashed first (RFC 4231 test case 6).
        let key = [0xaau8; 131];
        assert_eq!(
            hex(&Algorithm::Sha256.mac(&key, &[b"Test Using Larger Than Block-Size Key - Hash Key First"])),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"ab", b"abc"));
    }
}
