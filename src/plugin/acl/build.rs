//! How a configured `acl` directive becomes its plugin, and what it checks against its block
//! and offers it: the glue between the Corefile syntax (`setup.rs`) and the query path
//! (`handler.rs`), kept apart so neither of them imports the other.

use super::setup::AclConfig;
use crate::chain::{BuildCtx, Built, Configured};
use std::sync::Arc;

impl Configured for AclConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let metrics = ctx.metrics.and_then(|m| m.families::<super::AclMetrics>().ok());
        Built::Plugin(Arc::new(super::Acl::new(
            self.clone(),
            metrics.as_ref(),
            ctx.server,
        )))
    }
}
