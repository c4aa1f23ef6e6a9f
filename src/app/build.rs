//! Building a configuration's generation: its data sources (kept across reloads when their
//! configuration did not change), each block's chain and observers, the routing tables per
//! listen address with their answer memos, and the readiness checks `/ready` reads.

use super::*;

pub(super) fn zone_name(z: &str) -> Result<Name, StartError> {
    Name::from_ascii(z)
        .map(|n| n.to_lowercase())
        .map_err(|_| StartError::Zone(z.to_owned()))
}

/// The `server` label of a listen address, as CoreDNS writes it (`dns://:53`, `tls://:853`).
pub(super) fn server_label(key: &ListenKey) -> String {
    let scheme = key.2.as_str();
    match key {
        (None, port, _) => format!("{scheme}://:{port}"),
        (Some(IpAddr::V6(ip)), port, _) => format!("{scheme}://[{ip}]:{port}"),
        (Some(ip), port, _) => format!("{scheme}://{ip}:{port}"),
    }
}

/// Builds everything `config` runs except sockets, keeping the sources of `previous` whose
/// configuration did not change.
pub(super) async fn build(
    config: Config,
    shared: &Shared,
    previous: &[Arc<Source>],
) -> Result<Generation, StartError> {
    let mut sources: Vec<Arc<Source>> = Vec::new();
    let mut routers: BTreeMap<ListenKey, Router> = BTreeMap::new();
    let mut tls = BTreeMap::new();
    let mut chains = Vec::new();
    for block in &config.blocks {
        let mut cluster_zone = None;
        if let Some(k) = block.get::<KubernetesConfig>() {
            let source = match previous.iter().chain(sources.iter()).find(|s| s.config == *k) {
                Some(s) => s.clone(),
                None => Arc::new(new_source(k, &shared.metrics).await?),
            };
            cluster_zone = Some(source.zone.clone());
            sources.push(source);
        }
        let keys: Vec<ListenKey> = if block.bind().is_empty() {
            vec![(None, block.port, block.scheme)]
        } else {
            block
                .bind()
                .iter()
                .map(|ip| (Some(*ip), block.port, block.scheme))
                .collect()
        };
        if block.scheme != Scheme::Dns
            && let Some(config) = block.tls()
        {
            for key in &keys {
                tls.entry(*key).or_insert_with(|| config.clone());
            }
        }
        // The plugin order and composition live in the registry (`plugin::registry`). One chain
        // serves every address of the block; its metrics carry the first address's label.
        let first_server = keys.first().map(server_label).unwrap_or_default();
        let hostname = super::host_name();
        let ctx = BuildCtx {
            first_zone: block
                .zones
                .first()
                .and_then(|z| zone_name(z).ok())
                .unwrap_or_else(Name::root),
            server: &first_server,
            metrics: Some(&shared.metrics),
            source: cluster_zone.map(|z| z as Arc<dyn std::any::Any + Send + Sync>),
            hostname: &hostname,
        };
        let (chain, observing) = build_chain(&block.plugins, &ctx);
        for o in &observing {
            o.start();
        }
        chains.push(chain.clone());
        let zones: Vec<Name> = block
            .zones
            .iter()
            .map(|z| zone_name(z))
            .collect::<Result<_, _>>()?;
        for key in keys {
            let server = server_label(&key);
            let observers = observers(block, &zones, shared, &server, &observing);
            routers.entry(key).or_default().blocks.push(BlockRoute {
                zones: zones.clone(),
                chain: chain.clone(),
                udp_payload: block.udp_payload(),
                view: block.view(),
                observers,
            });
        }
    }
    // Each address gets its answer memo once its blocks are known.
    let routers = routers
        .into_iter()
        .map(|(k, r)| {
            let r = r.with_memo();
            r.memo.attach(shared.memo.listener(&server_label(&k)));
            (k, r)
        })
        .collect();
    Ok(Generation {
        config,
        sources,
        routers,
        tls,
        chains,
    })
}

pub(super) async fn new_source(k: &KubernetesConfig, metrics: &DnsMetrics) -> Result<Source, StartError> {
    let zone = Arc::new(ClusterZone::new());
    let watch = match &k.source {
        ApiSource::Manifests(paths) => {
            let report = manifests::load_files(paths, &zone)?;
            tracing::info!(
                applied = report.applied,
                ignored = report.ignored,
                skipped = report.skipped.len(),
                services = zone.service_count(),
                "loaded cluster objects from manifests"
            );
            None
        }
        // The API source: serving starts at once; until the first lists are in, a would-be
        // NXDOMAIN is answered SERVFAIL.
        _ => {
            let families = metrics.families::<KubernetesMetrics>()?;
            Some(watch::start_with_metrics(&k.watch_options(), zone.clone(), Some(families)).await?)
        }
    };
    Ok(Source {
        config: k.clone(),
        zone,
        watch,
    })
}

/// The observers of `block` on the listener labelled `server`: its `prometheus` recorders and
/// its observing plugins.
pub(super) fn observers(
    block: &BlockConfig,
    zones: &[Name],
    shared: &Shared,
    server: &str,
    plugins: &[Arc<dyn Observer>],
) -> Observers {
    let metrics = block.get::<PrometheusConfig>().map(|_| {
        for zone in &block.zones {
            for name in block.plugin_names() {
                shared.metrics.plugin_enabled(server, zone, name);
            }
        }
        let view = block.view();
        BlockMetrics::new(
            &shared.metrics,
            server,
            zones,
            view.as_ref().map_or("", |v| v.name()),
        )
    });
    Observers {
        metrics,
        plugins: plugins.to_vec(),
    }
}

