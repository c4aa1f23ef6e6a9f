//! The one builder: turns a [`Config`] into what it runs, without sockets. For each server
//! block it acquires the plugins' long-lived resources (kept in [`Resources`] across
//! configurations), builds its chain and observers in the registry's order, and routes it
//! on each of its listen addresses with its settings (UDP size, view, metrics); each address
//! gets its answer memo once its blocks are known. The server, the test harness, the benches
//! and the fuzz targets all build through [`build`], so they answer alike.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// How often [`Generation::wait_for_startup`] asks the plugins it waits for again.
const STARTUP_POLL: Duration = Duration::from_millis(50);

use hickory_proto::rr::Name;

use crate::chain::{
    AcquireCtx, AcquireError, BuildCtx, Capabilities, Chain, ListenerSettings, Observer, Plugin,
    ReadinessCheck, Resources, StartupWait,
};
use crate::config::{BlockConfig, Config};
use crate::corefile::Scheme;
use crate::plugin::registry::build_chain;
use crate::server::observe::Observers;
use crate::server::{BlockRoute, Router};
use crate::telemetry::memo::MemoMetrics;
use crate::telemetry::{BlockMetrics, DnsMetrics};

/// Where a group of server blocks listens: an address (`None`: all interfaces), a port, and
/// how questions arrive there.
pub type ListenKey = (Option<IpAddr>, u16, Scheme);

/// Why a configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A zone in the configuration is not a valid DNS name.
    #[error("invalid zone '{0}'")]
    Zone(String),
    /// A plugin could not acquire its resources (a manifest, the API connection).
    #[error(transparent)]
    Acquire(#[from] AcquireError),
}

/// What a build draws on besides the configuration.
#[derive(Debug, Clone, Copy)]
pub struct BuildEnv<'a> {
    /// The resources that outlive configurations.
    pub resources: &'a Resources,
    /// The process's metrics, when it exports them.
    pub metrics: Option<&'a DnsMetrics>,
    /// Each listen address gets an answer memo (counted in these families, when given).
    pub memo: bool,
    /// The families the memos count into.
    pub memo_metrics: Option<&'a MemoMetrics>,
    /// The host's name (`chaos`, `nsid`).
    pub hostname: &'a str,
}

/// What one configuration runs: its routing tables and chains, and what its blocks acquired.
#[derive(Debug)]
pub struct Generation {
    /// The configuration.
    pub config: Config,
    /// The routing table of each listen address.
    pub routers: BTreeMap<ListenKey, Router>,
    /// What the listener of each listen address is told, folded from its blocks' settings
    /// ([`crate::server::fold_listener`]) and handed whole to the server.
    pub listeners: BTreeMap<ListenKey, ListenerSettings>,
    /// One chain per server block, in block order.
    pub chains: Vec<Chain>,
    /// The observers of every block (their background work starts with the generation).
    pub observers: Vec<Arc<dyn Observer>>,
    /// What each block's plugins acquired, held while the generation runs.
    pub acquired: Vec<Capabilities>,
}

impl Generation {
    /// Starts the plugins' and observers' background work (once the listeners are up).
    pub fn start(&self) {
        for o in &self.observers {
            o.start();
        }
        for chain in &self.chains {
            chain.start();
        }
    }

    /// One readiness check per plugin of every chain ([`Plugin::not_ready`]).
    pub fn readiness_checks(&self) -> Vec<Arc<dyn ReadinessCheck>> {
        self.chains
            .iter()
            .flat_map(|c| c.plugins().iter().cloned())
            .map(|p| Arc::new(PluginReady(p)) as Arc<dyn ReadinessCheck>)
            .collect()
    }

    /// What the listener of `key` is bound and served with, from its blocks' settings.
    pub fn listener_settings(&self, key: &ListenKey) -> ListenerSettings {
        self.listeners.get(key).cloned().unwrap_or_default()
    }

    /// Holds until every plugin that asks for it ([`StartupWait`]) is ready, each
    /// for at most its own wait: called at start, before the listeners are bound, so the first
    /// answers come from synced data when the data comes in time.
    pub async fn wait_for_startup(&self) {
        let plugins: Vec<(&Arc<dyn Plugin>, Duration)> = self
            .chains
            .iter()
            .flat_map(|c| c.offered::<StartupWait>())
            .filter(|(_, wait)| !wait.0.is_zero())
            .map(|(p, wait)| (p, wait.0))
            .collect();
        let Some(longest) = plugins.iter().map(|(_, wait)| *wait).max() else {
            return;
        };
        let started = tokio::time::Instant::now();
        let mut logged = false;
        // Bounded by `longest`: past it, no plugin is waited for.
        loop {
            let waited = started.elapsed();
            let waiting: Vec<String> = plugins
                .iter()
                .filter(|(_, wait)| waited < *wait)
                .flat_map(|(p, _)| p.not_ready())
                .collect();
            if waiting.is_empty() {
                break;
            }
            if !logged {
                tracing::info!(up_to = ?longest, waiting = %waiting.join("; "), "waiting for plugins to be ready before serving");
                logged = true;
            }
            tokio::time::sleep(STARTUP_POLL).await;
        }
        let late: Vec<String> = plugins.iter().flat_map(|(p, _)| p.not_ready()).collect();
        if !late.is_empty() {
            tracing::warn!(waited = ?started.elapsed(), waiting = %late.join("; "), "serving before every plugin is ready");
        } else if logged {
            tracing::info!(waited = ?started.elapsed(), "ready: serving");
        }
    }

