//! The `nsid` directive's Corefile syntax: `nsid [DATA...]`, the words joined by spaces, no
//! block, once per block; the identifier defaults to the host's name.

use std::sync::Arc;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// `nsid`, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsidConfig {
    /// The identifier, or `None` for the host's name.
    pub data: Option<String>,
}

/// The `nsid` directive's setup: `nsid [DATA...]` (the words joined by spaces), no block, once
/// per block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.expect_no_block()?;
    let words: Vec<&str> = d.args().map(|t| t.text.as_str()).collect();
    let data = (!words.is_empty()).then(|| words.join(" "));
    Ok(Arc::new(NsidConfig { data }))
}

impl Configured for NsidConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let data = self.data.as_deref().unwrap_or(ctx.hostname);
        Built::Plugin(Arc::new(super::Nsid::new(data.as_bytes().to_vec())))
    }
}
