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

#[cfg(test)]
mod kubernetes_answers_now {
    use hickory_proto::rr::{Name, RecordType};

    use super::{FIXTURE_YAML, handler_for};
    use crate::proto::{Question, Reply};

    /// The kubernetes plugin's `serve_now` answers every kind of question exactly as `serve` does: the same reply, the
    /// same writer, the same replay plan; and a fallthrough reaches the next plugin.
    #[tokio::test]
    async fn answering_without_a_future_is_answering_with_one() {
        // k3s's shape: `hosts` (falling through) before `kubernetes`; `acl` in front.
        let corefile = ".:53 {\n acl {\n  block type HINFO\n }\n hosts {\n  10.9.9.9 node-1.example.\n  fallthrough\n }\n kubernetes cluster.local in-addr.arpa ip6.arpa {\n  pods insecure\n  fallthrough in-addr.arpa ip6.arpa\n }\n whoami\n}\n";
        let handler = handler_for(corefile, FIXTURE_YAML).expect("handler");
        let router = handler.router();
        let chain = &router.blocks[0].chain;
        let asked = [
            ("svc1.testns.svc.cluster.local.", RecordType::A),
            ("SVC1.testns.svc.Cluster.Local.", RecordType::A),
            ("svc1.testns.svc.cluster.local.", RecordType::AAAA),
            ("hdls.testns.svc.cluster.local.", RecordType::A),
            ("_http._tcp.svc1.testns.svc.cluster.local.", RecordType::SRV),
            ("_http._tcp.hdls.testns.svc.cluster.local.", RecordType::SRV),
            ("ext.testns.svc.cluster.local.", RecordType::A),
            ("ext-internal.testns.svc.cluster.local.", RecordType::A),
            ("1.10.96.10.in-addr.arpa.", RecordType::PTR),
            ("9.9.9.9.in-addr.arpa.", RecordType::PTR),
            ("nothing.testns.svc.cluster.local.", RecordType::A),
            ("cluster.local.", RecordType::SOA),
            ("dns-version.cluster.local.", RecordType::TXT),
            ("10-0-0-1.testns.pod.cluster.local.", RecordType::A),
            ("example.com.", RecordType::A),
            ("node-1.example.", RecordType::A),
            ("svc1.testns.svc.cluster.local.", RecordType::HINFO),
        ];
        for (name, qtype) in asked {
            let q = Question::new(Name::from_ascii(name).expect("name"), qtype);
            let now = chain.serve(&q).await;
            let awaited = chain.serve_awaiting(&q).await;
            assert_eq!(now, awaited, "{name} {qtype}");
            assert!(
                !matches!(now.reply, Reply::Failed(_)),
                "{name} {qtype}: {:?}",
                now.reply
            );
        }
        // The reverse zones fall through to `whoami`, which writes the reply.
        let q = Question::new(
            Name::from_ascii("9.9.9.9.in-addr.arpa.").expect("name"),
            RecordType::PTR,
        );
        assert_eq!(chain.serve(&q).await.by, "whoami");
        let q = Question::new(
            Name::from_ascii("svc1.testns.svc.cluster.local.").expect("name"),
            RecordType::A,
        );
        assert_eq!(chain.serve(&q).await.by, "kubernetes");
        let q = Question::new(Name::from_ascii("node-1.example.").expect("name"), RecordType::A);
        assert_eq!(chain.serve(&q).await.by, "hosts");
        let q = Question::new(
            Name::from_ascii("svc1.testns.svc.cluster.local.").expect("name"),
            RecordType::HINFO,
        );
        let blocked = chain.serve(&q).await;
        assert_eq!(blocked.by, "acl");
        assert_eq!(
            blocked.reply,
            Reply::Rcode(hickory_proto::op::ResponseCode::Refused)
        );
    }
}
