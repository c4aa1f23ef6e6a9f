//! What a block's `acl` directives hold once parsed (`setup.rs` reads the Corefile into it): its
//! policies, each zones and rules in file order, and a rule's action; what the handler
//! (`handler.rs`) checks each question against.

use std::net::IpAddr;

use hickory_proto::rr::{Name, RecordType};

use crate::corefile::Cidr;

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The question goes on down the chain.
    Allow,
    /// REFUSED.
    Block,
    /// NOERROR with no records.
    Filter,
    /// No reply at all.
    Drop,
}

/// One rule: an action for questions of some types from some sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What it does.
    pub action: Action,
    /// The types it matches; empty: every type.
    pub types: Vec<RecordType>,
    /// The sources it matches; empty: every source.
    pub nets: Vec<Cidr>,
}

impl Rule {
    /// True when the rule applies to a question of `qtype` from `client`.
    pub fn matches(&self, qtype: RecordType, client: IpAddr) -> bool {
        (self.types.is_empty() || self.types.contains(&qtype))
            && (self.nets.is_empty() || self.nets.iter().any(|n| n.contains(client)))
    }
}

/// One `acl` directive: its zones and rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The zones, lower-case and absolute.
    pub zones: Vec<Name>,
    /// The rules, in file order.
    pub rules: Vec<Rule>,
}

/// A block's `acl` directives, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AclConfig {
    /// The policies.
    pub policies: Vec<Policy>,
}
