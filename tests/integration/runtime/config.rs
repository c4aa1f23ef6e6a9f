//! The typed configuration (`cluster_dns::config`) from Corefile text: blocks, zones, ports,
//! the settings directives write, the plugins' configurations, and file:line errors.

use std::path::Path;
use std::time::Duration;

use cluster_dns::config::{Config, DEFAULT_DNS_PORT};
use cluster_dns::corefile::{Corefile, CorefileError};
use cluster_dns::plugin::cache::CacheConfig;
use cluster_dns::plugin::errors::ErrorsConfig;
use cluster_dns::plugin::forward::ForwardBlock;
use cluster_dns::plugin::health::HealthConfig;
use cluster_dns::plugin::kubernetes::config::KubernetesConfig;
use cluster_dns::plugin::loadbalance::setup::LoadBalanceConfig;
use cluster_dns::plugin::loop_detect::setup::LoopConfig;
use cluster_dns::plugin::metrics::PrometheusConfig;
use cluster_dns::plugin::ready::ReadyConfig;

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
    assert_eq!(c.blocks[0].settings.bind.len(), 2);
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
    let e = parse(".:53 {\n  cache\n  cache\n}\n").unwrap_err().to_string();
    assert!(e.contains("Corefile:3") && e.contains("only once"), "{e}");
    // Several `forward`s are one block's chain of them (their `next`), as in CoreDNS.
    let c = parse(".:53 {\n  forward . 1.1.1.1 {\n next NXDOMAIN\n }\n  forward . 1.0.0.1\n}\n").unwrap();
    let to: Vec<_> = c.blocks[0]
        .get::<ForwardBlock>()
        .unwrap()
        .configs
        .iter()
        .map(|f| f.to[0].to_string())
        .collect();
    assert_eq!(to, ["1.1.1.1:53", "1.0.0.1:53"]);
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
    // A check against the rest of the block, after every directive is parsed:
    // CoreDNS starts this one, so it is a warning with its line, not an error.
    let c = parse(".:53 {\n  autopath @kubernetes\n  kubernetes cluster.local\n}\n").unwrap();
    let w = c.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    assert!(
        w.len() == 1 && w[0].contains("Corefile:2") && w[0].contains("pods verified"),
        "{w:?}"
    );
    let e = parse(".:53 {\n  bufsize 9000\n}\n").unwrap_err().to_string();
    assert!(
        e.contains("Corefile:2") && e.contains("not a size from 512 to 4096"),
        "{e}"
    );
    assert_eq!(
        parse(".:53 {\n  bufsize\n}\n").unwrap().blocks[0]
            .settings
            .udp_payload,
        1232
    );
    assert_eq!(
        parse(".:53 {\n  bufsize 1400\n}\n").unwrap().blocks[0]
            .settings
            .udp_payload,
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
    let f = &b.get::<ForwardBlock>().unwrap().configs[0];
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

/// autopath's checks against the rest of its block: `@kubernetes` walks only with `pods verified`,
/// the named plugin must exist and know search paths, a resolv.conf must be readable.
#[test]
fn autopath_kubernetes_warns_without_pods_verified_and_errors_name_the_line() {
    assert!(parse_text(".:53 {\n autopath @kubernetes\n kubernetes cluster.local {\n pods verified\n }\n forward . 127.0.0.1\n}\n").is_ok());
    // Without it the Corefile loads (as CoreDNS's does) with a warning at the autopath line.
    let c = parse_text(".:53 {\n autopath @kubernetes\n kubernetes cluster.local\n}\n").unwrap();
    let w: Vec<String> = c.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        matches!(w.as_slice(), [one] if one.contains("Corefile:2") && one.contains("pods verified")),
        "{w:?}"
    );
    assert!(
        parse_text(".:53 {\n autopath @kubernetes\n kubernetes cluster.local {\n pods verified\n }\n}\n")
            .unwrap()
            .warnings
            .is_empty()
    );
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
