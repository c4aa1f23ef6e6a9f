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

use std::sync::Arc;

use hickory_proto::rr::Name;

use crate::chain::{Chain, Observer, Plugin};

/// The query path, first to last. Directives not in this list are not in the query path
/// (`bind`, `health`, `ready`, `reload`) or not supported.
pub const CHAIN_ORDER: &[&str] = &[
    "prometheus",
    "errors",
    "log",
    "loadbalance",
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

/// The chain of one server block: its `kubernetes` plugin (built by the caller, which owns the
/// zone's source) and the plugins its configuration names, in [`CHAIN_ORDER`], recording into
/// `metrics` (the process's plugin metric families) under the `server` label when given. The
/// observing plugins (`errors`, `log`) come back apart: the server calls them after encoding.
pub fn build_chain(
    block: &crate::config::BlockConfig,
    kubernetes: Option<kubernetes::Kubernetes>,
    metrics: Option<(&metrics::PluginMetrics, &str)>,
) -> (Chain, Vec<Arc<dyn Observer>>) {
    let first_zone = block
        .zones
        .first()
        .and_then(|z| Name::from_ascii(z).ok())
        .map(|n| n.to_lowercase())
        .unwrap_or_else(Name::root);
    let mut plugins: Vec<Arc<dyn Plugin>> = Vec::new();
    let mut observers: Vec<Arc<dyn Observer>> = Vec::new();
    for name in CHAIN_ORDER {
        match *name {
            "errors" => {
                if let Some(e) = &block.errors {
                    observers.push(Arc::new(errors::ErrorLog::new(e)));
                }
            }
            "log" => {
                if let Some(l) = &block.log {
                    observers.push(Arc::new(log::QueryLog::new(l)));
                }
            }
            "loadbalance" if block.loadbalance => plugins.push(Arc::new(loadbalance::LoadBalance)),
            "cache" => {
                if let Some(c) = &block.cache {
                    let cache = match metrics {
                        Some((m, server)) => cache::Cache::new(c).with_metrics(m.cache.clone(), server),
                        None => cache::Cache::new(c),
                    };
                    plugins.push(Arc::new(cache));
                }
            }
            "rewrite" if !block.rewrite.is_empty() => {
                plugins.push(Arc::new(rewrite::Rewrite::new(block.rewrite.clone())));
            }
            "hosts" => {
                if let Some(h) = &block.hosts {
                    plugins.push(Arc::new(hosts::Hosts::new(h)));
                }
            }
            "kubernetes" => {
                if let Some(k) = &kubernetes {
                    plugins.push(Arc::new(k.clone()));
                }
            }
            "loop" if block.loop_detect => {
                plugins.push(Arc::new(loop_detect::LoopDetect::new(first_zone.clone())));
            }
            "forward" => {
                if let Some(f) = &block.forward {
                    let forward = match metrics {
                        Some((m, server)) => forward::Forward::new(f).with_metrics(m.forward.clone(), server),
                        None => forward::Forward::new(f),
                    };
                    plugins.push(Arc::new(forward));
                }
            }
            _ => {}
        }
    }
    (Chain::new(plugins), observers)
}
