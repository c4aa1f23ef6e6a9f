//! The `errors` directive's Corefile syntax, parsed into an [`ErrorsConfig`], and its
//! [`Configured`] impl (the block's observer, `handler.rs`):
//!
//! ```text
//! errors {
//!     stacktrace
//!     consolidate DURATION REGEXP [warning|error|info|debug] [show_first]
//! }
//! ```

use std::sync::Arc;

use regex::Regex;

use super::config::{Consolidate, ErrorsConfig, Level};
use super::handler::ErrorLog;
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{Args, CorefileError, Directive, parse_duration};

/// Parses the `errors` directive.
pub fn parse(d: &Directive) -> Result<ErrorsConfig, CorefileError> {
    Args::new(d).expect_none()?;
    let mut config = ErrorsConfig::default();
    for opt in &d.block {
        match opt.name.text.as_str() {
            // Go stack traces have no equivalent; a panic is caught and counted either way.
            "stacktrace" => Args::new(opt).expect_none()?,
            "consolidate" => {
                let mut a = Args::new(opt);
                let period = a.expect("a duration such as 30s")?;
                let period = parse_duration(&period.text)
                    .filter(|p| !p.is_zero())
                    .ok_or_else(|| {
                        period.error(format!(
                            "consolidate: '{}' is not a duration such as 30s",
                            period.text
                        ))
                    })?;
                let re = a.expect("a regular expression")?;
                let pattern = Regex::new(&re.text).map_err(|e| {
                    re.error(format!(
                        "consolidate: '{}' is not a valid regular expression: {e}",
                        re.text
                    ))
                })?;
                let mut level = Level::Error;
                let mut show_first = false;
                let mut next = a.next();
                if let Some(t) = next.filter(|t| t.text != "show_first") {
                    level = match t.text.as_str() {
                        "warning" => Level::Warning,
                        "error" => Level::Error,
                        "info" => Level::Info,
                        "debug" => Level::Debug,
                        other => {
                            return Err(t.error(format!(
                                "consolidate: '{other}' is not a level (warning, error, info or debug) or show_first"
                            )));
                        }
                    };
                    next = a.next();
                }
                if let Some(t) = next {
                    if t.text != "show_first" {
                        return Err(t.error(format!(
                            "consolidate: unexpected '{}' (only show_first may follow the level)",
                            t.text
                        )));
                    }
                    show_first = true;
                }
                a.expect_none()?;
                config.consolidate.push(Consolidate {
                    period,
                    pattern,
                    level,
                    show_first,
                });
            }
            other => return Err(opt.error(format!("unknown property '{other}'"))),
        }
    }
    Ok(config)
}

/// The `errors` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d)?))
}

impl Configured for ErrorsConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Observer(Arc::new(ErrorLog::new(self)))
    }
}
