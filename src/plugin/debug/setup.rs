//! The `debug` directive's Corefile syntax (see this folder's README), parsed into a
//! [`DebugConfig`], and its [`Configured`] impl: what the configured directive sets for its block.

use std::sync::Arc;

use crate::chain::{BlockSettings, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// A block's `debug`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebugConfig;

/// The `debug` directive's setup: `debug`, no arguments, no block, once per block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.bare(d)?;
    Ok(Arc::new(DebugConfig))
}

impl Configured for DebugConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.debug = true;
    }
}
