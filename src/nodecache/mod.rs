//! node-cache compatible mode (NodeLocal DNSCache's `node-cache` command line and job, see
//! README.md here): render the Corefile from the base one, set up the node-local interface and
//! the NOTRACK/ACCEPT rules, serve, keep them in place every sync interval, and on SIGTERM
//! drain and tear them down unless another instance on the node still serves them.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `flags.rs` | node-cache's command line |
//! | `pillar.rs` | the `__PILLAR__` variables and the kube-dns ConfigMap's stub domains |
//! | `command.rs` | errors; running `ip`, `iptables`, `nft` |
//! | `netif.rs` | the interface and its addresses |
//! | `rules.rs` | the rules, iptables or nftables |
//! | `instances.rs` | the instances of the node (upgrades without an outage) |
//! | `metrics.rs` | `coredns_nodecache_setup_errors_total` |

mod command;
pub mod flags;
mod instances;
mod metrics;
mod netif;
pub mod pillar;
mod rules;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::Config;

pub use command::NodeCacheError;
pub use flags::{Params, RulesBackend, parse, wanted};
pub use metrics::SetupErrors;
pub use rules::NFT_TABLE;

use instances::Instances;
use rules::{Backend, Rule};

use crate::app::Running;

/// How long a stopping instance waits for a starting peer to serve before it drains anyway.
const PEER_WAIT: Duration = Duration::from_secs(30);

/// The node's networking as this instance keeps it.
struct Node {
    params: Params,
    rules: Vec<Rule>,
    backend: Option<Backend>,
    errors: SetupErrors,
    instances: Option<Instances>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("interface", &self.params.interface)
            .finish()
    }
}

impl Node {
    fn guard(&self) -> Option<instances::Guard> {
        let g = self.instances.as_ref().map(Instances::guard)?;
        g.map_err(|e| tracing::warn!(error = %e, "cannot take the instance guard"))
            .ok()
    }

    /// Makes sure the interface and its addresses exist (`check`: the periodic pass).
    fn ensure_interface(&self, check: bool) -> Result<(), NodeCacheError> {
        if !self.params.setup_interface {
            return Ok(());
        }
        let name = &self.params.interface;
        match netif::ensure(name, &self.params.local_ips) {
            Ok(netif::Ensured::Existed) => Ok(()),
            Ok(how) => {
                tracing::info!(interface = %name, ?how, ips = ?self.params.local_ips, "added interface");
                Ok(())
            }
            Err(e) => {
                self.errors
                    .inc(if check { "interface_check" } else { "interface_add" });
                Err(e)
            }
        }
    }

    /// Makes sure the rules are in place.
    fn ensure_rules(&mut self) -> Result<(), NodeCacheError> {
        let Some(backend) = self.backend.as_mut() else {
            return Ok(());
        };
        match backend.ensure(&self.rules) {
            Ok(0) => Ok(()),
            Ok(n) => {
                tracing::info!(backend = backend.name(), rules = n, "added NOTRACK/ACCEPT rules");
                Ok(())
            }
            Err(e) => {
                self.errors
                    .inc(if e.is_lock() { "iptables_lock" } else { "iptables" });
                Err(e)
            }
        }
    }

    /// The periodic pass: interface and rules, under the guard.
    fn sync(&mut self) {
        let _guard = self.guard();
        if let Err(e) = self.ensure_interface(true) {
            tracing::error!("{e}");
        }
        if let Err(e) = self.ensure_rules() {
            tracing::error!("{e}");
        }
    }

