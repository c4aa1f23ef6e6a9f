//! Tenant DNS policy (`dnspolicy`): the `DNSPolicy` objects (`dns.cluster-dns.io/v1alpha1`) as
//! DNS needs them ([`Rule`]), which pods each covers, and the view a pod gets from the policies
//! that cover it ([`ClientView`]: the namespaces it sees, the outside names it may ask, what a
//! denied name is answered). The [`PolicyStore`] lives in the [`ClusterZone`](super::ClusterZone)
//! beside the pod index; the watch and the manifests fill it, the `dnspolicy` plugin asks it
//! for the view of each client.
//!
//! How policies combine, as NetworkPolicies do: a pod no `Enforce` policy covers sees
//! everything; a pod several cover sees the union of what they allow (a namespace any of them
//! shows, an outside name any of them allows; a policy without `visibleNamespaces`, or without
//! `external.allow`, allows every one). A pod always sees its own namespace. A denied outside
//! name is answered REFUSED only when every `Enforce` policy covering the pod says so, else
//! NXDOMAIN. `Audit` policies change no answer: the view also holds what the pod would see if
//! they were enforced, and what they would deny is counted and their pods' outside names
//! recorded ([`PolicyStats`]).
//!
//! A malformed policy (an unknown field, a bad selector, operator, pattern, action or mode)
//! never widens what anyone sees: it covers every pod of its namespace and allows nothing but
//! the pod's own namespace, in `Enforce` mode, until it is fixed (and it is logged with its
//! namespace and name, and counted).
//!
//! Invariant of the store's shared state: policies and namespace labels are written only under
//! the `objects` write lock, each write bumping `generation` after the change; a view is cached
//! only if `generation` did not move while it was computed, so a cached view is never older
//! than the objects. Classes are interned under their own mutex, and never reused.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::proto::Visibility;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::Name;

mod object;

pub use object::{Mode, Pattern, PolicyInfo, Rule, Selector};

/// The API group of `DNSPolicy`.
pub const GROUP: &str = "dns.cluster-dns.io";
/// Its version.
pub const VERSION: &str = "v1alpha1";
/// Its kind.
pub const KIND: &str = "DNSPolicy";
/// Its resource (plural).
pub const PLURAL: &str = "dnspolicies";

/// The API resource of `DNSPolicy`, for the watch.
pub fn dns_policy_resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: KIND.into(),
        plural: PLURAL.into(),
    }
}

/// A set of labels, sorted by key (a pod's or a namespace's). Shared: pods of one ReplicaSet
/// hold the same set.
pub type LabelSet = Arc<[(Arc<str>, Arc<str>)]>;

/// `labels` as a [`LabelSet`].
pub fn label_set<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> LabelSet {
    let mut v: Vec<(Arc<str>, Arc<str>)> = labels
        .into_iter()
        .map(|(k, v)| (Arc::from(k.as_str()), Arc::from(v.as_str())))
        .collect();
    v.sort();
    v.into()
}

pub(crate) fn label<'a>(set: &'a [(Arc<str>, Arc<str>)], key: &str) -> Option<&'a str> {
    set.binary_search_by(|(k, _)| (**k).cmp(key))
        .ok()
        .map(|i| &*set[i].1)
}

/// The names the cluster zone answers, as the `kubernetes` plugin offers them to `dnspolicy`
/// (which asks the policy about every other name: an "outside" name).
#[derive(Debug, Clone, Default)]
pub struct ClusterNames {
    /// Its forward zones (`cluster.local`, a `multicluster` zone).
    pub zones: Vec<Name>,
    /// Its reverse zones (`in-addr.arpa`, `ip6.arpa`): a name in one is the cluster's when an
    /// address of the zone (a Service's, an endpoint's, a pod's) is the one it names.
    pub reverse_zones: Vec<Name>,
}

