//! The `chaos` directive's Corefile syntax: `chaos [VERSION] [AUTHORS...]`, no block.

use std::sync::Arc;

use crate::chain::{Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// The version string `version.bind` answers by default (CoreDNS: `CoreDNS-<version>`).
pub const DEFAULT_VERSION: &str = concat!("cluster-dns-", env!("CARGO_PKG_VERSION"));

/// `chaos`, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChaosConfig {
    /// What `version.bind` and `version.server` answer.
    pub version: String,
    /// What `authors.bind` answers, one TXT record each.
    pub authors: Vec<String>,
}

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
