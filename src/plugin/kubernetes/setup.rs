//! The `kubernetes` directive's Corefile syntax, parsed into a [`KubernetesConfig`] with
//! CoreDNS's options, defaults and checks (see this folder's README), plus cluster-dns's own
//! `manifests` source. Each option is read by its own function in `options`; [`parse`] is the
//! dispatch and the checks that span options, `zones` the directive's own arguments.
//!
//! Every mistake is reported at the line of the option at fault, as
//! `Corefile:7: kubernetes: ttl: ...` or `Corefile:7: kubernetes: unknown property 'foo'`.
//!
//! And how a configured `kubernetes` directive becomes its plugin: its [`Configured`] impl, what it
//! checks against its block and offers it. What it parses into is `config.rs`'s, which the
//! handler reads too, so the handler never imports this file (the layer test finds import loops).

use std::any::TypeId;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::KubernetesConfig;
pub use super::options::{MAX_TTL, PodMode};
use super::options::{
    Opt, SourceOptions, parse_count, parse_endpoint, parse_fallthrough, parse_flag, parse_ignore,
    parse_kubeconfig, parse_manifests, parse_multicluster, parse_namespaces, parse_pods, parse_qps,
    parse_selector, parse_startup_timeout, parse_tls, parse_ttl,
};
use crate::chain::{
    AcquireCtx, AcquireError, AcquireFuture, BuildCtx, Built, Capabilities, Configured, NamedFile,
    OwnEndpoint, SetupCtx,
};
use crate::cluster::ClusterSource;
use crate::cluster::api_limits::ApiLimits;
use crate::cluster::metrics::KubernetesMetrics;
pub use crate::cluster::watch::ApiSource;
use crate::cluster::watch::WatchOptions;
use crate::corefile::{CorefileError, Directive, Token, is_reverse_zone, normalize_zone_or_cidr};
use crate::plugin::kit::{ClientDirectory, ClusterFamilies, PodNamespaces, ServiceFamilies};

impl KubernetesConfig {
    /// What the API source watches, as the cluster layer takes it (no Corefile types).
    pub fn watch_options(&self) -> WatchOptions {
        WatchOptions {
            source: self.source.clone(),
            tls: self.tls.clone(),
            namespaces: self.namespaces.clone(),
            namespace_labels: self.namespace_labels.clone(),
            labels: self.labels.clone(),
            pods: self.pods == PodMode::Verified,
            topology: self.topology,
            endpoint_places: self.topology || self.zonal,
            endpoint_pod_names: self.endpoint_pod_names,
            limits: ApiLimits {
                qps: self.apiserver_qps.filter(|q| *q > 0.0),
                burst: self.apiserver_burst.filter(|b| *b > 0),
                max_inflight: self.apiserver_max_inflight.filter(|m| *m > 0),
            },
            multicluster: !self.multicluster.is_empty(),
            policies: self.policies,
        }
    }
}

