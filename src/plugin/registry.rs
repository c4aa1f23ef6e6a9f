//! THE list of plugins: every directive cluster-dns implements, in the order a question passes
//! through them (CoreDNS's `plugin.cfg` order, whatever order the Corefile writes them in), each
//! with its setup; and the CoreDNS directives recognised but not implemented yet. Adding a
//! plugin is its folder plus one line in [`PLUGINS`].
//!
//! One setup signature ([`Setup`]; what it makes is in [`crate::chain`]): a directive and its
//! block's context in, a [`Configured`] value out. What a configured plugin becomes when a
//! configuration is built ([`Configured::build`]): a plugin in the chain, an observer, or
//! nothing in the query path (`bind`, `health`, `ready`, `prometheus`, `reload`: what they do
//! is in the block's settings, `chain::BlockSettings`).

use std::sync::Arc;

use super::{
    acl, any, autopath, bind, bufsize, cache, cancel, chaos, debug, dns64, dnspolicy, dnstap, errors,
    fairness, file, forward, header, health, hosts, https3, k8s_external, kubernetes, loadbalance, local,
    log, loop_detect, metadata, metrics, minimal, multisocket, noaaaa, nsid, pprof, proxyproto, quic, ready,
    reload, rewrite, root, rrl, secondary, shed, template, timeouts, tls, transfer, tsig, view, whoami,
};
use crate::chain::{BuildCtx, Built, Chain, Configured, Observer, SetupCtx};
use crate::corefile::{CorefileError, Directive};
use crate::telemetry::DnsMetrics;

/// Registers a plugin's metric families (through [`DnsMetrics::families`], once per process).
pub type RegisterFamilies = fn(&DnsMetrics) -> Result<(), prometheus::Error>;

/// A plugin's setup: parses one directive.
pub type Setup = fn(&Directive, &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError>;

/// One plugin: its directive, its setup and its metric families.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The directive.
    pub name: &'static str,
    /// Its setup.
    pub setup: Setup,
    /// Its own metric families, if it has some.
    pub families: Option<RegisterFamilies>,
    /// It is set up before the rest of its block, wherever it is written: the others' setups
    /// read what it configures (`root`'s folder, [`crate::chain::Configured::files_dir`]).
    pub first: bool,
}

const fn entry(name: &'static str, setup: Setup) -> Entry {
    Entry {
        name,
        setup,
        families: None,
        first: false,
    }
}

const fn with_families(name: &'static str, setup: Setup, families: RegisterFamilies) -> Entry {
    Entry {
        name,
        setup,
        families: Some(families),
        first: false,
    }
}

const fn set_up_first(name: &'static str, setup: Setup) -> Entry {
    Entry {
        name,
        setup,
        families: None,
        first: true,
    }
}

/// True when directive `name` is set up before the rest of its block ([`Entry::first`]).
pub fn sets_up_first(name: &str) -> bool {
    lookup(name).is_some_and(|e| e.first)
}

/// Registers every plugin's metric families (CoreDNS registers its plugins' at start-up, so
/// their unlabelled counters show 0 before first use).
pub fn register_families(metrics: &DnsMetrics) -> Result<(), prometheus::Error> {
    for e in PLUGINS {
        if let Some(register) = e.families {
            register(metrics)?;
        }
    }
    Ok(())
}

