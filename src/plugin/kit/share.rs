//! What lets one client's questions be weighed against everyone else's without the plugins that
//! weigh, answer and forward naming each other: who a client address is ([`ClientDirectory`],
//! the kubernetes plugin's pod index, offered as [`PodNamespaces`]), and the share of the
//! upstream exchanges a client may hold ([`UpstreamShare`], `fairness`'s, offered as
//! [`FairShare`] and asked by `forward` before it sends a question on).

use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::op::ResponseCode;

use crate::proto::{Question, Reply};

/// What knows which namespace a client address belongs to (the pod index).
pub trait ClientDirectory: Send + Sync {
    /// The namespace of the pod at `client`, when exactly one namespace's pods hold it; `None`
    /// for addresses no pod holds (nodes, other networks) or several namespaces share.
    fn namespace_of(&self, client: IpAddr) -> Option<Arc<str>>;
}

/// A block's [`ClientDirectory`], as offered in its capabilities (found by this type).
#[derive(Clone)]
pub struct PodNamespaces(pub Arc<dyn ClientDirectory>);

impl std::fmt::Debug for PodNamespaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodNamespaces").finish_non_exhaustive()
    }
}

/// Held while a question's upstream exchange is in flight; dropping it gives the client's share
/// back ([`UpstreamShare::admit`]).
pub struct UpstreamTicket(Option<Box<dyn Send + Sync>>);

impl UpstreamTicket {
    /// A ticket that holds `guard` until it is dropped.
    pub fn holding(guard: Box<dyn Send + Sync>) -> Self {
        Self(Some(guard))
    }

    /// A ticket that holds nothing (the question was not counted against any share).
    pub fn free() -> Self {
        Self(None)
    }

    /// True when the ticket holds a share.
    pub fn holds(&self) -> bool {
        self.0.is_some()
    }
}

impl std::fmt::Debug for UpstreamTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTicket")
            .field("holds", &self.holds())
            .finish()
    }
}

/// What a question over its client's share gets instead of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// REFUSED.
    Refused,
    /// An empty reply with TC=1 ([`Reply::Truncated`]).
    Truncated,
    /// No reply at all ([`Reply::Dropped`]).
    Dropped,
}

impl Refusal {
    /// The reply it is.
    pub fn reply(self) -> Reply {
        match self {
            Self::Refused => Reply::Rcode(ResponseCode::Refused),
            Self::Truncated => Reply::Truncated,
            Self::Dropped => Reply::Dropped,
        }
    }
}

/// What decides whether a question may cost an upstream exchange: the client's share of the
/// upstream (questions per second and exchanges in flight) is not used up.
pub trait UpstreamShare: Send + Sync {
    /// A ticket to hold while the exchange is in flight, or what the client gets instead, at
    /// once: an over-share question never waits, so it never delays anyone else's.
    fn admit(&self, q: &Question) -> Result<UpstreamTicket, Refusal>;
}

/// A block's [`UpstreamShare`], as offered in its capabilities (found by this type).
#[derive(Clone)]
pub struct FairShare(pub Arc<dyn UpstreamShare>);

impl std::fmt::Debug for FairShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairShare").finish_non_exhaustive()
    }
}