/// Parses the `kubernetes` directive `d` of a server block whose zones are `server_zones`
/// (normalized). `manifests` and `tls` paths are taken relative to `corefile_dir`. Each option
/// is read by its own function in `options`; what is checked here is only what spans options.
pub fn parse(
    d: &Directive,
    server_zones: &[String],
    corefile_dir: &Path,
) -> Result<KubernetesConfig, CorefileError> {
    let mut c = KubernetesConfig {
        zones: zones(d, server_zones)?,
        ..KubernetesConfig::default()
    };
    let mut source = SourceOptions::default();
    let mut namespaces_at: Option<&Token> = None;
    let mut namespace_labels_at: Option<&Token> = None;
    let mut zonal_at: Option<&Token> = None;

    for line in &d.block {
        let opt = Opt { d, line };
        if line.has_block {
            return Err(opt.fail("takes no block".into()));
        }
        match opt.name() {
            "endpoint" => source.endpoint = Some(parse_endpoint(&opt)?),
            "kubeconfig" => {
                let (path, context) = parse_kubeconfig(&opt)?;
                // As written: relative to the working directory, as CoreDNS reads it.
                c.files.push(named(line, PathBuf::from(&path.text)));
                source.kubeconfig = Some((path, context));
            }
            "manifests" => {
                let before = source.manifests.as_ref().map_or(0, |(_, files)| files.len());
                parse_manifests(&opt, corefile_dir, &mut source.manifests)?;
                let added = source
                    .manifests
                    .iter()
                    .flat_map(|(_, files)| files.iter().skip(before));
                c.files
                    .extend(added.cloned().map(|f| named(line, f)).collect::<Vec<_>>());
            }
            "tls" => {
                let (cert, key, ca) = parse_tls(&opt, corefile_dir)?;
                c.files.extend([&cert, &key, &ca].map(|f| named(line, f.clone())));
                c.tls = Some((cert, key, ca));
                source.tls_at = Some(&line.name);
            }
            "namespaces" => {
                parse_namespaces(&opt, &mut c.namespaces)?;
                namespaces_at = Some(&line.name);
            }
            "labels" => c.labels = Some(parse_selector(&opt)?),
            "namespace_labels" => {
                c.namespace_labels = Some(parse_selector(&opt)?);
                namespace_labels_at = Some(&line.name);
            }
            "pods" => c.pods = parse_pods(&opt)?,
            "endpoint_pod_names" => c.endpoint_pod_names = parse_flag(&opt)?,
            "noendpoints" => c.noendpoints = parse_flag(&opt)?,
            "zonal" => {
                c.zonal = parse_flag(&opt)?;
                zonal_at = Some(&line.name);
            }
            "topology" => c.topology = parse_flag(&opt)?,
            "ttl" => c.ttl = parse_ttl(&opt)?,
            "fallthrough" => c.fallthrough = Some(parse_fallthrough(&opt)?),
            "ignore" => c.ignore_empty_service = parse_ignore(&opt)?,
            "multicluster" => c.multicluster = parse_multicluster(&opt, &c.zones)?,
            "startup_timeout" => c.startup_timeout = parse_startup_timeout(&opt)?,
            "apiserver_qps" => c.apiserver_qps = Some(parse_qps(&opt)?),
            "apiserver_burst" => c.apiserver_burst = Some(parse_count(&opt)?),
            "apiserver_max_inflight" => c.apiserver_max_inflight = Some(parse_count(&opt)?),
            _ => return Err(opt.refused()),
        }
    }

    if let (Some(_), Some(at)) = (namespaces_at, namespace_labels_at) {
        return Err(d.error_at(at, "'namespaces' and 'namespace_labels' cannot both be set"));
    }
    if let (Some(at), true) = (zonal_at, c.noendpoints) {
        return Err(d.error_at(
            at,
            "zonal: zone-scoped names are made from endpoints, which 'noendpoints' turns off",
        ));
    }
    c.source = source.resolve(d)?;
    Ok(c)
}

/// `path`, named by option `line` of the `kubernetes` block, which start-up cannot do without.
fn named(line: &Directive, path: PathBuf) -> NamedFile {
    NamedFile {
        path,
        at: line.name.loc.clone(),
        what: format!("kubernetes: {}", line.name.text),
        needed: true,
    }
}

/// The plugin's zones: its arguments (normalized, CIDRs as reverse zones, duplicates dropped),
/// else the server block's; at least one must be a forward zone.
fn zones(d: &Directive, server_zones: &[String]) -> Result<Vec<String>, CorefileError> {
    let mut zones: Vec<String> = Vec::new();
    for t in &d.args {
        if t.text.trim().is_empty() {
            return Err(d.error_at(t, "a zone argument is empty"));
        }
        let z = normalize_zone_or_cidr(&t.text).map_err(|e| d.error_at(t, e))?;
        if !server_zones.is_empty() && !server_zones.iter().any(|s| is_subzone(&z, s)) {
            tracing::warn!(
                at = %t.loc,
                zone = %z,
                "kubernetes: the zone is outside the server block's zones, so no query for it reaches the plugin"
            );
        }
        if !zones.contains(&z) {
            zones.push(z);
        }
    }
    if zones.is_empty() {
        for s in server_zones {
            let z = normalize_zone_or_cidr(s).map_err(|e| d.error(e))?;
            if !zones.contains(&z) {
                zones.push(z);
            }
        }
    }
    if zones.is_empty() {
        return Err(d.error(
            "no zones: give them as arguments, e.g. 'kubernetes cluster.local in-addr.arpa ip6.arpa'",
        ));
    }
    if zones.iter().all(|z| is_reverse_zone(z)) {
        return Err(d.error(format!(
            "needs at least one zone that is not a reverse zone, e.g. 'cluster.local' (has only {})",
            zones.join(" ")
        )));
    }
    Ok(zones)
}

