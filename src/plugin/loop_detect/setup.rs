//! The `loop` directive's Corefile syntax: `loop`, with no arguments and no block.

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};
use std::sync::Arc;

/// Checks a `loop` directive.
pub fn parse(d: &Directive) -> Result<(), CorefileError> {
    d.args().expect_none()?;
    if d.has_block {
        return Err(d.error("takes no block"));
    }
    Ok(())
}

/// `loop`, as configured (it has no options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopConfig;

/// The `loop` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    parse(d)?;
    Ok(Arc::new(LoopConfig))
}

impl Configured for LoopConfig {
    /// Probe names are made under the block's first zone.
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::LoopDetect::new(ctx.first_zone.clone())))
    }
}
