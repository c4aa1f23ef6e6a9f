//! The `chaos` directive's Corefile syntax: `chaos [VERSION] [AUTHORS...]`, no block.
//!
//! And how a configured `chaos` directive becomes its plugin: its [`Configured`] impl, what it
//! checks against its block and offers it. What it parses into is `config.rs`'s, which the
//! handler reads too, so the handler never imports this file (the layer test finds import loops).

use std::sync::Arc;

use super::config::ChaosConfig;
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// The version string `version.bind` answers by default (CoreDNS: `CoreDNS-<version>`).
pub const DEFAULT_VERSION: &str = concat!("cluster-dns-", env!("CARGO_PKG_VERSION"));

/// The authors `authors.bind` answers by default: the package's, else its name.
fn default_authors() -> Vec<String> {
    let listed: Vec<String> = env!("CARGO_PKG_AUTHORS")
        .split(':')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    if listed.is_empty() {
        vec![env!("CARGO_PKG_NAME").to_owned()]
    } else {
        listed
    }
}

/// The `chaos` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.expect_no_block()?;
    let mut args = d.args();
    let version = args
        .next()
        .map_or_else(|| DEFAULT_VERSION.to_owned(), |t| t.text.clone());
    let authors: Vec<String> = args.remaining().iter().map(|t| t.text.clone()).collect();
    Ok(Arc::new(ChaosConfig {
        version,
        authors: if authors.is_empty() {
            default_authors()
        } else {
            authors
        },
    }))
}

impl Configured for ChaosConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::Chaos::new(self, ctx.hostname)))
    }
}
