//! How a configured `autopath` directive becomes its plugin, and what it checks against its block
//! and offers it: the glue between the Corefile syntax (`setup.rs`) and the query path
//! (`handler.rs`), kept apart so neither of them imports the other.

use super::setup::{AutoPathConfig, SearchSource};
use crate::chain::{BuildCtx, Built, Configured};
use crate::corefile::CorefileError;
use std::sync::Arc;

impl Configured for AutoPathConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let success = ctx
            .metrics
            .and_then(|m| m.families::<super::AutoPathMetrics>().ok())
            .map(|m| m.for_server(ctx.server));
        Built::Plugin(Arc::new(super::AutoPath::new(self.clone(), success)))
    }

    /// `@PLUGIN` must name a plugin of the block that can give search paths.
    fn check(&self, block: &[(&'static str, Arc<dyn Configured>)]) -> Result<(), CorefileError> {
        let SearchSource::Plugin(name) = &self.source else {
            return Ok(());
        };
        let Some((_, plugin)) = block.iter().find(|(n, _)| n == name) else {
            return Err(self.source_error(format!(
                "@{name}: this server block has no '{name}' plugin to take search paths from"
            )));
        };
        match plugin.offers_search_paths() {
            // It can, but not as configured: a warning (see `warnings`).
            Some(_) => Ok(()),
            None => Err(self.source_error(format!(
                "@{name}: the {name} plugin does not know its clients' search paths (only @kubernetes does)"
            ))),
        }
    }

    /// `@PLUGIN` that offers search paths only with other options (`@kubernetes` without
    /// `pods verified`): CoreDNS starts and its autopath does nothing; so does this one (the
    /// plugin gives no search paths), and says what to change.
    fn warnings(&self, block: &[(&'static str, Arc<dyn Configured>)]) -> Vec<CorefileError> {
        let SearchSource::Plugin(name) = &self.source else {
            return Vec::new();
        };
        match block
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, p)| p.offers_search_paths())
        {
            Some(Err(why)) => vec![self.source_error(format!("@{name}: autopath does nothing: {why}"))],
            _ => Vec::new(),
        }
    }
}
