//! How a configured `fairness` directive becomes its plugin and what it offers its block: the
//! table is made when the block's resources are acquired, offered to `forward` as the block's
//! [`FairShare`], and bound at build to the kubernetes plugin's pod index ([`PodNamespaces`],
//! when the block has `pods verified`) and to the block's counters.

use std::sync::Arc;

use super::handler::{Fairness, Share, Shared};
use super::metrics::{Decisions, FairnessMetrics};
use super::setup::FairnessConfig;
use crate::chain::{AcquireCtx, AcquireFuture, BuildCtx, Built, Capabilities, Configured};
use crate::corefile::CorefileError;
use crate::plugin::kit::{FairShare, PodNamespaces};

impl Configured for FairnessConfig {
    fn acquire<'a>(&'a self, ctx: AcquireCtx<'a>) -> AcquireFuture<'a> {
        Box::pin(async move {
            let families = ctx.metrics.and_then(|m| m.families::<FairnessMetrics>().ok());
            let shared = Arc::new(Shared::new(
                self.clone(),
                families.as_ref().map(|f| f.clients.clone()),
                families.as_ref().map(|f| f.overflow.clone()),
            ));
            let mut offered = Capabilities::default();
            offered.offer(Arc::new(FairShare(Arc::new(Share::new(shared.clone())))));
            offered.offer(shared);
            Ok(offered)
        })
    }

    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let Some(shared) = ctx.capabilities.get::<Shared>() else {
            return Built::Nothing;
        };
        let directory = ctx.capabilities.get::<PodNamespaces>().map(|p| p.0.clone());
        let decisions = ctx
            .metrics
            .and_then(|m| m.families::<FairnessMetrics>().ok())
            .map(|f| Decisions::for_server(&f, ctx.server));
        shared.bind(directory, decisions);
        Built::Plugin(Arc::new(Fairness::new(shared)))
    }

    /// Without `pods verified` nothing knows clients' namespaces: every client is grouped by
    /// its address prefix, which the server starts with and says.
    fn warnings(&self, block: &[(&'static str, Arc<dyn Configured>)]) -> Vec<CorefileError> {
        let knows = block
            .iter()
            .any(|(_, c)| c.offers(std::any::TypeId::of::<PodNamespaces>()));
        let Some(at) = &self.at else {
            return Vec::new();
        };
        if knows {
            return Vec::new();
        }
        vec![CorefileError::Invalid {
            loc: at.clone(),
            message: "fairness: no plugin of this block knows clients' namespaces (the kubernetes plugin does with `pods verified`): every client is grouped by its address prefix".to_owned(),
        }]
    }
}
