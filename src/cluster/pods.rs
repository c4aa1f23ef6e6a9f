//! The pod index: which namespace and node each live pod IP belongs to, and nothing else, kept
//! as small as that allows. `pods verified` asks "is there a live pod with this IP in this
//! namespace?"; `autopath` asks "which namespace is the client at this address a pod of?";
//! `topology` asks "which node, and zone, is it on?" (the nodes and their zones are in a
//! [`NodeTable`]; a pod's node is an interned `u32` id beside its namespace's, 4 bytes in each
//! table slot).
//!
//! What a pod costs here: no name and no object. A pod is known by a 64-bit hash of its
//! namespace and name (seeded per index) for its updates and deletes; its IP is a `u32` (IPv4)
//! or a `u128` (IPv6) key; its namespace an interned `u32` id (a cluster has few namespaces;
//! ids are never reused, so the table grows by the distinct namespace names ever seen). About
//! 26 bytes of table slots per IPv4 pod (two tables, at hashbrown's load between 44% and 87%
//! that is 30 to 60 bytes), against CoreDNS's whole Pod object (its scaling guide budgets about
//! 4 KB per pod with `pods verified`).
//!
//! Hash collisions: two live pods whose (namespace, name) hash to the same 64 bits would share
//! one identity, and an update of one could move the other. At 150,000 pods the odds of any such
//! pair are about 6 in 10^10.
//!
//! An IP that more than one live pod holds (host-network pods on a node's address, or an IP
//! reused while the old pod is still being deleted) keeps every holder: it "exists" for each of
//! their namespaces, but autopath gets a namespace only when every holder is a pod-network pod
//! of the same namespace. A host-network pod's address is a node's: it never names a
//! namespace, whoever else holds it.
//!
//! Not thread-safe by itself: [`super::ClusterZone`] holds it behind a lock and writes it only
//! under its writer lock.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash};
use std::net::IpAddr;
use std::sync::Arc;

use super::policy::LabelSet;
use super::topology::{ClientPlace, NO_PLACE, NONE, NodeTable};

type Hasher = foldhash::fast::RandomState;

/// A pod's place in an IP's holders: its namespace id, with the top bit set for host-network
/// pods, its node id ([`NONE`] when it has none), and its label set's id (0: none kept; only
/// `dnspolicy` keeps pod labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Member(u32, u32, u32);

const HOST_NETWORK: u32 = 1 << 31;
/// In [`Family::by_ip`]: the IP has more than one holder, all of them in [`Family::shared`].
/// Namespace ids stay below it.
const SHARED: Member = Member(1 << 30, NONE, 0);

impl Member {
    fn new(ns: u32, host_network: bool, node: u32, labels: u32) -> Self {
        Self(ns | if host_network { HOST_NETWORK } else { 0 }, node, labels)
    }
    fn labels(self) -> u32 {
        self.2
    }
    fn node(self) -> u32 {
        self.1
    }
    fn namespace(self) -> u32 {
        self.0 & !HOST_NETWORK
    }
    fn host_network(self) -> bool {
        self.0 & HOST_NETWORK != 0
    }
}

/// The index of one address family, keyed by `K` (`u32` for IPv4, `u128` for IPv6).
#[derive(Debug)]
struct Family<K> {
    /// Pod identity (hash of namespace and name) → its address and membership.
    pods: HashMap<u64, (K, Member), Hasher>,
    /// IP → its one holder, or [`SHARED`] when it has more (4 bytes a value: with 150,000
    /// pods the table has 262,144 slots).
    by_ip: HashMap<K, Member, Hasher>,
    /// IPs with more than one holder → all of them.
    shared: HashMap<K, Vec<Member>, Hasher>,
}

impl<K: Copy + Eq + Hash> Default for Family<K> {
    fn default() -> Self {
        Self {
            pods: HashMap::default(),
            by_ip: HashMap::default(),
            shared: HashMap::default(),
        }
    }
}

impl<K: Copy + Eq + Hash> Family<K> {
    fn add(&mut self, ip: K, m: Member) {
        match self.by_ip.get_mut(&ip) {
            None => {
                self.by_ip.insert(ip, m);
            }
            Some(h) if *h == SHARED => self.shared.entry(ip).or_default().push(m),
            Some(h) => {
                self.shared.insert(ip, vec![*h, m]);
                *h = SHARED;
            }
        }
    }

