//! The typed server configuration, built from a parsed Corefile: server blocks with their zones,
//! port, bind addresses and plugin configurations.
//!
//! Every directive is dispatched to its plugin's setup through the registry
//! ([`crate::plugin::registry`]); a directive cluster-dns knows from CoreDNS but does not
//! implement yet, and an unknown one, are errors that name the file and line.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::chain::{Configured, SetupCtx};
use crate::corefile::{Corefile, CorefileError, Scheme, Token, parse_zone_key};
use crate::plugin::bind::BindConfig;
use crate::plugin::bufsize::BufsizeConfig;
use crate::plugin::health::HealthConfig;
use crate::plugin::metrics::PrometheusConfig;
use crate::plugin::ready::ReadyConfig;
use crate::plugin::registry;
use crate::plugin::reload::ReloadConfig;
use crate::plugin::tls::TlsConfig;

/// The port a server block listens on when its key has none (CoreDNS's default).
pub const DEFAULT_DNS_PORT: u16 = 53;

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
}

impl BlockConfig {
    /// The configured directive of type `T` (`block.get::<ForwardConfig>()`).
    pub fn get<T: Configured>(&self) -> Option<&T> {
        crate::chain::find_configured(&self.plugins)
    }

    /// The `bind` addresses; empty means all interfaces.
    pub fn bind(&self) -> &[IpAddr] {
        self.get::<BindConfig>().map_or(&[], |b| b.addrs.as_slice())
    }

    /// The filter of its questions (`view`), if a directive sets one.
    pub fn view(&self) -> Option<Arc<dyn crate::chain::BlockFilter>> {
        self.plugins.iter().find_map(|(_, c)| c.block_filter())
    }

    /// The server's TLS configuration (`tls`): used by `tls://` and `https://` blocks, ignored
    /// by plain DNS ones.
    pub fn tls(&self) -> Option<Arc<tokio_rustls::rustls::ServerConfig>> {
        self.get::<TlsConfig>().map(|t| t.server.clone())
    }

