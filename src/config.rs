//! The typed server configuration, built from a parsed Corefile: server blocks with their zones,
//! port and scheme, their directives as their plugins' setups parsed them, and the settings
//! those directives wrote for the server ([`BlockSettings`]: listen addresses, UDP size, TLS,
//! HTTP routes, ...).
//!
//! Every directive is dispatched to its plugin's setup through the registry
//! ([`crate::plugin::registry`]); a directive cluster-dns knows from CoreDNS but does not
//! implement yet, and an unknown one, are errors that name the file and line. No plugin is
//! named here: what a block runs is read from its settings.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::chain::{BlockSettings, Configured, HttpRoute, NamedFile, ReloadSettings, SetupCtx};
use crate::corefile::{Corefile, CorefileError, Scheme, Token, parse_zone_key};
use crate::plugin::registry;

/// The port a server block listens on when its key has none (CoreDNS's default).
pub const DEFAULT_DNS_PORT: u16 = 53;

/// How long DNS keeps answering after SIGTERM once this server's endpoint is no longer ready in
/// any Service, when no `health { propagation_margin }` says: kube-proxy programs a node's rules
/// within its 1 s minimum sync period plus the EndpointSlice watch delay, usually well under
/// 2 s; 3 s leaves a margin over that.
pub const DEFAULT_PROPAGATION_MARGIN: Duration = Duration::from_secs(3);

/// One server block.
#[derive(Debug, Clone)]
pub struct BlockConfig {
    /// The block's zones, lower-case and absolute (`.` for the root).
    pub zones: Vec<String>,
    /// The port (0 picks a free one, for tests).
    pub port: u16,
    /// How its questions arrive: plain DNS, DNS over TLS or DNS over HTTPS.
    pub scheme: Scheme,
    /// Its directives, parsed by their plugins' setups: one entry per directive, in the order
    /// first used (a directive used again folds into its entry, or is refused).
    pub plugins: Vec<(&'static str, Arc<dyn Configured>)>,
    /// What its directives set for the server ([`Configured::configure`]).
    pub settings: BlockSettings,
}

impl BlockConfig {
    /// The configured directive of type `T`, if the block has it (for tests and tools; the
    /// runtime reads [`BlockConfig::settings`]).
    pub fn get<T: Configured>(&self) -> Option<&T> {
        self.plugins
            .iter()
            .find_map(|(_, c)| (c.as_ref() as &dyn std::any::Any).downcast_ref::<T>())
    }

    /// The plugins this block configures, by directive name, in chain order (for
    /// `coredns_plugin_enabled`).
    pub fn plugin_names(&self) -> Vec<&'static str> {
        registry::PLUGINS
            .iter()
            .filter(|e| self.plugins.iter().any(|(n, _)| *n == e.name))
            .map(|e| e.name)
            .collect()
    }
}

/// A whole configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The Corefile it came from.
    pub path: PathBuf,
    /// Its server blocks, in file order.
    pub blocks: Vec<BlockConfig>,
    /// What it asks for that this server accepts but cannot do ([`Configured::warnings`]), in
    /// file order: logged at start, printed by `--check`.
    pub warnings: Vec<CorefileError>,
}

impl Config {
    /// Reads and checks the Corefile at `path`. Keys without a port get `default_port`.
    pub fn load(path: &Path, default_port: u16) -> Result<Self, CorefileError> {
        let corefile = Corefile::from_file(path)?;
        Self::from_corefile(&corefile, path, default_port)
    }

