//! What the source watches: the resources ([`Resource`]) and the watches the `kubernetes`
//! plugin's filters make of them ([`watch_specs`]): one Namespace watch with the
//! `namespace_labels` selector, and one Service, EndpointSlice (and, with `pods verified`, Pod)
//! watch per listed namespace, or one at the cluster scope, with the `labels` selector; with
//! `multicluster`, ServiceImports and the imported EndpointSlices too.

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ApiResource;

use super::client::WatchOptions;

/// The resources the source watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    /// core/v1 Namespaces (cluster-scoped).
    Namespaces,
    /// core/v1 Services.
    Services,
    /// discovery.k8s.io/v1 EndpointSlices.
    EndpointSlices,
    /// core/v1 Pods (only with `pods verified` or `topology`).
    Pods,
    /// multicluster.x-k8s.io/v1alpha1 ServiceImports (only with `multicluster`).
    ServiceImports,
    /// The EndpointSlices labelled `multicluster.kubernetes.io/service-name` (only with
    /// `multicluster`): a second EndpointSlice watch, into the zone's imports.
    ClusterSlices,
    /// core/v1 Nodes, cluster-scoped (only with `topology`).
    Nodes,
    /// dns.cluster-dns.io/v1alpha1 DNSPolicies (only with `dnspolicy`).
    DnsPolicies,
}

impl Resource {
    /// The resource as RBAC names it (`services`, `endpointslices.discovery.k8s.io`, ...).
    pub fn rbac_name(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::Services => "services",
            Self::EndpointSlices => "endpointslices.discovery.k8s.io",
            Self::Pods => "pods",
            Self::ServiceImports => "serviceimports.multicluster.x-k8s.io",
            Self::ClusterSlices => "endpointslices.discovery.k8s.io",
            Self::Nodes => "nodes",
            Self::DnsPolicies => "dnspolicies.dns.cluster-dns.io",
        }
    }

    /// The watch's name in logs and `/ready`: the RBAC name, told apart for the imported
    /// slices.
    pub fn watch_name(self) -> &'static str {
        match self {
            Self::ClusterSlices => "endpointslices.discovery.k8s.io (multicluster)",
            other => other.rbac_name(),
        }
    }

    /// The kind of its objects.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Namespaces => "Namespace",
            Self::Services => "Service",
            Self::EndpointSlices | Self::ClusterSlices => "EndpointSlice",
            Self::Pods => "Pod",
            Self::ServiceImports => "ServiceImport",
            Self::Nodes => "Node",
            Self::DnsPolicies => crate::cluster::policy::KIND,
        }
    }

    pub(super) fn api_resource(self) -> ApiResource {
        match self {
            Self::Namespaces => ApiResource::erase::<Namespace>(&()),
            Self::Services => ApiResource::erase::<Service>(&()),
            Self::EndpointSlices | Self::ClusterSlices => ApiResource::erase::<EndpointSlice>(&()),
            Self::Pods => ApiResource::erase::<Pod>(&()),
            Self::ServiceImports => crate::cluster::multicluster::service_import_resource(),
            Self::Nodes => ApiResource::erase::<Node>(&()),
            Self::DnsPolicies => crate::cluster::policy::dns_policy_resource(),
        }
    }
}

/// One watch to run: a resource in a scope with a label selector.
#[derive(Debug, Clone)]
pub(super) struct WatchSpec {
    pub(super) resource: Resource,
    pub(super) namespace: Option<String>,
    pub(super) labels: Option<String>,
}

impl WatchSpec {
    pub(super) fn name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} in {ns}", self.resource.watch_name()),
            None => self.resource.watch_name().to_owned(),
        }
    }

    pub(super) fn scope(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "at the cluster scope".to_owned(),
        }
    }
}