/// True when `name` is `zone` or a name under it, its labels compared without regard to ASCII
/// case and without a copy of either name (hickory's `Name::zone_of` lower-cases both: two
/// allocations a call, on every question `dnspolicy` checks).
pub fn zone_of_ci(zone: &Name, name: &Name) -> bool {
    zone.num_labels() <= name.num_labels()
        && zone
            .iter()
            .rev()
            .zip(name.iter().rev())
            .all(|(a, b)| a.eq_ignore_ascii_case(b))
}

/// The address a reverse name names (`4.3.2.1.in-addr.arpa.`, 32 nibbles under `ip6.arpa.`).
pub fn reverse_address(name: &Name) -> Option<std::net::IpAddr> {
    let labels: Vec<String> = name
        .iter()
        .map(|l| String::from_utf8_lossy(l).to_ascii_lowercase())
        .collect();
    match labels.as_slice() {
        [d, c, b, a, arpa, root] if arpa == "in-addr" && root == "arpa" => {
            format!("{a}.{b}.{c}.{d}").parse().ok()
        }
        [nibbles @ .., ip6, arpa] if nibbles.len() == 32 && ip6 == "ip6" && arpa == "arpa" => {
            let hex: String = nibbles.iter().rev().map(String::as_str).collect();
            if hex.len() != 32 {
                return None;
            }
            u128::from_str_radix(&hex, 16)
                .ok()
                .map(|v| std::net::IpAddr::V6(v.into()))
        }
        _ => None,
    }
}

// ------------------------------------------------------------------ counting

/// What one policy counted and saw, kept across its updates (by namespace and name) and read
/// by the `dnspolicy` plugin's metrics and its allowlist page.
#[derive(Debug, Default)]
pub struct PolicyStats {
    /// Questions an `Enforce` policy denied (a hidden namespace, a denied outside name).
    pub denied: AtomicU64,
    /// Questions answered that the policy, enforced, would deny (`Audit`).
    pub audited: AtomicU64,
    /// The outside names its pods asked (`Audit` policies), at most [`OBSERVED_MAX`].
    observed: Mutex<BTreeSet<String>>,
    /// Names not recorded because the set was full.
    pub observed_dropped: AtomicU64,
}

/// The most outside names one policy records.
pub const OBSERVED_MAX: usize = 4096;

impl PolicyStats {
    /// Records `name` as asked by a pod the policy covers; true when it is new.
    fn observe(&self, name: &Name) -> bool {
        let mut set = self.observed.lock().unwrap_or_else(PoisonError::into_inner);
        let text = name.to_lowercase().to_string();
        let text = text.strip_suffix('.').unwrap_or(&text).to_owned();
        if set.contains(&text) {
            return false;
        }
        if set.len() >= OBSERVED_MAX {
            self.observed_dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        set.insert(text);
        true
    }

    /// The outside names recorded, sorted.
    pub fn observed(&self) -> Vec<String> {
        self.observed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

// ------------------------------------------------------------------ views

/// What a set of policies lets a pod reach.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Reach {
    /// The namespaces it sees (`None`: every one).
    namespaces: Option<HashSet<Arc<str>>>,
    /// The outside names it may ask (`None`: every one).
    outside: Option<Vec<Pattern>>,
}

impl Reach {
    fn nothing() -> Self {
        Self {
            namespaces: Some(HashSet::new()),
            outside: Some(Vec::new()),
        }
    }

    fn sees(&self, ns: &str) -> bool {
        self.namespaces.as_ref().is_none_or(|s| s.contains(ns))
    }

    fn may_ask(&self, name: &Name) -> bool {
        self.outside
            .as_ref()
            .is_none_or(|ps| ps.iter().any(|p| p.matches(name)))
    }

    /// Widens to what `other` reaches too.
    fn union(&mut self, other: Self) {
        self.namespaces = match (self.namespaces.take(), other.namespaces) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                Some(a)
            }
            _ => None,
        };
        self.outside = match (self.outside.take(), other.outside) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                a.sort();
                a.dedup();
                Some(a)
            }
            _ => None,
        };
    }

    /// A canonical text of it, for interning classes.
    fn key(&self) -> String {
        let mut out = String::new();
        match &self.namespaces {
            None => out.push('*'),
            Some(s) => {
                let mut v: Vec<&str> = s.iter().map(|n| &**n).collect();
                v.sort_unstable();
                out.push_str(&v.join(","));
            }
        }
        out.push('|');
        match &self.outside {
            None => out.push('*'),
            Some(ps) => {
                for p in ps {
                    out.push_str(&format!("{p:?};"));
                }
            }
        }
        out
    }
}