    /// Checks a parsed Corefile (read from `path`, which anchors relative paths).
    pub fn from_corefile(corefile: &Corefile, path: &Path, default_port: u16) -> Result<Self, CorefileError> {
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut blocks: Vec<BlockConfig> = Vec::new();
        let mut warnings = Vec::new();
        for block in &corefile.blocks {
            // Each key's zone and port. Keys of one block may use different ports (as in
            // CoreDNS, `example.com example.io:1053`): the block is then served as one block
            // per port, each with its own zones and the same directives.
            let mut keys: Vec<(String, Scheme, u16, &Token)> = Vec::new();
            for key_token in &block.keys {
                let key = parse_zone_key(key_token)?;
                let key_port = key.port.unwrap_or(key.scheme.default_port(default_port));
                if keys
                    .iter()
                    .any(|(z, s, p, _)| *z == key.zone && *s == key.scheme && *p == key_port)
                {
                    return Err(key_token.error(format!(
                        "zone '{}' is listed twice in this server block",
                        key.zone
                    )));
                }
                keys.push((key.zone, key.scheme, key_port, key_token));
            }
            // One served block per scheme and port.
            let mut listens: Vec<(Scheme, u16)> = Vec::new();
            for (_, s, p, _) in &keys {
                if !listens.contains(&(*s, *p)) {
                    listens.push((*s, *p));
                }
            }
            if listens.is_empty() {
                listens.push((Scheme::Dns, default_port));
            }
            // A zone and port may be served again after blocks with views (`view`): the first
            // block whose view admits a question takes it, a block without one takes the rest.
            // A port speaks one protocol.
            for &(scheme, port) in &listens {
                // The key to point at (a block always has one: the parser requires it).
                let Some(at) = keys
                    .iter()
                    .find(|(_, s, p, _)| *s == scheme && *p == port)
                    .map(|k| k.3)
                    .or(block.keys.first())
                else {
                    continue;
                };
                // Port 0 (tests) gives each listener a port of its own.
                if let Some((other, _)) = listens
                    .iter()
                    .find(|(s, p)| *p == port && *s != scheme && port != 0 && s.shares_sockets_with(scheme))
                {
                    return Err(at.error(format!(
                        "port {port} cannot serve both {}:// and {}://",
                        other.as_str(),
                        scheme.as_str()
                    )));
                }
                for earlier in &blocks {
                    if earlier.port != port || (earlier.scheme != scheme && port == 0) {
                        continue;
                    }
                    if earlier.scheme != scheme && !earlier.scheme.shares_sockets_with(scheme) {
                        continue;
                    }
                    if earlier.scheme != scheme {
                        return Err(at.error(format!(
                            "port {port} is served as {}:// by an earlier server block and cannot also serve {}://",
                            earlier.scheme.as_str(),
                            scheme.as_str()
                        )));
                    }
                    if let Some((z, _, _, key)) = keys
                        .iter()
                        .find(|(z, s, p, _)| *s == scheme && *p == port && earlier.zones.contains(z))
                        && earlier.settings.filter.is_none()
                    {
                        return Err(key.error(format!(
                            "zone '{z}' on port {port} is already served by an earlier server block (without a view)"
                        )));
                    }
                }
            }
            // The directives are set up once, against every zone of the block.
            let mut all_zones: Vec<String> = Vec::new();
            for (z, _, _, _) in &keys {
                if !all_zones.contains(z) {
                    all_zones.push(z.clone());
                }
            }
            let mut plugins: Vec<(&'static str, Arc<dyn Configured>)> = Vec::new();
            // Relative paths are read from the Corefile's folder, or from the one a directive
            // of the block sets (`root`); those are set up first, wherever they are written.
            let mut files_dir = dir.clone();
            let (first, rest): (Vec<_>, Vec<_>) = block
                .directives
                .iter()
                .partition(|d| registry::sets_up_first(&d.name.text));
            let names: Vec<&str> = block.directives.iter().map(|d| d.name.text.as_str()).collect();
            for d in first.into_iter().chain(rest) {
                let at = plugins.iter().position(|(n, _)| *n == d.name.text);
                let ctx = SetupCtx {
                    zones: &all_zones,
                    dir: &files_dir,
                    previous: at.and_then(|i| plugins.get(i)).map(|(_, c)| c.as_ref()),
                    block: &names,
                };
                let value = registry::setup(d, &ctx)?;
                if value.plain_dns_only()
                    && let Some((scheme, _)) = listens.iter().find(|(s, _)| *s != Scheme::Dns)
                {
                    return Err(d.error(format!(
                        "can only be used in plain DNS server blocks (dns://), not in a {}:// block",
                        scheme.as_str()
                    )));
                }
                if let Some(moved) = value.files_dir() {
                    files_dir = moved.to_path_buf();
                }
                let name = registry::lookup(&d.name.text).map_or("", |e| e.name);
                match at.and_then(|i| plugins.get_mut(i)) {
                    Some(slot) => slot.1 = value,
                    None => plugins.push((name, value)),
                }
            }
            let mut settings = BlockSettings::default();
            for (_, c) in &plugins {
                c.check(&plugins)?;
                warnings.extend(c.warnings(&plugins));
                c.configure(&mut settings);
            }
            // DNS over QUIC and over HTTP/3 are always encrypted: CoreDNS cannot start such a
            // block without a certificate either.
            if settings.listener.tls.is_none()
                && let Some((_, scheme, _, key)) = keys
                    .iter()
                    .find(|(_, s, _, _)| matches!(s, Scheme::Quic | Scheme::Https3))
            {
                return Err(key.error(format!(
                    "a {}:// server block needs a 'tls CERT KEY' directive (it is always encrypted)",
                    scheme.as_str()
                )));
            }
            for &(scheme, port) in &listens {
                let zones = keys
                    .iter()
                    .filter(|(_, s, p, _)| *s == scheme && *p == port)
                    .map(|(z, _, _, _)| z.clone())
                    .collect();
                blocks.push(BlockConfig {
                    zones,
                    port,
                    scheme,
                    plugins: plugins.clone(),
                    settings: settings.clone(),
                });
            }
        }
        Ok(Self {
            path: path.to_owned(),
            blocks,
            warnings,
        })
    }

    /// True when a block has `debug`: the process logs at debug level.
    pub fn debug(&self) -> bool {
        self.blocks.iter().any(|b| b.settings.debug)
    }

    /// The HTTP listeners the configuration asks for, each with the routes it serves (blocks
    /// that name the same address share one listener, as in CoreDNS; a path is served once).
    pub fn http_listeners(&self) -> Vec<(SocketAddr, Vec<HttpRoute>)> {
        let mut out: Vec<(SocketAddr, Vec<HttpRoute>)> = Vec::new();
        for route in self.blocks.iter().flat_map(|b| &b.settings.http) {
            match out.iter_mut().find(|(a, _)| *a == route.addr) {
                Some((_, routes)) if routes.iter().any(|r| r.path == route.path) => {}
                Some((_, routes)) => routes.push(route.clone()),
                None => out.push((route.addr, vec![route.clone()])),
            }
        }
        out
    }

    /// The HTTP listeners as addresses and paths, to compare two configurations.
    pub fn http_paths(&self) -> Vec<(SocketAddr, Vec<&'static str>)> {
        self.http_listeners()
            .into_iter()
            .map(|(a, routes)| (a, routes.iter().map(|r| r.path).collect()))
            .collect()
    }

    /// How long DNS keeps answering after SIGTERM: the longest lameduck of any block.
    pub fn lameduck(&self) -> Duration {
        self.blocks
            .iter()
            .map(|b| b.settings.lameduck)
            .max()
            .unwrap_or_default()
    }

    /// How long DNS keeps answering after SIGTERM once this server's endpoint left every
    /// Service: the longest `health { propagation_margin }`, else
    /// [`DEFAULT_PROPAGATION_MARGIN`].
    pub fn propagation_margin(&self) -> Duration {
        self.blocks
            .iter()
            .filter_map(|b| b.settings.propagation_margin)
            .max()
            .unwrap_or(DEFAULT_PROPAGATION_MARGIN)
    }

    /// The files the directives name ([`Configured::files`]) that cannot be opened now, each
    /// once, with the error.
    pub fn unopenable_files(&self) -> Vec<(NamedFile, std::io::Error)> {
        let mut seen: Vec<NamedFile> = Vec::new();
        let mut out = Vec::new();
        for file in self
            .blocks
            .iter()
            .flat_map(|b| &b.plugins)
            .flat_map(|(_, c)| c.files())
        {
            if seen.contains(&file) {
                continue;
            }
            seen.push(file.clone());
            if let Err(error) = std::fs::File::open(&file.path) {
                out.push((file, error));
            }
        }
        out
    }

    /// How often the Corefile is read again, when any block asks (it reloads the whole file,
    /// as in CoreDNS).
    pub fn reload(&self) -> Option<ReloadSettings> {
        self.blocks.iter().find_map(|b| b.settings.reload)
    }
}
