//! The typed server configuration, built from a parsed Corefile: server blocks with their zones,
//! port, bind addresses and plugin configurations.
//!
//! Every directive is dispatched here to its plugin's setup; a directive cluster-dns knows from
//! CoreDNS but does not implement yet, and an unknown one, are errors that name the file and
//! line.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::corefile::{Corefile, CorefileError, Directive, parse_zone_key};
use crate::plugin::cache::setup::{self as cache_setup, CacheConfig};
use crate::plugin::forward::setup::{self as forward_setup, ForwardConfig};
use crate::plugin::kubernetes::setup::{self as kubernetes_setup, KubernetesConfig};
use crate::plugin::{IMPLEMENTED, NOT_YET_IMPLEMENTED};
use crate::plugin::{loadbalance, loop_detect};

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
            if config.kubernetes.is_some() {
                return Err(d.error("can be used only once per server block"));
            }
            config.kubernetes = Some(kubernetes_setup::parse(d, &config.zones, dir)?);
            Ok(())
        }
        "forward" => {
            if config.forward.is_some() {
                return Err(d.error("can be used only once per server block"));
            }
            config.forward = Some(forward_setup::parse(d, dir)?);
            Ok(())
        }
        "cache" => {
            if config.cache.is_some() {
                return Err(d.error("can be used only once per server block"));
            }
            config.cache = Some(cache_setup::parse(d, &config.zones)?);
            Ok(())
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
        let e = parse(".:53 {\n  log\n}\n").unwrap_err().to_string();
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

    /// The kubeadm Corefile without the five issue-5 lines (errors, health, ready, prometheus,
    /// reload) is accepted as written.
    #[test]
    fn kubeadm_corefile_forward_cache_loop_loadbalance() {
        let dir = std::env::temp_dir().join(format!("cluster-dns-config-kubeadm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let resolv = dir.join("resolv.conf");
        std::fs::write(&resolv, "nameserver 10.0.0.2\n").unwrap();
        let text = format!(
            ".:53 {{\n    kubernetes cluster.local in-addr.arpa ip6.arpa {{\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }}\n    forward . {} {{\n       max_concurrent 1000\n    }}\n    cache 30 {{\n       disable success cluster.local\n       disable denial cluster.local\n    }}\n    loop\n    loadbalance\n}}\n",
            resolv.display()
        );
        let path = dir.join("Corefile");
        let cf = Corefile::parse_str(&text, &path).unwrap();
        let c = Config::from_corefile(&cf, &path, DEFAULT_DNS_PORT).unwrap();
        let b = &c.blocks[0];
        let f = b.forward.as_ref().unwrap();
        assert_eq!((f.to.len(), f.max_concurrent), (1, Some(1000)));
        assert_eq!(b.cache.as_ref().unwrap().success.max_ttl.as_secs(), 30);
        assert!(b.loop_detect && b.loadbalance);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
