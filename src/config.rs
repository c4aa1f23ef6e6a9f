//! The typed server configuration, built from a parsed Corefile: server blocks with their zones,
//! port, bind addresses and plugin configurations.
//!
//! Every directive is dispatched here to its plugin's setup; a directive cluster-dns knows from
//! CoreDNS but does not implement yet, and an unknown one, are errors that name the file and
//! line.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::corefile::{Corefile, CorefileError, Directive, parse_zone_key};
use crate::plugin::cache::setup::{self as cache_setup, CacheConfig};
use crate::plugin::errors::{self, ErrorsConfig};
use crate::plugin::forward::setup::{self as forward_setup, ForwardConfig};
use crate::plugin::health::{self, HealthConfig};
use crate::plugin::hosts::{self, HostsConfig};
use crate::plugin::kubernetes::setup::{self as kubernetes_setup, KubernetesConfig};
use crate::plugin::log::{self as query_log, LogConfig};
use crate::plugin::reload::{self, ReloadConfig};
use crate::plugin::rewrite::{self, RewriteRule};
use crate::plugin::{IMPLEMENTED, NOT_YET_IMPLEMENTED};
use crate::plugin::{loadbalance, loop_detect, metrics, ready};

/// The port a server block listens on when its key has none (CoreDNS's default).
pub const DEFAULT_DNS_PORT: u16 = 53;

/// One server block.
#[derive(Debug, Clone)]
pub struct BlockConfig {
    /// The block's zones, lower-case and absolute (`.` for the root).
    pub zones: Vec<String>,
    /// The port (0 picks a free one, for tests).
    pub port: u16,
    /// `bind` addresses; empty means all interfaces.
    pub bind: Vec<IpAddr>,
    /// The `kubernetes` plugin, if configured.
    pub kubernetes: Option<KubernetesConfig>,
    /// The `forward` plugin, if configured.
    pub forward: Option<ForwardConfig>,
    /// The `cache` plugin, if configured.
    pub cache: Option<CacheConfig>,
    /// `loop` is configured.
    pub loop_detect: bool,
    /// `loadbalance` is configured.
    pub loadbalance: bool,
    /// `log`.
    pub log: Option<LogConfig>,
    /// `errors`.
    pub errors: Option<ErrorsConfig>,
    /// `prometheus`: where `/metrics` listens; the block's requests are counted.
    pub prometheus: Option<SocketAddr>,
    /// `health`.
    pub health: Option<HealthConfig>,
    /// `ready`: where `/ready` listens.
    pub ready: Option<SocketAddr>,
    /// `reload`.
    pub reload: Option<ReloadConfig>,
    /// `hosts`.
    pub hosts: Option<HostsConfig>,
    /// `rewrite` rules, in file order.
    pub rewrite: Vec<RewriteRule>,
}

impl BlockConfig {
    /// The plugins this block configures, by directive name (for `coredns_plugin_enabled`).
    pub fn plugin_names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (on, name) in [
            (self.prometheus.is_some(), "prometheus"),
            (self.errors.is_some(), "errors"),
            (self.log.is_some(), "log"),
            (self.health.is_some(), "health"),
            (self.ready.is_some(), "ready"),
            (self.loadbalance, "loadbalance"),
            (self.cache.is_some(), "cache"),
            (!self.rewrite.is_empty(), "rewrite"),
            (self.hosts.is_some(), "hosts"),
            (self.kubernetes.is_some(), "kubernetes"),
            (self.loop_detect, "loop"),
            (self.forward.is_some(), "forward"),
            (self.reload.is_some(), "reload"),
        ] {
            if on {
                out.push(name);
            }
        }
        out
    }
}

/// What one HTTP listener serves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpEndpoints {
    /// `/health`.
    pub health: bool,
    /// `/ready`.
    pub ready: bool,
    /// `/metrics`.
    pub metrics: bool,
}

