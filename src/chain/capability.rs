//! What plugins offer by type, found ONE way: a bag of typed values ([`Capabilities`]), which
//! a directive returns when it acquires its resources ([`crate::chain::Configured::acquire`],
//! the cluster source `kubernetes` shares with `k8s_external`) and a built plugin when its chain
//! is built ([`crate::chain::Plugin::offers`]; found with [`crate::chain::Chain::offered`] and
//! [`crate::chain::Next::offered`]).
//!
//! The offers the server and the runtime read are defined here: the EDNS options a plugin adds
//! to replies ([`EdnsOptions`], `nsid`'s), what it publishes about a question for `metadata`
//! ([`MetadataSource`]), the class of clients its answers are made for ([`ClientClasses`],
//! for the memo), how long the server waits for it at start ([`StartupWait`]), and whether
//! this server's own endpoint is still listed ([`OwnEndpoint`], read at SIGTERM). The chain finds the ones read per question once, when it
//! is built. What plugins offer only one another (upstreams, search paths, zone transfers, a
//! zone notifier, taps, shares, ...) is in the plugin kit (`plugin::kit`).

use std::any::Any;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::Edns;
use hickory_proto::rr::rdata::opt::EdnsOption;

use crate::proto::{QueryMetadata, Question};

/// What knows whether clients are still sent to this server: whether its own address (`POD_IP`)
/// is a ready endpoint of a Service, as the cluster's EndpointSlices say (the `kubernetes`
/// plugin's watches). SIGTERM's drain keeps answering while it is. Offered as
/// `Arc<dyn OwnEndpoint>` in what a block's plugins acquire ([`Capabilities`]).
pub trait OwnEndpoint: Send + Sync {
    /// `Some(true)` while the server's own address is a ready endpoint of some Service;
    /// `Some(false)` once it is not; `None` when it cannot tell (no `POD_IP`, no watch of the
    /// API server, or the watch is failing or not synced yet).
    fn listed(&self) -> Option<bool>;
}

/// Typed values offered by type: what the plugins of one server block acquired
/// ([`crate::chain::Configured::acquire`]), offered to every plugin of the block when it is
/// built, and what a built plugin offers ([`crate::chain::Plugin::offers`]). A value is any
/// `'static` type, often an `Arc<dyn Trait>`.
#[derive(Clone, Default)]
pub struct Capabilities {
    items: Vec<Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capabilities")
            .field("items", &self.items.len())
            .finish()
    }
}

impl Capabilities {
    /// Offers `value` to the block's plugins.
    pub fn offer<T: Any + Send + Sync>(&mut self, value: Arc<T>) {
        self.items.push(value);
    }

    /// `self` with `value` offered too (a plugin's [`crate::chain::Plugin::offers`]:
    /// `Capabilities::default().with(self as Arc<dyn EdnsOptions>)`).
    #[must_use]
    pub fn with<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.items.push(Arc::new(value));
        self
    }

    /// The first value of type `T` offered, borrowed.
    pub(super) fn first<T: Any>(&self) -> Option<&T> {
        self.items.iter().find_map(|v| v.as_ref().downcast_ref::<T>())
    }

    /// Adds what `other` offers.
    pub fn extend(&mut self, other: Self) {
        self.items.extend(other.items);
    }

    /// The first value of type `T` offered.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.items.iter().find_map(|v| v.clone().downcast::<T>().ok())
    }

    /// Every value of type `T` offered, in the order offered.
    pub fn all<T: Any + Send + Sync>(&self) -> Vec<Arc<T>> {
        self.items
            .iter()
            .filter_map(|v| v.clone().downcast::<T>().ok())
            .collect()
    }

    /// Everything offered (a generation holds it while it runs).
    pub fn values(&self) -> &[Arc<dyn Any + Send + Sync>] {
        &self.items
    }
}

/// The EDNS options a plugin adds to the reply's OPT (`nsid`), offered as
/// `Arc<dyn EdnsOptions>`.
pub trait EdnsOptions: Send + Sync {
    /// Its options for a reply to a request with `request` as its OPT (`nsid`: its NSID when
    /// the request carries one). Asked for every reply of its block to a request with an OPT,
    /// after the chain answered; they must depend on the request alone (the answer memo
    /// replays them with the reply).
    fn edns_options(&self, request: &Edns) -> Vec<EdnsOption>;
}

/// What a plugin publishes about each question for `metadata` (`kubernetes/client-namespace`),
/// offered as `Arc<dyn MetadataSource>`.
pub trait MetadataSource: Send + Sync {
    /// Publishes what it knows of `q` into `md`; called once per question before routing
    /// decides on its block, only in blocks with `metadata` whose zones cover the name. Must be
    /// quick and touch no I/O.
    fn metadata(&self, q: &Question, md: &QueryMetadata);
}

/// The class of clients a plugin's answers depend on, offered as `Arc<dyn ClientClasses>` by a
/// plugin that marks answers with [`crate::chain::Next::for_clients_of`] (`kubernetes`'s
/// `topology`, `dnspolicy`'s views).
pub trait ClientClasses: Send + Sync {
    /// The class of `client` now, as its answer would read it. The answer memo asks it before
    /// replaying such an answer, and replays only one made for the same class. Must be quick
    /// and touch no I/O. `None`: no class (no replay).
    fn client_class(&self, client: IpAddr) -> Option<u64>;
}

/// How long the server may hold off serving at start until the plugin offering it is ready
/// ([`crate::chain::Plugin::not_ready`] empty): the kubernetes plugin's `startup_timeout`, as
/// CoreDNS holds its server until the informers have synced. Zero: not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartupWait(pub Duration);
