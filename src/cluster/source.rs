//! One cluster source: a [`ClusterZone`] and what fills it, the manifests loaded once or the
//! API watches that keep it in step. The kubernetes plugin owns one per distinct set of
//! [`WatchOptions`] and keeps it across configurations that do not change them (through
//! `chain::Resources`, a layer up): a reload that changes another line keeps the zone and
//! its watches, with no relist. Dropping the source stops its watches.

use std::sync::Arc;

use super::ClusterZone;
use super::manifests::{self, ManifestError};
use super::metrics::KubernetesMetrics;
use super::watch::{self, ApiSource, WatchError, WatchOptions, WatchSource};

/// Why a source could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A manifest file could not be loaded.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The API connection could not be set up.
    #[error(transparent)]
    Watch(#[from] WatchError),
}

/// A zone and its filling (see the module docs).
#[derive(Debug)]
pub struct ClusterSource {
    zone: Arc<ClusterZone>,
    /// The API watches; `None` for manifests, loaded once.
    watch: Option<WatchSource>,
}

impl ClusterSource {
    /// Fills a new zone as `options` say: manifests are loaded before this returns; API
    /// watches start, and until their first lists are in, the zone is not synced (a would-be
    /// NXDOMAIN is answered SERVFAIL). `metrics`: the families the watches count into.
    pub async fn start(
        options: &WatchOptions,
        metrics: Option<KubernetesMetrics>,
    ) -> Result<Self, SourceError> {
        let zone = Arc::new(ClusterZone::new());
        let watch = match &options.source {
            ApiSource::Manifests(paths) => {
                let report = manifests::load_files(paths, &zone)?;
                // The decoded documents are gone: their pages go back, as after a watch's list.
                super::heap::release_freed_heap();
                tracing::info!(
                    applied = report.applied,
                    ignored = report.ignored,
                    skipped = report.skipped.len(),
                    services = zone.service_count(),
                    "loaded cluster objects from manifests"
                );
                None
            }
            _ => Some(watch::start_with_metrics(options, zone.clone(), metrics).await?),
        };
        Ok(Self { zone, watch })
    }

    /// A source over a zone filled elsewhere (the test harness's fixture), with no watches.
    pub fn fixed(zone: Arc<ClusterZone>) -> Self {
        Self { zone, watch: None }
    }

    /// The zone.
    pub fn zone(&self) -> &Arc<ClusterZone> {
        &self.zone
    }

    /// The API watches' sync state, when the source watches the API.
    pub fn sync_state(&self) -> Option<watch::SyncState> {
        self.watch.as_ref().map(WatchSource::sync_state)
    }

    /// The watches that have not completed their first list, each with its last error
    /// (`services: 401 Unauthorized ...`); empty once synced, and for manifests.
    pub fn waiting(&self) -> Vec<String> {
        self.watch
            .as_ref()
            .map(|w| w.sync_state().waiting())
            .unwrap_or_default()
    }
}