/// The class of the view that sees everything (no policy covers the client).
pub const OPEN_CLASS: u64 = 0;
/// The class of the view that sees nothing (a client no pod is known at, with `unmapped deny`).
pub const CLOSED_CLASS: u64 = 1;

/// What the policies covering one pod let it see ([`Visibility`]).
#[derive(Debug)]
pub struct ClientView {
    class: u64,
    enforce: Reach,
    /// What it would reach if its `Audit` policies were enforced too; `None` when none covers
    /// it.
    audit: Option<Reach>,
    action: ResponseCode,
    /// The `Enforce` policies covering it (their denials are counted).
    enforcing: Box<[Arc<PolicyStats>]>,
    /// The `Audit` policies covering it.
    auditing: Box<[Arc<PolicyStats>]>,
    /// For the log of a first audited name: the policies' names.
    audit_names: Box<[String]>,
}

impl ClientView {
    /// The view of a client no policy covers.
    pub fn open() -> Self {
        Self {
            class: OPEN_CLASS,
            enforce: Reach::default(),
            audit: None,
            action: ResponseCode::NXDomain,
            enforcing: Box::default(),
            auditing: Box::default(),
            audit_names: Box::default(),
        }
    }

    /// The view that sees nothing and answers REFUSED (`unmapped deny`).
    pub fn closed() -> Self {
        Self {
            class: CLOSED_CLASS,
            enforce: Reach::nothing(),
            action: ResponseCode::Refused,
            ..Self::open()
        }
    }

    /// True when `Audit` policies cover the client (its answers are counted one by one).
    pub fn audited(&self) -> bool {
        self.audit.is_some()
    }

    /// Decides an outside name for the question the client asked (the `dnspolicy` plugin's
    /// check, once per question): whether it may be answered; counts a denial, or what an
    /// audit policy would deny, and records the name for the `Audit` policies' allowlists.
    pub fn decide_outside(&self, name: &Name) -> bool {
        let allowed = self.enforce.may_ask(name);
        if !allowed {
            for s in self.enforcing.iter() {
                s.denied.fetch_add(1, Ordering::Relaxed);
            }
            return false;
        }
        if let Some(audit) = &self.audit {
            let would = audit.may_ask(name);
            for (s, policy) in self.auditing.iter().zip(self.audit_names.iter()) {
                if !would {
                    s.audited.fetch_add(1, Ordering::Relaxed);
                }
                if s.observe(name) && !would {
                    tracing::info!(target: "cluster_dns::dnspolicy", policy = %policy, name = %name, "audit: Enforce would deny this outside name");
                }
            }
        }
        true
    }
}

impl Visibility for ClientView {
    fn class(&self) -> u64 {
        self.class
    }

    fn restricted(&self) -> bool {
        self.enforce.namespaces.is_some()
    }

    /// Counts a denial, or (answering) what an audit policy would deny.
    fn sees_namespace(&self, namespace: &str) -> bool {
        if !self.enforce.sees(namespace) {
            for s in self.enforcing.iter() {
                s.denied.fetch_add(1, Ordering::Relaxed);
            }
            return false;
        }
        if let Some(audit) = &self.audit
            && !audit.sees(namespace)
        {
            for s in self.auditing.iter() {
                s.audited.fetch_add(1, Ordering::Relaxed);
            }
        }
        true
    }

    fn may_ask_outside(&self, name: &Name) -> bool {
        self.enforce.may_ask(name)
    }

    fn denial(&self) -> ResponseCode {
        self.action
    }
}

