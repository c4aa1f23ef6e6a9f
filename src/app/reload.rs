//! Reload: the `reload` plugin's timer, and applying a new configuration beside the running one
//! (new listeners bound, routing tables swapped in one store, gone listeners stopped).

use super::*;

/// The `reload` plugin's timer: re-reads the Corefile every interval (± jitter) and applies it
/// when it changed. Ends when the server stops.
pub(super) async fn reload_loop(
    inner: Weak<Inner>,
    path: std::path::PathBuf,
    cfg: crate::plugin::reload::ReloadConfig,
) {
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
            Ok(config) => apply(&inner, config).await,
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

/// Applies `config`: builds it beside the running generation, waits (bounded) for new API
/// sources to sync, binds new addresses, then swaps each kept address's routing table and stops
/// the addresses no longer listed.
pub(super) async fn apply(inner: &Inner, config: Config) -> Result<(), StartError> {
    let previous: Vec<Arc<Source>> = {
        let state = inner
            .state
            .lock()
            .map_err(|_| ServerError::Serve("state lock poisoned".into()))?;
        match state.as_ref() {
            Some(s) => s.generation.sources.clone(),
            None => return Ok(()),
        }
    };
    if config.http_listeners() != inner.http_addrs_as_configured() {
        tracing::warn!("reload: changed health/ready/prometheus addresses take effect after a restart");
    }
    let generation = build(config, &inner.shared, &previous).await?;
    // A new API source answers SERVFAIL until synced: give it time before it takes traffic.
    for s in &generation.sources {
        if previous.iter().any(|p| Arc::ptr_eq(p, s)) {
            continue;
        }
        if let Some(w) = &s.watch {
            let state = w.sync_state();
            for _ in 0..600 {
                if state.is_synced() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
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
            let tls = generation.tls.get(key).cloned();
            fresh.insert(*key, listen(*key, router.clone(), tls, &inner.shared.tcp).await?);
        }
    }
    let mut stopped = Vec::new();
    {
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
            if let Some(tls) = generation.tls.get(key)
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
        inner.shared.readiness.replace(readiness_checks(&generation));
        for chain in &generation.chains {
            chain.start();
        }
        state.generation = generation;
    }
    for l in stopped {
        tracing::info!(addr = %l.addr, "reload: no server block listens here any more; stopped");
        let _ = l.stop.send(());
        let _ = l.task.await;
    }
    tracing::info!("reload: new configuration applied");
    Ok(())
}

impl Inner {
    fn http_addrs_as_configured(&self) -> Vec<(SocketAddr, HttpEndpoints)> {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| s.generation.config.http_listeners()))
            .unwrap_or_default()
    }
}
