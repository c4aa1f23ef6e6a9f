//! The `loadbalance` directive's Corefile syntax: `loadbalance [round_robin]` (the only policy
//! cluster-dns implements; CoreDNS's `weighted` and `prefer` are refused with a message).

use crate::corefile::{CorefileError, Directive};

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
