//! Start-up: turns a [`Config`] into running listeners. It fills each `kubernetes` plugin's
//! zone from its source, builds the chains, groups server blocks by listen address, binds and
//! serves. [`Running`] is the handle tests and the binary use to find the addresses and stop.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use hickory_proto::rr::Name;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::cluster::watch::{self, SyncState, WatchSource};
use crate::cluster::{ClusterZone, manifests};
use crate::config::Config;
use crate::plugin::Chain;
use crate::plugin::kubernetes::setup::ApiSource;
use crate::plugin::kubernetes::{Kubernetes, handler::self_ips_from_env};
use crate::plugin::loop_detect::{self, LoopStatus};
use crate::server::{self, BlockRoute, Router, ServerError};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A manifest file could not be loaded.
    #[error(transparent)]
    Manifest(#[from] manifests::ManifestError),
    /// A listener could not be bound.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// A zone in the configuration is not a valid DNS name.
    #[error("invalid zone '{0}'")]
    Zone(String),
    /// The Kubernetes API source could not be set up.
    #[error(transparent)]
    Watch(#[from] watch::WatchError),
}

/// A started server.
#[derive(Debug)]
pub struct Running {
    dns_addrs: Vec<SocketAddr>,
    zones: Vec<Arc<ClusterZone>>,
    stop: Vec<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<Result<(), ServerError>>>,
    /// The API watches of `kubernetes` plugins with an API source; dropped (stopped) with this.
    watches: Vec<WatchSource>,
    /// The `loop` plugins' findings, in block order.
    loops: Vec<Arc<LoopStatus>>,
}

impl Running {
    /// The addresses DNS is served on (UDP and TCP on each), with the real ports.
    pub fn dns_addrs(&self) -> &[SocketAddr] {
        &self.dns_addrs
    }

    /// The cluster zones, one per `kubernetes` plugin, in block order.
    pub fn zones(&self) -> &[Arc<ClusterZone>] {
        &self.zones
    }

    /// The sync state of every `kubernetes` plugin that watches the API, in block order.
    pub fn sync_states(&self) -> Vec<SyncState> {
        self.watches.iter().map(WatchSource::sync_state).collect()
    }

    /// What each `loop` plugin found, in block order (for metrics and `/ready`).
    pub fn loop_statuses(&self) -> &[Arc<LoopStatus>] {
        &self.loops
    }

    /// Stops every listener and waits for them.
    pub async fn stop(mut self) -> Result<(), ServerError> {
        for w in &mut self.watches {
            w.stop();
        }
        for s in self.stop.drain(..) {
            let _ = s.send(());
        }
        self.wait().await
    }

    /// Waits until the listeners stop (on error, or after [`Running::stop`]).
    pub async fn wait(self) -> Result<(), ServerError> {
        for t in self.tasks {
            match t.await {
                Ok(r) => r?,
                Err(e) => return Err(ServerError::Serve(format!("server task failed: {e}"))),
            }
        }
        Ok(())
    }
}

fn zone_name(z: &str) -> Result<Name, StartError> {
    Name::from_ascii(z)
        .map(|n| n.to_lowercase())
        .map_err(|_| StartError::Zone(z.to_owned()))
}

/// Loads the zones, binds every listener of `config` and starts serving.
pub async fn start(config: &Config) -> Result<Running, StartError> {
    let self_ips = self_ips_from_env();
    let mut zones = Vec::new();
    let mut watches = Vec::new();
    let mut groups: BTreeMap<(Option<IpAddr>, u16), Vec<BlockRoute>> = BTreeMap::new();
    let mut loop_chains = Vec::new();
    for block in &config.blocks {
        let mut kubernetes = None;
        if let Some(k) = &block.kubernetes {
            let zone = Arc::new(ClusterZone::new());
            match &k.source {
                ApiSource::Manifests(paths) => {
                    let report = manifests::load_files(paths, &zone)?;
                    tracing::info!(
                        applied = report.applied,
                        ignored = report.ignored,
                        skipped = report.skipped.len(),
                        services = zone.service_count(),
                        "loaded cluster objects from manifests"
                    );
                }
                // The API source: serving starts at once; until the first lists are in, a
                // would-be NXDOMAIN is answered SERVFAIL.
                _ => watches.push(watch::start(k, zone.clone()).await?),
            }
            kubernetes = Some(Kubernetes::new(k, zone.clone(), self_ips.clone()));
            zones.push(zone);
        }
        // The plugin order and composition live in `Chain` (plugin::CHAIN_ORDER).
        let chain = Chain::build(block, kubernetes);
        if chain.loop_detect.is_some() && chain.forward.is_some() {
            loop_chains.push(chain.clone());
        }
        let route = BlockRoute {
            zones: block
                .zones
                .iter()
                .map(|z| zone_name(z))
                .collect::<Result<_, _>>()?,
            chain,
        };
        if block.bind.is_empty() {
            groups.entry((None, block.port)).or_default().push(route);
        } else {
            for ip in &block.bind {
                groups
                    .entry((Some(*ip), block.port))
                    .or_default()
                    .push(route.clone());
            }
        }
    }

    let mut running = Running {
        dns_addrs: Vec::new(),
        zones,
        stop: Vec::new(),
        tasks: Vec::new(),
        watches,
        loops: loop_chains
            .iter()
            .filter_map(|c| c.loop_detect.as_ref().map(|l| Arc::clone(l.status())))
            .collect(),
    };
    for ((ip, port), blocks) in groups {
        let sockets = match ip {
            Some(ip) => server::bind(SocketAddr::new(ip, port)).await?,
            // All interfaces: dual-stack where the host has IPv6, else IPv4 only.
            None => match server::bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)).await {
                Ok(s) => s,
                Err(_) => server::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)).await?,
            },
        };
        let addr = sockets.local_addr().map_err(|source| ServerError::Bind {
            addr: format!("{ip:?}:{port}"),
            source,
        })?;
        let zone_list: Vec<String> = blocks
            .iter()
            .flat_map(|b| b.zones.iter().map(|z| z.to_string()))
            .collect();
        tracing::info!(%addr, zones = %zone_list.join(" "), "serving DNS over UDP and TCP");
        let (tx, rx) = oneshot::channel::<()>();
        let router = Arc::new(Router { blocks });
        running
            .tasks
            .push(tokio::spawn(server::serve(router, vec![sockets], async move {
                let _ = rx.await;
            })));
        running.stop.push(tx);
        running.dns_addrs.push(addr);
    }
    // The listeners are up: probe each `forward` upstream for a loop back to us (bounded: a
    // few tries per upstream, then the task ends).
    for chain in loop_chains {
        tokio::spawn(loop_detect::handler::run_probes(chain));
    }
    Ok(running)
}
