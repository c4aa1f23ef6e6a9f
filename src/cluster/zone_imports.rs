//! The [`ClusterZone`]'s ServiceImports and imported slices (`multicluster`): its writes take
//! the zone's writer lock, apply the change to the zone's [`ClusterSet`] and, for each import
//! entry that changed, move the SOA serial, the change counter and the scope of the import's
//! (namespace, name), the same key the answerer gives `<svc>.<ns>.svc.<zone>` names, so the
//! answer memo drops what the change made stale.

use std::sync::Arc;

use super::multicluster::{ClusterSlice, ImportEntry, ImportInfo, Key};
use super::scope::service_scope;
use super::zone::ClusterZone;

impl ClusterZone {
    /// The imported name `namespace/name` (lower-case).
    pub fn import(&self, namespace: &str, name: &str) -> Option<Arc<ImportEntry>> {
        self.clusterset.get(namespace, name)
    }

    /// Number of ServiceImports in the zone.
    pub fn import_count(&self) -> usize {
        self.clusterset.import_count()
    }

    /// Adds or replaces a ServiceImport.
    pub fn apply_import(&self, import: ImportInfo) {
        let _writer = self.write_lock();
        let changed = self.clusterset.apply_import(import);
        self.imports_changed(&changed);
    }

    /// Removes a ServiceImport (its slices stay, waiting for an import of that name).
    pub fn delete_import(&self, namespace: &str, name: &str) {
        let _writer = self.write_lock();
        let changed = self.clusterset.delete_import(namespace, name);
        self.imports_changed(&changed);
    }

    /// Adds or replaces an imported slice, moving it if its import label changed.
    pub fn apply_cluster_slice(&self, slice: ClusterSlice) {
        let _writer = self.write_lock();
        let changed = self.clusterset.apply_slice(slice);
        self.imports_changed(&changed);
    }

    /// Removes an imported slice.
    pub fn delete_cluster_slice(&self, namespace: &str, name: &str) {
        let _writer = self.write_lock();
        let changed = self.clusterset.delete_slice(namespace, name);
        self.imports_changed(&changed);
    }

    /// The (namespace, name) of every stored ServiceImport (for relists).
    pub fn import_keys(&self) -> Vec<Key> {
        self.clusterset.import_keys()
    }

    /// The (namespace, name) of every stored imported slice (for relists).
    pub fn cluster_slice_keys(&self) -> Vec<Key> {
        self.clusterset.slice_keys()
    }

    /// After a change to the entries `changed`; the caller holds the writer lock.
    fn imports_changed(&self, changed: &[Key]) {
        if changed.is_empty() {
            return;
        }
        self.bump_serial();
        for (namespace, name) in changed {
            self.bump_scope(service_scope(namespace, name));
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use serde_json::{Value, json};

    use super::*;
    use crate::cluster::multicluster::{MC_SERVICE_NAME_LABEL, MCS_API_VERSION, SOURCE_CLUSTER_LABEL};
    use crate::proto::ChangeCounter;

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
        let scope = z.scope_generation(super::super::scope::service_scope("ns", "db"));
        z.delete_import("ns", "db");
        assert!(z.import("ns", "db").is_none());
        assert!(z.scope_generation(super::super::scope::service_scope("ns", "db")) > scope);
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
