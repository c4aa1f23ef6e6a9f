//! The connection to the API server: where the objects come from ([`ApiSource`]), what is
//! watched ([`WatchOptions`], the `kubernetes` plugin's data options as plain values), and the
//! kube client configuration built from them ([`client_config`]): the in-cluster service
//! account, `endpoint URL` (with `tls CERT KEY CACERT`), or `kubeconfig PATH [CONTEXT]`.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::errors::WatchError;
use crate::cluster::api_limits::ApiLimits;

/// Where the cluster's objects come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiSource {
    /// The in-cluster service account (the default).
    InCluster,
    /// `endpoint URL`: the API server at that URL.
    Endpoint(String),
    /// `kubeconfig PATH [CONTEXT]` (wins over `endpoint`, as in CoreDNS).
    Kubeconfig {
        /// The kubeconfig file, as written (relative to the working directory, as in CoreDNS).
        path: PathBuf,
        /// The context; `None` for the file's current-context.
        context: Option<String>,
    },
    /// `manifests PATH...` (cluster-dns only): Kubernetes YAML files, relative to the
    /// Corefile's directory.
    Manifests(Vec<PathBuf>),
}

/// What the API source watches and how it connects: the `kubernetes` plugin's options that
/// concern the data, handed over as plain values (the cluster layer knows no Corefile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchOptions {
    /// Where the objects come from.
    pub source: ApiSource,
    /// A client certificate, key and CA for the API connection (already resolved paths).
    pub tls: Option<(PathBuf, PathBuf, PathBuf)>,
    /// The namespaces watched, lower-case; empty means all.
    pub namespaces: Vec<String>,
    /// A label selector on Namespaces.
    pub namespace_labels: Option<String>,
    /// A label selector on Services, EndpointSlices and Pods.
    pub labels: Option<String>,
    /// Pods are watched (`pods verified`).
    pub pods: bool,
    /// Pods (with their nodes) and Nodes (their zones) are watched, and endpoints keep their
    /// place (`topology`).
    pub topology: bool,
    /// Endpoints keep their node, zone and hints (`topology`, `zonal`).
    pub endpoint_places: bool,
    /// Endpoints keep their pod's name (`endpoint_pod_names`).
    pub endpoint_pod_names: bool,
    /// The client's rate and concurrency limits towards the API server.
    pub limits: ApiLimits,
    /// ServiceImports and imported EndpointSlices are watched (`multicluster`).
    pub multicluster: bool,
    /// DNSPolicies are watched, and Pods with their labels, and Namespaces' labels kept
    /// (`dnspolicy` in the block).
    pub policies: bool,
}

impl Default for WatchOptions {
    /// The in-cluster source, every namespace, no selectors, no pods.
    fn default() -> Self {
        Self {
            source: ApiSource::InCluster,
            tls: None,
            namespaces: Vec::new(),
            namespace_labels: None,
            labels: None,
            pods: false,
            topology: false,
            endpoint_places: false,
            endpoint_pod_names: false,
            limits: ApiLimits::default(),
            multicluster: false,
            policies: false,
        }
    }
}

/// Builds the kube client configuration for `config`'s source.
pub async fn client_config(config: &WatchOptions) -> Result<kube::Config, WatchError> {
    match &config.source {
        ApiSource::InCluster => kube::Config::incluster().map_err(|source| WatchError::InCluster { source }),
        ApiSource::Endpoint(url) => match &config.tls {
            None => match url.parse() {
                Ok(uri) => Ok(kube::Config::new(uri)),
                Err(e) => Err(WatchError::Endpoint {
                    url: url.clone(),
                    message: e.to_string(),
                }),
            },
            Some((cert, key, ca)) => {
                // A kubeconfig in memory, so that kube loads the files as it does for a real one.
                let q = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
                let text = format!(
                    "{{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"current-context\":\"c\",\"clusters\":[{{\"name\":\"c\",\"cluster\":{{\"server\":{},\"certificate-authority\":{}}}}}],\"users\":[{{\"name\":\"u\",\"user\":{{\"client-certificate\":{},\"client-key\":{}}}}}],\"contexts\":[{{\"name\":\"c\",\"context\":{{\"cluster\":\"c\",\"user\":\"u\"}}}}]}}",
                    q(url),
                    q(&ca.to_string_lossy()),
                    q(&cert.to_string_lossy()),
                    q(&key.to_string_lossy()),
                );
                let err = |source| WatchError::Kubeconfig {
                    path: PathBuf::from(url),
                    source,
                };
                let kc = Kubeconfig::from_yaml(&text).map_err(err)?;
                kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .map_err(err)
            }
        },
        ApiSource::Kubeconfig { path, context } => {
            let err = |source| WatchError::Kubeconfig {
                path: path.clone(),
                source,
            };
            let kc = Kubeconfig::read_from(path).map_err(err)?;
            let options = KubeConfigOptions {
                context: context.clone(),
                ..KubeConfigOptions::default()
            };
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(err)
        }
        ApiSource::Manifests(_) => Err(WatchError::NotApi),
    }
}
