//! THE list of plugins: every directive cluster-dns implements, in the order a question passes
//! through them (CoreDNS's `plugin.cfg` order, whatever order the Corefile writes them in), each
//! with its setup; and the CoreDNS directives recognised but not implemented yet. Adding a
//! plugin is its folder plus one line in [`PLUGINS`].
//!
//! One setup signature ([`Setup`]): a directive and its block's context in, a [`Configured`]
//! value out. What a configured plugin becomes when a configuration is built
//! ([`Configured::build`]): a plugin in the chain, an observer, or nothing in the query path
//! (`bind`, `health`, `ready`, `prometheus`, `reload`, which the runtime reads by type).

use std::any::Any;
use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use hickory_proto::rr::Name;

use super::{
    bind, cache, errors, forward, health, hosts, kubernetes, loadbalance, log, loop_detect, metrics, ready,
    reload, rewrite,
};
use crate::chain::{Chain, Observer, Plugin};
use crate::cluster::ClusterZone;
use crate::corefile::{CorefileError, Directive};

/// What a setup knows of the directive's server block.
#[derive(Debug, Clone, Copy)]
pub struct SetupCtx<'a> {
    /// The block's zones, lower-case and absolute.
    pub zones: &'a [String],
    /// The Corefile's folder: relative paths (manifests, hosts files, TLS files, resolv.conf)
    /// are read from it.
    pub dir: &'a Path,
    /// What an earlier use of the same directive in this block configured (the plugins that
    /// may be used more than once, such as `rewrite`, fold it in; the others refuse).
    pub previous: Option<&'a dyn Configured>,
}

impl SetupCtx<'_> {
    /// The error for a second use of a directive that may be used once per block.
    pub fn refuse_twice(&self, d: &Directive) -> Result<(), CorefileError> {
        match self.previous {
            Some(_) => Err(d.error("can be used only once per server block")),
            None => Ok(()),
        }
    }
}

/// A plugin's setup: parses one directive.
pub type Setup = fn(&Directive, &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError>;

/// What a configuration needs to build its plugins.
#[derive(Debug, Clone)]
pub struct BuildCtx<'a> {
    /// The block's first zone (the `loop` plugin's probe names are made under it).
    pub first_zone: Name,
    /// The `server` label of the block's first listen address (`dns://:53`).
    pub server: &'a str,
    /// The plugins' metric families, when the process exports them.
    pub metrics: Option<&'a metrics::PluginMetrics>,
    /// The zone of the block's `kubernetes` plugin, filled by its source (the runtime owns the
    /// source, which outlives configurations).
    pub cluster_zone: Option<Arc<ClusterZone>>,
    /// This server's own IPs (the NS record's target).
    pub self_ips: Vec<IpAddr>,
}

/// What a configured directive becomes in a built configuration.
#[derive(Debug)]
pub enum Built {
    /// A plugin in the query path.
    Plugin(Arc<dyn Plugin>),
    /// A plugin that observes answered requests.
    Observer(Arc<dyn Observer>),
    /// Nothing in the query path (the runtime reads the configuration itself).
    Nothing,
}

/// A parsed directive.
pub trait Configured: Any + Send + Sync + fmt::Debug {
    /// What it becomes when a configuration is built.
    fn build(&self, ctx: &BuildCtx<'_>) -> Built;
}

/// The configured value of type `T` among a block's directives.
pub fn find<'a, T: Configured>(configured: &'a [(&'static str, Arc<dyn Configured>)]) -> Option<&'a T> {
    configured
        .iter()
        .find_map(|(_, c)| (c.as_ref() as &dyn Any).downcast_ref::<T>())
}

/// The `previous` use of a directive whose setup folds repeated uses, as its own type.
pub fn previous<'a, T: Configured>(ctx: &SetupCtx<'a>) -> Option<&'a T> {
    ctx.previous.and_then(|p| (p as &dyn Any).downcast_ref::<T>())
}

/// One plugin: its directive and its setup.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The directive.
    pub name: &'static str,
    /// Its setup.
    pub setup: Setup,
}

const fn entry(name: &'static str, setup: Setup) -> Entry {
    Entry { name, setup }
}

/// Every implemented directive, in chain order (CoreDNS's `plugin.cfg`). Directives outside the
/// query path keep their place too, so `coredns_plugin_enabled` and `--check` list them alike.
pub const PLUGINS: &[Entry] = &[
    entry("reload", reload::setup),
    entry("bind", bind::setup),
    entry("ready", ready::setup),
    entry("health", health::setup),
    entry("prometheus", metrics::setup),
    entry("errors", errors::setup),
    entry("log", log::setup),
    entry("loadbalance", loadbalance::setup::setup),
    entry("cache", cache::setup::setup),
    entry("rewrite", rewrite::setup::setup),
    entry("hosts", hosts::setup::setup),
    entry("kubernetes", kubernetes::setup::setup),
    entry("loop", loop_detect::setup::setup),
    entry("forward", forward::setup::setup),
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

/// The registry entry of directive `name`.
pub fn lookup(name: &str) -> Option<&'static Entry> {
    PLUGINS.iter().find(|e| e.name == name)
}

/// Parses directive `d` with the setup of its plugin: the error for a directive not implemented
/// yet, or unknown, names it and says what to do.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    let name = d.name.text.as_str();
    if let Some(e) = lookup(name) {
        return (e.setup)(d, ctx);
    }
    match NOT_YET_IMPLEMENTED.iter().find(|(n, _)| *n == name) {
        Some((_, what)) => Err(d.error(format!(
            "{what} is not implemented in cluster-dns yet; remove the '{name}' line to start"
        ))),
        None => Err(d.error(format!("unknown directive '{name}'"))),
    }
}

/// The chain of a server block from its configured directives (`(name, configured)` in any
/// order): its plugins in [`PLUGINS`] order, and apart, its observers (the server calls them
/// after encoding).
pub fn build_chain(
    configured: &[(&'static str, Arc<dyn Configured>)],
    ctx: &BuildCtx<'_>,
) -> (Chain, Vec<Arc<dyn Observer>>) {
    let mut plugins = Vec::new();
    let mut observers = Vec::new();
    for entry in PLUGINS {
        for (_, c) in configured.iter().filter(|(n, _)| *n == entry.name) {
            match c.build(ctx) {
                Built::Plugin(p) => plugins.push(p),
                Built::Observer(o) => observers.push(o),
                Built::Nothing => {}
            }
        }
    }
    (Chain::new(plugins), observers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_has_each_directive_once_and_none_also_not_yet_implemented() {
        for (i, e) in PLUGINS.iter().enumerate() {
            assert!(
                !PLUGINS[..i].iter().any(|o| o.name == e.name),
                "{} listed twice",
                e.name
            );
            assert!(
                !NOT_YET_IMPLEMENTED.iter().any(|(n, _)| *n == e.name),
                "{} is implemented",
                e.name
            );
        }
    }
}
