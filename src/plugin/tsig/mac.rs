//! The MACs of TSIG (RFC 8945 §6): HMAC (RFC 2104) over SHA-1, SHA-224, SHA-256, SHA-384 and
//! SHA-512, by the algorithm names TSIG records carry. SHA-2 comes from `sha2`, SHA-1 from
//! `ring` (both already in the tree); HMAC itself is written out here (RFC 2104 §2).

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