    fn remove(&mut self, ip: K, m: Member) {
        let Some(h) = self.by_ip.get_mut(&ip) else { return };
        if *h != SHARED {
            if *h == m {
                self.by_ip.remove(&ip);
            }
            return;
        }
        let Some(list) = self.shared.get_mut(&ip) else {
            return;
        };
        let Some(at) = list.iter().position(|x| *x == m) else {
            return;
        };
        list.swap_remove(at);
        if let [last] = list.as_slice() {
            *h = *last;
            self.shared.remove(&ip);
        }
    }

    fn holders(&self, ip: K) -> &[Member] {
        match self.by_ip.get(&ip) {
            None => &[],
            Some(h) if *h == SHARED => self.shared.get(&ip).map(Vec::as_slice).unwrap_or_default(),
            Some(h) => std::slice::from_ref(h),
        }
    }

    /// Takes pod `id` out; true when it was here.
    fn take(&mut self, id: u64) -> bool {
        match self.pods.remove(&id) {
            Some((ip, m)) => {
                self.remove(ip, m);
                true
            }
            None => false,
        }
    }

    /// Puts pod `id` at `ip`; false when it was there already.
    fn put(&mut self, id: u64, ip: K, m: Member) -> bool {
        match self.pods.insert(id, (ip, m)) {
            Some(old) if old == (ip, m) => false,
            Some((old_ip, old_m)) => {
                self.remove(old_ip, old_m);
                self.add(ip, m);
                true
            }
            None => {
                self.add(ip, m);
                true
            }
        }
    }

    /// Takes out every pod `gone` accepts; returns how many.
    fn retain(&mut self, gone: impl Fn(u64, Member) -> bool) -> usize {
        let out: Vec<(u64, K, Member)> = self
            .pods
            .iter()
            .filter(|(id, (_, m))| gone(**id, *m))
            .map(|(id, (ip, m))| (*id, *ip, *m))
            .collect();
        for (id, ip, m) in &out {
            self.pods.remove(id);
            self.remove(*ip, *m);
        }
        out.len()
    }
}

/// A pod's address as stored: IPv4 (and IPv4-mapped IPv6) as `u32`, IPv6 as `u128`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Addr {
    V4(u32),
    V6(u128),
}

impl From<IpAddr> for Addr {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(a) => Self::V4(u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => Self::V4(u32::from(v4)),
                None => Self::V6(u128::from(a)),
            },
        }
    }
}

/// The pod index. See the module docs.
#[derive(Debug, Default)]
pub struct PodIndex {
    v4: Family<u32>,
    v6: Family<u128>,
    /// Namespace names by id, and ids by name.
    names: Vec<Arc<str>>,
    ids: HashMap<Arc<str>, u32, Hasher>,
    /// The identity hash's seed.
    seed: Hasher,
    /// Node names and their zones.
    nodes: NodeTable,
    /// Pod label sets by id (`dnspolicy`), and ids by set. Ids are never reused; sets no pod
    /// holds any more are swept when they outnumber the pods.
    label_sets: HashMap<u32, LabelSet, Hasher>,
    label_ids: HashMap<LabelSet, u32, Hasher>,
    next_labels: u32,
}

impl PodIndex {
    /// The identity of the pod `namespace/name` in this index.
    pub fn identity(&self, namespace: &str, name: &str) -> u64 {
        self.seed.hash_one((namespace, name))
    }

    fn namespace_id(&mut self, namespace: &Arc<str>) -> u32 {
        if let Some(id) = self.ids.get(namespace) {
            return *id;
        }
        // Ids stay below the flag bits; past 2^30 namespace names (never in a real cluster)
        // the last id is shared.
        let id = u32::try_from(self.names.len())
            .unwrap_or(u32::MAX)
            .min(SHARED.0 - 1);
        self.names.push(namespace.clone());
        self.ids.insert(namespace.clone(), id);
        id
    }

    fn holders(&self, ip: IpAddr) -> &[Member] {
        match Addr::from(ip) {
            Addr::V4(k) => self.v4.holders(k),
            Addr::V6(k) => self.v6.holders(k),
        }
    }

