//! What a narrowed headless answer lists and why: the endpoints a [`Pick`] keeps, how an
//! answer used the client ([`ClientUse`], [`Reason`]), and CoreDNS's zonal names
//! ([`ZonalName`]). Plain types, read by the answerer and by `topology`'s choices.

use crate::cluster::model::EndpointInfo;

/// Why a client-aware answer lists what it lists (the `reason` label of
/// `cluster_dns_topology_answers_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Only the endpoints on the client's node.
    Node,
    /// Only the endpoints in the client's zone.
    Zone,
    /// Every endpoint: none was near the client pod.
    Fallback,
}

impl Reason {
    /// The number it is noted as with a memoized answer, given back on each replay.
    pub fn note(self) -> u8 {
        match self {
            Self::Node => 1,
            Self::Zone => 2,
            Self::Fallback => 3,
        }
    }

    /// The reason noted as `note` ([`Reason::note`]).
    pub fn from_note(note: u8) -> Option<Self> {
        match note {
            1 => Some(Self::Node),
            2 => Some(Self::Zone),
            3 => Some(Self::Fallback),
            _ => None,
        }
    }

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Self::Node => "node",
            Self::Zone => "zone",
            Self::Fallback => "fallback",
        }
    }
}

/// How an answer used the client's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientUse {
    /// The answer depends on who asks (never replayed or cached for another client).
    pub dependent: bool,
    /// For a known pod: how its answer was narrowed.
    pub reason: Option<Reason>,
    /// The client's place class (`ClientPlace::class`, or `NO_PLACE` for a client that is not
    /// a pod on a known node): the answer is the same for every client of the class. `None`:
    /// for this client alone.
    pub class: Option<u64>,
}

/// Which of a headless Service's ready endpoints an answer lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick<'a> {
    /// All of them.
    All,
    /// Those whose `nodeName` is this.
    Node(&'a str),
    /// Those whose `hints.forNodes` name this node.
    NodeHint(&'a str),
    /// Those whose `zone` is this (ASCII case ignored: `zonal` names are asked in any case).
    Zone(&'a str),
    /// Those whose `hints.forZones` name this zone.
    ZoneHint(&'a str),
}

impl Pick<'_> {
    /// True when `ep` is listed.
    pub fn keeps(self, ep: &EndpointInfo) -> bool {
        let place = ep.place();
        let named =
            |list: Option<&[std::sync::Arc<str>]>, x: &str| list.is_some_and(|l| l.iter().any(|n| **n == *x));
        match self {
            Self::All => true,
            Self::Node(n) => place.and_then(|p| p.node.as_deref()) == Some(n),
            Self::NodeHint(n) => named(place.and_then(|p| p.for_nodes.as_deref()), n),
            Self::Zone(z) => place
                .and_then(|p| p.zone.as_deref())
                .is_some_and(|ez| ez.eq_ignore_ascii_case(z)),
            Self::ZoneHint(z) => named(place.and_then(|p| p.for_zones.as_deref()), z),
        }
    }
}

/// The zonal directives (CoreDNS 1.14.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// `pin`: zone-local endpoints only; NODATA when there are none.
    Pin,
    /// `prefer`: zone-local endpoints, else every endpoint.
    Prefer,
}

/// A zonal name: `<zone labels...>.<directive>._zone.<service>.<namespace>.svc` (the labels
/// left of the cluster zone).
#[derive(Debug)]
pub struct ZonalName<'a> {
    /// The requested zone: every label left of the directive, joined with dots.
    pub zone: String,
    /// `pin` or `prefer`.
    pub directive: Directive,
    /// The Service label.
    pub service: &'a str,
    /// The namespace label.
    pub namespace: &'a str,
}

impl<'a> ZonalName<'a> {
    /// Reads `labels` (lower-case, left of the cluster zone) as a zonal name; `None` when they
    /// are not one (an unknown directive is not one either: it keeps the stock NXDOMAIN).
    pub fn parse(labels: &[&'a str]) -> Option<Self> {
        let [zone @ .., directive, "_zone", service, namespace, "svc"] = labels else {
            return None;
        };
        if zone.is_empty() {
            return None;
        }
        let directive = match *directive {
            "pin" => Directive::Pin,
            "prefer" => Directive::Prefer,
            _ => return None,
        };
        Some(Self {
            zone: zone.join("."),
            directive,
            service,
            namespace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zonal_names_parse_as_coredns_reads_them() {
        let z = ZonalName::parse(&["us-west-2a", "pin", "_zone", "db", "prod", "svc"]).unwrap();
        assert_eq!(
            (z.zone.as_str(), z.directive, z.service, z.namespace),
            ("us-west-2a", Directive::Pin, "db", "prod")
        );
        let dotted =
            ZonalName::parse(&["corp", "example", "com", "prefer", "_zone", "db", "prod", "svc"]).unwrap();
        assert_eq!(
            (dotted.zone.as_str(), dotted.directive),
            ("corp.example.com", Directive::Prefer)
        );
        assert!(ZonalName::parse(&["a", "near", "_zone", "db", "prod", "svc"]).is_none());
        assert!(ZonalName::parse(&["pin", "_zone", "db", "prod", "svc"]).is_none());
        assert!(ZonalName::parse(&["a", "pin", "zone", "db", "prod", "svc"]).is_none());
    }
}
