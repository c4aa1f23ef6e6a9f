//! The `manifests` source: loads the cluster's objects from Kubernetes YAML files (multi-document
//! files or `kind: List`, as `kubectl get -o yaml` writes them) into a [`ClusterZone`].
//!
//! Namespaces, Services, EndpointSlices (discovery.k8s.io/v1), Pods, Nodes, DNSPolicies and ServiceImports
//! (multicluster.x-k8s.io/v1alpha1; slices labelled `multicluster.kubernetes.io/service-name`
//! join them too) are read (endpoints with their node, zone and hints, for `topology` and
//! `zonal`); other kinds are ignored. A file that cannot be read or is not YAML is an error; a malformed object is skipped
//! with a warning that names it, and the rest is applied.

use std::path::{Path, PathBuf};

use crate::cluster::policy::PolicyInfo;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::Value;

use super::ClusterZone;
use super::model::{PodInfo, ServiceInfo, SliceInfo, namespace_name};
use super::multicluster::{ClusterSlice, ImportInfo, MC_SERVICE_NAME_LABEL, MCS_API_VERSION};
use super::topology::NodeInfo;

/// A manifest file that cannot be loaded at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The file could not be read.
    #[error("{}: cannot read manifest: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid YAML.
    #[error("{}: not valid YAML: {message}", path.display())]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
}

/// What a load applied and skipped.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// Objects applied to the zone.
    pub applied: usize,
    /// Objects of other kinds, ignored.
    pub ignored: usize,
    /// Malformed objects, skipped, each with the reason (also logged).
    pub skipped: Vec<String>,
}

/// Loads every file in `paths` into `zone`, then marks the zone synced.
pub fn load_files(paths: &[PathBuf], zone: &ClusterZone) -> Result<LoadReport, ManifestError> {
    let mut report = LoadReport::default();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.clone(),
            source,
        })?;
        load_str(&text, path, zone, &mut report)?;
    }
    zone.set_synced(true);
    Ok(report)
}

/// Loads the YAML `text` (named `path` in messages) into `zone`, adding to `report`.
pub fn load_str(
    text: &str,
    path: &Path,
    zone: &ClusterZone,
    report: &mut LoadReport,
) -> Result<(), ManifestError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple_with_options(text, yaml_options()).map_err(|e| ManifestError::Yaml {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    for (index, doc) in docs.into_iter().enumerate() {
        let place = format!("{} document {}", path.display(), index + 1);
        if doc.get("kind").and_then(Value::as_str) == Some("List") {
            let items = doc
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (i, item) in items.into_iter().enumerate() {
                apply_object(item, &format!("{place} item {}", i + 1), zone, report);
            }
        } else {
            apply_object(doc, &place, zone, report);
        }
    }
    Ok(())
}

/// YAML limits sized for whole-cluster dumps. serde-saphyr's defaults (1,024 documents, 250,000
/// nodes) suit configuration files and reject a `kubectl get -o yaml` of a 1,000-service
/// cluster; the alias and nesting protections stay as they are.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_documents: 100_000_000,
            max_nodes: 1_000_000_000,
            max_events: 4_000_000_000,
            max_total_scalar_bytes: 16 * 1024 * 1024 * 1024,
        },
    }
}

fn apply_object(obj: Value, place: &str, zone: &ClusterZone, report: &mut LoadReport) {
    if obj.is_null() {
        return; // an empty document (comments only)
    }
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let label = object_label(&obj);
    let result: Result<(), String> = match (kind.as_str(), api_version) {
        ("Namespace", "v1") => serde_json::from_value::<Namespace>(obj)
            .map_err(|e| e.to_string())
            .and_then(|ns| {
                let name = namespace_name(&ns).map_err(|e| e.to_string())?;
                let labels = crate::cluster::policy::label_set(ns.metadata.labels.iter().flatten());
                zone.policies().set_namespace(name.clone(), labels);
                Ok(name)
            })
            .map(|name| zone.apply_namespace(name)),
        // A malformed policy is kept closed, never skipped (it must not widen anything).
        (crate::cluster::policy::KIND, "dns.cluster-dns.io/v1alpha1") => PolicyInfo::from_json(&obj)
            .map_err(|e| e.to_string())
            .map(|p| zone.policies().apply(p)),
        ("Service", "v1") => serde_json::from_value::<Service>(obj)
            .map_err(|e| e.to_string())
            .and_then(|s| ServiceInfo::from_k8s(&s).map_err(|e| e.to_string()))
            .map(|s| zone.apply_service(s)),
        ("EndpointSlice", "discovery.k8s.io/v1") => serde_json::from_value::<EndpointSlice>(obj)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                // An imported slice (MCS API) also joins its ServiceImport.
                let imported = s
                    .metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(MC_SERVICE_NAME_LABEL));
                if imported {
                    zone.apply_cluster_slice(ClusterSlice::from_k8s(&s, true).map_err(|e| e.to_string())?);
                }
                SliceInfo::from_k8s_placed(&s, true, true).map_err(|e| e.to_string())
            })
            .map(|s| zone.apply_slice(s)),
        ("ServiceImport", MCS_API_VERSION) => ImportInfo::from_json(&obj)
            .map_err(|e| e.to_string())
            .map(|i| zone.apply_import(i)),
        ("Pod", "v1") => serde_json::from_value::<Pod>(obj)
            .map_err(|e| e.to_string())
            .and_then(|p| PodInfo::from_k8s_labelled(&p).map_err(|e| e.to_string()))
            .map(|p| zone.apply_pod(p)),
        ("Node", "v1") => serde_json::from_value::<Node>(obj)
            .map_err(|e| e.to_string())
            .and_then(|n| NodeInfo::from_k8s(&n).map_err(|e| e.to_string()))
            .map(|n| zone.apply_node(&n)),
        _ => {
            report.ignored += 1;
            return;
        }
    };
    match result {
        Ok(()) => report.applied += 1,
        Err(reason) => {
            let msg = format!("{place} ({kind} {label}): skipped: {reason}");
            tracing::warn!(target: "cluster_dns::manifests", "{msg}");
            report.skipped.push(msg);
        }
    }
}

