//! The `shed` directive's Corefile syntax (see this folder's README), parsed into a [`ShedConfig`],
//! and its [`Configured`] impl: what the configured directive sets for its block.

use std::sync::Arc;

use crate::chain::{BlockSettings, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// `shed`, as configured (it has no options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShedConfig;

/// `shed`: no arguments, no block, once per server block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.bare(d)?;
    Ok(Arc::new(ShedConfig))
}

impl Configured for ShedConfig {
    /// It disciplines UDP sockets: CoreDNS refuses it in tls, https, grpc and quic blocks.
    fn plain_dns_only(&self) -> bool {
        true
    }

    fn configure(&self, settings: &mut BlockSettings) {
        settings.listener.shed = true;
    }
}
