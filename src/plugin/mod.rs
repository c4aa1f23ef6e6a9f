//! Plugins: each owns one folder with its Corefile setup and its handler, as CoreDNS's do.
//!
//! The order in which a query passes through a server block's plugins is fixed here, in
//! [`CHAIN_ORDER`], whatever order the Corefile writes them in (as CoreDNS's `plugin.cfg`).
//! [`Chain`] is that order made code: [`Chain::serve`] walks the configured plugins in that
//! order, each one either answering or handing the question on.

pub mod cache;
pub mod errors;
pub mod forward;
pub mod health;
pub mod hosts;
pub mod kubernetes;
pub mod loadbalance;
pub mod log;
pub mod loop_detect;
pub mod metrics;
pub mod ready;
pub mod reload;
pub mod rewrite;

use std::future::Future;
use std::pin::Pin;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::CNAME;
use hickory_proto::rr::{Name, RData};

use crate::dns::Outcome;
use crate::proto::{Answer, Failure, NO_PLUGIN_ANSWERED, Question, Reply};

/// The query path, first to last. Directives not in this list are not in the query path
/// (`bind`, `health`, `ready`, `reload`) or not supported.
pub const CHAIN_ORDER: &[&str] = &[
    "prometheus",
    "errors",
    "log",
    "loadbalance",
    "autopath",
    "cache",
    "rewrite",
    "hosts",
    "kubernetes",
    "loop",
    "forward",
];

/// Directives cluster-dns implements today.
pub const IMPLEMENTED: &[&str] = &[
    "bind",
    "kubernetes",
    "forward",
    "cache",
    "loop",
    "loadbalance",
    "errors",
    "log",
    "health",
    "ready",
    "prometheus",
    "reload",
    "hosts",
    "rewrite",
];

/// CoreDNS directives that cluster-dns recognises but does not implement yet: a Corefile that
/// uses one fails to start with a message that says so, rather than "unknown directive".
pub const NOT_YET_IMPLEMENTED: &[(&str, &str)] = &[
    ("autopath", "autopath"),
    ("bufsize", "the bufsize plugin"),
    ("any", "the any plugin"),
    ("chaos", "the chaos plugin"),
    ("debug", "the debug plugin"),
    ("whoami", "the whoami plugin"),
    ("template", "the template plugin"),
    ("k8s_external", "the k8s_external plugin"),
    ("file", "the file plugin"),
    ("auto", "the auto plugin"),
    ("secondary", "the secondary plugin"),
    ("transfer", "zone transfer"),
    ("dnssec", "DNSSEC signing"),
    ("acl", "the acl plugin"),
    ("local", "the local plugin"),
    ("metadata", "the metadata plugin"),
    ("nsid", "the nsid plugin"),
    ("timeouts", "the timeouts plugin"),
    ("tls", "DNS over TLS"),
    ("view", "the view plugin"),
    ("minimal", "the minimal plugin"),
    ("root", "the root plugin"),
    ("trace", "the trace plugin"),
    ("dns64", "the dns64 plugin"),
    ("geoip", "the geoip plugin"),
    ("header", "the header plugin"),
    ("cancel", "the cancel plugin"),
    ("sign", "the sign plugin"),
    ("grpc", "the grpc plugin"),
    ("erratic", "the erratic plugin"),
    ("clouddns", "the clouddns plugin"),
    ("route53", "the route53 plugin"),
    ("azure", "the azure plugin"),
    ("etcd", "the etcd plugin"),
    ("pprof", "the pprof plugin"),
    ("dnstap", "the dnstap plugin"),
    ("multisocket", "the multisocket plugin"),
];

/// The plugins of one server block, applied in [`CHAIN_ORDER`]. Every field is cheap to clone
/// (shared state behind `Arc`s), so background work (prefetch, stale refresh) takes a clone.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    /// `loadbalance`.
    pub loadbalance: Option<loadbalance::LoadBalance>,
    /// `cache`.
    pub cache: Option<cache::Cache>,
    /// `rewrite` (its rules in file order).
    pub rewrite: Option<rewrite::Rewrite>,
    /// `hosts`.
    pub hosts: Option<hosts::Hosts>,
    /// The `kubernetes` plugin, if the block has one.
    pub kubernetes: Option<kubernetes::Kubernetes>,
    /// `loop`.
    pub loop_detect: Option<loop_detect::LoopDetect>,
    /// `forward`.
    pub forward: Option<forward::Forward>,
}

/// A boxed future of a [`Reply`] (the chain recurses through its stages).
pub type ReplyFuture<'a> = Pin<Box<dyn Future<Output = Reply> + Send + 'a>>;

fn stage_index(name: &str) -> usize {
    CHAIN_ORDER
        .iter()
        .position(|n| *n == name)
        .unwrap_or(CHAIN_ORDER.len())
}

impl Chain {
    /// Passes the question along the chain. A question no plugin answers gets SERVFAIL, as in
    /// CoreDNS when there is no next plugin.
    pub async fn serve(&self, q: &Question) -> Reply {
        self.serve_from(0, q).await
    }

    fn configured(&self, name: &str) -> bool {
        match name {
            "loadbalance" => self.loadbalance.is_some(),
            "cache" => self.cache.is_some(),
            "rewrite" => self.rewrite.is_some(),
            "hosts" => self.hosts.is_some(),
            "kubernetes" => self.kubernetes.is_some(),
            "loop" => self.loop_detect.is_some(),
            "forward" => self.forward.is_some(),
            _ => false,
        }
    }

