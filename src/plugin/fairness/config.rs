//! What a configured `fairness` directive holds once parsed (`setup.rs` reads the Corefile into
//! it): each client's and group's rates, the bounds of the table, and the defaults; what the
//! handler (`handler.rs`) and its table run with.

use super::table::{Limits, Rate};

/// Questions per second a client address may ask, by default.
pub const DEFAULT_QUESTIONS: f64 = 1000.0;

/// Questions per second a client address may send upstream, by default (a pod resolving 200
/// new outside names a second is well inside it).
pub const DEFAULT_UPSTREAM: f64 = 500.0;

/// Upstream exchanges a client address may hold in flight, by default.
pub const DEFAULT_INFLIGHT: u32 = 50;

/// How many times a client's budget a namespace or an address prefix has, by default.
pub const DEFAULT_GROUP: u32 = 5;

/// The prefix lengths that group clients no pod index knows, by default.
pub const DEFAULT_PREFIX: (u8, u8) = (24, 56);

/// Every Nth refused UDP question gets a truncated reply, by default.
pub const DEFAULT_SLIP: u32 = 2;

/// The most client keys the table holds, by default (about 5 MiB).
pub const DEFAULT_MAX_CLIENTS: usize = 65_536;

/// `fairness`, as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct FairnessConfig {
    /// A client address's limits.
    pub address: Limits,
    /// The factor of a namespace's and a prefix's limits to an address's.
    pub group: u32,
    /// The prefix lengths of unknown clients (IPv4, IPv6).
    pub prefix: (u8, u8),
    /// Every Nth refused UDP question is answered truncated, the rest not at all (0: none is
    /// answered).
    pub slip: u32,
    /// Refused UDP questions get REFUSED instead (no slip, no silence).
    pub refuse: bool,
    /// The most client keys tracked.
    pub max_clients: usize,
    /// Where the directive is written (for its warnings).
    pub at: Option<crate::corefile::Location>,
}

impl Default for FairnessConfig {
    fn default() -> Self {
        Self {
            address: Limits {
                questions: Rate {
                    per_second: DEFAULT_QUESTIONS,
                    burst: 2.0 * DEFAULT_QUESTIONS,
                },
                upstream: Rate {
                    per_second: DEFAULT_UPSTREAM,
                    burst: 2.0 * DEFAULT_UPSTREAM,
                },
                inflight: DEFAULT_INFLIGHT,
            },
            group: DEFAULT_GROUP,
            prefix: DEFAULT_PREFIX,
            slip: DEFAULT_SLIP,
            refuse: false,
            max_clients: DEFAULT_MAX_CLIENTS,
            at: None,
        }
    }
}

impl FairnessConfig {
    /// The limits of a namespace or a prefix: the address's times `group`.
    pub fn grouped(&self) -> Limits {
        let f = f64::from(self.group);
        let scale = |r: Rate| Rate {
            per_second: r.per_second * f,
            burst: r.burst * f,
        };
        Limits {
            questions: scale(self.address.questions),
            upstream: scale(self.address.upstream),
            inflight: self.address.inflight.saturating_mul(self.group),
        }
    }
}
