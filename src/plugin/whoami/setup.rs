//! The `whoami` directive's Corefile syntax (no arguments) and its [`Configured`] impl: the
//! plugin (`handler.rs`) it builds.

use std::sync::Arc;

use super::handler::WhoAmI;
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// `whoami`, as configured (it has no options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WhoAmIConfig;

/// The `whoami` directive's setup: no arguments, no block, once per block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.bare(d)?;
    Ok(Arc::new(WhoAmIConfig))
}

impl Configured for WhoAmIConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(WhoAmI))
    }
}
