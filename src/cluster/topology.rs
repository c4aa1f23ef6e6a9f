//! Where things are in the cluster, for answers that depend on where the client is (issue 35):
//! a Service's `spec.trafficDistribution` ([`TrafficDistribution`]), an endpoint's node, zone
//! and routing hints ([`EndpointPlace`]), a Node's zone ([`NodeInfo`]), and the table of node
//! names and their zones the pod index keeps beside its pods ([`NodeTable`]).
//!
//! Node names and zone names are interned: a pod's node is a `u32` id in the pod index, and a
//! node's zone a `u32` id in [`NodeTable`]; ids are never reused (a cluster has a few thousand
//! nodes and a handful of zones, so the tables grow by the distinct names ever seen).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::Endpoint;

use super::ObjectError;

/// The Node label that names its zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A Service's `spec.trafficDistribution` that DNS acts on (other values are ignored, as
/// kube-proxy ignores them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrafficDistribution {
    /// `PreferSameNode`: the client's node, else its zone, else every endpoint.
    PreferSameNode,
    /// `PreferSameZone`, and the older `PreferClose` (its alias): the client's zone, else every
    /// endpoint.
    PreferSameZone,
}

impl TrafficDistribution {
    /// Parses the field's value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "PreferSameNode" => Some(Self::PreferSameNode),
            "PreferSameZone" | "PreferClose" => Some(Self::PreferSameZone),
            _ => None,
        }
    }
}

/// Where an endpoint is: its `nodeName`, `zone` and `hints`. Kept only when an option reads
/// them (`topology`, `zonal`): without one, endpoints carry no place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointPlace {
    /// `nodeName`.
    pub node: Option<Arc<str>>,
    /// `zone`.
    pub zone: Option<Arc<str>>,
    /// `hints.forZones[].name`; `None` when the endpoint has no zone hints.
    pub for_zones: Option<Box<[Arc<str>]>>,
    /// `hints.forNodes[].name`; `None` when the endpoint has no node hints.
    pub for_nodes: Option<Box<[Arc<str>]>>,
}

impl EndpointPlace {
    /// The place of `ep`, with every string passed through `intern` (the same few node and
    /// zone names repeat across endpoints); `None` when it has none.
    pub fn of(ep: &Endpoint, mut intern: impl FnMut(&str) -> Arc<str>) -> Option<Box<Self>> {
        let hints = ep.hints.as_ref();
        let mut list = |names: Option<Vec<&str>>| names.map(|n| n.into_iter().map(&mut intern).collect());
        let for_zones = list(
            hints
                .and_then(|h| h.for_zones.as_ref())
                .map(|z| z.iter().map(|z| z.name.as_str()).collect()),
        );
        let for_nodes = list(
            hints
                .and_then(|h| h.for_nodes.as_ref())
                .map(|n| n.iter().map(|n| n.name.as_str()).collect()),
        );
        let place = Self {
            node: ep.node_name.as_deref().filter(|s| !s.is_empty()).map(&mut intern),
            zone: ep.zone.as_deref().filter(|s| !s.is_empty()).map(&mut intern),
            for_zones,
            for_nodes,
        };
        (place != Self::default()).then(|| Box::new(place))
    }
}

/// The DNS view of a Node: its name and zone label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: Arc<str>,
    /// The `topology.kubernetes.io/zone` label, if any.
    pub zone: Option<Arc<str>>,
}

impl NodeInfo {
    /// Projects a Node (only its metadata is read).
    pub fn from_k8s(node: &Node) -> Result<Self, ObjectError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if name.is_empty() {
            return Err(ObjectError::new(
                "Node",
                "",
                "<unnamed>",
                "metadata.name is missing",
            ));
        }
        let zone = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ZONE_LABEL))
            .filter(|z| !z.is_empty())
            .map(|z| Arc::from(z.as_str()));
        Ok(Self {
            name: Arc::from(name),
            zone,
        })
    }
}

/// No node, or no zone: the id the tables use for "none".
pub const NONE: u32 = u32::MAX;

/// Node names and zones, interned. Not thread-safe by itself: it lives in the pod index,
/// behind the zone's lock.
#[derive(Debug, Default)]
pub struct NodeTable {
    /// Node names by id, and ids by name.
    names: Vec<Arc<str>>,
    ids: HashMap<Arc<str>, u32, foldhash::fast::RandomState>,
    /// The zone id of each node id ([`NONE`]: no zone known).
    zone_of: Vec<u32>,
    /// Zone names by id, and ids by name.
    zones: Vec<Arc<str>>,
    zone_ids: HashMap<Arc<str>, u32, foldhash::fast::RandomState>,
}

fn intern(
    names: &mut Vec<Arc<str>>,
    ids: &mut HashMap<Arc<str>, u32, foldhash::fast::RandomState>,
    name: &str,
) -> u32 {
    if let Some(id) = ids.get(name) {
        return *id;
    }
    // Past 2^32 - 1 distinct names (never in a real cluster) the last id is shared.
    let id = u32::try_from(names.len()).unwrap_or(NONE - 1).min(NONE - 1);
    let name: Arc<str> = Arc::from(name);
    names.push(name.clone());
    ids.insert(name, id);
    id
}