    /// What is not ready in it, one line each.
    pub fn not_ready(&self) -> Vec<String> {
        self.readiness_checks()
            .iter()
            .flat_map(|c| c.not_ready())
            .collect()
    }
}

/// A plugin's own readiness, as `/ready` reads it.
#[derive(Debug)]
struct PluginReady(Arc<dyn Plugin>);

impl ReadinessCheck for PluginReady {
    fn not_ready(&self) -> Vec<String> {
        self.0.not_ready()
    }
}

/// The name of zone `z` (lower-case).
pub fn zone_name(z: &str) -> Result<Name, BuildError> {
    Name::from_ascii(z)
        .map(|n| n.to_lowercase())
        .map_err(|_| BuildError::Zone(z.to_owned()))
}

/// The `server` label of a listen address, as CoreDNS writes it (`dns://:53`, `tls://:853`).
pub fn server_label(key: &ListenKey) -> String {
    let scheme = key.2.as_str();
    match key {
        (None, port, _) => format!("{scheme}://:{port}"),
        (Some(IpAddr::V6(ip)), port, _) => format!("{scheme}://[{ip}]:{port}"),
        (Some(ip), port, _) => format!("{scheme}://{ip}:{port}"),
    }
}

/// The listen addresses of `block`: one per `bind` address, or all interfaces.
fn listen_keys(block: &BlockConfig) -> Vec<ListenKey> {
    if block.settings.bind.is_empty() {
        vec![(None, block.port, block.scheme)]
    } else {
        block
            .settings
            .bind
            .iter()
            .map(|ip| (Some(*ip), block.port, block.scheme))
            .collect()
    }
}

/// Builds everything `config` runs except sockets (see the module docs).
pub async fn build(config: Config, env: &BuildEnv<'_>) -> Result<Generation, BuildError> {
    let mut routers: BTreeMap<ListenKey, Router> = BTreeMap::new();
    let mut listeners: BTreeMap<ListenKey, ListenerSettings> = BTreeMap::new();
    let mut chains = Vec::new();
    let mut all_observers = Vec::new();
    let mut acquired = Vec::new();
    for block in &config.blocks {
        let keys = listen_keys(block);
        for key in &keys {
            crate::server::fold_listener(listeners.entry(*key).or_default(), &block.settings.listener);
        }
        let mut capabilities = Capabilities::default();
        for (_, configured) in &block.plugins {
            let ctx = AcquireCtx {
                resources: env.resources,
                metrics: env.metrics,
            };
            capabilities.extend(configured.acquire(ctx).await?);
        }
        // The plugin order and composition live in the registry. One chain serves every
        // address of the block; its metrics carry the first address's label.
        let first_server = keys.first().map(server_label).unwrap_or_default();
        let ctx = BuildCtx {
            first_zone: block
                .zones
                .first()
                .and_then(|z| zone_name(z).ok())
                .unwrap_or_else(Name::root),
            server: &first_server,
            metrics: env.metrics,
            capabilities: &capabilities,
            hostname: env.hostname,
        };
        let (chain, observing) = build_chain(&block.plugins, &ctx);
        chains.push(chain.clone());
        let zones: Vec<Name> = block
            .zones
            .iter()
            .map(|z| zone_name(z))
            .collect::<Result<_, _>>()?;
        for key in keys {
            let server = server_label(&key);
            routers.entry(key).or_default().blocks.push(BlockRoute {
                zones: zones.clone(),
                chain: chain.clone(),
                udp_payload: block.settings.udp_payload,
                view: block.settings.filter.clone(),
                metadata: block
                    .settings
                    .metadata
                    .as_ref()
                    .map(|zs| if zs.is_empty() { zones.clone() } else { zs.clone() }),
                auth: block.settings.auth.clone(),
                transfers: block.settings.transfers,
                observers: observers(block, &zones, env.metrics, &server, &observing),
            });
        }
        all_observers.extend(observing);
        acquired.push(capabilities);
    }
    let routers = routers
        .into_iter()
        .map(|(k, r)| {
            if !env.memo {
                return (k, r);
            }
            let r = r.with_memo();
            if let Some(m) = env.memo_metrics {
                r.memo.attach(m.listener(&server_label(&k)));
            }
            (k, r)
        })
        .collect();
    Ok(Generation {
        config,
        routers,
        listeners,
        chains,
        observers: all_observers,
        acquired,
    })
}

