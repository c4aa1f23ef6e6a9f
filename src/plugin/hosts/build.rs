//! How a configured `hosts` directive becomes its plugin, and what it checks against its block
//! and offers it: the glue between the Corefile syntax (`setup.rs`) and the query path
//! (`handler.rs`), kept apart so neither of them imports the other.

use super::setup::HostsConfig;
use crate::chain::{BuildCtx, Built, Configured, NamedFile};
use std::sync::Arc;

impl Configured for HostsConfig {
    /// The hosts file the Corefile names, for `--check` to warn about: the server starts without
    /// it and reads it once it appears (as CoreDNS), so it is not needed.
    fn files(&self) -> Vec<NamedFile> {
        let Some(at) = &self.path_at else {
            return Vec::new();
        };
        vec![NamedFile {
            path: self.path.clone(),
            at: at.clone(),
            what: "hosts".to_owned(),
            needed: false,
        }]
    }

    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let hosts = super::Hosts::new(self);
        let hosts = match ctx.metrics.and_then(|m| m.families::<super::HostsMetrics>().ok()) {
            Some(m) => hosts.with_metrics(m),
            None => hosts,
        };
        Built::Plugin(Arc::new(hosts))
    }
}