/// A whole configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The Corefile it came from.
    pub path: PathBuf,
    /// Its server blocks, in file order.
    pub blocks: Vec<BlockConfig>,
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
        for block in &corefile.blocks {
            let mut zones = Vec::new();
            let mut port = None;
            for key_token in &block.keys {
                let key = parse_zone_key(key_token)?;
                let key_port = key.port.unwrap_or(default_port);
                match port {
                    None => port = Some(key_port),
                    Some(p) if p != key_port => {
                        return Err(key_token.error(format!(
                            "all keys of a server block must use the same port (this one uses {key_port}, an earlier one {p}); write a separate block per port"
                        )));
                    }
                    Some(_) => {}
                }
                if zones.contains(&key.zone) {
                    return Err(key_token.error(format!(
                        "zone '{}' is listed twice in this server block",
                        key.zone
                    )));
                }
                zones.push(key.zone);
            }
            let port = port.unwrap_or(default_port);
            for earlier in &blocks {
                if earlier.port == port
                    && let Some((z, key)) = zones
                        .iter()
                        .zip(&block.keys)
                        .find(|(z, _)| earlier.zones.contains(z))
                {
                    return Err(key.error(format!(
                        "zone '{z}' on port {port} is already served by an earlier server block"
                    )));
                }
            }

            let mut config = BlockConfig {
                zones,
                port,
                bind: Vec::new(),
                kubernetes: None,
                forward: None,
                cache: None,
                loop_detect: false,
                loadbalance: false,
                log: None,
                errors: None,
                prometheus: None,
                health: None,
                ready: None,
                reload: None,
                hosts: None,
                rewrite: Vec::new(),
            };
            for d in &block.directives {
                apply_directive(&mut config, d, &dir)?;
            }
            blocks.push(config);
        }
        Ok(Self {
            path: path.to_owned(),
            blocks,
        })
    }

    /// The HTTP listeners the configuration asks for, each with what it serves (blocks that
    /// name the same address share one listener, as in CoreDNS).
    pub fn http_listeners(&self) -> Vec<(SocketAddr, HttpEndpoints)> {
        let mut out: Vec<(SocketAddr, HttpEndpoints)> = Vec::new();
        let mut add = |addr: SocketAddr, set: &dyn Fn(&mut HttpEndpoints)| match out
            .iter_mut()
            .find(|(a, _)| *a == addr)
        {
            Some((_, e)) => set(e),
            None => {
                let mut e = HttpEndpoints::default();
                set(&mut e);
                out.push((addr, e));
            }
        };
        for b in &self.blocks {
            if let Some(h) = &b.health {
                add(h.addr, &|e| e.health = true);
            }
            if let Some(a) = b.ready {
                add(a, &|e| e.ready = true);
            }
            if let Some(a) = b.prometheus {
                add(a, &|e| e.metrics = true);
            }
        }
        out
    }

    /// How long DNS keeps answering after SIGTERM: the longest `health { lameduck }`.
    pub fn lameduck(&self) -> Duration {
        self.blocks
            .iter()
            .filter_map(|b| b.health.as_ref().map(|h| h.lameduck))
            .max()
            .unwrap_or_default()
    }

    /// `reload`, when any block has it (it reloads the whole file, as in CoreDNS).
    pub fn reload(&self) -> Option<ReloadConfig> {
        self.blocks.iter().find_map(|b| b.reload)
    }
}

/// Stores a directive's value in its slot, refusing a second use of it in the same block.
fn once<T>(slot: &mut Option<T>, d: &Directive, value: T) -> Result<(), CorefileError> {
    if slot.is_some() {
        return Err(d.error("can be used only once per server block"));
    }
    *slot = Some(value);
    Ok(())
}