fn object_label(obj: &Value) -> String {
    let meta = obj.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    match meta.and_then(|m| m.get("namespace")).and_then(Value::as_str) {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_and_list_files_load() {
        let zone = ClusterZone::new();
        let mut report = LoadReport::default();
        let text = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n# only a comment\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: s, namespace: a}\n  spec: {clusterIP: 10.0.0.1}\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: d, namespace: a}\n";
        load_str(text, Path::new("t.yaml"), &zone, &mut report).unwrap();
        assert_eq!(report.applied, 2);
        assert_eq!(report.ignored, 1);
        assert!(zone.namespace_exists("a"));
        assert!(zone.service("a", "s").is_some());
    }

    /// ServiceImports load, and an imported slice joins its import (and stays a slice).
    #[test]
    fn service_imports_and_imported_slices_load() {
        let zone = ClusterZone::new();
        let mut report = LoadReport::default();
        let text = "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: db, namespace: a}\nspec: {type: Headless, ports: [{name: pg, port: 5432, protocol: TCP}]}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: db-c1, namespace: a, labels: {multicluster.kubernetes.io/service-name: db, multicluster.kubernetes.io/source-cluster: c1}}\naddressType: IPv4\nendpoints: [{addresses: [10.1.0.1], hostname: db-0}]\nports: [{name: pg, port: 5432, protocol: TCP}]\n---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {name: bad, namespace: a}\nspec: {type: NodePort}\n";
        load_str(text, Path::new("t.yaml"), &zone, &mut report).unwrap();
        assert_eq!(report.applied, 2, "{report:?}");
        assert!(report.skipped[0].contains("a/bad") && report.skipped[0].contains("NodePort"));
        let e = zone.import("a", "db").unwrap();
        assert!(e.import.is_some());
        assert_eq!(e.ready().count(), 1);
        assert_eq!(zone.slice_keys().len(), 1);
    }

    #[test]
    fn malformed_objects_are_skipped_with_their_name() {
        let zone = ClusterZone::new();
        let mut report = LoadReport::default();
        let text = "apiVersion: v1\nkind: Service\nmetadata: {name: broken, namespace: a}\nspec: {clusterIP: 10.0.0.300}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: typed, namespace: a}\nspec: {ports: [{port: eighty}]}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: good, namespace: a}\nspec: {clusterIP: 10.0.0.2}\n";
        load_str(text, Path::new("t.yaml"), &zone, &mut report).unwrap();
        assert_eq!(report.applied, 1);
        assert_eq!(report.skipped.len(), 2);
        assert!(
            report.skipped[0].contains("document 1") && report.skipped[0].contains("a/broken"),
            "{:?}",
            report.skipped
        );
        assert!(report.skipped[1].contains("a/typed"), "{:?}", report.skipped);
        assert!(zone.service("a", "good").is_some());
    }

    #[test]
    fn whole_cluster_dumps_load() {
        // Regression: more than 1,024 documents, and a List of more than 250,000 nodes, were
        // refused by the YAML parser's default budget.
        let zone = ClusterZone::new();
        let mut report = LoadReport::default();
        let mut docs = String::new();
        for i in 0..1500 {
            docs.push_str(&format!(
                "---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{i}, namespace: a}}\nspec: {{clusterIP: 10.0.{}.{}}}\n",
                i / 250,
                i % 250 + 1
            ));
        }
        load_str(&docs, Path::new("many.yaml"), &zone, &mut report).unwrap();
        assert_eq!(report.applied, 1500);
        let mut list = String::from("apiVersion: v1\nkind: List\nitems:\n");
        for i in 0..12_000 {
            list.push_str(&format!(
                "- apiVersion: v1\n  kind: Service\n  metadata: {{name: l{i}, namespace: b, labels: {{app: x, tier: web}}}}\n  spec: {{clusterIP: 10.1.{}.{}, ports: [{{name: http, port: 80, protocol: TCP}}]}}\n",
                i / 250,
                i % 250 + 1
            ));
        }
        let mut report = LoadReport::default();
        load_str(&list, Path::new("list.yaml"), &zone, &mut report).unwrap();
        assert_eq!(report.applied, 12_000, "{:?}", report.skipped.first());
    }

    #[test]
    fn invalid_yaml_is_an_error() {
        let zone = ClusterZone::new();
        let err = load_str(
            "a: [unclosed\n",
            Path::new("bad.yaml"),
            &zone,
            &mut LoadReport::default(),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("bad.yaml: not valid YAML"), "{err}");
    }
}
