//! How a configured `hosts` directive becomes its plugin, and what it checks against its block
//! and offers it: the glue between the Corefile syntax (`setup.rs`) and the query path
//! (`handler.rs`), kept apart so neither of them imports the other.

use super::setup::HostsConfig;
use crate::chain::{BuildCtx, Built, Configured};
use std::sync::Arc;

impl Configured for HostsConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let hosts = super::Hosts::new(self);
        let hosts = match ctx.metrics.and_then(|m| m.families::<super::HostsMetrics>().ok()) {
            Some(m) => hosts.with_metrics(m),
            None => hosts,
        };
        Built::Plugin(Arc::new(hosts))
    }
}
