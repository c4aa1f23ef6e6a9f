//! What plugins offer one another without naming each other: who tells secondaries of a
//! changed zone ([`Notifier`], `transfer`'s, called by `file`), and whether any Service has an
//! IPv6 address ([`ClusterFamilies`], `kubernetes`'s, read by `noaaaa auto`), found by their
//! type among a block's [`crate::chain::Capabilities`].

use std::sync::Arc;

use hickory_proto::rr::Name;

/// What tells a block's secondaries that a zone changed (RFC 1996 NOTIFY to `transfer`'s `to`
/// addresses). A plugin whose zone data changes (`file`, when it loads and reloads a zone)
/// calls it through the [`Notifier`] its block offers.
pub trait ZoneNotifier: Send + Sync + std::fmt::Debug {
    /// `zone` (its apex) has new data: its secondaries are told, in the background.
    fn zone_changed(&self, zone: &Name);
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
