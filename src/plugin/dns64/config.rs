//! What a configured `dns64` directive holds once parsed (`setup.rs` reads the Corefile into it):
//! the NAT64 prefix and whom it translates for; what the handler (`handler.rs`) synthesizes with.

use std::net::Ipv6Addr;

/// A block's `dns64`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dns64Config {
    /// The NAT64 prefix (host bits zero).
    pub prefix: Ipv6Addr,
    /// Its length, one of 32, 40, 48, 56, 64, 96.
    pub prefix_len: u8,
    /// Synthesize even when the name has AAAA records.
    pub translate_all: bool,
    /// Translate for clients asking over IPv4 too (by default only IPv6 clients).
    pub allow_ipv4: bool,
}

impl Default for Dns64Config {
    fn default() -> Self {
        Self {
            prefix: Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0),
            prefix_len: 96,
            translate_all: false,
            allow_ipv4: false,
        }
    }
}
