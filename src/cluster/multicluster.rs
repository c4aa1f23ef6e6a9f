//! The multicluster part of the cluster zone (the Multi-Cluster Services API, KEP-1645): the
//! ServiceImports (`multicluster.x-k8s.io/v1alpha1`, a CRD, so read as JSON: k8s-openapi has no
//! type for them) and the EndpointSlices an MCS implementation imports for them, labelled
//! `multicluster.kubernetes.io/service-name` and `multicluster.kubernetes.io/source-cluster`.
//!
//! It is kept apart from the Services of the cluster: an import is answered only in the
//! `multicluster` zones (`clusterset.local`), and an imported slice is joined to its import by
//! the multicluster label, never to a Service. The store ([`ClusterSet`]) lives in the
//! `ClusterZone`, whose methods in `super::zone_imports` write it under the zone's writer lock
//! and move the zone's change counters.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::ObjectError;
use super::model::{PortInfo, PortProtocol, SliceInfo};
use crate::proto::is_dns_label;

/// The label that ties an imported EndpointSlice to its ServiceImport.
pub const MC_SERVICE_NAME_LABEL: &str = "multicluster.kubernetes.io/service-name";
/// The label that names the cluster an imported EndpointSlice's endpoints are in.
pub const SOURCE_CLUSTER_LABEL: &str = "multicluster.kubernetes.io/source-cluster";
/// The API group and version of ServiceImports.
pub const MCS_API_VERSION: &str = "multicluster.x-k8s.io/v1alpha1";

/// The ServiceImport resource, for kube's dynamic API.
pub fn service_import_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", "ServiceImport"),
        "serviceimports",
    )
}

/// How an import is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportKind {
    /// `type: ClusterSetIP`: its `spec.ips` (in order, without repeats).
    ClusterSetIp(Vec<IpAddr>),
    /// `type: Headless`: the ready endpoints of its imported slices.
    Headless,
}

/// The DNS view of a ServiceImport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportInfo {
    /// Name, lower-case.
    pub name: Arc<str>,
    /// Namespace, lower-case.
    pub namespace: Arc<str>,
    /// How it answers.
    pub kind: ImportKind,
    /// `spec.ports`.
    pub ports: Vec<PortInfo>,
}

fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

impl ImportInfo {
    /// Projects a ServiceImport from its JSON. An unknown `spec.type` or a bad port is an
    /// error naming the object; an IP that does not parse is left out.
    pub fn from_json(obj: &Value) -> Result<Self, ObjectError> {
        const KIND: &str = "ServiceImport";
        let name = text(obj, &["metadata", "name"]).unwrap_or_default();
        let namespace = text(obj, &["metadata", "namespace"]).unwrap_or("default");
        let fail = |m: String| ObjectError::new(KIND, namespace, name, m);
        if !is_dns_label(name) || !is_dns_label(namespace) {
            return Err(fail(
                "metadata.name and metadata.namespace must be DNS labels".into(),
            ));
        }
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        let kind = match text(&spec, &["type"]) {
            Some("ClusterSetIP") => {
                let mut ips: Vec<IpAddr> = Vec::new();
                for ip in spec.get("ips").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(ip) = ip.as_str().and_then(|s| s.parse().ok())
                        && !ips.contains(&ip)
                    {
                        ips.push(ip);
                    }
                }
                ImportKind::ClusterSetIp(ips)
            }
            Some("Headless") => ImportKind::Headless,
            other => {
                return Err(fail(format!(
                    "spec.type {other:?} is neither ClusterSetIP nor Headless"
                )));
            }
        };
        let mut ports = Vec::new();
        for p in spec.get("ports").and_then(Value::as_array).into_iter().flatten() {
            let number = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let number = u16::try_from(number)
                .ok()
                .filter(|n| *n != 0)
                .ok_or_else(|| fail(format!("port {number} is out of range 1-65535")))?;
            let protocol = match text(p, &["protocol"]) {
                None => PortProtocol::Tcp,
                Some(s) => {
                    PortProtocol::parse(s).ok_or_else(|| fail(format!("unknown port protocol '{s}'")))?
                }
            };
            let port = PortInfo {
                name: text(p, &["name"]).unwrap_or_default().to_ascii_lowercase().into(),
                protocol,
                port: Some(number),
            };
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        Ok(Self {
            name: name.to_ascii_lowercase().into(),
            namespace: namespace.to_ascii_lowercase().into(),
            kind,
            ports,
        })
    }
}

