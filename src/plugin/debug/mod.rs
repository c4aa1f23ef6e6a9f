//! The `debug` plugin: debug-level logs for the process, as CoreDNS's `debug` turns on its
//! debug messages. Not in the query path: it sets its block's `debug` setting, which the runtime
//! reads when it sets up logging. See
//! this folder's README.

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
