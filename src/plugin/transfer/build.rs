//! How a configured `transfer` directive becomes its plugin: the glue between the Corefile
//! syntax (`setup.rs`) and the query path (`handler.rs`), kept apart so neither imports the other.

use std::sync::Arc;

use super::setup::TransferConfig;
use crate::chain::{BuildCtx, Built, Configured};

impl Configured for TransferConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::Transfer::new(self)))
    }
}