    /// The largest UDP payload the block advertises and fills: its `bufsize`, or 1232.
    pub fn udp_payload(&self) -> u16 {
        self.get::<BufsizeConfig>()
            .map_or(crate::proto::MAX_UDP_PAYLOAD, |b| b.size)
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
                    .find(|(s, p)| *p == port && *s != scheme && port != 0)
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
                        && earlier.view().is_none()
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
            for d in &block.directives {
                let at = plugins.iter().position(|(n, _)| *n == d.name.text);
                let ctx = SetupCtx {
                    zones: &all_zones,
                    dir: &dir,
                    previous: at.and_then(|i| plugins.get(i)).map(|(_, c)| c.as_ref()),
                };
                let value = registry::setup(d, &ctx)?;
                let name = registry::lookup(&d.name.text).map_or("", |e| e.name);
                match at.and_then(|i| plugins.get_mut(i)) {
                    Some(slot) => slot.1 = value,
                    None => plugins.push((name, value)),
                }
            }
            for (_, c) in &plugins {
                c.check(&plugins)?;
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
                });
            }
        }
        Ok(Self {
            path: path.to_owned(),
            blocks,
        })
    }

    /// True when a block has `debug`: the process logs at debug level.
    pub fn debug(&self) -> bool {
        self.blocks
            .iter()
            .any(|b| b.get::<crate::plugin::debug::DebugConfig>().is_some())
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
            if let Some(h) = b.get::<HealthConfig>() {
                add(h.addr, &|e| e.health = true);
            }
            if let Some(r) = b.get::<ReadyConfig>() {
                add(r.addr, &|e| e.ready = true);
            }
            if let Some(p) = b.get::<PrometheusConfig>() {
                add(p.addr, &|e| e.metrics = true);
            }
        }
        out
    }

    /// How long DNS keeps answering after SIGTERM: the longest `health { lameduck }`.
    pub fn lameduck(&self) -> Duration {
        self.blocks
            .iter()
            .filter_map(|b| b.get::<HealthConfig>().map(|h| h.lameduck))
            .max()
            .unwrap_or_default()
    }

    /// `reload`, when any block has it (it reloads the whole file, as in CoreDNS).
    pub fn reload(&self) -> Option<ReloadConfig> {
        self.blocks.iter().find_map(|b| b.get::<ReloadConfig>().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::cache::CacheConfig;
    use crate::plugin::errors::ErrorsConfig;
    use crate::plugin::forward::ForwardConfig;
    use crate::plugin::kubernetes::setup::KubernetesConfig;
    use crate::plugin::loadbalance::setup::LoadBalanceConfig;
    use crate::plugin::loop_detect::setup::LoopConfig;

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
        assert_eq!(c.blocks[0].bind().len(), 2);
        assert_eq!(
            c.blocks[0].get::<KubernetesConfig>().unwrap().zones,
            vec!["cluster.local.", "in-addr.arpa."]
        );
        assert_eq!(c.blocks[1].port, 5300);
        assert_eq!(parse(".\n").unwrap().blocks[0].port, 53);
        // Keys on different ports: one block per port, the directives set up once for all.
        let c = parse("example.com example.io:1053 example.net {\n kubernetes\n}\n").unwrap();
        assert_eq!(c.blocks.len(), 2);
        assert_eq!(c.blocks[0].zones, vec!["example.com.", "example.net."]);
        assert_eq!(c.blocks[0].port, 53);
        assert_eq!(c.blocks[1].zones, vec!["example.io."]);
        assert_eq!(c.blocks[1].port, 1053);
        let k0 = c.blocks[0].get::<KubernetesConfig>().unwrap();
        assert_eq!(k0, c.blocks[1].get::<KubernetesConfig>().unwrap());
        assert_eq!(k0.zones, vec!["example.com.", "example.io.", "example.net."]);
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
        let e = parse(".:53 {\n  dnssec example.org\n}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Corefile:2") && e.contains("not implemented"), "{e}");
        let e = parse(".:53 {\n  k8s_external example.org\n}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Corefile:2") && e.contains("needs a 'kubernetes'"),
            "{e}"
        );
        // A check against the rest of the block, after every directive is parsed.
        let e = parse(".:53 {\n  autopath @kubernetes\n  kubernetes cluster.local\n}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Corefile:2") && e.contains("pods verified"), "{e}");
        let e = parse(".:53 {\n  bufsize 9000\n}\n").unwrap_err().to_string();
        assert!(
            e.contains("Corefile:2") && e.contains("not a size from 512 to 4096"),
            "{e}"
        );
        assert_eq!(
            parse(".:53 {\n  bufsize\n}\n").unwrap().blocks[0].udp_payload(),
            1232
        );
        assert_eq!(
            parse(".:53 {\n  bufsize 1400\n}\n").unwrap().blocks[0].udp_payload(),
            1400
        );
        let e = parse(".:53 {\n  dns64 {\n    prefix 64:ff9b::/80\n  }\n}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Corefile:3") && e.contains("length 32, 40"), "{e}");
        let e = parse(".:53 {\n  dns64 {\n    translate_some\n  }\n}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Corefile:3") && e.contains("unknown option"), "{e}");
        let e = parse(".:53 {\n  acl {\n    deny net 10.0.0.0/8\n  }\n}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Corefile:3") && e.contains("unknown action 'deny'"),
            "{e}"
        );
        let e = parse(".:53 {\n  acl {\n    block type AAAA net 10.0.0.0/40\n  }\n}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Corefile:3") && e.contains("not an address"), "{e}");
        let e = parse(".:53 {\n  acl {\n    block type FOO\n  }\n}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Corefile:3") && e.contains("not a record type"), "{e}");
        for (text, why) in [
            (
                "template IN A {\n    match \"(\"\n  }",
                "not a regular expression",
            ),
            (
                "template IN A {\n    answer \"{{ .Message }}\"\n  }",
                "not supported",
            ),
            ("template IN A {\n    rcode BOGUS\n  }", "rcode 'BOGUS'"),
            ("template IN A {\n    frob\n  }", "unknown option 'frob'"),
        ] {
            let e = parse(&format!(".:53 {{\n  {text}\n}}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("Corefile:3") && e.contains(why), "{text}: {e}");
        }
        let e = parse(".:53 {\n  template IN FOO\n}\n").unwrap_err().to_string();
        assert!(e.contains("Corefile:2") && e.contains("not a record type"), "{e}");
        let e = parse(".:53 {\n  frobnicate\n}\n").unwrap_err().to_string();
        assert!(
            e.contains("Corefile:2") && e.contains("unknown directive 'frobnicate'"),
            "{e}"
        );
        let e = parse(".:53 {\n  bind nosuch0\n}\n").unwrap_err().to_string();
        assert!(
            e.contains("Corefile:2") && e.contains("neither an IP address"),
            "{e}"
        );
        let e = parse("a.:53 b. a {\n}\n").unwrap_err().to_string();
        assert!(e.contains("listed twice") && e.contains("Corefile:1"), "{e}");
        let e = parse("a.:54 {\n}\nb. a.:54 {\n}\n").unwrap_err().to_string();
        assert!(e.contains("already served") && e.contains("port 54"), "{e}");
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
        let cache = c.blocks[0].get::<CacheConfig>().unwrap();
        assert_eq!(cache.success.max_ttl, Duration::from_secs(30));
        let template = older
            .replace("       pods insecure\n", "")
            .replace("       ttl 30\n", "");
        let c = parse(&template).unwrap();
        assert_eq!(c.blocks[0].get::<KubernetesConfig>().unwrap().ttl, 5);
    }

    /// kubeadm's Corefile (`config/Corefile`) as shipped: every directive is accepted and lands
    /// where it should.
    #[test]
    fn kubeadm_corefile_as_shipped() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/config/Corefile"));
        let c = Config::load(path, DEFAULT_DNS_PORT).unwrap();
        let b = &c.blocks[0];
        assert_eq!((b.zones.as_slice(), b.port), (&[".".to_owned()][..], 53));
        let f = b.get::<ForwardConfig>().unwrap();
        assert_eq!(f.max_concurrent, Some(1000));
        assert_eq!(b.get::<CacheConfig>().unwrap().success.max_ttl.as_secs(), 30);
        assert!(
            b.get::<LoopConfig>().is_some()
                && b.get::<LoadBalanceConfig>().is_some()
                && b.get::<ErrorsConfig>().is_some()
        );
        assert_eq!(b.get::<HealthConfig>().unwrap().lameduck, Duration::from_secs(5));
        assert_eq!(c.lameduck(), Duration::from_secs(5));
        assert_eq!(b.get::<ReadyConfig>().unwrap().addr.port(), 8181);
        assert_eq!(b.get::<PrometheusConfig>().unwrap().addr.port(), 9153);
        assert!(c.reload().is_some());
        let http: Vec<u16> = c.http_listeners().iter().map(|(a, _)| a.port()).collect();
        assert_eq!(http, [8080, 8181, 9153]);
        assert_eq!(b.plugin_names().len(), 10);
    }

    fn parse_text(text: &str) -> Result<Config, String> {
        parse(text).map_err(|e| e.to_string())
    }

    /// autopath's checks against the rest of its block: `@kubernetes` needs `pods verified`,
    /// the named plugin must exist and know search paths, a resolv.conf must be readable.
    #[test]
    fn autopath_kubernetes_needs_pods_verified_and_errors_name_the_line() {
        assert!(parse_text(".:53 {\n autopath @kubernetes\n kubernetes cluster.local {\n pods verified\n }\n forward . 127.0.0.1\n}\n").is_ok());
        let e = parse_text(".:53 {\n autopath @kubernetes\n kubernetes cluster.local\n}\n").unwrap_err();
        assert!(e.contains("Corefile:2") && e.contains("pods verified"), "{e}");
        let e = parse_text(".:53 {\n kubernetes cluster.local\n autopath @nothere\n}\n").unwrap_err();
        assert!(
            e.contains("Corefile:3") && e.contains("no 'nothere' plugin"),
            "{e}"
        );
        let e = parse_text(".:53 {\n autopath @forward\n forward . 127.0.0.1\n}\n").unwrap_err();
        assert!(e.contains("does not know its clients' search paths"), "{e}");
        let e = parse_text(".:53 {\n autopath\n}\n").unwrap_err();
        assert!(e.contains("needs a resolv.conf file or @PLUGIN"), "{e}");
        let e = parse_text(".:53 {\n autopath /nonexistent/resolv.conf\n}\n").unwrap_err();
        assert!(
            e.contains("cannot read resolv.conf /nonexistent/resolv.conf"),
            "{e}"
        );
    }
}
