//! What a running server holds: the process-wide state that outlives configurations
//! ([`Shared`]: metrics, readiness, the resources plugins keep), the running generation with
//! its DNS listeners ([`State`]), and the HTTP listeners.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::build::{BuildEnv, Generation, ListenKey};
use crate::chain::{Readiness, Resources};
use crate::server::{RouterCell, ServerError};
use crate::telemetry::memo::MemoMetrics;
use crate::telemetry::{DnsMetrics, Families};

/// The `reload` metrics: `coredns_reload_failed_total` and `coredns_reload_version_info`.
#[derive(Debug, Clone)]
pub(super) struct ReloadMetrics {
    failed: prometheus::IntCounter,
    version: prometheus::GaugeVec,
}

impl Families for ReloadMetrics {
    fn register(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let failed = prometheus::IntCounter::new(
            "coredns_reload_failed_total",
            "Counter of the number of failed reload attempts.",
        )?;
        let version = prometheus::GaugeVec::new(
            prometheus::Opts::new(
                "coredns_reload_version_info",
                "A metric with a constant '1' value labeled by hash, and value which type of hash generated.",
            ),
            &["hash", "value"],
        )?;
        registry.register(Box::new(failed.clone()))?;
        registry.register(Box::new(version.clone()))?;
        Ok(Self { failed, version })
    }
}

impl ReloadMetrics {
    /// A reload was refused.
    pub(super) fn failed(&self) {
        self.failed.inc();
    }

    /// `corefile` is the running Corefile: its SHA-512 becomes the one version series.
    pub(super) fn running(&self, corefile: &[u8]) {
        use sha2::Digest as _;
        let digest = sha2::Sha512::digest(corefile);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.version.reset();
        self.version.with_label_values(&["sha512", &hex]).set(1.0);
    }
}

/// Process-wide state that outlives every configuration: the metric families (so counters keep
/// counting through reloads), the readiness registry `/ready` reads, and the resources plugins
/// keep across configurations.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) metrics: DnsMetrics,
    pub(super) readiness: Readiness,
    pub(super) resources: Resources,
    pub(super) reload: ReloadMetrics,
    pub(super) listeners: crate::server::ListenerFamilies,
    pub(super) memo: MemoMetrics,
    pub(super) hostname: String,
}

impl Shared {
    pub(super) fn new() -> Result<Self, prometheus::Error> {
        let metrics = DnsMetrics::new()?;
        // Every plugin's families from the start, as CoreDNS registers its plugins' at init.
        crate::plugin::registry::register_families(&metrics)?;
        let reload = metrics.families::<ReloadMetrics>()?;
        let listeners = crate::server::ListenerFamilies::register(metrics.registry())?;
        let memo = MemoMetrics::register(metrics.registry())?;
        Ok(Self {
            metrics,
            readiness: Readiness::default(),
            resources: Resources::default(),
            reload,
            listeners,
            memo,
            hostname: host_name(),
        })
    }

    /// What a build of a configuration for this process draws on.
    pub(super) fn build_env(&self) -> BuildEnv<'_> {
        BuildEnv {
            resources: &self.resources,
            metrics: Some(&self.metrics),
            memo: true,
            memo_metrics: Some(&self.memo),
            hostname: &self.hostname,
        }
    }
}

/// The host's name as the kernel holds it (what Go's `os.Hostname` reads on Linux), or
/// `localhost` when it cannot be read, as CoreDNS's `chaos` falls back.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// One listen address's DNS sockets, serving.
#[derive(Debug)]
pub(super) struct Listener {
    pub(super) addr: SocketAddr,
    pub(super) cell: RouterCell,
    /// What its connections speak (its TLS configuration is replaced on reload).
    pub(super) protocol: crate::server::tcp::StreamProtocol,
    /// Its QUIC endpoint, for a `quic://` listener (its TLS configuration is replaced on
    /// reload).
    pub(super) quic: Option<crate::server::quic::QuicListener>,
    pub(super) stop: oneshot::Sender<()>,
    pub(super) task: JoinHandle<Result<(), ServerError>>,
}

/// The running generation and its listeners.
#[derive(Debug)]
pub(super) struct State {
    pub(super) generation: Generation,
    pub(super) listeners: BTreeMap<ListenKey, Listener>,
}

/// One HTTP listener, serving.
#[derive(Debug)]
pub(super) struct HttpListener {
    /// The work that runs beside it (`health`'s self-probe).
    pub(super) beside: Vec<JoinHandle<()>>,
    pub(super) stop: oneshot::Sender<()>,
    pub(super) task: JoinHandle<std::io::Result<()>>,
}

impl HttpListener {
    /// Stops it and what runs beside it; the task ends soon after.
    pub(super) fn stop(self) -> JoinHandle<std::io::Result<()>> {
        for b in self.beside {
            b.abort();
        }
        let _ = self.stop.send(());
        self.task
    }
}

/// Everything a [`super::Running`] holds.
#[derive(Debug)]
pub(super) struct Inner {
    pub(super) shared: Shared,
    pub(super) default_port: u16,
    /// Invariant: `None` once stopped. Replaced as a whole by the one task applying a
    /// configuration ([`super::reload::apply`], serialized by `applying`).
    pub(super) state: Mutex<Option<State>>,
    /// Held by the task applying a configuration, from the build to the swap, so two reloads
    /// (the timer and a caller) cannot interleave.
    pub(super) applying: tokio::sync::Mutex<()>,
    pub(super) http: Mutex<Vec<HttpListener>>,
    /// The HTTP listeners' bound addresses and the paths each serves.
    pub(super) http_addrs: Vec<(SocketAddr, Vec<&'static str>)>,
}