    /// Sets pod `namespace/name` to hold `ip` (`None`: it holds none: no IP yet, or not live).
    /// Returns true when the index changed.
    pub fn set(&mut self, namespace: &Arc<str>, name: &str, ip: Option<IpAddr>, host_network: bool) -> bool {
        self.set_on(namespace, name, ip, host_network, None)
    }

    fn labels_id(&mut self, labels: Option<&LabelSet>) -> u32 {
        let Some(labels) = labels else { return 0 };
        if let Some(id) = self.label_ids.get(labels) {
            return *id;
        }
        if self.label_sets.len() >= 1024 && self.label_sets.len() > 2 * self.len() {
            self.sweep_label_sets();
        }
        self.next_labels = self.next_labels.max(1);
        let id = self.next_labels;
        self.next_labels = self.next_labels.wrapping_add(1).max(1);
        self.label_sets.insert(id, labels.clone());
        self.label_ids.insert(labels.clone(), id);
        id
    }

    /// Forgets the label sets no pod holds.
    fn sweep_label_sets(&mut self) {
        let used: HashSet<u32> = self
            .v4
            .pods
            .values()
            .map(|(_, m)| m.labels())
            .chain(self.v6.pods.values().map(|(_, m)| m.labels()))
            .collect();
        self.label_sets.retain(|id, _| used.contains(id));
        let sets = &self.label_sets;
        self.label_ids.retain(|_, id| sets.contains_key(id));
    }

    /// [`Self::set_on`] with the pod's labels (`dnspolicy`).
    pub fn set_labelled(
        &mut self,
        namespace: &Arc<str>,
        name: &str,
        ip: Option<IpAddr>,
        host_network: bool,
        node: Option<&str>,
        labels: Option<&LabelSet>,
    ) -> bool {
        let id = self.identity(namespace, name);
        let Some(ip) = ip else {
            return self.v4.take(id) | self.v6.take(id);
        };
        let node = node.map_or(NONE, |n| self.nodes.node_id(n));
        let labels = self.labels_id(labels);
        let m = Member::new(self.namespace_id(namespace), host_network, node, labels);
        match Addr::from(ip) {
            Addr::V4(k) => self.v6.take(id) | self.v4.put(id, k, m),
            Addr::V6(k) => self.v4.take(id) | self.v6.put(id, k, m),
        }
    }

    /// Who the client at `ip` is for `dnspolicy`: its namespace id and label set id, when every
    /// holder of `ip` is a pod-network pod of one namespace with the same labels. `None` for
    /// node addresses, unknown addresses and mixed holders. Ids are never reused.
    pub fn policy_ids(&self, ip: IpAddr) -> Option<(u32, u32)> {
        let holders = self.holders(ip);
        let first = holders.first()?;
        if holders
            .iter()
            .any(|m| m.host_network() || m.namespace() != first.namespace() || m.labels() != first.labels())
        {
            return None;
        }
        Some((first.namespace(), first.labels()))
    }

    /// The namespace and the labels [`Self::policy_ids`] named.
    pub fn policy_names(&self, namespace: u32, labels: u32) -> Option<(Arc<str>, LabelSet)> {
        let labels = match labels {
            0 => LabelSet::from([]),
            id => self.label_sets.get(&id)?.clone(),
        };
        Some((self.names.get(namespace as usize)?.clone(), labels))
    }

    /// [`Self::set`], with the pod's node (`spec.nodeName`).
    pub fn set_on(
        &mut self,
        namespace: &Arc<str>,
        name: &str,
        ip: Option<IpAddr>,
        host_network: bool,
        node: Option<&str>,
    ) -> bool {
        self.set_labelled(namespace, name, ip, host_network, node, None)
    }

    /// The address pod `namespace/name` holds, if it holds one.
    pub fn address_of(&self, namespace: &str, name: &str) -> Option<IpAddr> {
        let id = self.identity(namespace, name);
        if let Some((k, _)) = self.v4.pods.get(&id) {
            return Some(IpAddr::V4((*k).into()));
        }
        self.v6.pods.get(&id).map(|(k, _)| IpAddr::V6((*k).into()))
    }

    /// Removes pod `namespace/name`; true when it held an IP.
    pub fn delete(&mut self, namespace: &str, name: &str) -> bool {
        let id = self.identity(namespace, name);
        self.v4.take(id) | self.v6.take(id)
    }

