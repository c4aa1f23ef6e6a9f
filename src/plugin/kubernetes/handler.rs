//! The `kubernetes` plugin's handler: owns the cluster zone for its zones and answers from it
//! through the query engine in [`super::answer`]. An ExternalName whose target is outside the
//! cluster is chased through the rest of the chain when a plugin after this one may reach an
//! upstream: the CNAME, then the target's records, with the target's rcode (RFC 6604).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::rr::{Name, Record};

use super::answer::answerer::name_under;
use super::answer::kept::KeptBudget;
use super::answer::pick::Reason;
use super::answer::{AnswerSettings, ClusterAnswerer, Outcome, PodRecords};
use super::config::KubernetesConfig;
use super::metrics::{TopologyCounters, TransferCounters};
use super::options::PodMode;
use crate::chain::{
    Capabilities, Chain, ClientClasses, MetadataSource, Next, Now, Plugin, Replay, Replayed, ReplyFuture,
    Scope, StartupWait,
};
use crate::cluster::{ClusterSource, ClusterZone};
use crate::corefile::is_reverse_zone;
use crate::plugin::kit::{Journal, Notifier, SearchPaths, ZoneTransfer};
use crate::proto::{ChangeCounter, QueryMetadata, Question, Reply};

/// The `kubernetes` plugin in a server block's chain.
#[derive(Debug, Clone)]
pub struct Kubernetes {
    answerer: ClusterAnswerer,
    /// Its zone and what fills it; `/ready` waits for its first lists.
    source: Arc<ClusterSource>,
    /// With `pods verified`: the cluster domain its clients' search paths are made under,
    /// and `svc.<domain>` under it (built once: every autopath walk starts from them).
    search_domain: Option<(Name, Name)>,
    /// `startup_timeout`: how long a new configuration waits for the first lists.
    startup_timeout: Duration,
    /// `cluster_dns_topology_answers_total` (with `topology` and metrics).
    topology_answers: Option<TopologyCounters>,
    /// The block's NOTIFY sender (`transfer` with `to` addresses), told when the primary zone
    /// changes ([`Plugin::start`]).
    notifier: Option<Arc<Notifier>>,
    /// Held by the plugin alone: its NOTIFY task ends once this has no strong holder.
    alive: Arc<()>,
    /// The last version of its primary zone a transfer gave out (one copy of the zone, kept
    /// once a secondary transfers it) and the journal of the steps between transferred
    /// versions, for IXFR. Written under its lock by transfers only.
    pub(super) transfers: Arc<std::sync::Mutex<(Option<Vec<Record>>, Journal)>>,
    /// `cluster_dns_kubernetes_transfers_total` (with metrics).
    pub(super) transfer_counts: Option<TransferCounters>,
}

/// How often the NOTIFY task looks at the zone's serial: a burst of changes is one NOTIFY (the
/// serial itself moves at most once a second, the Unix time of the last change).
const NOTIFY_EVERY: Duration = Duration::from_secs(1);

fn zone_name(zone: &str) -> Option<Name> {
    Name::from_ascii(zone).ok().map(|n| n.to_lowercase())
}

impl Kubernetes {
    /// The plugin for `config`, answering from the zone of `source`.
    pub fn new(
        config: &KubernetesConfig,
        source: Arc<ClusterSource>,
        self_ips: Vec<IpAddr>,
        kept: Arc<KeptBudget>,
    ) -> Self {
        let zones: Vec<Name> = config.zones.iter().filter_map(|z| zone_name(z)).collect();
        let reverse_zones: Vec<Name> = config
            .zones
            .iter()
            .filter(|z| is_reverse_zone(z))
            .filter_map(|z| zone_name(z))
            .collect();
        let primary = config
            .zones
            .iter()
            .find(|z| !is_reverse_zone(z))
            .and_then(|z| zone_name(z))
            .unwrap_or_else(Name::root);
        let search_domain = if config.pods == PodMode::Verified {
            name_under(&["svc"], &primary).map(|svc| (primary.clone(), svc))
        } else {
            None
        };
        let settings = AnswerSettings {
            zones,
            reverse_zones,
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
            multicluster: config.multicluster.iter().filter_map(|z| zone_name(z)).collect(),
            zonal: config.zonal,
            topology: config.topology,
        };
        Self {
            answerer: ClusterAnswerer::new(settings, source.zone().clone()).with_kept_budget(kept),
            source,
            search_domain,
            startup_timeout: config.startup_timeout,
            topology_answers: None,
            notifier: None,
            alive: Arc::new(()),
            transfers: Arc::default(),
            transfer_counts: None,
        }
    }