/// An imported EndpointSlice: its ready endpoints (a [`SliceInfo`] whose `service` is the
/// import's name, from the multicluster label) and the cluster they are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSlice {
    /// The slice; `service` is the `multicluster.kubernetes.io/service-name` label.
    pub slice: SliceInfo,
    /// The `multicluster.kubernetes.io/source-cluster` label, lower-case; empty when absent
    /// (such endpoints have no per-cluster name).
    pub cluster: Arc<str>,
}

impl ClusterSlice {
    /// Projects an imported EndpointSlice (see [`SliceInfo::from_k8s`]).
    pub fn from_k8s(slice: &EndpointSlice, pod_names: bool) -> Result<Self, ObjectError> {
        let mut info = SliceInfo::from_k8s(slice, pod_names)?;
        let label = |k: &str| slice.metadata.labels.as_ref().and_then(|l| l.get(k));
        info.service = label(MC_SERVICE_NAME_LABEL)
            .filter(|s| is_dns_label(s))
            .map(|s| Arc::from(s.to_ascii_lowercase()));
        let cluster = label(SOURCE_CLUSTER_LABEL)
            .filter(|c| is_dns_label(c))
            .map(|c| c.to_ascii_lowercase())
            .unwrap_or_default();
        Ok(Self {
            slice: info,
            cluster: cluster.into(),
        })
    }
}

/// Everything the zone knows about one imported name: the ServiceImport (when it exists) and
/// the imported slices labelled with its name, by slice name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportEntry {
    /// The ServiceImport.
    pub import: Option<ImportInfo>,
    /// Its imported slices.
    pub slices: BTreeMap<Arc<str>, Arc<ClusterSlice>>,
}

impl ImportEntry {
    /// Every ready address, with its slice and endpoint, in slice-name order.
    pub fn ready(&self) -> impl Iterator<Item = (&ClusterSlice, &super::model::EndpointInfo, &IpAddr)> {
        self.slices.values().flat_map(|s| {
            s.slice
                .endpoints
                .iter()
                .flat_map(move |e| e.addresses.iter().map(move |ip| (&**s, e, ip)))
        })
    }
}

/// (namespace, name) of an import or an imported slice.
pub type Key = (Arc<str>, Arc<str>);

/// The imports and their slices. Invariant: writers are serialized by the caller (the
/// `ClusterZone`'s writer lock, in `super::zone_imports`), so a
/// slice's owner and the entries it is in change together; each entry is swapped whole, so a
/// reader sees an import and its slices from one version. Every write returns the keys of the
/// entries it changed, for the caller to count.
#[derive(Debug, Default)]
pub struct ClusterSet {
    entries: RwLock<HashMap<Key, Arc<ImportEntry>>>,
    /// Which import each imported slice was last joined to, by (namespace, slice name).
    slice_owner: RwLock<HashMap<Key, Option<Arc<str>>>>,
}

