//! The `whoami` plugin: answers every question that reaches it with the client's address, port
//! and transport, as CoreDNS's `whoami` does: an empty answer section, and in the additional
//! section an A (or AAAA) record of the client's address owned by the question's name and an
//! SRV record `_udp.<name>` (or `_tcp`) with the client's port, target the root. Its answers
//! depend on the client, so they are never memoized. See this folder's README.

pub mod handler;

use std::sync::Arc;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

pub use handler::WhoAmI;

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