    /// Removes every pod whose namespace `in_scope` accepts and whose identity is not in
    /// `seen` (a relist's result); returns how many.
    pub fn retain(&mut self, seen: &HashSet<u64>, in_scope: impl Fn(&str) -> bool) -> usize {
        let names = &self.names;
        let gone = |id: u64, m: Member| {
            !seen.contains(&id) && names.get(m.namespace() as usize).is_some_and(|n| in_scope(n))
        };
        self.v4.retain(gone) + self.v6.retain(gone)
    }

    /// True when a live pod of `namespace` holds `ip` (host-network pods included, as
    /// `pods verified` counts them).
    pub fn exists(&self, namespace: &str, ip: IpAddr) -> bool {
        let Some(id) = self.ids.get(namespace) else {
            return false;
        };
        self.holders(ip).iter().any(|m| m.namespace() == *id)
    }

    /// The namespace of the pod at `ip`, when it names exactly one: every holder is a
    /// pod-network pod of that namespace. `None` for unknown addresses, node addresses (any
    /// host-network holder) and addresses pods of different namespaces hold.
    pub fn namespace_of(&self, ip: IpAddr) -> Option<Arc<str>> {
        let holders = self.holders(ip);
        let first = holders.first()?;
        if holders
            .iter()
            .any(|m| m.host_network() || m.namespace() != first.namespace())
        {
            return None;
        }
        self.names.get(first.namespace() as usize).cloned()
    }

    /// Where the client at `ip` is: the node of its pods, when every pod holding `ip` is on
    /// the same node (a node's address held by its host-network pods names that node), with
    /// the node's zone. `None` for an address no pod with a node holds.
    pub fn place_of(&self, ip: IpAddr) -> Option<ClientPlace> {
        let node = self.node_of(ip)?;
        Some(ClientPlace {
            node: self.nodes.name(node)?.clone(),
            zone: self.nodes.zone(node).cloned(),
            class: self.nodes.class(node),
        })
    }

    /// The class of what [`PodIndex::place_of`] gives for `ip`: its place's
    /// [`ClientPlace::class`], or [`NO_PLACE`] when it has none.
    pub fn place_class(&self, ip: IpAddr) -> Option<u64> {
        match self.node_of(ip) {
            None => Some(NO_PLACE),
            Some(node) => self.nodes.class(node),
        }
    }

    /// The node of every pod holding `ip`, when they are all on one known node.
    fn node_of(&self, ip: IpAddr) -> Option<u32> {
        let holders = self.holders(ip);
        let node = holders.first()?.node();
        if node == NONE || holders.iter().any(|m| m.node() != node) || self.nodes.name(node).is_none() {
            return None;
        }
        Some(node)
    }

    /// Sets node `name`'s zone (`None`: it has none, or is gone); true when it changed.
    pub fn set_node_zone(&mut self, name: &str, zone: Option<&str>) -> bool {
        self.nodes.set_zone(name, zone)
    }

    /// The nodes with a zone.
    pub fn zoned_nodes(&self) -> Vec<Arc<str>> {
        self.nodes.zoned()
    }

    /// Bytes the index's tables hold (an estimate from their capacities; strings counted once).
    pub fn heap_bytes(&self) -> usize {
        // hashbrown's slots for a capacity: 7/8 of them are usable, and their count is a
        // power of two.
        fn slots(capacity: usize) -> usize {
            if capacity == 0 {
                0
            } else {
                (capacity * 8).div_ceil(7).next_power_of_two()
            }
        }
        fn family<K>(f: &Family<K>) -> usize {
            // A slot is its entry plus hashbrown's control byte.
            slots(f.pods.capacity()) * (size_of::<(u64, (K, Member))>() + 1)
                + slots(f.by_ip.capacity()) * (size_of::<(K, Member)>() + 1)
                + slots(f.shared.capacity()) * (size_of::<(K, Vec<Member>)>() + 1)
        }
        family(&self.v4)
            + family(&self.v6)
            + self.names.iter().map(|n| n.len() + 16).sum::<usize>()
            + slots(self.ids.capacity()) * 21
            + self.nodes.heap_bytes()
            + self
                .label_sets
                .values()
                .map(|l| 16 + l.iter().map(|(k, v)| k.len() + v.len() + 32).sum::<usize>())
                .sum::<usize>()
            + (slots(self.label_sets.capacity()) + slots(self.label_ids.capacity())) * 21
    }

