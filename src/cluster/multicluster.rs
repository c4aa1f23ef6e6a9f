//! The multicluster part of the cluster zone (the Multi-Cluster Services API, KEP-1645): the
//! ServiceImports (`multicluster.x-k8s.io/v1alpha1`, a CRD, so read as JSON: k8s-openapi has no
//! type for them) and the EndpointSlices an MCS implementation imports for them, labelled
//! `multicluster.kubernetes.io/service-name` and `multicluster.kubernetes.io/source-cluster`.
//!
//! It is kept apart from the Services of the cluster ([`super::zone`]): an import is answered
//! only in the `multicluster` zones (`clusterset.local`), and an imported slice is joined to its
//! import by the multicluster label, never to a Service. The store lives in the
//! [`ClusterZone`] so that every change moves the zone's change counters (the answer memo and
//! the SOA serial follow it): its writes take the zone's writer lock and bump the scope of the
//! import's (namespace, name), the same key the answerer gives `<svc>.<ns>.svc.<zone>` names.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::ObjectError;
use super::model::{PortInfo, PortProtocol, SliceInfo};
use super::zone::ClusterZone;
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

type Key = (Arc<str>, Arc<str>);

/// The imports and their slices. Invariant: written only by the [`ClusterZone`] methods below,
/// under the zone's writer lock (so a slice's owner and the entries it is in change together);
/// each entry is swapped whole, so a reader sees an import and its slices from one version.
#[derive(Debug, Default)]
pub struct ClusterSet {
    entries: RwLock<HashMap<Key, Arc<ImportEntry>>>,
    /// Which import each imported slice was last joined to, by (namespace, slice name).
    slice_owner: RwLock<HashMap<Key, Option<Arc<str>>>>,
}

impl ClusterZone {
    /// The imported name `namespace/name` (lower-case).
    pub fn import(&self, namespace: &str, name: &str) -> Option<Arc<ImportEntry>> {
        let entries = self
            .clusterset
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        entries.get(&(Arc::from(namespace), Arc::from(name))).cloned()
    }

    /// Number of ServiceImports in the zone.
    pub fn import_count(&self) -> usize {
        let entries = self
            .clusterset
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        entries.values().filter(|e| e.import.is_some()).count()
    }

    /// Adds or replaces a ServiceImport.
    pub fn apply_import(&self, import: ImportInfo) {
        let _writer = self.write_lock();
        let key = (import.namespace.clone(), import.name.clone());
        self.update_import(key, |e| e.import = Some(import));
    }

    /// Removes a ServiceImport (its slices stay, waiting for an import of that name).
    pub fn delete_import(&self, namespace: &str, name: &str) {
        let _writer = self.write_lock();
        self.update_import((namespace.into(), name.into()), |e| e.import = None);
    }

    /// Adds or replaces an imported slice, moving it if its import label changed.
    pub fn apply_cluster_slice(&self, cs: ClusterSlice) {
        let _writer = self.write_lock();
        let ns = cs.slice.namespace.clone();
        let slice_name = cs.slice.name.clone();
        let owner = cs.slice.service.clone();
        let previous = self
            .clusterset
            .slice_owner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((ns.clone(), slice_name.clone()), owner.clone())
            .flatten();
        if let Some(old) = previous.filter(|old| Some(old) != owner.as_ref()) {
            self.update_import((ns.clone(), old), |e| {
                e.slices.remove(&slice_name);
            });
        }
        if let Some(service) = owner {
            let cs = Arc::new(cs);
            self.update_import((ns, service), |e| {
                e.slices.insert(slice_name, cs);
            });
        }
    }

    /// Removes an imported slice.
    pub fn delete_cluster_slice(&self, namespace: &str, name: &str) {
        let _writer = self.write_lock();
        let key: Key = (namespace.into(), name.into());
        let owner = self
            .clusterset
            .slice_owner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        if let Some(Some(service)) = owner {
            self.update_import((key.0, service), |e| {
                e.slices.remove(name);
            });
        }
    }

