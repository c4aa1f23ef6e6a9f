//! Ready-made servers for fuzz targets, benchmarks and tests: the conformance fixture's cluster
//! behind the kubeadm-style `kubernetes` stanza, as a [`DnsHandler`] that answers wire bytes
//! without sockets. Built by the server's own builder ([`crate::app::build::build`]), with
//! the cluster zone given to every `kubernetes` block, so a handler answers exactly as the
//! server with the same Corefile would (its `bufsize`, `view`, metrics and memo included).
//! Not part of the server; kept in the library so every harness builds the same thing.

use std::path::Path;
use std::sync::Arc;

use crate::app::build::{BuildEnv, build};
use crate::chain::Resources;
use crate::cluster::{ClusterSource, ClusterZone, manifests};
use crate::config::Config;
use crate::corefile::Corefile;
use crate::server::{DnsHandler, router_cell};
use crate::telemetry::DnsMetrics;

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

/// [`handler_with_zone`], with the metrics its plugins count into (a registry of its own).
pub fn handler_with_metrics(
    corefile: &str,
    yaml: &str,
    memo: bool,
) -> Result<(DnsHandler, Arc<ClusterZone>, DnsMetrics), String> {
    let zone = zone_from_yaml(yaml)?;
    let metrics = DnsMetrics::new().map_err(|e| e.to_string())?;
    let handler = build_handler(corefile, &zone, memo, &metrics)?;
    Ok((handler, zone, metrics))
}

/// A synced zone holding the objects of `yaml`.
pub fn zone_from_yaml(yaml: &str) -> Result<Arc<ClusterZone>, String> {
    let zone = Arc::new(ClusterZone::new());
    let mut report = manifests::LoadReport::default();
    manifests::load_str(yaml, Path::new("fixture.yaml"), &zone, &mut report).map_err(|e| e.to_string())?;
    zone.set_synced(true);
    Ok(zone)
}

/// A handler with the Corefile `corefile` over an existing `zone` (every `kubernetes` block
/// answers from it): two handlers on one zone give the same SOA serial, so their responses can
/// be compared byte for byte. The handler serves the first listen address the Corefile has
/// (its only one, in the harness's Corefiles); relative paths are read from the working
/// directory.
pub fn handler_on_zone(corefile: &str, zone: &Arc<ClusterZone>, memo: bool) -> Result<DnsHandler, String> {
    let metrics = DnsMetrics::new().map_err(|e| e.to_string())?;
    build_handler(corefile, zone, memo, &metrics)
}