/// Every implemented directive, in chain order (CoreDNS's `plugin.cfg`). Directives outside the
/// query path keep their place too, so `coredns_plugin_enabled` and `--check` list them alike.
pub const PLUGINS: &[Entry] = &[
    // First in CoreDNS's order, and set up first: every file path of the block is read from
    // its folder.
    set_up_first("root", root::setup::setup),
    entry("metadata", metadata::setup::setup),
    // First of the query path, as in CoreDNS: it bounds every plugin after it.
    entry("cancel", cancel::setup::setup),
    entry("tls", tls::setup::setup),
    entry("timeouts", timeouts::setup::setup),
    entry("multisocket", multisocket::setup::setup),
    entry("quic", quic::setup::setup),
    entry("https3", https3::setup::setup),
    entry("proxyproto", proxyproto::setup::setup),
    entry("reload", reload::setup::setup),
    entry("nsid", nsid::setup::setup),
    entry("bufsize", bufsize::setup::setup),
    entry("bind", bind::setup::setup),
    entry("debug", debug::setup::setup),
    entry("ready", ready::setup::setup),
    with_families("health", health::setup::setup, health::families),
    entry("pprof", pprof::setup::setup),
    entry("shed", shed::setup::setup),
    // Early, as CoreDNS's external rrl: it judges the reply of everything after it (cache too).
    with_families("rrl", rrl::setup::setup, rrl::families),
    entry("prometheus", metrics::setup::setup),
    entry("errors", errors::setup::setup),
    entry("log", log::setup::setup),
    with_families("dnstap", dnstap::setup::setup, dnstap::families),
    // Before anything answers or multiplies a question (autopath's tries): a question over its
    // client's share costs nothing more.
    with_families("fairness", fairness::setup::setup, fairness::families),
    with_families("local", local::setup::setup, local::families),
    with_families("dns64", dns64::setup::setup, dns64::families),
    entry("any", any::setup::setup),
    entry("chaos", chaos::setup::setup),
    entry("loadbalance", loadbalance::setup::setup),
    // Where CoreDNS 1.14.7 has it; it works on the wire form around the chain (its check and
    // signature are block settings), so its place only orders `coredns_plugin_enabled`.
    entry("tsig", tsig::setup::setup),
    // rewrite, autopath, acl, cache: CoreDNS 1.14.7's order, a security fix. `acl` decides on
    // the names the rest of the chain is asked (after `rewrite` renamed the question and for
    // each of `autopath`'s tries: CVE-2026-26017, coredns/coredns#7882 and #8290), and before
    // the `cache` can answer a blocked client (#8289).
    entry("rewrite", rewrite::setup::setup),
    // Before the cache: its answers depend on the client, the tries it makes below do not.
    with_families("autopath", autopath::setup::setup, autopath::families),
    with_families("acl", acl::setup::setup, acl::families),
    // Tenant DNS policy: after rewrite and autopath (it sees every name they ask for the
    // client), before cache (it decides again for every client before a store is asked).
    with_families("dnspolicy", dnspolicy::setup::setup, dnspolicy::families),
    with_families("cache", cache::setup::setup, cache::families),
    // After the cache, as in CoreDNS: the cache keeps the replies it edited.
    entry("header", header::setup::setup),
    entry("minimal", minimal::setup::setup),
    with_families("template", template::setup::setup, template::families),
    with_families("transfer", transfer::setup::setup, transfer::families),
    entry("hosts", hosts::setup::setup),
    entry("k8s_external", k8s_external::setup::setup),
    with_families("kubernetes", kubernetes::setup::setup, kubernetes::families),
    entry("file", file::setup::setup),
    // After file, as in CoreDNS's plugin.cfg.
    with_families("secondary", secondary::setup::setup, secondary::families),
    entry("loop", loop_detect::setup::setup),
    // Just before `forward`: it sees only the names no authoritative plugin above answered.
    with_families("noaaaa", noaaaa::setup::setup, noaaaa::families),
    with_families("forward", forward::setup::setup, forward::families),
    entry("whoami", whoami::setup::setup),
    entry("view", view::setup::setup),
];

/// CoreDNS directives that cluster-dns recognises but does not implement yet: a Corefile that
/// uses one fails to start with a message that says so, rather than "unknown directive".
pub const NOT_YET_IMPLEMENTED: &[(&str, &str)] = &[
    ("auto", "the auto plugin"),
    ("dnssec", "DNSSEC signing"),
    ("trace", "the trace plugin"),
    ("geoip", "the geoip plugin"),
    ("sign", "the sign plugin"),
    ("grpc", "the grpc plugin"),
    ("erratic", "the erratic plugin"),
    ("clouddns", "the clouddns plugin"),
    ("route53", "the route53 plugin"),
    ("azure", "the azure plugin"),
    ("etcd", "the etcd plugin"),
];

/// Directives CoreDNS itself removed: a Corefile written for an old CoreDNS gets the
/// replacement named, rather than "unknown directive".
pub const REMOVED_FROM_COREDNS: &[(&str, &str)] = &[
    (
        "proxy",
        "the proxy plugin was removed from CoreDNS in 1.5.0; use 'forward', which takes the same addresses (forward . 10.0.0.2 10.0.0.3)",
    ),
    (
        "federation",
        "the federation plugin left CoreDNS in 1.7.0 (Kubernetes federation v1 is retired) and has no replacement here; remove the 'federation' block (a server block with 'forward' to the other cluster's DNS answers its names)",
    ),
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
    if let Some((_, why)) = REMOVED_FROM_COREDNS.iter().find(|(n, _)| *n == name) {
        return Err(d.error(*why));
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
            assert!(
                !REMOVED_FROM_COREDNS.iter().any(|(n, _)| *n == e.name),
                "{} is implemented",
                e.name
            );
        }
    }
}