/// The watches `config` asks for, the Namespace watch first.
pub(super) fn watch_specs(config: &WatchOptions) -> Vec<WatchSpec> {
    let mut resources = vec![Resource::Services, Resource::EndpointSlices];
    if config.pods || config.topology || config.policies {
        resources.push(Resource::Pods);
    }
    if config.multicluster {
        resources.extend([Resource::ServiceImports, Resource::ClusterSlices]);
    }
    if config.policies {
        resources.push(Resource::DnsPolicies);
    }
    let mut specs = vec![WatchSpec {
        resource: Resource::Namespaces,
        namespace: None,
        labels: config.namespace_labels.clone(),
    }];
    for resource in resources {
        let labels = match resource {
            // Imports and policies are not Services: `labels` does not select them.
            Resource::ServiceImports | Resource::DnsPolicies => None,
            // Only the imported slices, and of them those `labels` selects.
            Resource::ClusterSlices => Some(match &config.labels {
                Some(l) => format!("{},{l}", crate::cluster::multicluster::MC_SERVICE_NAME_LABEL),
                None => crate::cluster::multicluster::MC_SERVICE_NAME_LABEL.to_owned(),
            }),
            _ => config.labels.clone(),
        };
        if config.namespaces.is_empty() {
            specs.push(WatchSpec {
                resource,
                namespace: None,
                labels,
            });
        } else {
            for ns in &config.namespaces {
                specs.push(WatchSpec {
                    resource,
                    namespace: Some(ns.clone()),
                    labels: labels.clone(),
                });
            }
        }
    }
    if config.topology {
        // Nodes are cluster-scoped, and no label selector of the options is about them.
        specs.push(WatchSpec {
            resource: Resource::Nodes,
            namespace: None,
            labels: None,
        });
    }
    specs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::watch::client::ApiSource;

    /// Options as `namespaces`, `labels`, `namespace_labels` and `pods verified` set them.
    fn config(
        namespaces: &[&str],
        labels: Option<&str>,
        namespace_labels: Option<&str>,
        pods: bool,
    ) -> WatchOptions {
        WatchOptions {
            source: ApiSource::Endpoint("http://127.0.0.1:1".into()),
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            labels: labels.map(str::to_owned),
            namespace_labels: namespace_labels.map(str::to_owned),
            pods,
            ..WatchOptions::default()
        }
    }

    #[test]
    fn watches_follow_the_filters() {
        let names = |c: &WatchOptions| watch_specs(c).iter().map(WatchSpec::name).collect::<Vec<_>>();
        assert_eq!(
            names(&config(&[], None, None, false)),
            ["namespaces", "services", "endpointslices.discovery.k8s.io"]
        );
        let c = config(&["a", "b"], Some("app=x"), None, true);
        assert_eq!(
            names(&c),
            [
                "namespaces",
                "services in a",
                "services in b",
                "endpointslices.discovery.k8s.io in a",
                "endpointslices.discovery.k8s.io in b",
                "pods in a",
                "pods in b"
            ]
        );
        assert!(
            watch_specs(&c)[1..]
                .iter()
                .all(|s| s.labels.as_deref() == Some("app=x"))
        );
        let mut c = config(&["a"], Some("app=x"), None, false);
        c.multicluster = true;
        let specs = watch_specs(&c);
        assert_eq!(
            specs.iter().map(WatchSpec::name).collect::<Vec<_>>(),
            [
                "namespaces",
                "services in a",
                "endpointslices.discovery.k8s.io in a",
                "serviceimports.multicluster.x-k8s.io in a",
                "endpointslices.discovery.k8s.io (multicluster) in a"
            ]
        );
        assert_eq!(specs[3].labels, None);
        assert_eq!(
            specs[4].labels.as_deref(),
            Some("multicluster.kubernetes.io/service-name,app=x")
        );
        let c = config(&[], None, Some("team=dns"), false);
        assert_eq!(watch_specs(&c)[0].labels.as_deref(), Some("team=dns"));
        assert_eq!(watch_specs(&c)[1].labels, None);
    }

    #[test]
    fn topology_watches_pods_and_nodes_once_at_the_cluster_scope() {
        let c = WatchOptions {
            topology: true,
            ..config(&["a", "b"], Some("app=x"), None, false)
        };
        let specs = watch_specs(&c);
        let names: Vec<String> = specs.iter().map(WatchSpec::name).collect();
        assert_eq!(&names[5..], ["pods in a", "pods in b", "nodes"]);
        assert_eq!(
            specs[7].labels, None,
            "the options' selectors are not about Nodes"
        );
    }
}