impl ClusterSet {
    /// The imported name `namespace/name` (lower-case).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ImportEntry>> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        entries.get(&(Arc::from(namespace), Arc::from(name))).cloned()
    }

    /// Number of ServiceImports.
    pub fn import_count(&self) -> usize {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        entries.values().filter(|e| e.import.is_some()).count()
    }

    /// The (namespace, name) of every ServiceImport.
    pub fn import_keys(&self) -> Vec<Key> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        entries
            .iter()
            .filter(|(_, e)| e.import.is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The (namespace, name) of every imported slice.
    pub fn slice_keys(&self) -> Vec<Key> {
        let owners = self.slice_owner.read().unwrap_or_else(PoisonError::into_inner);
        owners.keys().cloned().collect()
    }

    /// Adds or replaces a ServiceImport.
    pub fn apply_import(&self, import: ImportInfo) -> Vec<Key> {
        let key = (import.namespace.clone(), import.name.clone());
        self.update(key, |e| e.import = Some(import))
            .into_iter()
            .collect()
    }

    /// Removes a ServiceImport (its slices stay, waiting for an import of that name).
    pub fn delete_import(&self, namespace: &str, name: &str) -> Vec<Key> {
        self.update((namespace.into(), name.into()), |e| e.import = None)
            .into_iter()
            .collect()
    }

    /// Adds or replaces an imported slice, moving it if its import label changed.
    pub fn apply_slice(&self, cs: ClusterSlice) -> Vec<Key> {
        let ns = cs.slice.namespace.clone();
        let slice_name = cs.slice.name.clone();
        let owner = cs.slice.service.clone();
        let previous = self
            .slice_owner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((ns.clone(), slice_name.clone()), owner.clone())
            .flatten();
        let mut changed = Vec::new();
        if let Some(old) = previous.filter(|old| Some(old) != owner.as_ref()) {
            changed.extend(self.update((ns.clone(), old), |e| {
                e.slices.remove(&slice_name);
            }));
        }
        if let Some(service) = owner {
            let cs = Arc::new(cs);
            changed.extend(self.update((ns, service), |e| {
                e.slices.insert(slice_name, cs);
            }));
        }
        changed
    }

    /// Removes an imported slice.
    pub fn delete_slice(&self, namespace: &str, name: &str) -> Vec<Key> {
        let key: Key = (namespace.into(), name.into());
        let owner = self
            .slice_owner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        match owner {
            Some(Some(service)) => self
                .update((key.0, service), |e| {
                    e.slices.remove(name);
                })
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Applies `change` to a copy of the entry `key` and swaps it in whole; `Some(key)` when it
    /// changed.
    fn update(&self, key: Key, change: impl FnOnce(&mut ImportEntry)) -> Option<Key> {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        let old = entries.get(&key).cloned();
        let mut new = old.as_deref().cloned().unwrap_or_default();
        change(&mut new);
        if old.as_deref() == Some(&new) {
            return None;
        }
        if new.import.is_none() && new.slices.is_empty() {
            entries.remove(&key);
        } else {
            entries.insert(key.clone(), Arc::new(new));
        }
        Some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn import(name: &str, spec: Value) -> Value {
        json!({"apiVersion": MCS_API_VERSION, "kind": "ServiceImport",
               "metadata": {"name": name, "namespace": "ns"}, "spec": spec})
    }

    #[test]
    fn imports_project_their_type_ips_and_ports() {
        let i = ImportInfo::from_json(&import(
            "web",
            json!({"type": "ClusterSetIP", "ips": ["10.9.0.1", "bad", "10.9.0.1", "fd00::1"],
                   "ports": [{"name": "HTTP", "protocol": "TCP", "port": 80}, {"port": 53, "protocol": "UDP"}]}),
        ))
        .unwrap();
        assert_eq!(
            i.kind,
            ImportKind::ClusterSetIp(vec!["10.9.0.1".parse().unwrap(), "fd00::1".parse().unwrap()])
        );
        assert_eq!(&*i.ports[0].name, "http");
        assert_eq!(
            (i.ports[1].protocol, i.ports[1].port),
            (PortProtocol::Udp, Some(53))
        );
        let h = ImportInfo::from_json(&import("db", json!({"type": "Headless"}))).unwrap();
        assert_eq!(h.kind, ImportKind::Headless);
        for bad in [
            json!({"type": "LoadBalancer"}),
            json!({}),
            json!({"type": "Headless", "ports": [{"port": 0}]}),
        ] {
            let e = ImportInfo::from_json(&import("x", bad)).unwrap_err();
            assert_eq!((e.kind, e.name.as_str()), ("ServiceImport", "x"));
        }
    }
}
