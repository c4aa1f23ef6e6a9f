//! The `dnspolicy` plugin's handler: finds the view of the client who asks (its pod's
//! policies, or the `unmapped` choice), puts it on the question for the plugins after it, and
//! answers itself what the view denies outright: an outside name it may not ask (the policy's
//! rcode; nothing leaves the server), a transfer of the cluster zone for a client that does not
//! see every namespace (REFUSED), anything for a client `unmapped deny` refuses.
//!
//! Placed before `cache` (beside `acl`), so it decides again for every client before a store
//! is asked, and after `autopath` and `rewrite`, so it sees every name they ask for the client.
//! Every reply of its block is made for the view's class of clients ([`Next::for_clients_of`]):
//! the memo replays it to clients that see the same only.

use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RecordType};

use super::config::Unmapped;
use super::metrics::PolicyMetrics;
use crate::chain::{Capabilities, ClientClasses, Next, Now, Plugin, Replay, ReplyFuture};
use crate::cluster::ClusterSource;
use crate::cluster::policy::{CLOSED_CLASS, ClientView, ClusterNames, reverse_address, zone_of_ci};
use crate::proto::{Question, Reply, Visibility, VisibilityRef};

/// The `dnspolicy` plugin in a server block's chain.
#[derive(Debug)]
pub struct DnsPolicy {
    source: Arc<ClusterSource>,
    names: Arc<ClusterNames>,
    unmapped: Unmapped,
    /// The view of a client no policy covers (and of unmapped clients with `allow`).
    open: Arc<ClientView>,
    /// The view of unmapped clients with `deny`.
    closed: Arc<ClientView>,
    metrics: Option<PolicyMetrics>,
}

impl DnsPolicy {
    /// The plugin over the zone of `source`, whose cluster names are `names`.
    pub fn new(
        source: Arc<ClusterSource>,
        names: Arc<ClusterNames>,
        unmapped: Unmapped,
        metrics: Option<PolicyMetrics>,
    ) -> Self {
        Self {
            source,
            names,
            unmapped,
            open: Arc::new(ClientView::open()),
            closed: Arc::new(ClientView::closed()),
            metrics,
        }
    }

    /// The view of the client at `ip`.
    pub fn view_of(&self, ip: IpAddr) -> Arc<ClientView> {
        self.find_view(ip).0
    }

    /// The view of the client at `ip`, and whether a pod is known there.
    fn find_view(&self, ip: IpAddr) -> (Arc<ClientView>, bool) {
        if let Some(v) = self.source.zone().client_view(ip) {
            return (v, true);
        }
        let view = match self.unmapped {
            Unmapped::Allow => self.open.clone(),
            Unmapped::Deny => self.closed.clone(),
        };
        (view, false)
    }

    /// True when `name` is not one the cluster zone answers: outside its forward zones, and in
    /// its reverse zones unless it names an address a Service or endpoint of the zone holds.
    pub fn is_outside(&self, name: &Name) -> bool {
        if self.names.zones.iter().any(|z| zone_of_ci(z, name)) {
            return false;
        }
        if self.names.reverse_zones.iter().any(|z| zone_of_ci(z, name)) {
            return match reverse_address(name) {
                Some(ip) => self.source.zone().reverse(&ip).is_empty(),
                None => true,
            };
        }
        true
    }

    /// Decides `q` for its client: the reply when the view denies it, or `None` to ask on
    /// (with the view set on the question).
    fn decide(&self, q: &Question, next: &Next<'_>) -> Option<Reply> {
        // Asked again for the same client (a CNAME target's question): the view it has, and
        // nothing counted twice.
        let fresh = match q.visibility.get() {
            Some(_) => None,
            None => {
                let (view, mapped) = self.find_view(q.client.ip());
                if let (false, Some(m)) = (mapped, &self.metrics) {
                    m.unmapped(self.unmapped == Unmapped::Allow);
                }
                let _ = q.visibility.set(VisibilityRef(view.clone()));
                Some(view)
            }
        };
        let view = q.view()?;
        next.for_clients_of(view.class(), 0);
        if view.class() == CLOSED_CLASS {
            return Some(Reply::Rcode(ResponseCode::Refused));
        }
        let outside = self.is_outside(&q.name);
        if matches!(q.qtype, RecordType::AXFR | RecordType::IXFR) && view.restricted() && !outside {
            return Some(Reply::Rcode(ResponseCode::Refused));
        }
        if outside {
            let allowed = match &fresh {
                Some(cv) => {
                    if cv.audited() {
                        // Every audited question is counted: none is replayed.
                        next.forbid_replay();
                    }
                    cv.decide_outside(&q.name)
                }
                None => view.may_ask_outside(&q.name),
            };
            if !allowed {
                return Some(Reply::Rcode(view.denial()));
            }
        } else if fresh.as_ref().is_some_and(|cv| cv.audited()) {
            next.forbid_replay();
        }
        None
    }
}

impl Plugin for DnsPolicy {
    fn name(&self) -> &'static str {
        "dnspolicy"
    }

    /// Its decisions are made for the view's class of clients, which it pushes on every
    /// question ([`Next::for_clients_of`]): replayed to clients of the same class only.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Same
    }

    /// The class of its clients' views ([`ClientClasses`]).
    fn offers(self: Arc<Self>) -> Capabilities {
        Capabilities::default().with(self as Arc<dyn ClientClasses>)
    }

    fn serve_now(&self, q: &Question, next: &Next<'_>) -> Now {
        match self.decide(q, next) {
            Some(reply) => Now::Reply(reply),
            None => Now::Pass,
        }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }
}

impl ClientClasses for DnsPolicy {
    /// The class of the view of the client at `client` (the memo replays a reply made for a
    /// class only to clients of the same class).
    fn client_class(&self, client: IpAddr) -> Option<u64> {
        Some(self.view_of(client).class())
    }
}
