//! What directives' setups share: [`previous`], the earlier use of a directive whose setup
//! folds repeated uses into one (`acl`, `bind`, `file`, ...).

use std::any::Any;

use crate::chain::{Configured, SetupCtx};

/// The `previous` use of a directive whose setup folds repeated uses, as its own type.
pub fn previous<'a, T: Configured>(ctx: &SetupCtx<'a>) -> Option<&'a T> {
    ctx.previous.and_then(|p| (p as &dyn Any).downcast_ref::<T>())
}