impl NodeTable {
    /// The id of node `name`, made when it is new.
    pub fn node_id(&mut self, name: &str) -> u32 {
        let id = intern(&mut self.names, &mut self.ids, name);
        if self.zone_of.len() < self.names.len() {
            self.zone_of.resize(self.names.len(), NONE);
        }
        id
    }

    /// Sets the zone of node `name` (`None`: it has none, or the node is gone); true when it
    /// changed.
    pub fn set_zone(&mut self, name: &str, zone: Option<&str>) -> bool {
        if zone.is_none() && !self.ids.contains_key(name) {
            return false;
        }
        let node = self.node_id(name) as usize;
        let zone = zone.map_or(NONE, |z| intern(&mut self.zones, &mut self.zone_ids, z));
        let old = std::mem::replace(&mut self.zone_of[node], zone);
        old != zone
    }

    /// The name of node `id`.
    pub fn name(&self, id: u32) -> Option<&Arc<str>> {
        self.names.get(id as usize)
    }

    /// The zone of node `id`, if known.
    pub fn zone(&self, id: u32) -> Option<&Arc<str>> {
        let z = *self.zone_of.get(id as usize)?;
        self.zones.get(z as usize)
    }

    /// The class of node `id` with its current zone: `id` and the zone's id, or `None` for an
    /// id two names may share (past 2^32 - 2 names).
    pub fn class(&self, id: u32) -> Option<u64> {
        let zone = *self.zone_of.get(id as usize)?;
        if id >= NONE - 1 || zone == NONE - 1 {
            return None;
        }
        Some((u64::from(id) << 32) | u64::from(zone))
    }

    /// The names of the nodes that have a zone (a Node relist deletes those it lacks).
    pub fn zoned(&self) -> Vec<Arc<str>> {
        self.names
            .iter()
            .zip(&self.zone_of)
            .filter(|(_, z)| **z != NONE)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Bytes its tables hold (an estimate: names, slots and table capacity).
    pub fn heap_bytes(&self) -> usize {
        let strings: usize = self.names.iter().chain(&self.zones).map(|n| n.len() + 16).sum();
        strings
            + self.names.capacity() * 16
            + self.zones.capacity() * 16
            + self.zone_of.capacity() * 4
            + (self.ids.capacity() + self.zone_ids.capacity()) * 21
    }
}

/// The place class of a client that is not a pod on one known node ([`ClientPlace::class`]).
pub const NO_PLACE: u64 = u64::MAX;

/// Where a client pod is: its node and, when its Node has the label, its zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientPlace {
    /// The pod's `spec.nodeName`.
    pub node: Arc<str>,
    /// The node's zone.
    pub zone: Option<Arc<str>>,
    /// The node's id and its zone's id as one number: two clients with the same class have
    /// the same node and zone names (ids are never reused), so an answer made from the place
    /// is the same for both ([`NodeTable::class`]). `None` past the ids' range.
    pub class: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_distribution_values() {
        assert_eq!(
            TrafficDistribution::parse("PreferSameNode"),
            Some(TrafficDistribution::PreferSameNode)
        );
        assert_eq!(
            TrafficDistribution::parse("PreferClose"),
            Some(TrafficDistribution::PreferSameZone)
        );
        assert_eq!(TrafficDistribution::parse("preferclose"), None);
    }

    #[test]
    fn nodes_keep_their_ids_and_change_zones() {
        let mut t = NodeTable::default();
        assert!(
            !t.set_zone("n1", None),
            "an unknown node without a zone is no change"
        );
        let n1 = t.node_id("n1");
        assert_eq!(t.node_id("n1"), n1);
        assert!(t.set_zone("n1", Some("a")));
        assert!(!t.set_zone("n1", Some("a")));
        assert_eq!(t.zone(n1).map(|z| &**z), Some("a"));
        assert!(t.set_zone("n2", Some("b")));
        assert_eq!(t.zoned().len(), 2);
        assert!(t.set_zone("n1", None));
        assert_eq!(t.zone(n1), None);
        assert_eq!(t.name(n1).map(|n| &**n), Some("n1"));
        assert_eq!(t.zone(NONE), None);
    }

    #[test]
    fn endpoint_places_read_node_zone_and_hints() {
        let ep: Endpoint = serde_saphyr::from_str(
            "addresses: [10.0.0.1]\nnodeName: n1\nzone: a\nhints: {forZones: [{name: a}], forNodes: [{name: n1}]}\n",
        )
        .unwrap();
        let p = EndpointPlace::of(&ep, |s: &str| Arc::from(s)).unwrap();
        assert_eq!(p.node.as_deref(), Some("n1"));
        assert_eq!(p.zone.as_deref(), Some("a"));
        assert_eq!(p.for_zones.as_deref().map(<[_]>::len), Some(1));
        assert_eq!(p.for_nodes.as_deref().map(<[_]>::len), Some(1));
        let bare: Endpoint = serde_saphyr::from_str("addresses: [10.0.0.1]\n").unwrap();
        assert_eq!(EndpointPlace::of(&bare, |s: &str| Arc::from(s)), None);
    }
}
