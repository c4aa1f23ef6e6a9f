//! The `bufsize` directive's Corefile syntax (see this folder's README), parsed into a
//! [`BufsizeConfig`], and its [`Configured`] impl: what the configured directive sets for its
//! block.

use std::sync::Arc;

use crate::chain::{BlockSettings, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};
use crate::proto::{MAX_UDP_PAYLOAD, PLAIN_UDP_LIMIT};

/// The largest size `bufsize` accepts (CoreDNS's bound).
pub const LARGEST: u16 = 4096;

/// A block's `bufsize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufsizeConfig {
    /// The UDP payload size, `PLAIN_UDP_LIMIT..=LARGEST`.
    pub size: u16,
}

/// The `bufsize` directive's setup: `bufsize [SIZE]`, once per block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    if d.has_block {
        return Err(d.error("takes no block"));
    }
    let mut args = d.args();
    let size = match args.next() {
        None => MAX_UDP_PAYLOAD,
        Some(t) => match t.text.parse::<u16>() {
            Ok(n) if (PLAIN_UDP_LIMIT..=LARGEST).contains(&n) => n,
            _ => {
                return Err(d.error_at(
                    t,
                    format!(
                        "bufsize: '{}' is not a size from {PLAIN_UDP_LIMIT} to {LARGEST}",
                        t.text
                    ),
                ));
            }
        },
    };
    args.expect_none()?;
    Ok(Arc::new(BufsizeConfig { size }))
}

impl Configured for BufsizeConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.udp_payload = self.size;
    }
}
