//! How a configured `dns64` directive becomes its plugin, and what it checks against its block
//! and offers it: the glue between the Corefile syntax (`setup.rs`) and the query path
//! (`handler.rs`), kept apart so neither of them imports the other.

use super::setup::Dns64Config;
use crate::chain::{BuildCtx, Built, Configured};
use std::sync::Arc;

impl Configured for Dns64Config {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let translated = ctx
            .metrics
            .and_then(|m| m.families::<super::Dns64Metrics>().ok())
            .map(|m| m.for_server(ctx.server));
        Built::Plugin(Arc::new(super::Dns64::new(self.clone(), translated)))
    }
}
