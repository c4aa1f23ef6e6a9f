//! How a configured `cache` directive becomes its plugin, and what it checks against its block
//! and offers it: the glue between the Corefile syntax (`setup.rs`) and the query path
//! (`handler.rs`), kept apart so neither of them imports the other.

use super::setup::CacheConfig;
use crate::chain::{BuildCtx, Built, Configured};
use std::sync::Arc;

impl Configured for CacheConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let cache = super::Cache::new(self);
        let families = ctx.metrics.and_then(|m| m.families::<super::CacheMetrics>().ok());
        let cache = match families {
            Some(f) => cache.with_metrics(f, ctx.server),
            None => cache,
        };
        Built::Plugin(Arc::new(cache))
    }
}
