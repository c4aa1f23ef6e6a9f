//! The `minimal` directive's Corefile syntax: `minimal`, with no arguments and no block.

use std::sync::Arc;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// `minimal`, as configured (it has no options).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinimalConfig;

/// The `minimal` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.bare(d)?;
    Ok(Arc::new(MinimalConfig))
}

impl Configured for MinimalConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::Minimal))
    }
}
