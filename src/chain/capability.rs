//! What plugins and the runtime find by type: the values a server block's plugins acquired
//! ([`Capabilities`], the cluster source `kubernetes` shares with `k8s_external`), and among
//! them the one the runtime reads itself: whether this server's own endpoint is still listed
//! ([`EndpointWatch`], `kubernetes`'s, read at SIGTERM). What plugins offer only one another
//! (upstreams, search paths, a zone notifier, the cluster's address families) is in the plugin
//! kit (`plugin::kit`).

use std::any::Any;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use hickory_proto::rr::Name;

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
pub trait SearchPaths: Send + Sync {
    /// The search domains a client at `client` walks, in order (without the bare name); `None`
    /// when it is not known (the client is not a pod this source knows).
    fn search_path(&self, client: std::net::IpAddr) -> Option<Vec<Name>>;
}

/// What knows whether clients are still sent to this server: whether its own address (`POD_IP`)
/// is a ready endpoint of a Service, as the cluster's EndpointSlices say (the `kubernetes`
/// plugin's watches). SIGTERM's drain keeps answering while it is.
pub trait OwnEndpoint: Send + Sync {
    /// `Some(true)` while the server's own address is a ready endpoint of some Service;
    /// `Some(false)` once it is not; `None` when it cannot tell (no `POD_IP`, no watch of the
    /// API server, or the watch is failing or not synced yet).
    fn listed(&self) -> Option<bool>;
}

/// A block's [`OwnEndpoint`], as offered in its [`Capabilities`] (found by this type).
#[derive(Clone)]
pub struct EndpointWatch(pub Arc<dyn OwnEndpoint>);

impl std::fmt::Debug for EndpointWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointWatch").finish_non_exhaustive()
    }
}

/// The values the plugins of one server block acquired ([`crate::chain::Configured::acquire`]),
/// offered to every plugin of the block when it is built, found by their type.
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