// ------------------------------------------------------------------ the store

/// The most views kept (one per namespace and pod label set in use); past it the cache is
/// emptied and views are computed again as clients ask.
const VIEWS_MAX: usize = 65_536;
/// The most view contents whose class is remembered.
const CLASSES_MAX: usize = 262_144;

/// How many views and classes a store keeps ([`VIEWS_MAX`], [`CLASSES_MAX`]; smaller in tests).
#[derive(Debug, Clone, Copy)]
struct CacheBounds {
    views: usize,
    classes: usize,
}

impl Default for CacheBounds {
    fn default() -> Self {
        Self {
            views: VIEWS_MAX,
            classes: CLASSES_MAX,
        }
    }
}

/// What the store's two caches hold now, and how often each was emptied at its bound
/// (`cluster_dns_dnspolicy_cached` and `cluster_dns_dnspolicy_cache_flushes_total`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounts {
    /// Views kept.
    pub views: usize,
    /// View contents whose class is remembered.
    pub classes: usize,
    /// Times the views were emptied because they reached their bound (65,536).
    pub view_flushes: u64,
    /// Times the classes were emptied because they reached their bound (262,144).
    pub class_flushes: u64,
}

/// A policy as the store keeps it: its rule (the closed one when malformed), why it is
/// malformed, and its stats.
#[derive(Debug)]
struct Kept {
    rule: Rule,
    error: Option<String>,
    stats: Arc<PolicyStats>,
}

/// One policy as [`PolicyStore::policies`] lists it.
#[derive(Debug, Clone)]
pub struct PolicySummary {
    /// Its namespace.
    pub namespace: Arc<str>,
    /// Its name.
    pub name: Arc<str>,
    /// Its mode (`Enforce` when malformed).
    pub mode: Mode,
    /// Why it is malformed, if it is.
    pub error: Option<String>,
    /// What it counted and saw.
    pub stats: Arc<PolicyStats>,
}

/// Views are kept by the pod's namespace id and label set id (the pod index's; never reused).
pub type ViewKey = (u32, u32);

#[derive(Debug, Default)]
struct Objects {
    /// Policies by (namespace, name).
    policies: BTreeMap<(Arc<str>, Arc<str>), Kept>,
    /// Every namespace's labels (the `visibleNamespaces.selector`s read them).
    namespaces: BTreeMap<Arc<str>, LabelSet>,
}

/// The policies and namespace labels of one zone, and the views made of them (see the module
/// docs for the invariant).
#[derive(Debug, Default)]
pub struct PolicyStore {
    objects: RwLock<Objects>,
    /// Moves after every change of `objects`.
    generation: AtomicU64,
    /// Views by (namespace, pod label set id).
    views: RwLock<HashMap<ViewKey, Arc<ClientView>, foldhash::fast::RandomState>>,
    /// Classes by the canonical text of a view's content, and the next id (from 2 on; ids are
    /// never reused: past [`CLASSES_MAX`] texts the map is emptied and numbering goes on).
    classes: Mutex<(HashMap<String, u64>, u64)>,
    /// Malformed policies seen (applies of a malformed object).
    pub malformed_seen: AtomicU64,
    bounds: CacheBounds,
    view_flushes: AtomicU64,
    class_flushes: AtomicU64,
}

