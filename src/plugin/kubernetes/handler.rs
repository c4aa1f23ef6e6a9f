//! The `kubernetes` plugin's handler: owns the cluster zone for its zones and answers from it
//! through the query engine in [`crate::dns`].

use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::rr::{Name, RecordType};

use super::setup::{KubernetesConfig, PodMode};
use crate::cluster::ClusterZone;
use crate::dns::{AnswerSettings, ClusterAnswerer, Outcome, PodRecords};

/// The environment variable that names this server's own IPs (the Pod IP, from the downward
/// API), comma-separated. The NS record names the Service whose endpoints hold one of them.
pub const POD_IP_ENV: &str = "POD_IP";

/// The `kubernetes` plugin in a server block's chain.
#[derive(Debug, Clone)]
pub struct Kubernetes {
    answerer: ClusterAnswerer,
}

fn zone_name(zone: &str) -> Option<Name> {
    Name::from_ascii(zone).ok().map(|n| n.to_lowercase())
}

fn is_reverse_zone(zone: &str) -> bool {
    zone.ends_with("in-addr.arpa.") || zone.ends_with("ip6.arpa.") || zone == "arpa."
}

/// This server's own IPs, from [`POD_IP_ENV`].
pub fn self_ips_from_env() -> Vec<IpAddr> {
    std::env::var(POD_IP_ENV)
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

impl Kubernetes {
    /// The plugin for `config`, answering from `zone`.
    pub fn new(config: &KubernetesConfig, zone: Arc<ClusterZone>, self_ips: Vec<IpAddr>) -> Self {
        let zones: Vec<Name> = config.zones.iter().filter_map(|z| zone_name(z)).collect();
        let primary = config
            .zones
            .iter()
            .find(|z| !is_reverse_zone(z))
            .and_then(|z| zone_name(z))
            .unwrap_or_else(Name::root);
        let settings = AnswerSettings {
            zones,
            primary,
            ttl: config.ttl,
            pods: match config.pods {
                PodMode::Disabled => PodRecords::Disabled,
                PodMode::Insecure => PodRecords::Insecure,
                PodMode::Verified => PodRecords::Verified,
            },
            endpoint_pod_names: config.endpoint_pod_names,
            noendpoints: config.noendpoints,
            fallthrough: config
                .fallthrough
                .as_ref()
                .map(|zs| zs.iter().filter_map(|z| zone_name(z)).collect()),
            ignore_empty_service: config.ignore_empty_service,
            namespaces: config.namespaces.iter().map(|n| n.to_ascii_lowercase()).collect(),
            self_ips,
        };
        Self {
            answerer: ClusterAnswerer::new(settings, zone),
        }
    }

    /// The zone this plugin answers from.
    pub fn zone(&self) -> &Arc<ClusterZone> {
        self.answerer.zone()
    }

    /// Answers `qname` / `qtype`, or hands it on ([`Outcome::Fallthrough`]).
    pub fn serve(&self, qname: &Name, qtype: RecordType) -> Outcome {
        self.answerer.answer(qname, qtype)
    }
}
