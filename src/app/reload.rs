//! Reload: the timer `reload` asks for, the detector of a changed Corefile, and applying a new
//! configuration beside the running one: built (its plugins take over the resources the
//! running one holds, when their configuration kept them), given time to become as ready as
//! the running one, then new listeners bound, routing tables swapped in one store and gone
//! listeners stopped. A configuration that fails to build leaves the running one serving.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::build::{ListenKey, build};
use super::error::StartError;
use super::listen::listen;
use super::state::Inner;
use crate::chain::ReloadSettings;
use crate::config::Config;
use crate::corefile::Corefile;
use crate::server::ServerError;

/// How long a new configuration is given to become as ready as the running one before it is
/// swapped in anyway (a new API source's first lists; it answers SERVFAIL until then).
const READY_WAIT: Duration = Duration::from_secs(30);

/// Tells whether the Corefile at a path changed since the last look. Reading the path each
/// time follows the `..data` symlink swap a ConfigMap update makes, which a watch on the file
/// itself would lose after the first swap.
#[derive(Debug)]
pub(super) struct ChangeDetector {
    path: PathBuf,
    last: Option<Vec<u8>>,
}

impl ChangeDetector {
    /// A detector that takes the file's current content as the running one.
    pub(super) fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            last: std::fs::read(path).ok(),
        }
    }

    /// The new content when it differs from the last seen (an unreadable file is no change:
    /// a ConfigMap swap can leave it missing for a moment).
    pub(super) fn poll(&mut self) -> Option<Vec<u8>> {
        let now = std::fs::read(&self.path).ok()?;
        if self.last.as_deref() == Some(now.as_slice()) {
            return None;
        }
        self.last = Some(now.clone());
        Some(now)
    }
}

/// The `reload` timer: re-reads the Corefile every interval (± jitter) and applies it when it
/// changed. Ends when the server stops.
pub(super) async fn reload_loop(inner: Weak<Inner>, path: PathBuf, cfg: ReloadSettings) {
    let mut detector = ChangeDetector::new(&path);
    loop {
        let jitter = cfg.jitter.as_millis() as u64;
        let wait = if jitter == 0 {
            cfg.interval
        } else {
            let offset = rand::random_range(0..=2 * jitter);
            (cfg.interval + Duration::from_millis(offset)).saturating_sub(cfg.jitter)
        };
        tokio::time::sleep(wait).await;
        let Some(text) = detector.poll() else {
            if inner.strong_count() == 0 {
                return;
            }
            continue;
        };
        let Some(inner) = inner.upgrade() else { return };
        let parsed = match std::str::from_utf8(&text) {
            Ok(t) => Corefile::parse_str(t, &path)
                .and_then(|cf| Config::from_corefile(&cf, &path, inner.default_port))
                .map_err(StartError::from),
            Err(_) => Err(StartError::NotUtf8(path.clone())),
        };
        let applied = match parsed {
            Ok(config) => {
                for w in &config.warnings {
                    tracing::warn!("reload: {w}");
                }
                apply(&inner, config).await
            }
            Err(e) => Err(e),
        };
        match applied {
            Ok(()) => inner.shared.reload.running(&text),
            Err(e) => {
                inner.shared.reload.failed();
                tracing::error!("reload: {e}; the running configuration keeps serving");
            }
        }
    }
}

