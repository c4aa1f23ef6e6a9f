//! The setup contract: every directive is parsed by one setup (a function of the directive and
//! its [`SetupCtx`], listed in the registry) into a [`Configured`] value.
//! What that value does for its server block, in the order the runtime asks:
//! 1. [`Configured::configure`]: the settings of the server that runs the block (listen
//!    addresses, UDP size, TLS, HTTP routes, ...; see [`BlockSettings`]);
//! 2. [`Configured::acquire`]: long-lived resources, kept in the process's
//!    [`crate::chain::Resources`] across configurations and offered to the block's other
//!    plugins by type ([`Capabilities`]: the kubernetes plugin's cluster source);
//! 3. [`Configured::build`]: a plugin in the query path, an observer, or nothing.
//!
//! A plugin reads nothing of another but what it offers by type, so the runtime that asks
//! these questions never names a plugin.

use std::any::{Any, TypeId};
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use hickory_proto::rr::Name;

use super::capability::Capabilities;
use super::observer::Observer;
use super::resources::Resources;
use super::settings::BlockSettings;
use super::walk::Plugin;
use crate::corefile::{CorefileError, Directive, Location};
use crate::telemetry::DnsMetrics;

/// What a setup knows of the directive's server block.
#[derive(Debug, Clone, Copy)]
pub struct SetupCtx<'a> {
    /// The block's zones, lower-case and absolute.
    pub zones: &'a [String],
    /// The folder relative paths (manifests, hosts files, TLS files, resolv.conf) are read
    /// from: the Corefile's, or the block's `root` ([`Configured::files_dir`]).
    pub dir: &'a Path,
    /// What an earlier use of the same directive in this block configured (the plugins that
    /// may be used more than once, such as `rewrite`, fold it in; the others refuse).
    pub previous: Option<&'a dyn Configured>,
    /// The names of the block's directives, as written (a plugin that fills what another
    /// reads: `kubernetes` watches DNSPolicies when the block has `dnspolicy`, as CoreDNS's
    /// setups look a plugin up by name).
    pub block: &'a [&'a str],
}

impl SetupCtx<'_> {
    /// The error for a second use of a directive that may be used once per block.
    pub fn refuse_twice(&self, d: &Directive) -> Result<(), CorefileError> {
        match self.previous {
            Some(_) => Err(d.error("can be used only once per server block")),
            None => Ok(()),
        }
    }

    /// Checks a directive that takes nothing (`any`, `debug`, `whoami`): once per block, no
    /// arguments, no block.
    pub fn bare(&self, d: &Directive) -> Result<(), CorefileError> {
        self.refuse_twice(d)?;
        d.args().expect_none()?;
        d.expect_no_block()
    }
}

/// What a plugin acquiring its resources may use ([`Configured::acquire`]).
#[derive(Debug, Clone, Copy)]
pub struct AcquireCtx<'a> {
    /// The resources that outlive configurations: a plugin takes its own from here, so a
    /// reload that keeps its configuration keeps them.
    pub resources: &'a Resources,
    /// The process's metrics, when it exports them.
    pub metrics: Option<&'a DnsMetrics>,
}

/// A resource a plugin could not acquire (a manifest that does not load, an API connection
/// that cannot be set up): start-up, or the reload, fails with it.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub struct AcquireError {
    /// The directive.
    pub plugin: &'static str,
    /// What went wrong, as the layer that knows says it.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// What [`Configured::acquire`] returns: what the plugin offers its block.
pub type AcquireFuture<'a> = Pin<Box<dyn Future<Output = Result<Capabilities, AcquireError>> + Send + 'a>>;

/// What a configuration needs to build its plugins.
#[derive(Debug, Clone)]
pub struct BuildCtx<'a> {
    /// The block's first zone (the `loop` plugin's probe names are made under it).
    pub first_zone: Name,
    /// The `server` label of the block's first listen address (`dns://:53`).
    pub server: &'a str,
    /// The process's metrics, when it exports them: a plugin takes its own families from
    /// [`DnsMetrics::families`].
    pub metrics: Option<&'a DnsMetrics>,
    /// What the block's plugins acquired ([`Configured::acquire`]), by type.
    pub capabilities: &'a Capabilities,
    /// The host's name, as the OS tells it (`chaos`'s `hostname.bind`, `nsid`'s default).
    pub hostname: &'a str,
}

