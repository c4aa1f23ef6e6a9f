//! How a configured `rewrite` directive becomes its plugin, and what it checks against its block
//! and offers it: the glue between the Corefile syntax (`setup.rs`) and the query path
//! (`handler.rs`), kept apart so neither of them imports the other.

use super::setup::RewriteRules;
use crate::chain::{BuildCtx, Built, Configured};
use std::sync::Arc;

impl Configured for RewriteRules {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::Rewrite::new(self.0.clone())))
    }
}