/// Applies `config`: builds it beside the running generation, waits (bounded) until it is as
/// ready as the running one, binds new addresses, then swaps each kept address's routing
/// table and stops the addresses no longer listed.
pub(super) async fn apply(inner: &Inner, config: Config) -> Result<(), StartError> {
    let _applying = inner.applying.lock().await;
    let running_not_ready = {
        let state = inner
            .state
            .lock()
            .map_err(|_| ServerError::Serve("state lock poisoned".into()))?;
        match state.as_ref() {
            Some(s) => s.generation.not_ready(),
            None => return Ok(()),
        }
    };
    if config.http_paths() != inner.http_paths_as_configured() {
        tracing::warn!(
            "reload: changed HTTP addresses (health, ready, prometheus) take effect after a restart"
        );
    }
    let generation = build(config, &inner.shared.build_env()).await?;
    // What the new generation brings that is not ready (a new API source, until its first
    // lists are in: it would answer SERVFAIL) gets time before it takes traffic.
    let deadline = tokio::time::Instant::now() + READY_WAIT;
    while tokio::time::Instant::now() < deadline
        && generation
            .not_ready()
            .iter()
            .any(|why| !running_not_ready.contains(why))
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let running_keys: Vec<ListenKey> = inner
        .state
        .lock()
        .ok()
        .and_then(|s| s.as_ref().map(|s| s.listeners.keys().copied().collect()))
        .unwrap_or_default();
    let mut fresh = BTreeMap::new();
    for (key, router) in &generation.routers {
        if !running_keys.contains(key) {
            fresh.insert(
                *key,
                listen(
                    *key,
                    router.clone(),
                    generation.listener_settings(key),
                    &inner.shared,
                )
                .await?,
            );
        }
    }
    let mut stopped = Vec::new();
    let replaced = {
        let mut guard = inner
            .state
            .lock()
            .map_err(|_| ServerError::Serve("state lock poisoned".into()))?;
        let Some(state) = guard.as_mut() else {
            return Ok(());
        };
        for (key, listener) in &state.listeners {
            if let Some(router) = generation.routers.get(key) {
                listener.cell.store(Arc::new(router.clone()));
            }
            // New certificates take effect for new connections.
            // (A plain DNS listener has no certificate to take.)
            let tls = generation
                .listeners
                .get(key)
                .and_then(|l| l.tls.as_ref())
                .filter(|_| key.2 != crate::corefile::Scheme::Dns);
            if let (Some(tls), Some(quic)) = (tls, &listener.quic) {
                if let Err(error) = quic.update_tls(tls) {
                    tracing::warn!(addr = %listener.addr, %error, "reload: the new certificate cannot serve DNS over QUIC; keeping the old one");
                }
            } else if let Some(tls) = tls
                && !listener.protocol.update_tls(tls)
            {
                tracing::warn!(addr = %listener.addr, "reload: a 'tls' directive added to a running listener takes effect after a restart");
            }
        }
        let gone: Vec<ListenKey> = state
            .listeners
            .keys()
            .filter(|k| !generation.routers.contains_key(k))
            .copied()
            .collect();
        for k in gone {
            if let Some(l) = state.listeners.remove(&k) {
                stopped.push(l);
            }
        }
        state.listeners.extend(fresh);
        inner.shared.readiness.replace(generation.readiness_checks());
        generation.start();
        std::mem::replace(&mut state.generation, generation)
    };
    // The old generation goes outside the lock: what only it held (a source no block uses any
    // more, with its watches) stops here.
    drop(replaced);
    for l in stopped {
        tracing::info!(addr = %l.addr, "reload: no server block listens here any more; stopped");
        let _ = l.stop.send(());
        let _ = l.task.await;
    }
    tracing::info!("reload: new configuration applied");
    Ok(())
}

impl Inner {
    fn http_paths_as_configured(&self) -> Vec<(std::net::SocketAddr, Vec<&'static str>)> {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| s.generation.config.http_paths()))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_detector_follows_a_symlink_swap() {
        let dir = std::env::temp_dir().join(format!("cluster-dns-reload-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("v1")).unwrap();
        std::fs::create_dir_all(dir.join("v2")).unwrap();
        std::fs::write(dir.join("v1/Corefile"), "a").unwrap();
        std::fs::write(dir.join("v2/Corefile"), "b").unwrap();
        std::os::unix::fs::symlink("v1", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/Corefile", dir.join("Corefile")).unwrap();
        let mut d = ChangeDetector::new(&dir.join("Corefile"));
        assert_eq!(d.poll(), None);
        // Swap ..data atomically, as the kubelet does.
        std::os::unix::fs::symlink("v2", dir.join("..data_tmp")).unwrap();
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
        assert_eq!(d.poll(), Some(b"b".to_vec()));
        assert_eq!(d.poll(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