    /// The same plugin counting its topology-aware answers into `counters`.
    #[must_use]
    pub fn with_topology_metrics(mut self, counters: TopologyCounters) -> Self {
        self.topology_answers = Some(counters);
        self
    }

    /// The same plugin telling `notifier` (the block's `transfer`) when its zone changes.
    #[must_use]
    pub fn with_notifier(mut self, notifier: Option<Arc<Notifier>>) -> Self {
        self.notifier = notifier;
        self
    }

    /// Its answerer (what a name answers is decided there).
    pub(super) fn answerer(&self) -> &ClusterAnswerer {
        &self.answerer
    }

    /// The zone this plugin answers from.
    pub fn zone(&self) -> &Arc<ClusterZone> {
        self.answerer.zone()
    }

    /// Answers `q`, or hands it on ([`Outcome::Fallthrough`]); a probe's NXDOMAIN comes
    /// without its SOA.
    pub fn answer(&self, q: &Question) -> Outcome {
        self.answerer.answer_as(&q.name, q.qtype, q.probe)
    }

    /// [`Kubernetes::answer`] for `q`'s client (`topology`) and through its DNS policy
    /// (`dnspolicy`'s view): an answer made for it alone is marked so on `next` (never replayed
    /// or cached for another client), and counted; one made through a view is never cached
    /// (the memo replays it to the view's class only).
    fn serve_client(&self, q: &Question, next: &Next<'_>) -> Outcome {
        let view = q.view();
        // A name of its zones (answered, or passed on from them) is made through the view;
        // any other name is none of its business, and a cache may keep what answers it.
        if view.is_some() && self.answerer.matching_zone(&q.name).is_some() {
            next.depends_on_visibility();
        }
        let (outcome, used) =
            self.answerer
                .answer_through(&q.name, q.qtype, q.probe, Some(q.client.ip()), view);
        if used.dependent {
            match used.class {
                // The same for every client of its place: replayed to those alone.
                Some(class) => next.for_clients_of(class, used.reason.map_or(0, Reason::note)),
                None => next.for_this_client_only(),
            }
        }
        if let (Some(reason), Some(c)) = (used.reason, &self.topology_answers) {
            c.count(reason);
        }
        outcome
    }
}