    /// Removes the rules and the interface unless `-skipteardown` or a live peer; unregisters.
    fn teardown(mut self) {
        let guard = self.guard();
        let peers = self.instances.as_ref().map(Instances::peers).unwrap_or_default();
        if self.params.skip_teardown {
            tracing::info!("-skipteardown: leaving the interface and rules in place");
        } else if !peers.is_empty() {
            let names: Vec<&str> = peers.iter().map(|p| p.name.as_str()).collect();
            tracing::info!(peers = ?names, "another instance serves this node: leaving the interface and rules to it");
        } else if let Some(addr) = self.bound_elsewhere() {
            tracing::info!(%addr, "another instance serves this node (the DNS address is still bound): leaving the interface and rules to it");
        } else {
            tracing::info!("tearing down the interface and rules");
            if let Some(b) = self.backend.as_mut()
                && let Err(e) = b.remove(&self.rules)
            {
                tracing::error!("{e}");
            }
            if self.params.setup_interface
                && let Err(e) = netif::remove(&self.params.interface)
            {
                tracing::error!("{e}");
            }
        }
        if let Some(i) = self.instances.take() {
            i.leave();
        }
        drop(guard);
    }

    /// A local address whose DNS port some other socket still holds (this instance's are
    /// closed by now): another instance serving, though not registered with this one (no
    /// shared `-instance-dir`). A plain bind fails while any socket, shared or not, is bound.
    fn bound_elsewhere(&self) -> Option<SocketAddr> {
        self.params
            .local_ips
            .iter()
            .map(|ip| SocketAddr::new(*ip, self.params.dns_port))
            .find(|addr| {
                matches!(std::net::UdpSocket::bind(addr), Err(e) if e.kind() == std::io::ErrorKind::AddrInUse)
            })
    }

    fn set_state(&mut self, state: &str) {
        if let Some(i) = self.instances.as_mut()
            && let Err(e) = i.set_state(state)
        {
            tracing::warn!(error = %e, "cannot write this instance's state");
        }
    }
}

/// Renders the Corefile; writes it when it changed. True when it was written.
fn render(p: &Params, errors: &SetupErrors) -> Result<bool, NodeCacheError> {
    let cm = p.kubedns_cm.clone().or_else(|| {
        let d = PathBuf::from(pillar::DEFAULT_KUBEDNS_CM);
        d.is_dir().then_some(d)
    });
    let ips = p
        .local_ips
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let text = pillar::render_files(&p.base_corefile, cm.as_deref(), &ips, p.dns_port, &p.upstream_svc)
        .map_err(|e| {
            errors.inc("configmap");
            NodeCacheError::Other(e.to_string())
        })?;
    if std::fs::read_to_string(&p.corefile).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    std::fs::write(&p.corefile, &text).map_err(|e| {
        errors.inc("configmap");
        NodeCacheError::Other(format!("cannot write the Corefile {}: {e}", p.corefile.display()))
    })?;
    tracing::info!(corefile = %p.corefile.display(), "wrote the Corefile from {}", p.base_corefile.display());
    Ok(true)
}

fn load(path: &Path, port: u16) -> Result<Config, NodeCacheError> {
    Config::load(path, port).map_err(|e| NodeCacheError::Other(e.to_string()))
}

/// Serves `/metrics` on `-metrics-listen-address` (shared with a peer's during an upgrade).
async fn serve_metrics(running: &Running, addr: SocketAddr) -> Option<tokio::sync::oneshot::Sender<()>> {
    let listener = match crate::http::bind_http(addr).await {
        Ok(l) => l,
        Err(error) => {
            tracing::warn!(%addr, %error, "cannot serve node-cache metrics");
            return None;
        }
    };
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let router = running.metrics().router();
    tokio::spawn(crate::http::serve(listener, router, async move {
        let _ = rx.await;
    }));
    Some(stop)
}

