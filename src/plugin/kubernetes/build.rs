//! How a configured `kubernetes` directive becomes its plugin, and what it checks against its block
//! and offers it: the glue between the Corefile syntax (`setup.rs`) and the query path
//! (`handler.rs`), kept apart so neither of them imports the other.

use super::options::PodMode;
use super::setup::KubernetesConfig;
use crate::chain::{
    AcquireCtx, AcquireError, AcquireFuture, BuildCtx, Built, Capabilities, Configured, NamedFile,
    OwnEndpoint,
};
use crate::cluster::ClusterSource;
use crate::cluster::metrics::KubernetesMetrics;
use crate::plugin::kit::{ClientDirectory, ClusterFamilies, PodNamespaces, ServiceFamilies};
use std::any::TypeId;
use std::sync::Arc;

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
