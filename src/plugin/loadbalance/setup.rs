//! The `loadbalance` directive's Corefile syntax: `loadbalance [round_robin]` (the only policy
//! cluster-dns implements; CoreDNS's `weighted` and `prefer` are refused with a message).

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};
use std::sync::Arc;

/// Checks a `loadbalance` directive.
pub fn parse(d: &Directive) -> Result<(), CorefileError> {
    let mut args = d.args();
    if let Some(policy) = args.next()
        && policy.text != "round_robin"
    {
        return Err(d.error_at(
            policy,
            format!("policy '{}' is not supported; only round_robin is", policy.text),
        ));
    }
    args.expect_none()?;
    if d.has_block {
        return Err(d.error("takes no block"));
    }
    Ok(())
}

/// `loadbalance`, as configured (it has no options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadBalanceConfig;

/// The `loadbalance` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    parse(d)?;
    Ok(Arc::new(LoadBalanceConfig))
}

impl Configured for LoadBalanceConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::LoadBalance))
    }
}
