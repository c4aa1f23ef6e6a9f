//! How a configured `transfer` directive becomes its plugin: the glue between the Corefile
//! syntax (`setup.rs`) and the query path (`handler.rs`), kept apart so neither imports the other;
//! and the [`Notifier`] it offers its block (`notify.rs`).

use std::any::TypeId;
use std::sync::Arc;

use super::notify::NotifySender;
use super::setup::TransferConfig;
use crate::chain::{AcquireCtx, AcquireFuture, BlockSettings, BuildCtx, Built, Capabilities, Configured};
use crate::plugin::kit::Notifier;

impl Configured for TransferConfig {
    /// Its block answers zone transfers (the server refuses them in blocks without it).
    fn configure(&self, settings: &mut BlockSettings) {
        settings.transfers = true;
    }

    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::Transfer::new(self)))
    }

    fn offers(&self, capability: TypeId) -> bool {
        capability == TypeId::of::<Notifier>() && !self.notify.is_empty()
    }

    /// Its NOTIFY sender, when a `to` line names an address.
    fn acquire<'a>(&'a self, _ctx: AcquireCtx<'a>) -> AcquireFuture<'a> {
        let mut offered = Capabilities::default();
        if let Some(sender) = NotifySender::new(self) {
            offered.offer(Arc::new(Notifier(Arc::new(sender))));
        }
        Box::pin(std::future::ready(Ok(offered)))
    }
}