    /// The (namespace, name) of every stored ServiceImport (for relists).
    pub fn import_keys(&self) -> Vec<(Arc<str>, Arc<str>)> {
        let entries = self
            .clusterset
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        entries
            .iter()
            .filter(|(_, e)| e.import.is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The (namespace, name) of every stored imported slice (for relists).
    pub fn cluster_slice_keys(&self) -> Vec<(Arc<str>, Arc<str>)> {
        let owners = self
            .clusterset
            .slice_owner
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        owners.keys().cloned().collect()
    }

    /// Applies `change` to a copy of the entry `key` and swaps it in whole; moves the serial,
    /// the change counter and the scope of `key` when it changed. The caller holds the writer
    /// lock.
    fn update_import(&self, key: Key, change: impl FnOnce(&mut ImportEntry)) {
        let mut entries = self
            .clusterset
            .entries
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let old = entries.get(&key).cloned();
        let mut new = old.as_deref().cloned().unwrap_or_default();
        change(&mut new);
        if old.as_deref() == Some(&new) {
            return;
        }
        let scope = super::scope::service_scope(&key.0, &key.1);
        if new.import.is_none() && new.slices.is_empty() {
            entries.remove(&key);
        } else {
            entries.insert(key, Arc::new(new));
        }
        drop(entries);
        self.bump_serial();
        self.bump_scope(scope);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ChangeCounter;
    use serde_json::json;

    fn import(name: &str, spec: Value) -> Value {
        json!({"apiVersion": MCS_API_VERSION, "kind": "ServiceImport",
               "metadata": {"name": name, "namespace": "ns"}, "spec": spec})
    }

    fn slice(name: &str, svc: &str, cluster: &str, ips: &[&str]) -> ClusterSlice {
        let s: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns",
                         "labels": {MC_SERVICE_NAME_LABEL: svc, SOURCE_CLUSTER_LABEL: cluster}},
            "addressType": "IPv4",
            "endpoints": ips.iter().map(|ip| json!({"addresses": [ip]})).collect::<Vec<_>>(),
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]
        }))
        .unwrap();
        ClusterSlice::from_k8s(&s, false).unwrap()
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

    #[test]
    fn slices_join_their_import_by_the_multicluster_label_and_move_with_it() {
        let z = ClusterZone::new();
        let g0 = z.generation();
        z.apply_cluster_slice(slice("db-c1", "db", "c1", &["10.1.0.1"]));
        assert!(z.generation() > g0);
        assert!(z.import("ns", "db").unwrap().import.is_none());
        z.apply_import(ImportInfo::from_json(&import("db", json!({"type": "Headless"}))).unwrap());
        let e = z.import("ns", "db").unwrap();
        assert_eq!(e.ready().count(), 1);
        assert_eq!(&*e.slices.values().next().unwrap().cluster, "c1");
        // Relabelled to another import: moved.
        z.apply_cluster_slice(slice("db-c1", "other", "c1", &["10.1.0.1"]));
        assert_eq!(z.import("ns", "db").unwrap().ready().count(), 0);
        assert_eq!(z.import("ns", "other").unwrap().ready().count(), 1);
        assert_eq!(z.cluster_slice_keys().len(), 1);
        z.delete_cluster_slice("ns", "db-c1");
        assert!(z.import("ns", "other").is_none());
        assert_eq!(z.import_keys(), vec![(Arc::from("ns"), Arc::from("db"))]);
        // The same import again changes nothing.
        let g = z.generation();
        z.apply_import(ImportInfo::from_json(&import("db", json!({"type": "Headless"}))).unwrap());
        assert_eq!(z.generation(), g);
        let scope = z.scope_generation(crate::cluster::scope::service_scope("ns", "db"));
        z.delete_import("ns", "db");
        assert!(z.import("ns", "db").is_none());
        assert!(z.scope_generation(crate::cluster::scope::service_scope("ns", "db")) > scope);
    }

    /// Concurrent writers (imports and slices of the same names, on a multi-threaded runtime):
    /// every slice ends up in exactly the import its last label names, nothing is lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_writers_keep_slices_and_owners_in_step() {
        let z = Arc::new(ClusterZone::new());
        let mut tasks = Vec::new();
        for t in 0..8 {
            let z = z.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..200 {
                    let svc = if i % 2 == 0 { "a" } else { "b" };
                    z.apply_cluster_slice(slice(&format!("s{t}"), svc, "c1", &[&format!("10.0.{t}.1")]));
                    z.apply_import(ImportInfo::from_json(&import(svc, json!({"type": "Headless"}))).unwrap());
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // Each task's last write labelled its slice "b".
        assert_eq!(z.import("ns", "b").unwrap().slices.len(), 8);
        assert_eq!(z.import("ns", "a").unwrap().slices.len(), 0);
        assert_eq!(z.import_count(), 2);
    }
}
