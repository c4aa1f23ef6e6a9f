//! What plugins offer one another without naming each other: the upstreams a question can be
//! sent to (`Arc<dyn `[`Upstreams`]`>`, `forward`'s, probed by `loop`), the search paths of the
//! clients (`Arc<dyn `[`SearchPaths`]`>`, the kubernetes plugin's, walked by `autopath`), a
//! zone's records for a transfer (`Arc<dyn `[`ZoneTransfer`]`>`, `kubernetes`'s and `file`'s,
//! asked by `transfer`), who tells secondaries of a changed zone ([`Notifier`], `transfer`'s,
//! called by `file`), and whether any Service has an IPv6 address ([`ClusterFamilies`],
//! `kubernetes`'s, read by `noaaaa auto`), found by their type among a block's [`crate::chain::Capabilities`] or its plugins' offers
//! ([`crate::chain::Plugin::offers`]).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use hickory_proto::rr::{Name, Record};

/// Upstream servers a question can be sent to, one by one (what `forward` offers, and what the
/// `loop` plugin probes through).
pub trait Upstreams: Send + Sync {
    /// How many upstreams there are.
    fn count(&self) -> usize;
    /// True when the upstreams would be asked for `name`.
    fn handles(&self, name: &Name) -> bool;
    /// Sends a loop probe (`HINFO name`) to upstream `index`; true when any reply came.
    fn probe(&self, index: usize, name: Name) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;
    /// Stops using upstream `index` for good (it loops back to this server); its address when
    /// this call took it out of use.
    fn mark_looping(&self, index: usize) -> Option<SocketAddr>;
}

/// What knows each client's resolv.conf search path (CoreDNS's AutoPather).
pub trait SearchPaths: Send + Sync + std::fmt::Debug {
    /// The search domains a client at `client` walks, in order (without the bare name); `None`
    /// when it is not known (the client is not a pod this source knows).
    fn search_path(&self, client: std::net::IpAddr) -> Option<Vec<Name>>;
}

/// Every record of a zone for a zone transfer (AXFR), offered by a plugin authoritative for
/// whole zones (`kubernetes`, `file`); `transfer` asks the plugins after it.
pub trait ZoneTransfer: Send + Sync {
    /// Every record of `zone`, the SOA first and last, when it is authoritative for exactly
    /// that zone; `None` otherwise.
    fn zone_transfer(&self, zone: &Name) -> Option<Vec<Record>>;

    /// The answer to an IXFR of `zone` from a secondary holding version `held` (RFC 1995
    /// section 4: the current SOA, then each version's removed and added records between the
    /// SOAs before and after it, then the current SOA), when the plugin keeps the differences
    /// back to `held`; `None` (a whole transfer instead) otherwise.
    fn zone_changes(&self, _zone: &Name, _held: u32) -> Option<Vec<Record>> {
        None
    }
}

/// What tells a block's secondaries that a zone changed (RFC 1996 NOTIFY to `transfer`'s `to`
/// addresses). A plugin whose zone data changes (`file`, when it loads and reloads a zone)
/// calls it through the [`Notifier`] its block offers.
pub trait ZoneNotifier: Send + Sync + std::fmt::Debug {
    /// `zone` (its apex) has new data: its secondaries are told, in the background.
    fn zone_changed(&self, zone: &Name);

    /// A secondary at `secondary` was just given a zone (`transfer`): a notifier that tells
    /// the secondaries that transferred (`notify transferred`) tells it from now on.
    fn transferred_to(&self, _secondary: std::net::IpAddr) {}
}

/// The block's [`ZoneNotifier`], as offered in its [`crate::chain::Capabilities`] (found by this type).
#[derive(Debug, Clone)]
pub struct Notifier(pub Arc<dyn ZoneNotifier>);

/// What knows the address families of the cluster's Services (the `kubernetes` plugin's zone):
/// `noaaaa auto` answers AAAA locally only while no Service has an IPv6 address.
pub trait ServiceFamilies: Send + Sync {
    /// `Some(true)` while some Service has an IPv6 ClusterIP or endpoint address,
    /// `Some(false)` while none has; `None` when it cannot tell (the zone has not synced
    /// yet). Cheap: read on every question it matters to.
    fn has_ipv6(&self) -> Option<bool>;
}

/// A block's [`ServiceFamilies`], as offered in its [`crate::chain::Capabilities`] (found by this type).
#[derive(Clone)]
pub struct ClusterFamilies(pub Arc<dyn ServiceFamilies>);

impl std::fmt::Debug for ClusterFamilies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterFamilies").finish_non_exhaustive()
    }
}
