//! What a configured `rrl` directive holds once parsed (`setup.rs` reads the Corefile into it): its
//! zones, window, prefix lengths, the allowance of each category and the table's bound; what the
//! handler (`handler.rs`) and its table limit with.

use hickory_proto::rr::Name;

/// A block's `rrl`.
#[derive(Debug, Clone, PartialEq)]
pub struct RrlConfig {
    /// The zones whose answers are limited, lower-case and absolute.
    pub zones: Vec<Name>,
    /// Seconds of debt an account can run up (default 15).
    pub window: u32,
    /// Bits of an IPv4 client address that make its account (default 24).
    pub ipv4_prefix: u8,
    /// Bits of an IPv6 client address that make its account (default 56).
    pub ipv6_prefix: u8,
    /// Allowances a second by category ([`Category::slot`](super::Category::slot) order: responses, nodata,
    /// nxdomains, referrals, errors, requests); 0 does not limit that category.
    pub rates: [u32; 6],
    /// Every Nth limited response goes out truncated (TC=1, sections empty); 0: none does.
    pub slip: u32,
    /// The most accounts kept (default 100000).
    pub max_table: usize,
    /// Count what would be limited, limit nothing.
    pub report_only: bool,
}

impl Default for RrlConfig {
    fn default() -> Self {
        Self {
            zones: vec![Name::root()],
            window: 15,
            ipv4_prefix: 24,
            ipv6_prefix: 56,
            rates: [0; 6],
            slip: 0,
            max_table: 100_000,
            report_only: false,
        }
    }
}