impl Plugin for Kubernetes {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    /// Its answers are a function of the question and the cluster zone. (A chased ExternalName
    /// also visits the upstream plugins, whose declarations then keep it from being replayed.)
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Same
    }

    /// A replayed topology-aware answer (made for the client's place, `Next::for_clients_of`)
    /// counts under the reason it was made for.
    fn replayed(&self, replay: Replayed) {
        if let (Some(reason), Some(c)) = (Reason::from_note(replay.note), &self.topology_answers) {
            c.count(reason);
        }
    }

    /// With a NOTIFY sender: tells the block's secondaries of its primary zone once it has
    /// synced, then whenever its SOA serial moved, looked at once a second (a burst
    /// of changes is one NOTIFY). The task ends with the plugin (its configuration).
    fn start(&self, _chain: &Chain) {
        let Some(notifier) = self.notifier.clone() else {
            return;
        };
        let alive = Arc::downgrade(&self.alive);
        let zone = self.zone().clone();
        let primary = self.answerer.settings().primary.clone();
        tokio::spawn(async move {
            let mut told: Option<u32> = None;
            let mut tick = tokio::time::interval(NOTIFY_EVERY);
            // Bounded by the plugin: once it is dropped, the next tick ends the task.
            loop {
                tick.tick().await;
                if alive.strong_count() == 0 {
                    break;
                }
                if !zone.is_synced() {
                    continue;
                }
                let serial = zone.serial();
                if told != Some(serial) {
                    notifier.0.zone_changed(&primary);
                    told = Some(serial);
                }
            }
        });
    }

    fn zones(&self) -> Vec<Arc<dyn ChangeCounter>> {
        vec![self.zone().clone() as Arc<dyn ChangeCounter>]
    }

    /// Until every watch has its first list in, each one waiting, with its last error.
    fn not_ready(&self) -> Vec<String> {
        self.source
            .waiting()
            .into_iter()
            .map(|w| format!("kubernetes: {w}"))
            .collect()
    }

    /// A name about one Service or one address is made from that scope's data only.
    fn scope(&self, q: &Question) -> Scope {
        self.answerer.scope_of(&q.name).map_or(Scope::Whole, Scope::Key)
    }

    /// Its search paths (with `pods verified`: what `autopath @kubernetes` walks), its zone
    /// for `transfer`, its metadata, the class of clients of its topology-aware answers, and
    /// CoreDNS's `startup_timeout` (the server waits this long for the first lists before
    /// serving; each watch's own manifests are in at once).
    fn offers(self: Arc<Self>) -> Capabilities {
        let offers = Capabilities::default()
            .with(self.clone() as Arc<dyn ZoneTransfer>)
            .with(self.clone() as Arc<dyn MetadataSource>)
            .with(self.clone() as Arc<dyn ClientClasses>)
            .with(StartupWait(self.startup_timeout));
        if self.search_domain.is_some() {
            offers.with(self as Arc<dyn SearchPaths>)
        } else {
            offers
        }
    }

    /// Everything but an ExternalName whose target the rest of the chain must look up.
    fn serve_now(&self, q: &Question, next: &Next<'_>) -> Now {
        match self.serve_client(q, next) {
            Outcome::Answer(answer) if answer.chase_target.is_some() && next.awaits_io() => Now::Later,
            Outcome::Answer(answer) => Now::Reply(Reply::Authoritative(answer)),
            Outcome::Fallthrough => Now::Pass,
        }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            match self.serve_client(q, &next) {
                Outcome::Answer(answer) => match answer.chase_target.clone() {
                    Some(target) if next.awaits_io() => next.chase(answer, target, q).await,
                    _ => Reply::Authoritative(answer),
                },
                Outcome::Fallthrough => next.serve(q).await,
            }
        })
    }
}

impl ClientClasses for Kubernetes {
    /// With `topology`: the client's place class (its pod's node and zone), which its
    /// topology-aware answers are the same for.
    fn client_class(&self, client: IpAddr) -> Option<u64> {
        if self.answerer.settings().topology {
            self.zone().client_place_class(client)
        } else {
            None
        }
    }
}

impl ZoneTransfer for Kubernetes {
    /// Its primary zone, whole, for `transfer`.
    fn zone_transfer(&self, zone: &Name) -> Option<Vec<Record>> {
        self.transfer(zone)
    }

    /// The differences since a transferred version of its primary zone (IXFR).
    fn zone_changes(&self, zone: &Name, held: u32) -> Option<Vec<Record>> {
        self.transfer_changes(zone, held)
    }
}

impl MetadataSource for Kubernetes {
    /// CoreDNS's `kubernetes/*` labels; the client's namespace with `pods verified` only.
    fn metadata(&self, q: &Question, md: &QueryMetadata) {
        self.publish(&q.name, q.client.ip(), self.search_domain.is_some(), md);
    }
}

/// A pod's search path, as kubelet writes it into the pod's resolv.conf: `<ns>.svc.<zone>`,
/// `svc.<zone>`, `<zone>`. Known for clients whose address the pod index gives one namespace.
impl SearchPaths for Kubernetes {
    fn search_path(&self, client: IpAddr) -> Option<Vec<Name>> {
        let (domain, svc) = self.search_domain.as_ref()?;
        let namespace = self.zone().pod_namespace(client)?;
        let ns = name_under(&[&namespace], svc)?;
        Some(vec![ns, svc.clone(), domain.clone()])
    }
}