/// True when `zone` is `parent` or under it (both normalized).
fn is_subzone(zone: &str, parent: &str) -> bool {
    parent == "." || zone == parent || zone.strip_suffix(parent).is_some_and(|head| head.ends_with('.'))
}

/// The `kubernetes` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    let mut config = parse(d, ctx.zones, ctx.dir)?;
    config.policies = ctx.block.contains(&"dnspolicy");
    Ok(Arc::new(config))
}

impl Configured for KubernetesConfig {
    /// Search paths come from the pod index, which only `pods verified` keeps.
    fn files(&self) -> Vec<NamedFile> {
        self.files.clone()
    }

    fn offers_search_paths(&self) -> Option<Result<(), String>> {
        Some(match self.pods {
            PodMode::Verified => Ok(()),
            _ => Err("the kubernetes plugin knows its clients' namespaces only with `pods verified` (CoreDNS's autopath does nothing without it too); add `pods verified` to the kubernetes block".to_owned()),
        })
    }

    /// Its cluster source, shared with the block (`k8s_external` answers from its zone), and
    /// with `pods verified` the namespaces of client addresses (`fairness` groups by them).
    fn offers(&self, capability: TypeId) -> bool {
        capability == TypeId::of::<ClusterSource>()
            || capability == TypeId::of::<crate::cluster::policy::ClusterNames>()
            || (capability == TypeId::of::<PodNamespaces>() && self.pods == PodMode::Verified)
    }

    /// The cluster source of its watch options: the one a running configuration holds
    /// (a reload that changes another line keeps the zone and its watches), or a new one.
    fn acquire<'a>(&'a self, ctx: AcquireCtx<'a>) -> AcquireFuture<'a> {
        Box::pin(async move {
            let failed = |source: Box<dyn std::error::Error + Send + Sync>| AcquireError {
                plugin: "kubernetes",
                source,
            };
            let families = match ctx.metrics {
                Some(m) => Some(
                    m.families::<KubernetesMetrics>()
                        .map_err(|e| failed(Box::new(e)))?,
                ),
                None => None,
            };
            let options = self.watch_options();
            let source = ctx
                .resources
                .get_or_make(options.clone(), || ClusterSource::start(&options, families))
                .await
                .map_err(|e| failed(Box::new(e)))?;
            if !source.made {
                tracing::debug!(zones = %self.zones.join(" "), "kubernetes: keeping the running cluster source");
            }
            let mut offered = Capabilities::default();
            offered.offer(Arc::new(Arc::new(OwnEndpointOf {
                source: source.value.clone(),
                ips: crate::cluster::self_ips_from_env(),
            }) as Arc<dyn OwnEndpoint>));
            // Who a client is, for `fairness`: only the pod index of `pods verified` knows.
            if self.pods == PodMode::Verified {
                offered.offer(Arc::new(PodNamespaces(Arc::new(ClientsOf {
                    source: source.value.clone(),
                }))));
            }
            // The names its zone answers, for `dnspolicy` (every other name is "outside").
            let names = |reverse: bool| {
                self.zones
                    .iter()
                    .filter(|z| crate::corefile::is_reverse_zone(z) == reverse)
                    .filter_map(|z| hickory_proto::rr::Name::from_ascii(z).ok())
                    .collect()
            };
            offered.offer(Arc::new(crate::cluster::policy::ClusterNames {
                zones: names(false),
                reverse_zones: names(true),
            }));
            offered.offer(Arc::new(ClusterFamilies(Arc::new(FamiliesOf {
                source: source.value.clone(),
            }))));
            offered.offer(source.value);
            Ok(offered)
        })
    }

