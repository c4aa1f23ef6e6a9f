//! Ready-made servers for fuzz targets and benchmarks: the conformance fixture's cluster behind
//! the kubeadm-style `kubernetes` stanza, as a [`DnsHandler`] that answers wire bytes without
//! sockets. Not part of the server; kept in the library so every harness builds the same thing.

use std::path::Path;
use std::sync::Arc;

use crate::chain::BuildCtx;
use crate::cluster::{ClusterZone, manifests};
use crate::config::Config;
use crate::corefile::Corefile;
use crate::plugin::kubernetes::setup::KubernetesConfig;
use crate::plugin::registry::build_chain;
use crate::server::observe::Observers;
use crate::server::{BlockRoute, DnsHandler, Router, router_cell};

/// The conformance fixture (Namespaces, Services, EndpointSlices, Pods).
pub const FIXTURE_YAML: &str = include_str!("../tests/data/conformance-fixture.yaml");

/// The kubeadm profile's server block, without a forwarder.
pub const KUBEADM_BLOCK: &str = ".:53 {\n kubernetes cluster.local in-addr.arpa ip6.arpa {\n  pods insecure\n  fallthrough in-addr.arpa ip6.arpa\n  ttl 30\n }\n}\n";

/// A handler over `yaml` (Kubernetes objects) with the server block `corefile`.
pub fn handler_for(corefile: &str, yaml: &str) -> Result<DnsHandler, String> {
    handler_with_zone(corefile, yaml, true).map(|(h, _)| h)
}

/// [`handler_for`], with the answer memo on or off, and the zone it answers from (for tests
/// that change it).
pub fn handler_with_zone(
    corefile: &str,
    yaml: &str,
    memo: bool,
) -> Result<(DnsHandler, Arc<ClusterZone>), String> {
    let zone = zone_from_yaml(yaml)?;
    Ok((handler_on_zone(corefile, &zone, memo)?, zone))
}

/// A synced zone holding the objects of `yaml`.
pub fn zone_from_yaml(yaml: &str) -> Result<Arc<ClusterZone>, String> {
    let zone = Arc::new(ClusterZone::new());
    let mut report = manifests::LoadReport::default();
    manifests::load_str(yaml, Path::new("fixture.yaml"), &zone, &mut report).map_err(|e| e.to_string())?;
    zone.set_synced(true);
    Ok(zone)
}

/// A handler with the server block `corefile` over an existing `zone`: two handlers on one zone
/// give the same SOA serial, so their responses can be compared byte for byte.
pub fn handler_on_zone(corefile: &str, zone: &Arc<ClusterZone>, memo: bool) -> Result<DnsHandler, String> {
    let path = Path::new("/dev/null/Corefile");
    let cf = Corefile::parse_str(corefile, path).map_err(|e| e.to_string())?;
    let config = Config::from_corefile(&cf, path, 53).map_err(|e| e.to_string())?;
    let mut blocks = Vec::new();
    for block in &config.blocks {
        let ctx = BuildCtx {
            first_zone: block
                .zones
                .first()
                .and_then(|z| hickory_proto::rr::Name::from_ascii(z).ok())
                .map(|n| n.to_lowercase())
                .unwrap_or_else(hickory_proto::rr::Name::root),
            server: "dns://:53",
            metrics: None,
            source: block
                .get::<KubernetesConfig>()
                .map(|_| zone.clone() as Arc<dyn std::any::Any + Send + Sync>),
            hostname: "localhost",
        };
        let (chain, plugins) = build_chain(&block.plugins, &ctx);
        let zones = block
            .zones
            .iter()
            .map(|z| hickory_proto::rr::Name::from_ascii(z).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        blocks.push(BlockRoute {
            zones,
            chain,
            udp_payload: crate::proto::MAX_UDP_PAYLOAD,
            view: None,
            observers: Observers {
                metrics: None,
                plugins,
            },
        });
    }
    let router = if memo {
        Router::new(blocks)
    } else {
        Router {
            blocks,
            ..Router::default()
        }
    };
    Ok(DnsHandler::new(router_cell(router)))
}

/// The conformance fixture behind [`KUBEADM_BLOCK`].
pub fn fixture_handler() -> Result<DnsHandler, String> {
    handler_for(KUBEADM_BLOCK, FIXTURE_YAML)
}
