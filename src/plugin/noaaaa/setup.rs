//! The `noaaaa` directive's Corefile syntax, parsed into a [`NoaaaaConfig`], and its
//! [`Configured`] impl: what the configured directive builds.
//!
//! ```text
//! noaaaa [always|auto] [ZONES...]
//! ```
//!
//! Bare, it is `auto` for `.`: active while no Service in the cluster has an IPv6 address.
//! Refused beside `dns64` in one block (one synthesizes AAAA answers, the other removes them).

use std::sync::Arc;

use hickory_proto::rr::Name;

use super::handler::{Mode, Noaaaa};
use super::metrics::NoaaaaMetrics;
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Location};
use crate::plugin::kit::ClusterFamilies;

/// A block's `noaaaa`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoaaaaConfig {
    /// When it answers.
    pub mode: Mode,
    /// The zones whose AAAA questions it answers, lower-case and absolute (default `.`).
    pub zones: Vec<Name>,
    /// Where the directive is (the `dns64` conflict is reported there).
    pub at: Location,
    /// The directive as written, for that error.
    pub directive: String,
}

/// The `noaaaa` directive's setup: once per block, no block of options.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.expect_no_block()?;
    let (mode, args) = match d.args.split_first() {
        Some((t, rest)) if t.text == "always" => (Mode::Always, rest),
        Some((t, rest)) if t.text == "auto" => (Mode::Auto, rest),
        _ => (Mode::Auto, d.args.as_slice()),
    };
    let zones = if args.is_empty() {
        vec![Name::root()]
    } else {
        args.iter()
            .map(|t| {
                let z = crate::corefile::normalize_zone_or_cidr(&t.text).map_err(|e| d.error_at(t, e))?;
                Name::from_ascii(&z)
                    .map(|n| n.to_lowercase())
                    .map_err(|_| d.error_at(t, format!("'{}' is not a zone", t.text)))
            })
            .collect::<Result<_, _>>()?
    };
    Ok(Arc::new(NoaaaaConfig {
        mode,
        zones,
        at: d.name.loc.clone(),
        directive: d.name.text.clone(),
    }))
}

impl Configured for NoaaaaConfig {
    /// `dns64` makes AAAA answers for IPv6-only clients where this one takes them away.
    fn check(&self, block: &[(&'static str, Arc<dyn Configured>)]) -> Result<(), CorefileError> {
        if block.iter().any(|(name, _)| *name == "dns64") {
            return Err(CorefileError::Directive {
                loc: self.at.clone(),
                directive: self.directive.clone(),
                message: "cannot be used with dns64 in the same server block: dns64 synthesizes AAAA answers for IPv6-only clients, noaaaa answers AAAA with no records; remove one of them".into(),
            });
        }
        Ok(())
    }

    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let families = ctx.capabilities.get::<ClusterFamilies>().map(|f| (*f).clone());
        if self.mode == Mode::Auto && families.is_none() {
            tracing::warn!(
                at = %self.at,
                "noaaaa auto: this server block has no kubernetes plugin to tell whether any Service has an IPv6 address; it stays off (write 'noaaaa always' to answer AAAA locally anyway)"
            );
        }
        let metrics = ctx
            .metrics
            .and_then(|m| m.families::<NoaaaaMetrics>().ok())
            .map(|m| m.block(ctx.server));
        Built::Plugin(Arc::new(Noaaaa::new(
            self.zones.clone(),
            self.mode,
            families,
            metrics,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::set_up;

    fn config(text: &str) -> Result<NoaaaaConfig, String> {
        set_up(text, setup).map(|c| {
            (c.as_ref() as &dyn std::any::Any)
                .downcast_ref::<NoaaaaConfig>()
                .expect("a NoaaaaConfig")
                .clone()
        })
    }

    #[test]
    fn modes_and_zones() {
        let c = config("noaaaa").unwrap();
        assert_eq!((c.mode, c.zones.clone()), (Mode::Auto, vec![Name::root()]));
        let c = config("noaaaa always").unwrap();
        assert_eq!((c.mode, c.zones.clone()), (Mode::Always, vec![Name::root()]));
        let c = config("noaaaa auto example.com EXAMPLE.net.").unwrap();
        assert_eq!(c.mode, Mode::Auto);
        assert_eq!(
            c.zones,
            vec![
                Name::from_ascii("example.com.").unwrap(),
                Name::from_ascii("example.net.").unwrap()
            ]
        );
        let e = config("noaaaa {\n}").unwrap_err();
        assert!(e.contains("Corefile:2: noaaaa: takes no block"), "{e}");
        let e = config("noaaaa always bad..zone").unwrap_err();
        assert!(e.contains("Corefile:2"), "{e}");
    }
}