    /// Live pods with an IP.
    pub fn len(&self) -> usize {
        self.v4.pods.len() + self.v6.pods.len()
    }

    /// True when no pod is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_pod_moves_leaves_and_comes_back() {
        let mut x = PodIndex::default();
        let a: Arc<str> = Arc::from("a");
        assert!(x.set(&a, "p", Some(ip("10.0.0.1")), false));
        assert!(!x.set(&a, "p", Some(ip("10.0.0.1")), false));
        assert_eq!(x.namespace_of(ip("10.0.0.1")).as_deref(), Some("a"));
        assert!(x.exists("a", ip("10.0.0.1")));
        assert!(!x.exists("b", ip("10.0.0.1")));
        // Its IP changes (sandbox recreated): the old address is free at once.
        assert!(x.set(&a, "p", Some(ip("10.0.0.2")), false));
        assert_eq!(x.namespace_of(ip("10.0.0.1")), None);
        assert_eq!(x.namespace_of(ip("10.0.0.2")).as_deref(), Some("a"));
        // Not live any more.
        assert!(x.set(&a, "p", None, false));
        assert_eq!(x.namespace_of(ip("10.0.0.2")), None);
        assert!(x.is_empty());
        assert!(!x.delete("a", "p"));
    }

    #[test]
    fn a_reused_ip_names_the_new_namespace_only_once_the_old_pod_is_gone() {
        let mut x = PodIndex::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        x.set(&a, "old", Some(ip("10.0.0.9")), false);
        x.set(&b, "new", Some(ip("10.0.0.9")), false);
        // Both hold it for a moment: it exists for both, names neither.
        assert!(x.exists("a", ip("10.0.0.9")) && x.exists("b", ip("10.0.0.9")));
        assert_eq!(x.namespace_of(ip("10.0.0.9")), None);
        assert!(x.delete("a", "old"));
        assert_eq!(x.namespace_of(ip("10.0.0.9")).as_deref(), Some("b"));
        assert!(!x.exists("a", ip("10.0.0.9")));
        assert_eq!(x.len(), 1);
    }

    #[test]
    fn node_addresses_name_no_namespace() {
        let mut x = PodIndex::default();
        let (ks, mon): (Arc<str>, Arc<str>) = (Arc::from("kube-system"), Arc::from("monitoring"));
        x.set(&ks, "kube-proxy-x", Some(ip("192.168.1.10")), true);
        assert!(x.exists("kube-system", ip("192.168.1.10")));
        assert_eq!(x.namespace_of(ip("192.168.1.10")), None);
        x.set(&mon, "node-exporter-x", Some(ip("192.168.1.10")), true);
        x.set(&mon, "app", Some(ip("10.1.0.4")), false);
        assert_eq!(x.len(), 3);
        x.delete("kube-system", "kube-proxy-x");
        assert_eq!(x.namespace_of(ip("192.168.1.10")), None);
        assert!(x.exists("monitoring", ip("192.168.1.10")));
    }

    #[test]
    fn three_holders_come_and_go_in_any_order() {
        let mut x = PodIndex::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        let at = ip("10.0.0.7");
        x.set(&a, "p1", Some(at), false);
        x.set(&b, "p2", Some(at), false);
        x.set(&a, "p3", Some(at), false);
        assert!(x.exists("a", at) && x.exists("b", at));
        assert_eq!(x.namespace_of(at), None, "two namespaces hold it");
        x.delete("b", "p2");
        assert_eq!(x.namespace_of(at).as_deref(), Some("a"), "both holders are of a");
        x.delete("a", "p1");
        assert_eq!(x.namespace_of(at).as_deref(), Some("a"));
        assert!(!x.exists("b", at));
        x.delete("a", "p3");
        assert!(!x.exists("a", at) && x.is_empty());
        assert_eq!(x.v4.shared.len() + x.v4.by_ip.len(), 0, "nothing left behind");
    }

    #[test]
    fn ipv6_and_mapped_addresses() {
        let mut x = PodIndex::default();
        let a: Arc<str> = Arc::from("a");
        x.set(&a, "v6", Some(ip("fd00::5")), false);
        x.set(&a, "v4", Some(ip("10.0.0.5")), false);
        assert_eq!(x.namespace_of(ip("fd00::5")).as_deref(), Some("a"));
        // A client on a dual-stack socket shows up as ::ffff:10.0.0.5.
        assert_eq!(x.namespace_of(ip("::ffff:10.0.0.5")).as_deref(), Some("a"));
    }

    #[test]
    fn a_relist_removes_what_it_no_longer_has_in_its_scope() {
        let mut x = PodIndex::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        x.set(&a, "keep", Some(ip("10.0.0.1")), false);
        x.set(&a, "gone", Some(ip("10.0.0.2")), false);
        x.set(&b, "other", Some(ip("10.0.0.3")), false);
        let seen = HashSet::from([x.identity("a", "keep")]);
        assert_eq!(x.retain(&seen, |ns| ns == "a"), 1);
        assert_eq!(x.namespace_of(ip("10.0.0.2")), None);
        assert_eq!(x.namespace_of(ip("10.0.0.3")).as_deref(), Some("b"));
        assert_eq!(x.len(), 2);
    }
}

