//! The `cancel` directive's Corefile syntax, as CoreDNS 1.14.7 reads it: `cancel [TIMEOUT]`, a
//! Go duration more than zero (5001 ms when absent), no block.

use std::sync::Arc;
use std::time::Duration;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, parse_duration};

/// The bound when none is written: just past the 5 s most DNS clients wait.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(5001);

/// `cancel`, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CancelConfig {
    /// How long the rest of the chain may take for one question.
    pub timeout: Duration,
}

/// The `cancel` directive's setup (once per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.expect_no_block()?;
    let mut args = d.args();
    let timeout = match args.next() {
        None => DEFAULT_TIMEOUT,
        Some(arg) => match parse_duration(&arg.text) {
            Some(t) if !t.is_zero() => t,
            Some(_) => {
                return Err(d.error_at(
                    arg,
                    format!("invalid duration '{}': it must be more than 0", arg.text),
                ));
            }
            None => {
                return Err(d.error_at(arg, format!("invalid duration '{}' (e.g. 1s, 500ms)", arg.text)));
            }
        },
    };
    args.expect_none()?;
    Ok(Arc::new(CancelConfig { timeout }))
}

impl Configured for CancelConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::Cancel::new(self.timeout)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Duration, String> {
        let c = crate::chain::set_up(text, setup)?;
        let any: &dyn std::any::Any = c.as_ref();
        Ok(any.downcast_ref::<CancelConfig>().unwrap().timeout)
    }

    #[test]
    fn the_timeout_defaults_to_5001_ms() {
        assert_eq!(parse("cancel").unwrap(), Duration::from_millis(5001));
        assert_eq!(parse("cancel 1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse("cancel 1m30s").unwrap(), Duration::from_secs(90));
    }

    #[test]
    fn wrong_arguments_fail_at_their_line() {
        for (bad, says) in [
            ("cancel soon", "Corefile:2: cancel: invalid duration 'soon'"),
            ("cancel 5", "Corefile:2: cancel: invalid duration '5'"),
            ("cancel -1s", "Corefile:2: cancel: invalid duration '-1s'"),
            (
                "cancel 0s",
                "Corefile:2: cancel: invalid duration '0s': it must be more than 0",
            ),
            ("cancel 1s 2s", "Corefile:2: unexpected argument '2s' to 'cancel'"),
            ("cancel {\n}", "Corefile:2: cancel: takes no block"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