    /// The plugin over the cluster source it acquired.
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let Some(source) = ctx.capabilities.get::<ClusterSource>() else {
            return Built::Nothing;
        };
        // What the answerer keeps with zone entries, shown in the kubernetes families.
        let families = ctx.metrics.and_then(|m| m.families::<KubernetesMetrics>().ok());
        use super::answer::kept::{DEFAULT_KEPT_BYTES, KeptBudget, KeptChange};
        let observe = families.map(|f| {
            Box::new(move |change| match change {
                KeptChange::Used(d) => f.kept_names.add(d),
                KeptChange::Limit(d) => f.kept_names_limit.add(d),
            }) as Box<dyn Fn(KeptChange) + Send + Sync>
        });
        let budget = KeptBudget::new(DEFAULT_KEPT_BYTES, observe);
        let mut plugin = super::Kubernetes::new(self, source, crate::cluster::self_ips_from_env(), budget)
            .with_notifier(ctx.capabilities.get::<crate::plugin::kit::Notifier>());
        if self.topology
            && let Some(m) = ctx
                .metrics
                .and_then(|m| m.families::<super::metrics::TopologyMetrics>().ok())
        {
            plugin = plugin.with_topology_metrics(super::metrics::TopologyCounters::of(&m));
        }
        if let Some(m) = ctx
            .metrics
            .and_then(|m| m.families::<super::metrics::TransferMetrics>().ok())
        {
            plugin.transfer_counts = Some(super::metrics::TransferCounters::of(&m));
        }
        Built::Plugin(Arc::new(plugin))
    }
}

/// Whether this server's own address (`POD_IP`) is a ready endpoint of a Service, from the
/// zone its watches keep (SIGTERM's drain reads it).
struct OwnEndpointOf {
    source: Arc<ClusterSource>,
    ips: Vec<std::net::IpAddr>,
}

impl OwnEndpoint for OwnEndpointOf {
    /// `None` without `POD_IP`, from manifests (nothing watches the cluster), or while a watch
    /// is failing or has not listed yet: only a healthy watch's "not listed" is believed.
    fn listed(&self) -> Option<bool> {
        if self.ips.is_empty() || !self.source.sync_state()?.is_healthy() {
            return None;
        }
        let zone = self.source.zone();
        Some(
            self.ips
                .iter()
                .any(|ip| zone.reverse(ip).iter().any(|owner| !owner.cluster_ip)),
        )
    }
}

/// The namespaces of client addresses, from the pod index of `pods verified`.
struct ClientsOf {
    source: Arc<ClusterSource>,
}

impl ClientDirectory for ClientsOf {
    fn namespace_of(&self, client: std::net::IpAddr) -> Option<Arc<str>> {
        self.source.zone().pod_namespace(client)
    }
}

/// Whether any Service has an IPv6 address, from the zone (`noaaaa auto` reads it).
struct FamiliesOf {
    source: Arc<ClusterSource>,
}

