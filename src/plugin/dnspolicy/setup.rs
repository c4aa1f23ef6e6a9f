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
//!
//! And how a configured `dnspolicy` directive becomes its plugin (its [`Configured`] impl), what
//! it checks against its block (a `kubernetes` plugin whose zone knows the pods) and the HTTP page
//! it serves (`observed`). What it parses into is `config.rs`'s, which the handler reads too.

use std::sync::{Arc, PoisonError};

use axum::response::IntoResponse;

use super::config::{DnsPolicyConfig, Unmapped};
use crate::chain::{BlockSettings, BuildCtx, Built, Configured, HttpRoute, SetupCtx};
use crate::cluster::ClusterSource;
use crate::cluster::policy::{ClusterNames, Mode};
use crate::corefile::{CorefileError, Directive};

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

impl Configured for DnsPolicyConfig {
    fn check(&self, block: &[(&'static str, Arc<dyn Configured>)]) -> Result<(), CorefileError> {
        let offered = block
            .iter()
            .any(|(_, c)| c.offers(std::any::TypeId::of::<ClusterNames>()));
        if offered {
            Ok(())
        } else {
            Err(CorefileError::Directive {
                loc: self.at.clone(),
                directive: "dnspolicy".into(),
                message: "needs a 'kubernetes' plugin in the same server block (its watch reads the DNSPolicies and the pods)".into(),
            })
        }
    }

    fn configure(&self, settings: &mut BlockSettings) {
        let Some(addr) = self.observed else { return };
        let source = self.source.clone();
        settings.http.push(HttpRoute {
            addr,
            path: "/dnspolicy/observed",
            router: Arc::new(move |_| {
                let source = source.clone();
                axum::Router::new().route(
                    "/dnspolicy/observed",
                    axum::routing::get(move || {
                        let source = source.lock().unwrap_or_else(PoisonError::into_inner).clone();
                        async move { observed_page(source.as_deref()).into_response() }
                    }),
                )
            }),
            beside: None,
        });
    }

    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let (Some(source), Some(names)) = (
            ctx.capabilities.get::<ClusterSource>(),
            ctx.capabilities.get::<ClusterNames>(),
        ) else {
            return Built::Nothing;
        };
        let metrics = ctx
            .metrics
            .and_then(|m| m.families::<super::PolicyMetrics>().ok());
        if let Some(m) = &metrics {
            m.watch(&source);
        }
        *self.source.lock().unwrap_or_else(PoisonError::into_inner) = Some(source.clone());
        Built::Plugin(Arc::new(super::DnsPolicy::new(
            source,
            names,
            self.unmapped,
            metrics,
        )))
    }
}

/// `/dnspolicy/observed`: one JSON object per line for each `Audit` policy, naming it and
/// holding the merge patch that makes what its pods asked its allowlist
/// (`kubectl patch dnspolicy NAME -n NS --type merge -p '<patch>'`).
fn observed_page(source: Option<&ClusterSource>) -> (axum::http::StatusCode, String) {
    let Some(source) = source else {
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "no dnspolicy plugin is running\n".into(),
        );
    };
    let mut out = String::new();
    for policy in source.zone().policies().policies() {
        if policy.mode != Mode::Audit {
            continue;
        }
        let line = serde_json::json!({
            "namespace": &*policy.namespace,
            "name": &*policy.name,
            "patch": {"spec": {"external": {"allow": policy.stats.observed()}}},
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    (axum::http::StatusCode::OK, out)
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
