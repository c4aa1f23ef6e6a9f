//! How a configured `forward` block becomes its plugin: the glue between the Corefile syntax
//! (`setup.rs`) and the query path (`handler.rs`, `chained.rs`), kept apart so that the setup,
//! which the handler reads its configuration from, imports neither (the layer test finds import
//! loops of any length).

use std::sync::Arc;

use super::setup::ForwardBlock;
use crate::chain::{BuildCtx, Built, Configured};

impl Configured for ForwardBlock {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let families = ctx
            .metrics
            .and_then(|m| m.families::<super::ForwardMetrics>().ok());
        let taps: Vec<Arc<dyn crate::plugin::kit::Tap>> = ctx
            .capabilities
            .all::<crate::plugin::kit::TapSink>()
            .into_iter()
            .map(|s| s.0.clone())
            .collect();
        let share = ctx
            .capabilities
            .get::<crate::plugin::kit::FairShare>()
            .map(|s| (*s).clone());
        let mut forwards: Vec<super::Forward> = self
            .configs
            .iter()
            .map(|c| {
                let forward = super::Forward::new(c)
                    .with_taps(taps.clone())
                    .with_share(share.clone());
                match &families {
                    Some(f) => forward.with_metrics(f.clone(), ctx.server),
                    None => forward,
                }
            })
            .collect();
        match forwards.len() {
            1 => Built::Plugin(Arc::new(forwards.remove(0))),
            _ => Built::Plugin(Arc::new(super::Forwards::new(forwards))),
        }
    }
}