#[derive(Debug)]
pub(super) struct Synced(SyncState);

impl ReadinessCheck for Synced {
    fn name(&self) -> &str {
        "kubernetes"
    }
    fn is_ready(&self) -> bool {
        self.0.is_synced()
    }
    fn why_not(&self) -> Vec<String> {
        let waiting = self.0.waiting();
        if waiting.is_empty() {
            // Synced since `is_ready` was asked.
            return vec!["kubernetes".to_owned()];
        }
        waiting.into_iter().map(|w| format!("kubernetes: {w}")).collect()
    }
}

/// A plugin's own readiness ([`Plugin::not_ready`]), as `/ready` reads it.
#[derive(Debug)]
pub(super) struct PluginReady(Arc<dyn Plugin>);

impl ReadinessCheck for PluginReady {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn is_ready(&self) -> bool {
        self.0.not_ready().is_none()
    }
}

pub(super) fn readiness_checks(g: &Generation) -> Vec<Arc<dyn ReadinessCheck>> {
    let mut checks: Vec<Arc<dyn ReadinessCheck>> = Vec::new();
    for s in &g.sources {
        if let Some(w) = &s.watch {
            checks.push(Arc::new(Synced(w.sync_state())));
        }
    }
    for chain in &g.chains {
        for p in chain.plugins() {
            checks.push(Arc::new(PluginReady(p.clone())));
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    //! The runtime's building blocks without sockets: what a configuration builds.
    use std::path::Path;

    use super::*;

    fn config(dir: &Path, text: &str) -> Config {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("cluster.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n",
        )
        .unwrap();
        let path = dir.join("Corefile");
        std::fs::write(&path, text).unwrap();
        Config::load(&path, 53).unwrap()
    }

    #[test]
    fn server_labels_are_coredns_s() {
        assert_eq!(server_label(&(None, 53, Scheme::Dns)), "dns://:53");
        assert_eq!(
            server_label(&(Some("127.0.0.1".parse().unwrap()), 1053, Scheme::Dns)),
            "dns://127.0.0.1:1053"
        );
        assert_eq!(
            server_label(&(Some("::1".parse().unwrap()), 53, Scheme::Dns)),
            "dns://[::1]:53"
        );
        assert_eq!(server_label(&(None, 853, Scheme::Tls)), "tls://:853");
        assert_eq!(server_label(&(None, 443, Scheme::Https)), "https://:443");
    }

    /// Blocks are grouped by listen address (a `bind` per address), each block gets one chain
    /// in registry order, and an unchanged `kubernetes` configuration keeps its source (and
    /// zone) across a rebuild, as a reload does.
    #[tokio::test]
    async fn a_generation_groups_blocks_by_address_and_keeps_unchanged_sources() {
        let dir = std::env::temp_dir().join(format!("cluster-dns-app-build-{}", std::process::id()));
        let text = "cluster.local:0 {\n bind 127.0.0.1 127.0.0.2\n loop\n cache 30\n kubernetes {\n  manifests cluster.yaml\n }\n}\n.:0 {\n bind 127.0.0.1\n forward . 127.0.0.1:9\n}\n";
        let shared = Shared::new().unwrap();
        let g = build(config(&dir, text), &shared, &[]).await.unwrap();
        let keys: Vec<String> = g.routers.keys().map(server_label).collect();
        assert_eq!(keys, ["dns://127.0.0.1:0", "dns://127.0.0.2:0"]);
        let first = &g.routers[&(Some("127.0.0.1".parse().unwrap()), 0, Scheme::Dns)];
        assert_eq!(first.blocks.len(), 2);
        let names: Vec<&str> = first.blocks[0].chain.plugins().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["cache", "kubernetes", "loop"]);
        assert!(first.memo.is_on(), "the kubernetes zone turns the memo on");
        assert_eq!(g.sources.len(), 1);
        let again = build(config(&dir, text), &shared, &g.sources).await.unwrap();
        assert!(
            Arc::ptr_eq(&g.sources[0], &again.sources[0]),
            "the unchanged source is kept"
        );
        let changed = text.replace(
            "  manifests cluster.yaml\n",
            "  manifests cluster.yaml\n  ttl 30\n",
        );
        let other = build(config(&dir, &changed), &shared, &g.sources).await.unwrap();
        assert!(
            !Arc::ptr_eq(&g.sources[0], &other.sources[0]),
            "a changed source is new"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `/ready` asks every plugin of every chain: a `loop` plugin that found a loop is not ready.
    #[tokio::test]
    async fn readiness_asks_every_plugin() {
        let dir = std::env::temp_dir().join(format!("cluster-dns-app-ready-{}", std::process::id()));
        let text = ".:0 {\n bind 127.0.0.1\n loop\n forward . 127.0.0.1:9\n}\n";
        let shared = Shared::new().unwrap();
        let g = build(config(&dir, text), &shared, &[]).await.unwrap();
        let checks = readiness_checks(&g);
        assert!(checks.iter().all(|c| c.is_ready()));
        let l = g.chains[0].find::<LoopDetect>().unwrap();
        l.status().record("127.0.0.1:9".parse().unwrap());
        let not_ready: Vec<String> = checks
            .iter()
            .filter(|c| !c.is_ready())
            .map(|c| c.name().to_owned())
            .collect();
        assert_eq!(not_ready, ["loop"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
