//! The cluster zone: Kubernetes objects reduced to what DNS needs ([`model`]), the store that
//! joins and indexes them ([`zone`]), and the sources that fill it ([`manifests`], and [`watch`]
//! for the Kubernetes API), held together as one [`source::ClusterSource`]; the MCS API's
//! ServiceImports and imported slices in [`multicluster`] (kept in the zone by `zone_imports`).

pub mod api_limits;
pub mod heap;
pub mod manifests;
pub mod metrics;
pub mod model;
pub mod multicluster;
pub mod pods;
pub mod policy;
pub mod rest_client;
pub mod scope;
pub mod source;
pub mod topology;
pub mod watch;
pub mod zone;
mod zone_imports;

pub use source::ClusterSource;
pub use zone::ClusterZone;

/// The environment variable that names this server's own IPs (the Pod IP, from the downward
/// API), comma-separated. The NS answers of `kubernetes` and `k8s_external` name the Service
/// whose endpoints hold one of them.
pub const POD_IP_ENV: &str = "POD_IP";

/// This server's own IPs, from [`POD_IP_ENV`] (addresses that do not parse are left out).
pub fn self_ips_from_env() -> Vec<std::net::IpAddr> {
    std::env::var(POD_IP_ENV)
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// A Kubernetes object that cannot be used for DNS. The source skips it, logs this, and applies
/// the rest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {namespace}/{name}: {message}")]
pub struct ObjectError {
    /// The object's kind (`Service`, `EndpointSlice`, ...).
    pub kind: &'static str,
    /// Its namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// What is wrong with it.
    pub message: String,
}

impl ObjectError {
    /// An error about the object `kind` `namespace/name`.
    pub fn new(kind: &'static str, namespace: &str, name: &str, message: impl Into<String>) -> Self {
        Self {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            message: message.into(),
        }
    }
}
