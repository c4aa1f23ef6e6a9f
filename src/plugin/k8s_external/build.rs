//! How a configured `k8s_external` directive becomes its plugin, and what it checks against its block
//! and offers it: the glue between the Corefile syntax (`setup.rs`) and the query path
//! (`handler.rs`), kept apart so neither of them imports the other.

use super::setup::K8sExternalConfig;
use crate::chain::{BuildCtx, Built, Configured};
use crate::cluster::ClusterSource;
use crate::corefile::CorefileError;
use std::any::TypeId;
use std::sync::Arc;

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
