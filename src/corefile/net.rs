//! Address networks as Corefile values: `10.0.0.0/8`, `2001:db8::/32`, or a bare address (a
//! network of one), and whether a client address is in one. Shared by `acl` (`net SOURCE`) and
//! `view` (`incidr(IP, CIDR)`).

use std::net::IpAddr;

/// An address network: `addr` with its first `len` bits significant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    len: u8,
}

impl Cidr {
    /// Parses `ADDR/LEN` or `ADDR`; `None` when it is neither (or LEN is too long).
    pub fn parse(s: &str) -> Option<Self> {
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l.parse::<u8>().ok().filter(|l| *l <= max)?,
        };
        Some(Self { addr, len })
    }

    /// The prefix length (0: every address of its family).
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// True when `ip` is in this network (an IPv4 network never holds an IPv6 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.len)).unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks() {
        let n = Cidr::parse("192.168.0.0/16").unwrap();
        assert!(n.contains("192.168.3.4".parse().unwrap()));
        assert!(!n.contains("192.169.0.1".parse().unwrap()));
        assert!(!n.contains("::1".parse().unwrap()));
        let one = Cidr::parse("10.0.0.1").unwrap();
        assert!(one.contains("10.0.0.1".parse().unwrap()));
        assert!(!one.contains("10.0.0.2".parse().unwrap()));
        let v6 = Cidr::parse("2001:db8::/32").unwrap();
        assert!(v6.contains("2001:db8:1::5".parse().unwrap()));
        assert!(!v6.contains("2001:db9::5".parse().unwrap()));
        assert!(!Cidr::parse("0.0.0.0/0").unwrap().contains("::1".parse().unwrap()));
        for bad in ["10.0.0.0/33", "eth0", "10.0.0/8", "::/129"] {
            assert!(Cidr::parse(bad).is_none(), "{bad}");
        }
    }
}
