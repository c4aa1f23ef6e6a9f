//! How a configured `file` directive becomes its plugin, and what it tells `--check`: the glue
//! between the Corefile syntax (`setup.rs`) and the query path (`handler.rs`), kept apart so
//! neither of them imports the other.

use super::setup::FileConfig;
use crate::chain::{BuildCtx, Built, Configured, NamedFile};
use crate::plugin::kit::Notifier;
use std::sync::Arc;

impl Configured for FileConfig {
    /// The zone files: needed unless `reload` reads them once they appear.
    fn files(&self) -> Vec<NamedFile> {
        self.files
            .iter()
            .map(|f| NamedFile {
                path: f.path.clone(),
                at: f.at.clone(),
                what: "file: zone file".to_owned(),
                needed: f.reload.is_zero(),
            })
            .collect()
    }

    /// Its plugin, with the block's NOTIFY sender when it has one (`transfer`).
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::File::new(
            self,
            ctx.capabilities.get::<Notifier>(),
        )))
    }
}
