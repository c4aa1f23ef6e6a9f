//! The `local` directive's Corefile syntax, as CoreDNS 1.14.7 reads it: `local`, with no
//! arguments, and an optional block with `localhost_prefix on|off`.

use std::sync::Arc;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// `local`, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalConfig {
    /// `localhost.<domain>` names are answered as localhost (`localhost_prefix on`, the
    /// default).
    pub localhost_prefix: bool,
}

/// The `local` directive's setup (once per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.args().expect_none()?;
    let mut config = LocalConfig {
        localhost_prefix: true,
    };
    for opt in &d.block {
        if opt.name.text != "localhost_prefix" {
            return Err(d.error_at(
                &opt.name,
                format!("unknown property '{}' (localhost_prefix)", opt.name.text),
            ));
        }
        let arg = d.option_arg(opt)?;
        config.localhost_prefix = match arg.text.as_str() {
            "on" => true,
            "off" => false,
            other => {
                return Err(d.error_at(
                    arg,
                    format!("localhost_prefix expects 'on' or 'off', got '{other}'"),
                ));
            }
        };
    }
    Ok(Arc::new(config))
}

impl Configured for LocalConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let counter = ctx
            .metrics
            .and_then(|m| m.families::<super::LocalMetrics>().ok())
            .map(|m| m.localhost);
        Built::Plugin(Arc::new(super::Local::new(self.localhost_prefix, counter)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LocalConfig, String> {
        let c = crate::chain::set_up(text, setup)?;
        let any: &dyn std::any::Any = c.as_ref();
        Ok(*any.downcast_ref::<LocalConfig>().unwrap())
    }

    #[test]
    fn the_prefix_is_on_unless_turned_off() {
        assert!(parse("local").unwrap().localhost_prefix);
        assert!(
            parse("local {\n localhost_prefix on\n}")
                .unwrap()
                .localhost_prefix
        );
        assert!(
            !parse("local {\n localhost_prefix off\n}")
                .unwrap()
                .localhost_prefix
        );
    }

    #[test]
    fn wrong_options_fail_at_their_line() {
        for (bad, says) in [
            ("local now", "Corefile:2: unexpected argument 'now' to 'local'"),
            (
                "local {\n localhost_prefix maybe\n}",
                "Corefile:3: local: localhost_prefix expects 'on' or 'off', got 'maybe'",
            ),
            (
                "local {\n localhost_prefix\n}",
                "Corefile:3: local: localhost_prefix takes exactly one argument",
            ),
            (
                "local {\n localhost_prefix on off\n}",
                "Corefile:3: local: localhost_prefix takes exactly one argument",
            ),
            (
                "local {\n prefix off\n}",
                "Corefile:3: local: unknown property 'prefix'",
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
