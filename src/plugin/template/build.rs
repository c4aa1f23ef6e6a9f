//! How a configured `template` directive becomes its plugin, and what it checks against its block
//! and offers it: the glue between the Corefile syntax (`setup.rs`) and the query path
//! (`handler.rs`), kept apart so neither of them imports the other.

use super::setup::TemplateConfig;
use crate::chain::{BuildCtx, Built, Configured};
use std::sync::Arc;

impl Configured for TemplateConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let metrics = ctx
            .metrics
            .and_then(|m| m.families::<super::TemplateMetrics>().ok());
        Built::Plugin(Arc::new(super::TemplatePlugin::new(
            self.clone(),
            metrics,
            ctx.server,
        )))
    }
}
