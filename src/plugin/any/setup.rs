//! The `any` directive's Corefile syntax: `any`, with no arguments and no block.

use std::sync::Arc;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// `any`, as configured (it has no options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnyConfig;

/// The `any` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.bare(d)?;
    Ok(Arc::new(AnyConfig))
}

impl Configured for AnyConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::MinimalAny))
    }
}