impl ServiceFamilies for FamiliesOf {
    /// `None` until the zone has synced: an unsynced zone's "no IPv6" is not believed.
    fn has_ipv6(&self) -> Option<bool> {
        let zone = self.source.zone();
        zone.is_synced().then(|| zone.has_ipv6_service())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::{Corefile, parse_zone_key};
    use std::time::Duration;

    /// kubeadm's default Corefile, as shipped in `config/Corefile`.
    const KUBEADM: &str = include_str!("../../../config/Corefile");

    /// Parses the first `kubernetes` directive of `corefile` with its block's zones.
    fn parse_corefile(corefile: &str) -> Result<KubernetesConfig, CorefileError> {
        let cf = Corefile::parse_str(corefile, Path::new("/etc/coredns/Corefile"))?;
        let block = &cf.blocks[0];
        let zones: Vec<String> = block
            .keys
            .iter()
            .map(|k| parse_zone_key(k).unwrap().zone)
            .collect();
        let d = block
            .directives
            .iter()
            .find(|d| d.name.text == "kubernetes")
            .unwrap();
        parse(d, &zones, Path::new("/etc/coredns"))
    }

    /// `kubernetes cluster.local {` + `body` + `}` in a `.:53` block: the options start at line 3.
    fn parse_opts(body: &str) -> Result<KubernetesConfig, CorefileError> {
        parse_corefile(&format!(
            ".:53 {{\n kubernetes cluster.local {{\n{body}\n }}\n}}\n"
        ))
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn kubeadm_stanza() {
        let c = parse_corefile(KUBEADM).unwrap();
        assert_eq!(
            c.zones,
            strings(&["cluster.local.", "in-addr.arpa.", "ip6.arpa."])
        );
        assert_eq!(c.pods, PodMode::Insecure);
        assert_eq!(c.ttl, 30);
        assert_eq!(c.fallthrough, Some(strings(&["in-addr.arpa.", "ip6.arpa."])));
        assert_eq!(c.source, ApiSource::InCluster);
        assert_eq!(c.startup_timeout, Duration::from_secs(5));
        assert!(c.namespaces.is_empty() && c.labels.is_none() && c.tls.is_none());
    }

    #[test]
    fn defaults_and_zones() {
        let c = parse_corefile(".:53 {\n kubernetes CLUSTER.local. 10.0.0.0/8 cluster.local\n}\n").unwrap();
        assert_eq!(c.zones, strings(&["cluster.local.", "10.in-addr.arpa."]));
        assert_eq!(
            (c.ttl, c.pods, c.fallthrough.clone(), c.has_block_defaults()),
            (5, PodMode::Disabled, None, true)
        );
        // Without arguments, the server block's zones.
        let c = parse_corefile("cluster.local:53 in-addr.arpa:53 {\n kubernetes\n}\n").unwrap();
        assert_eq!(c.zones, strings(&["cluster.local.", "in-addr.arpa."]));
        let c = parse_corefile(".:53 {\n kubernetes {\n }\n}\n").unwrap();
        assert_eq!(c.zones, strings(&["."]));
        // One-line block.
        let c = parse_corefile(".:53 {\n kubernetes cluster.local { pods verified }\n}\n").unwrap();
        assert_eq!(c.pods, PodMode::Verified);
    }

    impl KubernetesConfig {
        fn has_block_defaults(&self) -> bool {
            let d = KubernetesConfig::default();
            (self.source == d.source)
                && self.tls == d.tls
                && self.namespaces == d.namespaces
                && !self.endpoint_pod_names
                && !self.noendpoints
                && !self.ignore_empty_service
                && self.startup_timeout == d.startup_timeout
                && self.apiserver_qps.is_none()
                && self.apiserver_burst.is_none()
                && self.apiserver_max_inflight.is_none()
        }
    }

    #[test]
    fn every_option() {
        let c = parse_opts(
            "  endpoint_pod_names\n  noendpoints\n  ignore empty_service\n  namespaces default KUBE-system default\n  labels app=dns, tier in (a, b)\n  ttl 0\n  fallthrough\n  startup_timeout 1m30s\n  apiserver_qps 50.5\n  apiserver_burst 100\n  apiserver_max_inflight 0\n  tls /c.crt k.key ca.crt\n  endpoint https://10.0.0.1:6443",
        )
        .unwrap();
        assert!(c.endpoint_pod_names && c.noendpoints && c.ignore_empty_service);
        assert_eq!(c.namespaces, strings(&["default", "kube-system"]));
        assert_eq!(c.labels.as_deref(), Some("app=dns, tier in (a, b)"));
        assert_eq!(c.ttl, 0);
        assert_eq!(c.fallthrough, Some(vec![]));
        assert_eq!(c.startup_timeout, Duration::from_secs(90));
        assert_eq!(
            (c.apiserver_qps, c.apiserver_burst, c.apiserver_max_inflight),
            (Some(50.5), Some(100), Some(0))
        );
        // tls: relative to the Corefile's directory, as manifests; absolute paths kept.
        assert_eq!(
            c.tls,
            Some((
                "/c.crt".into(),
                "/etc/coredns/k.key".into(),
                "/etc/coredns/ca.crt".into()
            ))
        );
        assert_eq!(c.source, ApiSource::Endpoint("https://10.0.0.1:6443".into()));
        let c = parse_opts("  namespace_labels kubernetes.io/metadata.name notin (kube-system)\n  fallthrough Example.ORG 10.0.0.0/8").unwrap();
        assert_eq!(
            c.namespace_labels.as_deref(),
            Some("kubernetes.io/metadata.name notin (kube-system)")
        );
        assert_eq!(
            c.fallthrough,
            Some(strings(&["example.org.", "10.in-addr.arpa."]))
        );
    }

    #[test]
    fn sources() {
        let c = parse_opts("  endpoint http://127.0.0.1:8080 http://other:8080").unwrap();
        assert_eq!(c.source, ApiSource::Endpoint("http://127.0.0.1:8080".into()));
        let c = parse_opts("  endpoint 10.0.0.1:6443").unwrap();
        assert_eq!(c.source, ApiSource::Endpoint("10.0.0.1:6443".into()));
        // kubeconfig wins over endpoint; its path is kept as written.
        let c = parse_opts("  endpoint http://a:1\n  kubeconfig kube.conf ctx").unwrap();
        assert_eq!(
            c.source,
            ApiSource::Kubeconfig {
                path: "kube.conf".into(),
                context: Some("ctx".into())
            }
        );
        let c = parse_opts("  kubeconfig /root/.kube/config").unwrap();
        assert_eq!(
            c.source,
            ApiSource::Kubeconfig {
                path: "/root/.kube/config".into(),
                context: None
            }
        );
        // manifests: relative to the Corefile's directory, accumulated over lines.
        let c = parse_opts("  manifests a.yaml /abs/b.yaml\n  manifests sub/c.yaml").unwrap();
        assert_eq!(
            c.source,
            ApiSource::Manifests(vec![
                "/etc/coredns/a.yaml".into(),
                "/abs/b.yaml".into(),
                "/etc/coredns/sub/c.yaml".into()
            ])
        );
    }

    #[test]
    fn each_mistake_names_line_and_option() {
        let cases = [
            ("  foo", "Corefile:3: kubernetes: unknown property 'foo'"),
            (
                "  pods insecure\n  frob 1",
                "Corefile:4: kubernetes: unknown property 'frob'",
            ),
            (
                "  ttl 3601",
                "Corefile:3: kubernetes: ttl: 3601 is out of range: the ttl must be from 0 to 3600",
            ),
            ("  ttl -1", "Corefile:3: kubernetes: ttl: -1 is out of range"),
            (
                "  ttl 30s",
                "Corefile:3: kubernetes: ttl: '30s' is not a whole number of seconds",
            ),
            (
                "  ttl",
                "Corefile:3: kubernetes: ttl: expected a number of seconds",
            ),
            (
                "  ttl 1 2",
                "Corefile:3: kubernetes: ttl: unexpected argument '2'",
            ),
            (
                "  pods maybe",
                "Corefile:3: kubernetes: pods: 'maybe' is not one of disabled, insecure, verified",
            ),
            ("  pods", "Corefile:3: kubernetes: pods: expected one of disabled"),
            (
                "  endpoint",
                "Corefile:3: kubernetes: endpoint: expected the API server's URL",
            ),
            (
                "  endpoint ftp://x",
                "Corefile:3: kubernetes: endpoint: 'ftp://x': the API server is reached over https://",
            ),
            (
                "  endpoint https://",
                "Corefile:3: kubernetes: endpoint: 'https://' has no host",
            ),
            (
                "  kubeconfig",
                "Corefile:3: kubernetes: kubeconfig: expected a kubeconfig file",
            ),
            (
                "  kubeconfig a b c",
                "Corefile:3: kubernetes: kubeconfig: unexpected argument 'c'",
            ),
            ("  tls a b", "Corefile:3: kubernetes: tls: expected three files"),
            (
                "  namespaces",
                "Corefile:3: kubernetes: namespaces: expected one or more namespaces",
            ),
            (
                "  namespaces kube_system",
                "Corefile:3: kubernetes: namespaces: 'kube_system' is not a valid namespace name",
            ),
            (
                "  labels",
                "Corefile:3: kubernetes: labels: expected a label selector",
            ),
            (
                "  labels a=b=c",
                "Corefile:3: kubernetes: labels: 'a=b=c' is not a valid label selector",
            ),
            (
                "  namespace_labels x in",
                "Corefile:3: kubernetes: namespace_labels: 'x in' is not a valid label selector",
            ),
            (
                "  ignore",
                "Corefile:3: kubernetes: ignore: expected 'empty_service'",
            ),
            (
                "  ignore everything",
                "Corefile:3: kubernetes: ignore: cannot ignore 'everything'",
            ),
            (
                "  ignore empty_service extra",
                "Corefile:3: kubernetes: ignore: unexpected argument 'extra'",
            ),
            (
                "  noendpoints now",
                "Corefile:3: kubernetes: noendpoints: takes no arguments, but has 'now'",
            ),
            (
                "  endpoint_pod_names yes",
                "Corefile:3: kubernetes: endpoint_pod_names: takes no arguments",
            ),
            (
                "  startup_timeout soon",
                "Corefile:3: kubernetes: startup_timeout: 'soon' is not a duration",
            ),
            (
                "  startup_timeout",
                "Corefile:3: kubernetes: startup_timeout: expected a duration",
            ),
            (
                "  apiserver_qps fast",
                "Corefile:3: kubernetes: apiserver_qps: 'fast' is not a non-negative number",
            ),
            (
                "  apiserver_qps -1",
                "Corefile:3: kubernetes: apiserver_qps: '-1' is not",
            ),
            (
                "  apiserver_burst 1.5",
                "Corefile:3: kubernetes: apiserver_burst: '1.5' is not a non-negative whole number",
            ),
            (
                "  apiserver_max_inflight",
                "Corefile:3: kubernetes: apiserver_max_inflight: expected a whole number",
            ),
            (
                "  fallthrough a..b",
                "Corefile:3: kubernetes: fallthrough: zone 'a..b' has an empty label",
            ),
            (
                "  multicluster clusterset.local",
                "Corefile:3: kubernetes: multicluster: 'clusterset.local.' is not one of the plugin's zones (cluster.local.)",
            ),
            (
                "  multicluster 10.0.0.0/8",
                "Corefile:3: kubernetes: multicluster: '10.in-addr.arpa.' is a reverse zone",
            ),
            (
                "  zonal\n  noendpoints",
                "Corefile:3: kubernetes: zonal: zone-scoped names are made from endpoints, which 'noendpoints' turns off",
            ),
            ("  zonal on", "Corefile:3: kubernetes: zonal: takes no arguments"),
            (
                "  resyncperiod 10s",
                "Corefile:3: kubernetes: 'resyncperiod' was removed from CoreDNS (ignored since 1.6, an error since 1.7): delete this line",
            ),
            (
                "  upstream",
                "Corefile:3: kubernetes: 'upstream' was removed from CoreDNS",
            ),
            ("  pods {\n  }", "Corefile:3: kubernetes: pods: takes no block"),
            (
                "  namespaces a\n  namespace_labels x=y",
                "Corefile:4: kubernetes: 'namespaces' and 'namespace_labels' cannot both be set",
            ),
            (
                "  manifests",
                "Corefile:3: kubernetes: manifests: expected one or more Kubernetes YAML files",
            ),
            (
                "  manifests a.yaml\n  endpoint http://x",
                "Corefile:3: kubernetes: 'manifests' cannot be combined with 'endpoint' or 'kubeconfig'",
            ),
            (
                "  kubeconfig k\n  manifests a.yaml",
                "Corefile:4: kubernetes: 'manifests' cannot be combined",
            ),
            (
                "  manifests a.yaml\n  tls a b c",
                "Corefile:3: kubernetes: 'manifests' cannot be combined with 'tls'",
            ),
        ];
        for (body, want) in cases {
            let e = parse_opts(body).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("/etc/coredns/{want}")),
                "{body:?}:\n  got  {e}\n  want {want}"
            );
        }
    }