/// Runs node-cache mode until `shutdown` completes, then drains and tears down.
pub async fn run(params: Params, shutdown: impl Future<Output = ()>) -> Result<(), NodeCacheError> {
    let errors = SetupErrors::new();
    // Two instances share every address during an upgrade, HTTP ones included.
    crate::http::share_ports();
    if let Err(e) = render(&params, &errors) {
        if params.corefile.exists() {
            tracing::error!("{e}; serving the Corefile written before");
        } else {
            return Err(e);
        }
    }
    let instances = match Instances::register(&params.instance_dir, &params.interface) {
        Ok(i) => Some(i),
        Err(e) => {
            tracing::warn!(
                dir = %params.instance_dir.display(),
                error = %e,
                "cannot register this instance: teardown will not wait for other instances"
            );
            None
        }
    };
    let mut node = Node {
        rules: rules::rules_for(&params.local_ips, params.dns_port, params.health_port),
        backend: None,
        errors,
        instances,
        params,
    };
    if node.params.setup_rules {
        let v6 = node.params.local_ips.first().is_some_and(|ip| ip.is_ipv6());
        let (backend, why) = rules::choose(node.params.rules_backend, v6)?;
        tracing::info!(backend = backend.name(), reason = why, "rules backend");
        node.backend = Some(backend);
    }
    {
        let _guard = node.guard();
        tokio::task::block_in_place(|| node.ensure_interface(false))?;
    }
    let port = node.params.dns_port;
    let started = match load(&node.params.corefile, port) {
        Ok(config) => crate::app::start_with_port(&config, port)
            .await
            .map_err(|e| NodeCacheError::Other(e.to_string())),
        Err(e) => Err(e),
    };
    let running = match started {
        Ok(r) => r,
        Err(e) => {
            node.backend = None;
            tokio::task::block_in_place(|| node.teardown());
            return Err(e);
        }
    };
    if let Err(e) = node.errors.register(running.metrics().registry()) {
        tracing::warn!(error = %e, "cannot register coredns_nodecache_setup_errors_total");
    }
    let metrics_stop = match node.params.metrics_listen {
        Some(addr) => serve_metrics(&running, addr).await,
        None => None,
    };
    tokio::pin!(shutdown);
    // The rules go in once DNS is served (after `-initialdelay`).
    let delay = tokio::time::sleep(node.params.initial_delay);
    let stopped_early = tokio::select! {
        _ = &mut shutdown => true,
        _ = delay => false,
    };
    if !stopped_early {
        let result = tokio::task::block_in_place(|| {
            let _guard = node.guard();
            node.ensure_rules()
        });
        if let Err(e) = result {
            if matches!(
                e,
                NodeCacheError::NoCapability { .. } | NodeCacheError::MissingProgram { .. }
            ) {
                let _ = running.stop().await;
                tokio::task::block_in_place(|| node.teardown());
                return Err(e);
            }
            tracing::error!("{e}");
        }
        node.set_state("serving");
        tracing::info!(ips = ?node.params.local_ips, "node-local DNS serving; interface and rules in place");
        if let Some(pidfile) = &node.params.pidfile
            && let Err(e) = std::fs::write(pidfile, format!("{}\n", std::process::id()))
        {
            tracing::warn!(error = %e, "cannot write the pidfile {}", pidfile.display());
        }
        let mut tick = tokio::time::interval(node.params.sync_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tick.tick() => {
                    tokio::task::block_in_place(|| node.sync());
                    match render(&node.params, &node.errors) {
                        Ok(true) => match load(&node.params.corefile, port) {
                            Ok(config) => if let Err(e) = running.reload(config).await {
                                tracing::error!("reloading the rendered Corefile: {e}");
                            },
                            Err(e) => tracing::error!("{e}"),
                        },
                        Ok(false) => {}
                        Err(e) => tracing::error!("{e}"),
                    }
                }
            }
        }
    }
    node.set_state("stopping");
    wait_for_a_serving_peer(&node).await;
    let result = running.shutdown().await;
    if let Some(stop) = metrics_stop {
        let _ = stop.send(());
    }
    tokio::task::block_in_place(|| node.teardown());
    result.map_err(|e| NodeCacheError::Other(e.to_string()))
}

/// During an upgrade the old instance gets SIGTERM once the new one is started: it keeps
/// answering until a peer says it serves (bounded by [`PEER_WAIT`]).
async fn wait_for_a_serving_peer(node: &Node) {
    let Some(instances) = node.instances.as_ref() else {
        return;
    };
    let deadline = tokio::time::Instant::now() + PEER_WAIT;
    loop {
        let peers = instances.peers();
        if peers.is_empty() || peers.iter().any(|p| p.state == "serving") {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!("a peer instance did not start serving in time; stopping anyway");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