fn apply_directive(config: &mut BlockConfig, d: &Directive, dir: &Path) -> Result<(), CorefileError> {
    let name = d.name.text.as_str();
    match name {
        "bind" => {
            if d.args.is_empty() {
                return Err(d.error("expected at least one IP address"));
            }
            if d.has_block {
                return Err(d.error("takes no block"));
            }
            for a in &d.args {
                let ip: IpAddr = a.text.parse().map_err(|_| {
                    a.error(format!(
                        "bind: '{}' is not an IP address (interface names are not supported)",
                        a.text
                    ))
                })?;
                if !config.bind.contains(&ip) {
                    config.bind.push(ip);
                }
            }
            Ok(())
        }
        "kubernetes" => {
            let value = kubernetes_setup::parse(d, &config.zones, dir)?;
            once(&mut config.kubernetes, d, value)
        }
        "forward" => {
            let value = forward_setup::parse(d, dir)?;
            once(&mut config.forward, d, value)
        }
        "cache" => {
            let value = cache_setup::parse(d, &config.zones)?;
            once(&mut config.cache, d, value)
        }
        "loop" => {
            loop_detect::setup::parse(d)?;
            config.loop_detect = true;
            Ok(())
        }
        "loadbalance" => {
            loadbalance::setup::parse(d)?;
            config.loadbalance = true;
            Ok(())
        }
        "log" => {
            let value = query_log::parse(d)?;
            once(&mut config.log, d, value)
        }
        "errors" => {
            let value = errors::parse(d)?;
            once(&mut config.errors, d, value)
        }
        "prometheus" => {
            let value = metrics::parse(d)?;
            once(&mut config.prometheus, d, value)
        }
        "health" => {
            let value = health::parse(d)?;
            once(&mut config.health, d, value)
        }
        "ready" => {
            let value = ready::parse(d)?;
            once(&mut config.ready, d, value)
        }
        "hosts" => {
            let value = hosts::setup::parse(d, &config.zones, dir)?;
            once(&mut config.hosts, d, value)
        }
        "rewrite" => {
            config.rewrite.push(rewrite::setup::parse(d)?);
            Ok(())
        }
        "reload" => {
            let value = reload::parse(d)?;
            once(&mut config.reload, d, value)
        }
        _ => {
            debug_assert!(!IMPLEMENTED.contains(&name));
            match NOT_YET_IMPLEMENTED.iter().find(|(n, _)| *n == name) {
                Some((_, what)) => Err(d.error(format!(
                    "{what} is not implemented in cluster-dns yet; remove the '{name}' line to start"
                ))),
                None => Err(d.error(format!("unknown directive '{name}'"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, CorefileError> {
        let path = Path::new("/tmp/Corefile");
        let cf = Corefile::parse_str(text, path)?;
        Config::from_corefile(&cf, path, DEFAULT_DNS_PORT)
    }

    #[test]
    fn blocks_zones_ports_and_bind() {
        let c = parse("cluster.local:1053 in-addr.arpa:1053 {\n bind 127.0.0.1 ::1\n kubernetes\n}\n.:5300 {\n bind 127.0.0.2\n}\n").unwrap();
        assert_eq!(c.blocks.len(), 2);
        assert_eq!(c.blocks[0].zones, vec!["cluster.local.", "in-addr.arpa."]);
        assert_eq!(c.blocks[0].port, 1053);
        assert_eq!(c.blocks[0].bind.len(), 2);
        assert_eq!(
            c.blocks[0].kubernetes.as_ref().unwrap().zones,
            vec!["cluster.local.", "in-addr.arpa."]
        );
        assert_eq!(c.blocks[1].port, 5300);
        assert_eq!(parse(".\n").unwrap().blocks[0].port, 53);
    }

    #[test]
    fn mistakes_are_reported_with_file_and_line() {
        let e = parse(".:53 {\n  kubernetes\n  kubernetes\n}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Corefile:3") && e.contains("only once"), "{e}");
        let e = parse(".:53 {\n  forward . 1.1.1.1\n  forward . 1.1.1.1\n}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Corefile:3") && e.contains("only once"), "{e}");
        let e = parse(".:53 {\n  autopath @kubernetes\n}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Corefile:2") && e.contains("not implemented"), "{e}");
        let e = parse(".:53 {\n  frobnicate\n}\n").unwrap_err().to_string();
        assert!(
            e.contains("Corefile:2") && e.contains("unknown directive 'frobnicate'"),
            "{e}"
        );
        let e = parse(".:53 {\n  bind eth0\n}\n").unwrap_err().to_string();
        assert!(e.contains("Corefile:2") && e.contains("not an IP"), "{e}");
        let e = parse("a.:53 b.:54 {\n}\n").unwrap_err().to_string();
        assert!(e.contains("same port"), "{e}");
        let e = parse("a.:53 {\n}\nb. a. {\n}\n").unwrap_err().to_string();
        assert!(e.contains("already served") && e.contains("Corefile:3"), "{e}");
    }

    /// The older kubeadm form (bare `cache 30`) and the coredns/deployment template (no `pods`,
    /// no `ttl`) load too.
    #[test]
    fn older_kubeadm_and_deployment_template_forms() {
        let older = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/Corefile"))
            .unwrap()
            .replace(
                "    cache 30 {\n       disable success cluster.local\n       disable denial cluster.local\n    }\n",
                "    cache 30\n",
            );
        assert!(older.contains("    cache 30\n"));
        let c = parse(&older).unwrap();
        let cache = c.blocks[0].cache.as_ref().unwrap();
        assert_eq!(cache.success.max_ttl, Duration::from_secs(30));
        let template = older
            .replace("       pods insecure\n", "")
            .replace("       ttl 30\n", "");
        let c = parse(&template).unwrap();
        assert_eq!(c.blocks[0].kubernetes.as_ref().unwrap().ttl, 5);
    }

    /// kubeadm's Corefile (`config/Corefile`) as shipped: every directive is accepted and lands
    /// where it should.
    #[test]
    fn kubeadm_corefile_as_shipped() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/config/Corefile"));
        let c = Config::load(path, DEFAULT_DNS_PORT).unwrap();
        let b = &c.blocks[0];
        assert_eq!((b.zones.as_slice(), b.port), (&[".".to_owned()][..], 53));
        let f = b.forward.as_ref().unwrap();
        assert_eq!(f.max_concurrent, Some(1000));
        assert_eq!(b.cache.as_ref().unwrap().success.max_ttl.as_secs(), 30);
        assert!(b.loop_detect && b.loadbalance && b.errors.is_some());
        assert_eq!(b.health.as_ref().unwrap().lameduck, Duration::from_secs(5));
        assert_eq!(c.lameduck(), Duration::from_secs(5));
        assert_eq!(b.ready.unwrap().port(), 8181);
        assert_eq!(b.prometheus.unwrap().port(), 9153);
        assert!(c.reload().is_some());
        let http: Vec<u16> = c.http_listeners().iter().map(|(a, _)| a.port()).collect();
        assert_eq!(http, [8080, 8181, 9153]);
        assert_eq!(b.plugin_names().len(), 10);
    }
}