    #[test]
    fn zone_mistakes() {
        let cases = [
            (
                ".:53 {\n kubernetes in-addr.arpa ip6.arpa\n}\n",
                "Corefile:2: kubernetes: needs at least one zone that is not a reverse zone",
            ),
            (
                "in-addr.arpa {\n kubernetes\n}\n",
                "Corefile:2: kubernetes: needs at least one zone that is not a reverse zone",
            ),
            (
                "10.0.0.0/8 {\n\n kubernetes\n}\n",
                "Corefile:3: kubernetes: needs at least one zone that is not a reverse zone",
            ),
            (
                ".:53 {\n kubernetes \"\"\n}\n",
                "Corefile:2: kubernetes: a zone argument is empty",
            ),
            (
                ".:53 {\n kubernetes cluster..local\n}\n",
                "Corefile:2: kubernetes: zone 'cluster..local' has an empty label",
            ),
            (
                ".:53 {\n kubernetes 10.0.0.0/33\n}\n",
                "Corefile:2: kubernetes: '10.0.0.0/33': an IPv4 prefix is at most 32 bits",
            ),
        ];
        for (text, want) in cases {
            let e = parse_corefile(text).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("/etc/coredns/{want}")),
                "{text:?}:\n  got  {e}\n  want {want}"
            );
        }
        let d = Corefile::parse_str(".:53 {\n kubernetes\n}\n", Path::new("Corefile"))
            .unwrap()
            .blocks[0]
            .directives[0]
            .clone();
        let e = parse(&d, &[], Path::new("")).unwrap_err().to_string();
        assert!(e.starts_with("Corefile:2: kubernetes: no zones"), "{e}");
    }
}
