//! The `dnspolicy` directive's Corefile syntax:
//!
//! ```text
//! dnspolicy {
//!     unmapped allow|deny
//!     observed ADDRESS
//! }
//! ```
//!
//! `unmapped` is required: what a client that is not a known pod (a node's address, a
//! host-network pod, an address no pod holds) gets: `allow`, every name as if no policy
//! existed; `deny`, REFUSED for every name. `observed` serves, at `ADDRESS` (as `prometheus`
//! takes it; the same address shares its listener), `/dnspolicy/observed`: per `Audit`
//! policy, the outside names its pods asked, as a merge patch of the policy.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::chain::{Configured, SetupCtx};
use crate::cluster::ClusterSource;
use crate::corefile::{CorefileError, Directive, Location};

/// What a client no pod is known at gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmapped {
    /// Every name, as if no policy existed.
    Allow,
    /// REFUSED, for every name.
    Deny,
}

/// A parsed `dnspolicy` directive.
#[derive(Debug, Clone)]
pub struct DnsPolicyConfig {
    /// `unmapped`.
    pub unmapped: Unmapped,
    /// `observed ADDRESS`.
    pub observed: Option<SocketAddr>,
    /// Where the directive is written (its errors name it).
    pub at: Location,
    /// The cluster source the built plugin reads, for the `observed` page (set at build; a
    /// reload's build sets its own).
    pub(super) source: Arc<Mutex<Option<Arc<ClusterSource>>>>,
}

/// Parses `dnspolicy`.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.args().expect_none()?;
    let mut unmapped = None;
    let mut observed = None;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "unmapped" => {
                let value = d.option_arg(opt)?;
                unmapped = Some(match value.text.as_str() {
                    "allow" => Unmapped::Allow,
                    "deny" => Unmapped::Deny,
                    other => {
                        return Err(d.error_at(value, format!("unmapped '{other}': allow or deny")));
                    }
                });
            }
            "observed" => {
                let addr = d.option_arg(opt)?;
                observed = Some(
                    crate::corefile::parse_http_addr(&addr.text)
                        .map_err(|e| d.error_at(addr, format!("observed: {e}")))?,
                );
            }
            other => {
                return Err(d.error_at(
                    &opt.name,
                    format!("unknown property '{other}' (unmapped, observed)"),
                ));
            }
        }
    }
    let Some(unmapped) = unmapped else {
        return Err(d.error(
            "dnspolicy needs 'unmapped allow' or 'unmapped deny' in its block: what clients that are not known pods (node addresses, host-network pods) get is a choice to write down",
        ));
    };
    Ok(Arc::new(DnsPolicyConfig {
        unmapped,
        observed,
        at: d.name.loc.clone(),
        source: Arc::default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::any::Any;

    fn parse(text: &str) -> Result<DnsPolicyConfig, String> {
        let c = crate::chain::set_up(text, setup)?;
        let any: &dyn Any = c.as_ref();
        Ok(any.downcast_ref::<DnsPolicyConfig>().unwrap().clone())
    }

    #[test]
    fn unmapped_is_a_required_choice() {
        assert_eq!(
            parse("dnspolicy {\n unmapped deny\n}").unwrap().unmapped,
            Unmapped::Deny
        );
        let c = parse("dnspolicy {\n unmapped allow\n observed :9153\n}").unwrap();
        assert_eq!(c.unmapped, Unmapped::Allow);
        assert_eq!(c.observed.unwrap().port(), 9153);
        for (text, want) in [
            ("dnspolicy", "needs 'unmapped allow' or 'unmapped deny'"),
            (
                "dnspolicy {\n unmapped maybe\n}",
                "unmapped 'maybe': allow or deny",
            ),
            ("dnspolicy {\n unmapped\n}", "unmapped takes exactly one argument"),
            ("dnspolicy a.b {\n unmapped deny\n}", "Corefile:2"),
            (
                "dnspolicy {\n unmapped deny\n frobnicate\n}",
                "unknown property 'frobnicate'",
            ),
            ("dnspolicy {\n unmapped deny\n observed nope:x\n}", "observed"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