    /// Runs the chain from the first configured plugin at or after `stage` in [`CHAIN_ORDER`].
    pub fn serve_from<'a>(&'a self, stage: usize, q: &'a Question) -> ReplyFuture<'a> {
        Box::pin(async move {
            let Some((i, name)) = CHAIN_ORDER
                .iter()
                .enumerate()
                .skip(stage)
                .find(|(_, n)| self.configured(n))
            else {
                return Reply::Failed(Failure {
                    rcode: ResponseCode::ServFail,
                    reason: NO_PLUGIN_ANSWERED,
                });
            };
            let next = i + 1;
            match *name {
                "loadbalance" => {
                    let mut reply = self.serve_from(next, q).await;
                    if let Some(lb) = &self.loadbalance {
                        lb.shuffle(&mut reply);
                    }
                    reply
                }
                "cache" => match &self.cache {
                    Some(cache) => cache.serve(self, next, q).await,
                    None => self.serve_from(next, q).await,
                },
                "rewrite" => match self.rewrite.as_ref().and_then(|r| r.apply(q)) {
                    Some(rewritten) => {
                        let reply = self.serve_from(next, &rewritten.question).await;
                        rewritten.restore(reply)
                    }
                    None => self.serve_from(next, q).await,
                },
                "hosts" => match self.hosts.as_ref().and_then(|h| h.serve(q)) {
                    Some(reply) => reply,
                    None => self.serve_from(next, q).await,
                },
                "kubernetes" => match self.kubernetes.as_ref().map(|k| k.serve(&q.name, q.qtype)) {
                    Some(Outcome::Answer(answer)) => match answer.external_target.clone() {
                        Some(target) if self.forward.is_some() => self.chase(answer, target, q).await,
                        _ => Reply::Authoritative(answer),
                    },
                    _ => self.serve_from(next, q).await,
                },
                "loop" => {
                    if let Some(l) = &self.loop_detect
                        && let Some(upstream) = l.probe_seen(&q.name)
                    {
                        if let Some(f) = &self.forward {
                            f.mark_looping(upstream, l.status());
                        }
                        return Reply::Rcode(ResponseCode::ServFail);
                    }
                    self.serve_from(next, q).await
                }
                "forward" => match &self.forward {
                    Some(f) if f.handles(&q.name) => f.serve(q).await,
                    _ => self.serve_from(next, q).await,
                },
                _ => self.serve_from(next, q).await,
            }
        })
    }

    /// An ExternalName answer whose target is outside the cluster: asks the chain again from
    /// the cache on for (target, qtype) and appends the upstream's answer section after the
    /// CNAME, with the target's rcode (RFC 6604).
    async fn chase(&self, mut answer: Answer, target: Name, q: &Question) -> Reply {
        answer.external_target = None;
        let inner = self.serve_from(stage_index("cache"), &q.for_name(target)).await;
        // Keep only what this answer owns: the CNAME(s) it wrote.
        answer
            .answers
            .retain(|r| matches!(r.data, RData::CNAME(CNAME(_))));
        match inner {
            Reply::Forwarded(f) => {
                answer.rcode = f.rcode;
                let negative = f.answers.is_empty() || f.rcode != ResponseCode::NoError;
                answer.answers.extend(f.answers);
                answer.authority = if negative { f.authority } else { Vec::new() };
                answer.additional = Vec::new();
            }
            Reply::Authoritative(a) => {
                answer.rcode = a.rcode;
                answer.answers.extend(a.answers);
                answer.authority = a.authority;
            }
            Reply::Rcode(r) | Reply::Failed(Failure { rcode: r, .. }) => {
                answer.rcode = r;
                answer.authority = Vec::new();
            }
        }
        Reply::Authoritative(answer)
    }
}

impl Chain {
    /// The chain of one server block: its `kubernetes` plugin (built by the caller, which owns
    /// the zone's source) and the plugins its configuration names, recording into `metrics`
    /// (the process's metric families) under the `server` label when given.
    pub fn build(
        block: &crate::config::BlockConfig,
        kubernetes: Option<kubernetes::Kubernetes>,
        metrics: Option<(&metrics::PluginMetrics, &str)>,
    ) -> Self {
        let first_zone = block
            .zones
            .first()
            .and_then(|z| Name::from_ascii(z).ok())
            .map(|n| n.to_lowercase())
            .unwrap_or_else(Name::root);
        Self {
            loadbalance: block.loadbalance.then_some(loadbalance::LoadBalance),
            cache: block.cache.as_ref().map(|c| match metrics {
                Some((m, server)) => cache::Cache::new(c).with_metrics(m.cache.clone(), server),
                None => cache::Cache::new(c),
            }),
            rewrite: (!block.rewrite.is_empty()).then(|| rewrite::Rewrite::new(block.rewrite.clone())),
            hosts: block.hosts.as_ref().map(hosts::Hosts::new),
            kubernetes,
            loop_detect: block
                .loop_detect
                .then(|| loop_detect::LoopDetect::new(first_zone)),
            forward: block.forward.as_ref().map(|f| match metrics {
                Some((m, server)) => forward::Forward::new(f).with_metrics(m.forward.clone(), server),
                None => forward::Forward::new(f),
            }),
        }
    }
}