/// The observers of `block` on the listener labelled `server`: its request metrics (when the
/// block counts them and the process exports metrics) and its observing plugins.
fn observers(
    block: &BlockConfig,
    zones: &[Name],
    metrics: Option<&DnsMetrics>,
    server: &str,
    plugins: &[Arc<dyn Observer>],
) -> Observers {
    let metrics = metrics.filter(|_| block.settings.records_metrics).map(|metrics| {
        for zone in &block.zones {
            for name in block.plugin_names() {
                metrics.plugin_enabled(server, zone, name);
            }
        }
        let view = block.settings.filter.as_ref().map_or("", |v| v.name());
        BlockMetrics::new(metrics, server, zones, view)
    });
    Observers {
        metrics,
        plugins: plugins.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    //! The builder without sockets: what a configuration builds.
    use std::path::Path;

    use super::*;
    use crate::cluster::ClusterSource;

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

    fn env(resources: &Resources) -> BuildEnv<'_> {
        BuildEnv {
            resources,
            metrics: None,
            memo: true,
            memo_metrics: None,
            hostname: "localhost",
        }
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
    /// in registry order, and a cluster source whose watch options did not change is kept
    /// across a rebuild while the old generation holds it, as a reload does; a change to the
    /// answers alone (`ttl`) keeps it too, a change to what is loaded does not.
    #[tokio::test]
    async fn a_generation_groups_blocks_by_address_and_keeps_unchanged_sources() {
        let dir = std::env::temp_dir().join(format!("cluster-dns-app-build-{}", std::process::id()));
        let text = "cluster.local:0 {\n bind 127.0.0.1 127.0.0.2\n loop\n cache 30\n kubernetes {\n  manifests cluster.yaml\n }\n}\n.:0 {\n bind 127.0.0.1\n forward . 127.0.0.1:9\n}\n";
        let resources = Resources::default();
        let g = build(config(&dir, text), &env(&resources)).await.unwrap();
        let keys: Vec<String> = g.routers.keys().map(server_label).collect();
        assert_eq!(keys, ["dns://127.0.0.1:0", "dns://127.0.0.2:0"]);
        let first = &g.routers[&(Some("127.0.0.1".parse().unwrap()), 0, Scheme::Dns)];
        assert_eq!(first.blocks.len(), 2);
        let names: Vec<&str> = first.blocks[0].chain.plugins().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["cache", "kubernetes", "loop"]);
        assert!(first.memo.is_on(), "the kubernetes zone turns the memo on");
        let source = |g: &Generation| g.acquired[0].get::<ClusterSource>().unwrap();
        assert_eq!(resources.live(), 1);
        let again = build(config(&dir, text), &env(&resources)).await.unwrap();
        assert!(
            Arc::ptr_eq(&source(&g), &source(&again)),
            "the unchanged source is kept"
        );
        let ttl = text.replace(
            "  manifests cluster.yaml\n",
            "  manifests cluster.yaml\n  ttl 30\n",
        );
        let other = build(config(&dir, &ttl), &env(&resources)).await.unwrap();
        assert!(
            Arc::ptr_eq(&source(&g), &source(&other)),
            "a ttl change keeps the source"
        );
        let labels = text.replace(
            "  manifests cluster.yaml\n",
            "  manifests cluster.yaml\n  labels app=dns\n",
        );
        let relabelled = build(config(&dir, &labels), &env(&resources)).await.unwrap();
        assert!(
            !Arc::ptr_eq(&source(&g), &source(&relabelled)),
            "a changed source is new"
        );
        drop((g, again, other));
        assert_eq!(
            resources.live(),
            1,
            "the old source went with the last generation holding it"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `/ready` asks every plugin of every chain (a `loop` that found a loop is not ready:
    /// `tests/integration/plugins/forward.rs`).
    #[tokio::test]
    async fn readiness_asks_every_plugin() {
        let dir = std::env::temp_dir().join(format!("cluster-dns-app-ready-{}", std::process::id()));
        let text = ".:0 {\n bind 127.0.0.1\n loop\n forward . 127.0.0.1:9\n}\n";
        let resources = Resources::default();
        let g = build(config(&dir, text), &env(&resources)).await.unwrap();
        assert!(g.not_ready().is_empty());
        let names: Vec<&str> = g.chains[0].plugins().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["loop", "forward"]);
        assert_eq!(g.readiness_checks().len(), 2, "one check per plugin");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
