//! How a configured `transfer` directive becomes its plugin: the glue between the Corefile
//! syntax (`setup.rs`) and the query path (`handler.rs`), kept apart so neither imports the other;
//! and the [`Notifier`] it offers its block (`notify.rs`).

use std::any::TypeId;
use std::sync::Arc;

use super::notify::{Learned, NotifySender};
use super::setup::TransferConfig;
use crate::chain::{AcquireCtx, AcquireFuture, BlockSettings, BuildCtx, Built, Capabilities, Configured};
use crate::plugin::kit::Notifier;

impl Configured for TransferConfig {
    /// Its block answers zone transfers (the server refuses them in blocks without it).
    fn configure(&self, settings: &mut BlockSettings) {
        settings.transfers = true;
    }

    /// Its plugin, telling the block's NOTIFY sender who transferred (`notify transferred`).
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::Transfer::new(
            self,
            ctx.capabilities.get::<Notifier>(),
        )))
    }

    fn offers(&self, capability: TypeId) -> bool {
        capability == TypeId::of::<Notifier>()
            && (!self.notify.is_empty() || self.notify_transferred.is_some())
    }

    /// Its NOTIFY sender, when a `to` line names an address or `notify transferred` is set.
    /// The addresses `notify transferred` learned are a resource kept across reloads (keyed
    /// by the zones and the port), so a reloaded Corefile still tells every agent.
    fn acquire<'a>(&'a self, ctx: AcquireCtx<'a>) -> AcquireFuture<'a> {
        Box::pin(async move {
            let mut offered = Capabilities::default();
            let learned = match self.notify_transferred {
                Some(port) => {
                    let gauge = ctx
                        .metrics
                        .and_then(|m| m.families::<super::TransferMetrics>().ok())
                        .map(|m| m.learned);
                    let key = (self.zones.clone(), port);
                    let made = ctx
                        .resources
                        .get_or_make(key, || async {
                            Ok::<_, std::convert::Infallible>(Learned::new(port, gauge))
                        })
                        .await;
                    made.ok().map(|a| a.value)
                }
                None => None,
            };
            if let Some(sender) = NotifySender::new(self, learned) {
                offered.offer(Arc::new(Notifier(Arc::new(sender))));
            }
            Ok(offered)
        })
    }
}
