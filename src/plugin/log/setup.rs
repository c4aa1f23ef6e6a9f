//! The `log` directive's Corefile syntax, parsed into a [`LogConfig`], and its [`Configured`]
//! impl (the block's observer, `handler.rs`):
//!

use std::sync::Arc;

use super::config::{COMMON_FORMAT, Classes, LogConfig};
use super::handler::QueryLog;
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// Parses the `log` directive.
pub fn parse(d: &Directive) -> Result<LogConfig, CorefileError> {
    let mut names = Vec::new();
    let mut format = COMMON_FORMAT.to_owned();
    for (i, a) in d.args.iter().enumerate() {
        if a.text.contains('{') {
            if i + 1 != d.args.len() {
                return Err(d.error("the format must be the last argument"));
            }
            format = match a.text.as_str() {
                "{common}" => COMMON_FORMAT.to_owned(),
                "{combined}" => format!("{COMMON_FORMAT} \"{{>opcode}}\""),
                other => other.to_owned(),
            };
        } else {
            names.push(crate::corefile::normalize_zone(&a.text).map_err(|e| d.error(e))?);
        }
    }
    let mut classes = Classes::ALL;
    let mut saw_class = false;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "class" => {
                if opt.args.is_empty() {
                    return Err(d.error("class: expects all, success, denial or error"));
                }
                if !saw_class {
                    classes = Classes::default();
                    saw_class = true;
                }
                for c in &opt.args {
                    match c.text.as_str() {
                        "all" => classes = Classes::ALL,
                        "success" => classes.success = true,
                        "denial" => classes.denial = true,
                        "error" => classes.error = true,
                        other => {
                            return Err(
                                d.error(format!("class: '{other}' is not all, success, denial or error"))
                            );
                        }
                    }
                }
            }
            other => return Err(d.error(format!("unknown property '{other}'"))),
        }
    }
    Ok(LogConfig {
        names,
        format,
        classes,
    })
}

/// The `log` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d)?))
}

impl Configured for LogConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Observer(Arc::new(QueryLog::new(self)))
    }
}
