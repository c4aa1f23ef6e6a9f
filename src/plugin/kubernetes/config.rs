//! What a configured `kubernetes` directive holds once parsed (`setup.rs` reads the Corefile into
//! it): its zones, where the objects come from and every option with its default; what the handler
//! (`handler.rs`) and the answerer (`answer/`) run with.

use std::path::PathBuf;
use std::time::Duration;

use super::options::PodMode;
use crate::chain::NamedFile;
use crate::cluster::watch::ApiSource;

/// The `kubernetes` plugin's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct KubernetesConfig {
    /// The zones, normalized (lower-case, absolute): the directive's arguments, else the server
    /// block's zones. At least one is not a reverse zone.
    pub zones: Vec<String>,
    /// Where the objects come from.
    pub source: ApiSource,
    /// `tls CERT KEY CACERT`: client certificate, key and CA for the API connection, relative to
    /// the Corefile's directory.
    pub tls: Option<(PathBuf, PathBuf, PathBuf)>,
    /// `namespaces`: the namespaces exposed, lower-case; empty means all.
    pub namespaces: Vec<String>,
    /// `namespace_labels`: a label selector on Namespaces (checked, as written).
    pub namespace_labels: Option<String>,
    /// `labels`: a label selector on Services, EndpointSlices and Pods (checked, as written).
    pub labels: Option<String>,
    /// `pods`.
    pub pods: PodMode,
    /// `endpoint_pod_names`: endpoints are named after their pod when they have no hostname.
    pub endpoint_pod_names: bool,
    /// `ttl`: the TTL of answers, 0 to 3600 (default 5).
    pub ttl: u32,
    /// `noendpoints`: no endpoint data is kept.
    pub noendpoints: bool,
    /// `zonal`: headless services answer CoreDNS's zone-scoped names
    /// (`<zone>.pin._zone.<svc>...`, `<zone>.prefer._zone.<svc>...`).
    pub zonal: bool,
    /// `topology`: headless answers follow the Service's `trafficDistribution` and the
    /// client pod's node and zone (Pods and Nodes are watched).
    pub topology: bool,
    /// `fallthrough`: `None` off; `Some([])` in all of the plugin's zones; else in those zones
    /// (normalized).
    pub fallthrough: Option<Vec<String>>,
    /// `ignore empty_service`: services without ready endpoints are NXDOMAIN.
    pub ignore_empty_service: bool,
    /// `startup_timeout`: how long start-up waits for the first sync (default 5 s).
    pub startup_timeout: Duration,
    /// `apiserver_qps`: the client's rate limit.
    pub apiserver_qps: Option<f32>,
    /// `apiserver_burst`: the client's burst.
    pub apiserver_burst: Option<u32>,
    /// `apiserver_max_inflight`: the client's limit on requests in flight.
    pub apiserver_max_inflight: Option<u32>,
    /// The files its options name (`kubeconfig`, `tls`, `manifests`), for `--check`.
    pub files: Vec<NamedFile>,
    /// `multicluster ZONES...`: those of `zones` answered from ServiceImports (normalized).
    pub multicluster: Vec<String>,
    /// The block has `dnspolicy`: DNSPolicies are watched, and pod and namespace labels kept.
    pub policies: bool,
}

/// The TTL when `ttl` is not given.
pub const DEFAULT_TTL: u32 = 5;

/// The start-up timeout when `startup_timeout` is not given.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(5);

impl Default for KubernetesConfig {
    /// CoreDNS's defaults, with no zones.
    fn default() -> Self {
        Self {
            zones: Vec::new(),
            source: ApiSource::InCluster,
            tls: None,
            namespaces: Vec::new(),
            namespace_labels: None,
            labels: None,
            pods: PodMode::Disabled,
            endpoint_pod_names: false,
            ttl: DEFAULT_TTL,
            noendpoints: false,
            zonal: false,
            topology: false,
            fallthrough: None,
            ignore_empty_service: false,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            apiserver_qps: None,
            apiserver_burst: None,
            apiserver_max_inflight: None,
            files: Vec::new(),
            multicluster: Vec::new(),
            policies: false,
        }
    }
}