#[cfg(test)]
mod topology_tests {
    use super::*;

    #[test]
    fn a_pods_node_and_zone_follow_the_pod_and_the_node() {
        let mut x = PodIndex::default();
        let a: Arc<str> = Arc::from("a");
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        x.set_on(&a, "p", Some(ip), false, Some("n1"));
        let place = x.place_of(ip).unwrap();
        assert_eq!((&*place.node, place.zone), ("n1", None));
        x.set_node_zone("n1", Some("z1"));
        assert_eq!(x.place_of(ip).unwrap().zone.as_deref(), Some("z1"));
        // The pod is recreated on another node at the same address.
        x.delete("a", "p");
        x.set_on(&a, "p2", Some(ip), false, Some("n2"));
        assert_eq!(&*x.place_of(ip).unwrap().node, "n2");
        assert_eq!(x.place_of(ip).unwrap().zone, None);
        // Two holders on different nodes: no place; a pod without a node: none either.
        x.set_on(&a, "p3", Some(ip), false, Some("n1"));
        assert_eq!(x.place_of(ip), None);
        x.set(&a, "q", Some("10.0.0.2".parse().unwrap()), false);
        assert_eq!(x.place_of("10.0.0.2".parse().unwrap()), None);
        // The namespace answers are unchanged by nodes.
        assert_eq!(x.namespace_of("10.0.0.2".parse().unwrap()).as_deref(), Some("a"));
    }

    /// The issue-35 memory goal: 150,000 pods on 5,000 nodes in 3 zones, 200 namespaces, in
    /// under 12 MB of index (hash table slots at their real capacity, names, node table).
    /// `cargo test --lib cluster::pods::topology_tests -- --nocapture` prints it.
    #[test]
    fn a_large_cluster_fits_the_memory_goal() {
        let mut x = PodIndex::default();
        let namespaces: Vec<Arc<str>> = (0..200).map(|i| Arc::from(format!("namespace-{i}"))).collect();
        for n in 0..5_000 {
            x.set_node_zone(
                &format!("ip-10-0-{}-{}.ec2.internal", n / 256, n % 256),
                Some(["us-east-1a", "us-east-1b", "us-east-1c"][n % 3]),
            );
        }
        for i in 0u32..150_000 {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            let node = format!("ip-10-0-{}-{}.ec2.internal", (i % 5_000) / 256, (i % 5_000) % 256);
            let ns = &namespaces[(i % 200) as usize];
            x.set_on(
                ns,
                &format!("app-{i}-7d9f8c6b5-x2x4z"),
                Some(ip),
                false,
                Some(&node),
            );
        }
        assert_eq!(x.len(), 150_000);
        let bytes = x.heap_bytes();
        println!(
            "pod index, 150,000 pods + 5,000 nodes: {bytes} bytes ({:.1} MB)",
            bytes as f64 / 1e6
        );
        assert!(bytes < 12_000_000, "{bytes}");
        let place = x.place_of("10.0.0.7".parse().unwrap()).unwrap();
        assert_eq!(place.zone.as_deref(), Some("us-east-1b"));
    }
}
