//! How a configured `dnspolicy` directive becomes its plugin, what it checks against its block
//! (a `kubernetes` plugin whose zone knows the pods) and the HTTP page it serves (`observed`).

use std::sync::{Arc, PoisonError};

use axum::response::IntoResponse;

use super::setup::DnsPolicyConfig;
use crate::chain::{BlockSettings, BuildCtx, Built, Configured, HttpRoute};
use crate::cluster::ClusterSource;
use crate::cluster::policy::{ClusterNames, Mode};
use crate::corefile::CorefileError;

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