/// What a configured directive becomes in a built configuration.
#[derive(Debug)]
pub enum Built {
    /// A plugin in the query path.
    Plugin(Arc<dyn Plugin>),
    /// A plugin that observes answered requests.
    Observer(Arc<dyn Observer>),
    /// Nothing in the query path (what it does is in the block's settings).
    Nothing,
}

/// A file a directive names, which `--check` opens (a TLS key, a kubeconfig, a hosts file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedFile {
    /// The file, as the server will open it.
    pub path: PathBuf,
    /// Where the Corefile names it.
    pub at: Location,
    /// What it is, as the error names it (`kubernetes: kubeconfig`).
    pub what: String,
    /// True when the server cannot start without it; false when it starts and reads the file
    /// once it appears (a hosts file, as CoreDNS's).
    pub needed: bool,
}

/// A parsed directive.
pub trait Configured: Any + Send + Sync + fmt::Debug {
    /// Writes what it sets for the server running its block into `settings`. Default: nothing.
    fn configure(&self, _settings: &mut BlockSettings) {}

    /// The folder the setups of its block read relative file paths from, when it sets one
    /// (`root`; the registry sets such directives up before the rest of their block). Default:
    /// none, the Corefile's folder stays.
    fn files_dir(&self) -> Option<&Path> {
        None
    }

    /// Acquires its long-lived resources (from [`AcquireCtx::resources`], so they outlive a
    /// reload that keeps them) and returns what it offers the other plugins of its block.
    /// Default: nothing.
    fn acquire<'a>(&'a self, _ctx: AcquireCtx<'a>) -> AcquireFuture<'a> {
        Box::pin(std::future::ready(Ok(Capabilities::default())))
    }

    /// What it becomes when a configuration is built. Default: nothing in the query path.
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Nothing
    }

    /// True when it may only be used in plain DNS server blocks (`dns://`), not `tls://`,
    /// `https://` or `quic://` ones (`shed`, as CoreDNS enforces at start). Default: false.
    fn plain_dns_only(&self) -> bool {
        false
    }

    /// Checks it against the rest of its block, once every directive of the block is parsed
    /// (`autopath @kubernetes` needs a `kubernetes` with `pods verified`).
    fn check(&self, _block: &[(&'static str, Arc<dyn Configured>)]) -> Result<(), CorefileError> {
        Ok(())
    }

    /// What it accepts, as CoreDNS does, but cannot do in this block, each at its file:line:
    /// the server starts and logs them (`--check` prints them as warnings). Default: none.
    fn warnings(&self, _block: &[(&'static str, Arc<dyn Configured>)]) -> Vec<CorefileError> {
        Vec::new()
    }

    /// True when its [`Configured::acquire`] offers a value of type `capability` (checked
    /// at setup by the plugins that need one: `k8s_external` needs a cluster source).
    fn offers(&self, _capability: TypeId) -> bool {
        false
    }

    /// The files it names that setup did not read itself, for `--check` to open. Default:
    /// none (a file setup reads, such as `tls`'s certificate, fails setup already).
    fn files(&self) -> Vec<NamedFile> {
        Vec::new()
    }

    /// Whether the plugin it builds will know its clients' search paths
    /// (the `SearchPaths` of the plugin kit it offers, [`Plugin::offers`]): `None` when it never does, `Some(Err(why))` when it would
    /// with other options.
    fn offers_search_paths(&self) -> Option<Result<(), String>> {
        None
    }
}

/// A setup, as the registry lists them (`plugin::registry::Setup`).
#[cfg(test)]
type SetupFn = fn(&Directive, &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError>;

/// For setups' unit tests: `text` (a directive line, maybe with its block) set up by `setup`
/// as the only directive of a `.:53` block in `Corefile`, with no zones, the folder `.` and
/// no earlier use; the configured value, or the error as a user reads it.
#[cfg(test)]
pub fn set_up(text: &str, setup: SetupFn) -> Result<Arc<dyn Configured>, String> {
    let cf = crate::corefile::Corefile::parse_str(&format!(".:53 {{\n{text}\n}}\n"), Path::new("Corefile"))
        .map_err(|e| e.to_string())?;
    let d = cf
        .blocks
        .first()
        .and_then(|b| b.directives.first())
        .ok_or("no directive")?;
    let ctx = SetupCtx {
        zones: &[],
        dir: Path::new("."),
        previous: None,
        block: &[],
    };
    setup(d, &ctx).map_err(|e| e.to_string())
}