/// The handler of [`handler_on_zone`], counting into `metrics`.
fn build_handler(
    corefile: &str,
    zone: &Arc<ClusterZone>,
    memo: bool,
    metrics: &DnsMetrics,
) -> Result<DnsHandler, String> {
    let path = Path::new("Corefile");
    let cf = Corefile::parse_str(corefile, path).map_err(|e| e.to_string())?;
    let config = Config::from_corefile(&cf, path, 53).map_err(|e| e.to_string())?;
    let resources = Resources::default().providing(Arc::new(ClusterSource::fixed(zone.clone())));
    let env = BuildEnv {
        resources: &resources,
        metrics: Some(metrics),
        memo,
        memo_metrics: None,
        hostname: "localhost",
    };
    // Nothing the build awaits needs a runtime here: the one resource it acquires is given.
    let generation = futures::executor::block_on(build(config, &env)).map_err(|e| e.to_string())?;
    let router = generation
        .routers
        .into_values()
        .next()
        .ok_or("the Corefile has no server block")?;
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

#[cfg(test)]
mod every_plugin_answers_now_as_it_answers_later {
    use hickory_proto::rr::{DNSClass, Name, RecordType};

    use super::{FIXTURE_YAML, handler_for};
    use crate::plugin::registry::PLUGINS;
    use crate::proto::Question;

    /// Each plugin that answers without a future ([`crate::chain::Plugin::serve_now`]) first in
    /// a chain, with the kubernetes plugin after it where the registry's order allows, then
    /// `whoami`: its lines.
    const FIRST: &[(&str, &str)] = &[
        ("cancel", "cancel 2s"),
        ("rrl", "rrl cluster.local {\n  responses-per-second 1000\n }"),
        ("fairness", "fairness {\n  questions 1000 1000\n }"),
        ("local", "local"),
        ("any", "any"),
        ("chaos", "chaos v1 alice bob"),
        ("acl", "acl {\n  block type HINFO\n  filter net 10.0.0.0/8\n }"),
        ("dnspolicy", "dnspolicy {\n  unmapped deny\n }"),
        ("dnspolicy", "dnspolicy {\n  unmapped allow\n }"),
        ("transfer", "transfer cluster.local {\n  to *\n }"),
        ("hosts", "hosts {\n  10.9.9.9 node-1.example.\n  fallthrough\n }"),
        ("k8s_external", "k8s_external example.org"),
        ("kubernetes", ""),
        ("noaaaa", "noaaaa always"),
        ("whoami", ""),
    ];

    /// The kubernetes plugin's lines in those chains.
    const KUBERNETES: &str = " kubernetes cluster.local in-addr.arpa ip6.arpa {\n  pods insecure\n  fallthrough in-addr.arpa ip6.arpa\n }\n";

    /// The questions: every kind of cluster name, the reverse zones, outside names, a
    /// transfer, `localhost`, ANY, AAAA, and a CH question.
    fn asked() -> Vec<Question> {
        let mut out: Vec<Question> = [
            ("svc1.testns.svc.cluster.local.", RecordType::A),
            ("svc1.testns.svc.cluster.local.", RecordType::AAAA),
            ("svc1.testns.svc.cluster.local.", RecordType::ANY),
            ("svc1.testns.svc.cluster.local.", RecordType::HINFO),
            ("hdls.testns.svc.cluster.local.", RecordType::A),
            ("_http._tcp.svc1.testns.svc.cluster.local.", RecordType::SRV),
            ("ext.testns.svc.cluster.local.", RecordType::A),
            ("1.10.96.10.in-addr.arpa.", RecordType::PTR),
            ("nothing.testns.svc.cluster.local.", RecordType::A),
            ("cluster.local.", RecordType::SOA),
            ("cluster.local.", RecordType::AXFR),
            ("10-0-0-1.testns.pod.cluster.local.", RecordType::A),
            ("svc1.testns.example.org.", RecordType::A),
            ("example.com.", RecordType::A),
            ("node-1.example.", RecordType::A),
            ("localhost.", RecordType::A),
            ("1.0.0.127.in-addr.arpa.", RecordType::PTR),
        ]
        .into_iter()
        .map(|(n, t)| Question::new(Name::from_ascii(n).expect("name"), t))
        .collect();
        let mut ch = Question::new(Name::from_ascii("version.bind.").expect("name"), RecordType::TXT);
        ch.qclass = DNSClass::CH;
        out.push(ch);
        out
    }

    /// Issue 43: every plugin that implements `serve_now` answers each question exactly as its
    /// `serve` does: the same reply, the same writer, the same replay plan.
    #[tokio::test]
    async fn serve_now_is_serve_for_every_plugin_first_in_a_chain() {
        // Every plugin folder whose code implements `serve_now` is in the list.
        let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/plugin");
        for dir in std::fs::read_dir(&plugins).expect("src/plugin") {
            let dir = dir.expect("an entry").path();
            let Ok(files) = std::fs::read_dir(&dir) else {
                continue;
            };
            let name = dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            for file in files {
                let text = std::fs::read_to_string(file.expect("a file").path()).unwrap_or_default();
                if text.contains("fn serve_now(") {
                    assert!(
                        FIRST.iter().any(|(d, _)| *d == name),
                        "src/plugin/{name} implements serve_now but is not in FIRST"
                    );
                }
            }
        }
        for (directive, lines) in FIRST {
            assert!(PLUGINS.iter().any(|e| e.name == *directive), "{directive}");
            // The kubernetes plugin after it, where the registry puts it after.
            let at = |d: &str| PLUGINS.iter().position(|e| e.name == d);
            let own = match *directive {
                "kubernetes" => KUBERNETES.to_owned(),
                "whoami" => String::new(),
                _ if at(directive) < at("kubernetes") => format!(" {lines}\n{KUBERNETES}"),
                _ => format!(" {lines}\n"),
            };
            let corefile = format!(".:53 {{\n{own} whoami\n}}\n");
            let handler = handler_for(&corefile, FIXTURE_YAML).expect(directive);
            let router = handler.router();
            let chain = &router.blocks[0].chain;
            assert_eq!(chain.plugins()[0].name(), *directive, "{corefile}");
            for q in asked() {
                let now = chain.serve(&q).await;
                let awaited = chain.serve_awaiting(&q).await;
                assert_eq!(now, awaited, "{directive}: {} {} {}", q.name, q.qclass, q.qtype);
            }
        }
    }
}
