//! CoreDNS's acl families: `coredns_acl_{blocked,filtered,dropped}_requests_total{server,zone,view}`
//! and `coredns_acl_allowed_requests_total{server,view}`. `zone` is the policy's zone (from the
//! Corefile); `view` is always empty (no `view` plugin yet).

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};

use super::config::Action;

/// The acl families. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AclMetrics {
    blocked: IntCounterVec,
    filtered: IntCounterVec,
    dropped: IntCounterVec,
    allowed: IntCounterVec,
}

impl crate::telemetry::Families for AclMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let with_zone =
            |name: &str, help: &str| IntCounterVec::new(Opts::new(name, help), &["server", "zone", "view"]);
        let blocked = with_zone(
            "coredns_acl_blocked_requests_total",
            "Counter of DNS requests being blocked.",
        )?;
        let filtered = with_zone(
            "coredns_acl_filtered_requests_total",
            "Counter of DNS requests being filtered.",
        )?;
        let dropped = with_zone(
            "coredns_acl_dropped_requests_total",
            "Counter of DNS requests being dropped.",
        )?;
        let allowed = IntCounterVec::new(
            Opts::new(
                "coredns_acl_allowed_requests_total",
                "Counter of DNS requests being allowed.",
            ),
            &["server", "view"],
        )?;
        crate::telemetry::register_all(
            registry,
            vec![
                Box::new(blocked.clone()),
                Box::new(filtered.clone()),
                Box::new(dropped.clone()),
                Box::new(allowed.clone()),
            ],
        )?;
        Ok(Self {
            blocked,
            filtered,
            dropped,
            allowed,
        })
    }
}

impl AclMetrics {
    /// The counter of `action` for the block labelled `server` and the policy zone `zone`.
    pub fn counter(&self, action: Action, server: &str, zone: &str) -> IntCounter {
        match action {
            Action::Allow => self.allowed.with_label_values(&[server, ""]),
            Action::Block => self.blocked.with_label_values(&[server, zone, ""]),
            Action::Filter => self.filtered.with_label_values(&[server, zone, ""]),
            Action::Drop => self.dropped.with_label_values(&[server, zone, ""]),
        }
    }
}
