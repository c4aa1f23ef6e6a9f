//! What a configured `autopath` directive holds once parsed (`setup.rs` reads the Corefile into
//! it): its zones and where each client's search path comes from; what the handler (`handler.rs`)
//! runs with.

use hickory_proto::rr::Name;

use crate::corefile::{Directive, Token};

/// Where the search path comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchSource {
    /// A plugin of the same block, per client (`@kubernetes`).
    Plugin(String),
    /// One path for every client, from a resolv.conf file's `search` line.
    Fixed(Vec<Name>),
}

/// `autopath`, as configured.
#[derive(Debug, Clone)]
pub struct AutoPathConfig {
    /// The zones it acts in (the block's when none are given), lower-case and absolute.
    pub zones: Vec<Name>,
    /// Where each client's search path comes from.
    pub source: SearchSource,
    /// The search domains of this server's own resolv.conf, tried after the client's own
    /// (with `@PLUGIN`, as CoreDNS does).
    pub own_search: Vec<Name>,
    /// The directive and its RESOLV-CONF argument, for errors found by [`Configured::check`](crate::chain::Configured::check).
    pub(super) at: (Directive, Token),
}