impl PolicyStore {
    /// What the view and class caches hold, and how often they were emptied at their bounds.
    pub fn cache_counts(&self) -> CacheCounts {
        CacheCounts {
            views: self.views.read().unwrap_or_else(PoisonError::into_inner).len(),
            classes: self
                .classes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .0
                .len(),
            view_flushes: self.view_flushes.load(Ordering::Relaxed),
            class_flushes: self.class_flushes.load(Ordering::Relaxed),
        }
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.views.write().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// Adds or replaces a policy. A malformed one is logged with its namespace and name and
    /// counted, and kept as the closed rule (see the module docs).
    pub fn apply(&self, info: PolicyInfo) {
        let (rule, error) = match info.rule {
            Ok(r) => (r, None),
            Err(e) => {
                tracing::warn!(target: "cluster_dns::dnspolicy", "{KIND} {}/{}: malformed, its namespace's pods see only their own namespace until it is fixed: {e}", info.namespace, info.name);
                self.malformed_seen.fetch_add(1, Ordering::Relaxed);
                (Rule::closed(), Some(e))
            }
        };
        {
            let mut o = self.objects.write().unwrap_or_else(PoisonError::into_inner);
            let key = (info.namespace, info.name);
            let stats = o.policies.get(&key).map(|k| k.stats.clone()).unwrap_or_default();
            o.policies.insert(key, Kept { rule, error, stats });
        }
        self.changed();
    }

    /// Removes a policy.
    pub fn delete(&self, namespace: &str, name: &str) {
        let removed = {
            let mut o = self.objects.write().unwrap_or_else(PoisonError::into_inner);
            o.policies
                .remove(&(Arc::from(namespace), Arc::from(name)))
                .is_some()
        };
        if removed {
            self.changed();
        }
    }

    /// Sets a namespace's labels.
    pub fn set_namespace(&self, name: Arc<str>, labels: LabelSet) {
        {
            let mut o = self.objects.write().unwrap_or_else(PoisonError::into_inner);
            if o.namespaces.get(&name) == Some(&labels) {
                return;
            }
            o.namespaces.insert(name, labels);
        }
        self.changed();
    }

    /// Forgets a namespace's labels.
    pub fn delete_namespace(&self, name: &str) {
        let removed = self
            .objects
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .namespaces
            .remove(name)
            .is_some();
        if removed {
            self.changed();
        }
    }

    /// The policies' keys (for a relist's sweep).
    pub fn keys(&self) -> Vec<(Arc<str>, Arc<str>)> {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .policies
            .keys()
            .cloned()
            .collect()
    }

    /// Every policy, by namespace and name.
    pub fn policies(&self) -> Vec<PolicySummary> {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .policies
            .iter()
            .map(|((ns, n), k)| PolicySummary {
                namespace: ns.clone(),
                name: n.clone(),
                mode: k.rule.mode,
                error: k.error.clone(),
                stats: k.stats.clone(),
            })
            .collect()
    }

    /// How many policies there are.
    pub fn len(&self) -> usize {
        self.objects
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .policies
            .len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The view kept for `key`, if one is.
    pub fn cached(&self, key: ViewKey) -> Option<Arc<ClientView>> {
        self.views
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned()
    }

    /// The view of a pod of `namespace` whose labels are `labels` (`key`: their ids).
    pub fn view(
        &self,
        key: ViewKey,
        namespace: &Arc<str>,
        labels: &[(Arc<str>, Arc<str>)],
    ) -> Arc<ClientView> {
        if let Some(v) = self.cached(key) {
            return v;
        }
        let at = self.generation.load(Ordering::SeqCst);
        let view = Arc::new(self.compute(namespace, labels));
        let mut views = self.views.write().unwrap_or_else(PoisonError::into_inner);
        if self.generation.load(Ordering::SeqCst) == at {
            if views.len() >= self.bounds.views {
                views.clear();
                self.view_flushes.fetch_add(1, Ordering::Relaxed);
            }
            views.insert(key, view.clone());
        }
        view
    }

    fn compute(&self, namespace: &Arc<str>, labels: &[(Arc<str>, Arc<str>)]) -> ClientView {
        let o = self.objects.read().unwrap_or_else(PoisonError::into_inner);
        let from = (namespace.clone(), Arc::<str>::from(""));
        let mut enforce: Option<Reach> = None;
        let mut all: Option<Reach> = None;
        let mut refused = true;
        let mut enforcing = Vec::new();
        let mut auditing = Vec::new();
        let mut audit_names = Vec::new();
        for ((ns, name), Kept { rule, stats, .. }) in o.policies.range(from..) {
            if ns != namespace {
                break;
            }
            if !rule.pods.matches(labels) {
                continue;
            }
            let reach = Self::reach(&o, namespace, rule);
            match rule.mode {
                Mode::Enforce => {
                    refused &= rule.action == ResponseCode::Refused;
                    enforcing.push(stats.clone());
                    match &mut enforce {
                        Some(r) => r.union(reach.clone()),
                        None => enforce = Some(reach.clone()),
                    }
                }
                Mode::Audit => {
                    auditing.push(stats.clone());
                    audit_names.push(format!("{ns}/{name}"));
                }
            }
            match &mut all {
                Some(r) => r.union(reach),
                None => all = Some(reach),
            }
        }
        drop(o);
        let Some(all) = all else {
            return ClientView::open();
        };
        let audit = (!auditing.is_empty()).then_some(all);
        let enforce = enforce.unwrap_or_default();
        let action = if refused && !enforcing.is_empty() {
            ResponseCode::Refused
        } else {
            ResponseCode::NXDomain
        };
        let key = format!(
            "{}#{}#{}",
            enforce.key(),
            audit.as_ref().map_or_else(String::new, Reach::key),
            u16::from(action)
        );
        let class = {
            let mut held = self.classes.lock().unwrap_or_else(PoisonError::into_inner);
            let (classes, next) = &mut *held;
            if classes.len() >= self.bounds.classes {
                classes.clear();
                self.class_flushes.fetch_add(1, Ordering::Relaxed);
            }
            *next = (*next).max(CLOSED_CLASS + 1);
            match classes.get(&key) {
                Some(c) => *c,
                None => {
                    let c = *next;
                    *next += 1;
                    classes.insert(key, c);
                    c
                }
            }
        };
        ClientView {
            class,
            enforce,
            audit,
            action,
            enforcing: enforcing.into(),
            auditing: auditing.into(),
            audit_names: audit_names.into(),
        }
    }

    /// What `rule` lets a pod of `namespace` reach.
    fn reach(o: &Objects, namespace: &Arc<str>, rule: &Rule) -> Reach {
        let namespaces = rule.namespaces.as_ref().map(|names| {
            let mut set: HashSet<Arc<str>> = names.iter().map(|n| Arc::from(n.as_str())).collect();
            set.insert(namespace.clone());
            if let Some(sel) = &rule.namespace_selector {
                set.extend(
                    o.namespaces
                        .iter()
                        .filter(|(_, l)| sel.matches(l))
                        .map(|(n, _)| n.clone()),
                );
            }
            set
        });
        Reach {
            namespaces,
            outside: rule.outside.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(ns: &str, name: &str, spec: serde_json::Value) -> PolicyInfo {
        PolicyInfo::from_json(
            &json!({"apiVersion": "dns.cluster-dns.io/v1alpha1", "kind": "DNSPolicy",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}),
        )
        .unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> LabelSet {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        label_set(&m)
    }

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    #[test]
    fn zone_of_ci_is_hickorys_zone_of_without_copies() {
        for (zone, name) in [
            ("example.org.", "a.B.Example.ORG."),
            ("example.org.", "example.org."),
            ("example.org.", "org."),
            ("example.org.", "xexample.org."),
            (".", "a."),
            ("b.a.", "b.a.c."),
        ] {
            assert_eq!(
                zone_of_ci(&n(zone), &n(name)),
                n(zone).zone_of(&n(name)),
                "{zone} {name}"
            );
        }
    }

    #[test]
    fn reverse_names_give_their_address() {
        assert_eq!(
            reverse_address(&n("4.3.2.10.in-addr.arpa.")),
            Some("10.2.3.4".parse().unwrap())
        );
        let v6 = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.";
        assert_eq!(reverse_address(&n(v6)), Some("fd00::1".parse().unwrap()));
        assert_eq!(reverse_address(&n("3.2.10.in-addr.arpa.")), None);
        assert_eq!(reverse_address(&n("x.3.2.10.in-addr.arpa.")), None);
    }

    #[test]
    fn patterns_match_as_documented() {
        let under = Pattern::parse("*.pypi.org").unwrap();
        assert!(under.matches(&n("files.pypi.org.")));
        assert!(under.matches(&n("A.B.PyPI.org.")));
        assert!(!under.matches(&n("pypi.org.")));
        assert!(!under.matches(&n("evilpypi.org.")));
        let exact = Pattern::parse("github.com").unwrap();
        assert!(exact.matches(&n("GitHub.com.")));
        assert!(!exact.matches(&n("api.github.com.")));
        assert!(Pattern::parse("*").unwrap().matches(&n("x.")));
        for bad in ["", "a.*.b", "*x.com", "**.a"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn selectors_follow_kubernetes_semantics() {
        let sel = |v: serde_json::Value| Selector::parse(serde_json::from_value(v).unwrap()).unwrap();
        let l = labels(&[("app", "web"), ("tier", "front")]);
        assert!(sel(json!({})).matches(&l));
        assert!(sel(json!({"matchLabels": {"app": "web"}})).matches(&l));
        assert!(!sel(json!({"matchLabels": {"app": "db"}})).matches(&l));
        let e = |op: &str, vals: &[&str]| json!({"matchExpressions": [{"key": "tier", "operator": op, "values": vals}]});
        assert!(sel(e("In", &["front", "x"])).matches(&l));
        assert!(!sel(e("NotIn", &["front"])).matches(&l));
        assert!(sel(e("Exists", &[])).matches(&l));
        assert!(!sel(e("DoesNotExist", &[])).matches(&l));
        assert!(Selector::parse(serde_json::from_value(e("Near", &["x"])).unwrap()).is_err());
        assert!(Selector::parse(serde_json::from_value(e("In", &[])).unwrap()).is_err());
    }

    #[test]
    fn malformed_policies_are_kept_closed_and_never_widen() {
        for spec in [
            json!({"visibleNamespaces": {"names": ["b"]}, "surprise": 1}),
            json!({"mode": "Sometimes"}),
            json!({"action": "DROP"}),
            json!({"external": {"allow": ["a.*.b"]}}),
            json!({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}),
        ] {
            let p = policy("a", "p", spec.clone());
            assert!(p.rule.is_err(), "{spec}");
            let store = PolicyStore::default();
            store.apply(p);
            let v = store.view((0, 1), &Arc::from("a"), &labels(&[("app", "x")]));
            assert!(v.sees_namespace("a"));
            assert!(!v.sees_namespace("b"), "{spec}");
            assert!(!v.may_ask_outside(&n("example.com.")), "{spec}");
            assert_eq!(store.malformed_seen.load(Ordering::Relaxed), 1);
        }
    }

    /// Both caches stay within their bounds, emptied when full, and say so in their counts.
    #[test]
    fn the_view_and_class_caches_are_bounded_and_counted() {
        let store = PolicyStore {
            bounds: CacheBounds { views: 4, classes: 2 },
            ..PolicyStore::default()
        };
        for i in 0..3 {
            store.apply(policy(
                "a",
                &format!("p{i}"),
                json!({"podSelector": {"matchLabels": {"app": format!("x{i}")}},
                       "visibleNamespaces": {"names": [format!("n{i}")]}}),
            ));
        }
        let ns: Arc<str> = Arc::from("a");
        for id in 0..10u32 {
            let app = format!("x{}", id % 3);
            let v = store.view((0, id), &ns, &labels(&[("app", &app)]));
            assert!(v.sees_namespace(&format!("n{}", id % 3)));
            let c = store.cache_counts();
            assert!(c.views <= 4 && c.classes <= 2, "{c:?}");
        }
        let c = store.cache_counts();
        // Ten views into four places: emptied at the fifth and the ninth.
        assert_eq!((c.views, c.view_flushes), (2, 2), "{c:?}");
        assert!(c.class_flushes >= 1, "{c:?}");
    }

    #[test]
    fn policies_combine_as_a_union_and_audit_changes_nothing() {
        let store = PolicyStore::default();
        let ns: Arc<str> = Arc::from("a");
        let web = labels(&[("app", "web")]);
        let db = labels(&[("app", "db")]);
        assert_eq!(store.view((0, 1), &ns, &web).class(), OPEN_CLASS);
        store.apply(policy(
            "a",
            "all",
            json!({"visibleNamespaces": {"names": ["shared"]}, "external": {"allow": []}, "action": "REFUSED"}),
        ));
        store.apply(policy(
            "a",
            "web",
            json!({"podSelector": {"matchLabels": {"app": "web"}},
                   "visibleNamespaces": {"selector": {"matchLabels": {"team": "blue"}}},
                   "external": {"allow": ["*.pypi.org"]}}),
        ));
        store.set_namespace(Arc::from("blue1"), labels(&[("team", "blue")]));
        store.set_namespace(Arc::from("red"), labels(&[("team", "red")]));
        let w = store.view((0, 1), &ns, &web);
        let d = store.view((0, 2), &ns, &db);
        for ns in ["a", "shared", "blue1"] {
            assert!(w.sees_namespace(ns), "{ns}");
        }
        assert!(!w.sees_namespace("red"));
        assert!(!d.sees_namespace("blue1") && d.sees_namespace("shared"));
        assert!(w.may_ask_outside(&n("files.pypi.org.")) && !d.may_ask_outside(&n("files.pypi.org.")));
        // REFUSED only when every enforcing policy says so.
        assert_eq!(d.denial(), ResponseCode::Refused);
        assert_eq!(w.denial(), ResponseCode::NXDomain);
        assert_ne!(w.class(), d.class());
        // A namespace label change is seen at once.
        store.set_namespace(Arc::from("red"), labels(&[("team", "blue")]));
        assert!(store.view((0, 1), &ns, &web).sees_namespace("red"));
        // Audit: answers unchanged, counted, names recorded. (Enforced, it would join the
        // union: where an Enforce policy allows a name already, it denies nothing more.)
        store.apply(policy(
            "c",
            "audit",
            json!({"mode": "Audit", "external": {"allow": []}, "visibleNamespaces": {"names": []}}),
        ));
        let c = store.view((2, 1), &Arc::from("c"), &web);
        assert!(c.audited());
        assert!(c.decide_outside(&n("files.pypi.org.")));
        assert!(c.sees_namespace("a"), "audit changes no answer");
        assert!(!store.view((0, 1), &ns, &web).audited());
        let audit = store
            .policies()
            .into_iter()
            .find(|p| &*p.name == "audit")
            .unwrap()
            .stats;
        assert_eq!(audit.audited.load(Ordering::Relaxed), 2);
        assert_eq!(audit.observed(), ["files.pypi.org"]);
        // Deleting every policy opens the view again.
        for (nsn, name) in store.keys() {
            store.delete(&nsn, &name);
        }
        assert_eq!(store.view((0, 1), &ns, &web).class(), OPEN_CLASS);
    }

    /// Concurrent writers and readers on a multi-threaded runtime: every view read after the
    /// last write reflects it (the cached views never outlive a change).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn views_are_never_older_than_the_policies() {
        let store = Arc::new(PolicyStore::default());
        let ns: Arc<str> = Arc::from("a");
        let mut tasks = Vec::new();
        for w in 0..4 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..200 {
                    store.apply(policy(
                        "a",
                        &format!("p{w}"),
                        json!({"visibleNamespaces": {"names": [format!("n{i}")]}}),
                    ));
                    tokio::task::yield_now().await;
                }
            }));
        }
        for _ in 0..4 {
            let store = store.clone();
            let ns = ns.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..400 {
                    let _ = store.view((0, 1), &ns, &labels(&[]));
                    tokio::task::yield_now().await;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let v = store.view((0, 1), &ns, &labels(&[]));
        for w in 0..4 {
            assert!(v.sees_namespace("n199"), "writer {w}");
        }
        assert!(!v.sees_namespace("n0"));
    }
}
