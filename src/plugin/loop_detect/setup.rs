//! The `loop` directive's Corefile syntax: `loop`, with no arguments and no block.

use crate::corefile::{CorefileError, Directive};

/// Checks a `loop` directive.
pub fn parse(d: &Directive) -> Result<(), CorefileError> {
    d.args().expect_none()?;
    if d.has_block {
        return Err(d.error("takes no block"));
    }
    Ok(())
}
