//! The `k8s_external` directive's Corefile syntax:
//! `k8s_external [ZONE...] { apex APEX; ttl TTL; headless; fallthrough [ZONE...] }`.
//!
//! And how a configured `k8s_external` directive becomes its plugin: its [`Configured`] impl, what it
//! checks against its block and offers it. What it parses into is `config.rs`'s, which the
//! handler reads too, so the handler never imports this file (the layer test finds import loops).

use std::any::TypeId;
use std::sync::Arc;

use hickory_proto::rr::Name;

use super::config::K8sExternalConfig;
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::cluster::ClusterSource;
use crate::corefile::{CorefileError, Directive, Token, normalize_zone_or_cidr};
use crate::proto::is_dns_label;

/// The default TTL of its answers (CoreDNS's).
pub const DEFAULT_TTL: u32 = 5;

fn zone_name(d: &Directive, t: &Token) -> Result<Name, CorefileError> {
    let z = normalize_zone_or_cidr(&t.text).map_err(|e| d.error_at(t, e))?;
    Name::from_ascii(&z)
        .map(|n| n.to_lowercase())
        .map_err(|_| d.error_at(t, format!("'{}' is not a zone", t.text)))
}

/// The `k8s_external` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    let zones = if d.args.is_empty() {
        ctx.zones
            .iter()
            .map(|z| {
                Name::from_ascii(z)
                    .map(|n| n.to_lowercase())
                    .map_err(|_| d.error(format!("'{z}' is not a zone")))
            })
            .collect::<Result<Vec<_>, _>>()?
    } else {
        d.args
            .iter()
            .map(|t| zone_name(d, t))
            .collect::<Result<Vec<_>, _>>()?
    };
    let mut c = K8sExternalConfig {
        zones,
        apex: "dns".to_owned(),
        ttl: DEFAULT_TTL,
        headless: false,
        fallthrough: None,
        at: d.name.clone(),
    };
    for opt in &d.block {
        match opt.name.text.as_str() {
            "apex" => {
                let t = d.option_arg(opt)?;
                let apex = t.text.to_ascii_lowercase();
                if !is_dns_label(&apex) {
                    return Err(d.error_at(t, format!("apex: '{}' is not a DNS label", t.text)));
                }
                c.apex = apex;
            }
            "ttl" => {
                let t = d.option_arg(opt)?;
                c.ttl = t.text.parse::<u32>().ok().filter(|v| *v <= 3600).ok_or_else(|| {
                    d.error_at(t, format!("ttl: '{}' is not a number from 0 to 3600", t.text))
                })?;
            }
            "headless" => {
                d.option_no_args(opt)?;
                c.headless = true;
            }
            "fallthrough" => {
                c.fallthrough = Some(
                    opt.args
                        .iter()
                        .map(|t| zone_name(d, t))
                        .collect::<Result<Vec<_>, _>>()?,
                );
            }
            other => {
                return Err(d.error_at(
                    &opt.name,
                    format!("unknown property '{other}' (expected apex, ttl, headless or fallthrough)"),
                ));
            }
        }
    }
    Ok(Arc::new(c))
}

impl Configured for K8sExternalConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        match ctx.capabilities.get::<ClusterSource>() {
            Some(source) => Built::Plugin(Arc::new(super::K8sExternal::new(
                self.clone(),
                source.zone().clone(),
                crate::cluster::self_ips_from_env(),
            ))),
            None => Built::Nothing,
        }
    }

    /// It serves from the cluster zone a plugin of its block offers (the `kubernetes` plugin's;
    /// CoreDNS refuses a `k8s_external` without one too).
    fn check(&self, block: &[(&'static str, Arc<dyn Configured>)]) -> Result<(), CorefileError> {
        if block.iter().any(|(_, c)| c.offers(TypeId::of::<ClusterSource>())) {
            Ok(())
        } else {
            Err(CorefileError::Directive {
                loc: self.at.loc.clone(),
                directive: self.at.text.clone(),
                message:
                    "needs a 'kubernetes' plugin in the same server block (it serves that plugin's Services)"
                        .into(),
            })
        }
    }
}
