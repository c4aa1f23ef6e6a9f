//! Tests of the Corefile language.

use super::*;

const KUBEADM: &str = ".:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
";

fn parse(text: &str) -> Result<Corefile, CorefileError> {
    Corefile::parse_str(text, Path::new("Corefile"))
}

fn names(ds: &[Directive]) -> Vec<&str> {
    ds.iter().map(|d| d.name.text.as_str()).collect()
}

#[test]
fn kubeadm_corefile() {
    let cf = parse(KUBEADM).unwrap();
    assert_eq!(cf.blocks.len(), 1);
    let b = &cf.blocks[0];
    assert_eq!(b.keys[0].text, ".:53");
    assert_eq!(
        names(&b.directives),
        [
            "errors",
            "health",
            "ready",
            "kubernetes",
            "prometheus",
            "forward",
            "cache",
            "loop",
            "reload",
            "loadbalance"
        ]
    );
    let k = &b.directives[3];
    assert_eq!(
        k.args.iter().map(|t| t.text.as_str()).collect::<Vec<_>>(),
        ["cluster.local", "in-addr.arpa", "ip6.arpa"]
    );
    assert_eq!(names(&k.block), ["pods", "fallthrough", "ttl"]);
    assert_eq!(k.block[2].name.loc.line, 10);
    let cache = &b.directives[6];
    assert_eq!(cache.block[1].args[0].text, "denial");
    assert!(b.directives[2].block.is_empty() && !b.directives[2].has_block);
}

#[test]
fn one_line_blocks_comments_quotes_commas() {
    let cf = parse("# header\na.com, b.com:1053 { # trailing\n kubernetes cluster.local { pods insecure }\n log \"a b\" `raw \\n` \"q\\\"x\"\n}\n").unwrap();
    let b = &cf.blocks[0];
    assert_eq!(
        b.keys.iter().map(|k| k.text.as_str()).collect::<Vec<_>>(),
        ["a.com", "b.com:1053"]
    );
    assert_eq!(b.directives[0].block[0].args[0].text, "insecure");
    assert_eq!(
        b.directives[1]
            .args
            .iter()
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>(),
        ["a b", "raw \\n", "q\"x"]
    );
    let empty = parse(".:53 {}\n").unwrap();
    assert!(empty.blocks[0].directives.is_empty());
    let two = parse("a.:1 {\n}\nb.:2 {\n x\n}\n").unwrap();
    assert_eq!(two.blocks.len(), 2);
}

#[test]
fn single_block_without_braces() {
    let cf = parse(".:1053\nkubernetes cluster.local\nbind 127.0.0.1\n").unwrap();
    assert_eq!(cf.blocks.len(), 1);
    assert_eq!(names(&cf.blocks[0].directives), ["kubernetes", "bind"]);
}

#[test]
fn environment_variables() {
    // cargo sets CARGO_PKG_NAME for test runs.
    let cf = parse("{$CARGO_PKG_NAME}.:53 {\n x {%CARGO_PKG_NAME%}-{$CLUSTER_DNS_UNSET_VAR}\n}\n").unwrap();
    assert_eq!(cf.blocks[0].keys[0].text, "cluster-dns.:53");
    assert_eq!(cf.blocks[0].directives[0].args[0].text, "cluster-dns-");
}

fn temp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cluster-dns-corefile-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn snippets_and_imports() {
    let dir = temp("imports");
    std::fs::write(dir.join("common.conf"), "log\nerrors\n").unwrap();
    std::fs::create_dir_all(dir.join("blocks")).unwrap();
    std::fs::write(dir.join("blocks/a.server"), "a.:53 {\n import common.conf\n}\n").unwrap();
    std::fs::write(dir.join("blocks/b.server"), "b.:53 {\n x\n}\n").unwrap();
    let text = "(snip) {\n ready\n}\n.:53 {\n import snip\n import common.conf\n}\nimport blocks/*.server\n";
    let cf = Corefile::parse_str(text, &dir.join("Corefile")).unwrap_err();
    // blocks/a.server imports common.conf relative to blocks/: missing there.
    assert!(cf.to_string().contains("a.server:2"), "{cf}");
    std::fs::write(dir.join("blocks/common.conf"), "whoami\n").unwrap();
    let cf = Corefile::parse_str(text, &dir.join("Corefile")).unwrap();
    assert_eq!(cf.blocks.len(), 3);
    assert_eq!(names(&cf.blocks[0].directives), ["ready", "log", "errors"]);
    assert_eq!(names(&cf.blocks[1].directives), ["whoami"]);
    assert_eq!(
        cf.blocks[1].directives[0].name.loc.file.file_name().unwrap(),
        "common.conf"
    );
}

#[test]
fn import_cycle_is_an_error() {
    let dir = temp("cycle");
    std::fs::write(dir.join("x.conf"), "import y.conf\n").unwrap();
    std::fs::write(dir.join("y.conf"), "import x.conf\n").unwrap();
    let e = Corefile::parse_str(".:53 {\n import x.conf\n}\n", &dir.join("Corefile")).unwrap_err();
    assert!(e.to_string().contains("import cycle"), "{e}");
}

#[test]
fn each_mistake_has_file_line_and_expectation() {
    let cases = [
        (
            ".:53 {\n kubernetes\n",
            "Corefile:2: expected '}' to close the block opened at line 1",
        ),
        (".:53 {\n}\n}\n", "Corefile:3: unexpected '}'"),
        ("{\n}\n", "Corefile:1: '{' with no server block keys"),
        (".:53 {\n x \"open\n}\n", "Corefile:2: unterminated quoted string"),
        (
            ".:53 {\n import nope\n}\n",
            "Corefile:2: import: no snippet named 'nope'",
        ),
        (".:53 {\n import\n}\n", "Corefile:2: import takes exactly one"),
        ("", "Corefile:1: no server blocks"),
        ("# only a comment\n", "no server blocks"),
        (
            ".:53 {\n x {\n  y\n}\n",
            "expected '}' to close the block opened at line 1",
        ),
        (".:53 {\n { x }\n}\n", "Corefile:2: unexpected '{'"),
        (
            "a.:53 {\n}\nb.:54\n",
            "Corefile:3: expected '{' after the server block keys",
        ),
        (
            "(snip)\n.:53 {}\n",
            "Corefile:1: snippet 'snip' must be followed by '{'",
        ),
    ];
    for (text, want) in cases {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: got {e}");
    }
}

#[test]
fn zone_keys() {
    let t = |s: &str| Token {
        text: s.into(),
        loc: Location {
            file: Arc::new("Corefile".into()),
            line: 1,
        },
    };
    let k = |s: &str| parse_zone_key(&t(s));
    assert_eq!(
        k(".:53").unwrap(),
        ZoneKey {
            scheme: "dns".into(),
            zone: ".".into(),
            port: Some(53)
        }
    );
    assert_eq!(k(":53").unwrap().zone, ".");
    assert_eq!(
        k("Cluster.Local").unwrap(),
        ZoneKey {
            scheme: "dns".into(),
            zone: "cluster.local.".into(),
            port: None
        }
    );
    assert_eq!(k("dns://cluster.local.:1053").unwrap().port, Some(1053));
    assert_eq!(k("10.0.0.0/8").unwrap().zone, "10.in-addr.arpa.");
    assert_eq!(k("10.96.0.0/12").unwrap().zone, "10.in-addr.arpa.");
    assert_eq!(
        k("192.168.1.0/24:53").unwrap(),
        ZoneKey {
            scheme: "dns".into(),
            zone: "1.168.192.in-addr.arpa.".into(),
            port: Some(53)
        }
    );
    assert_eq!(k("fd00::/8").unwrap().zone, "d.f.ip6.arpa.");
    for bad in [
        "tls://.:853",
        "grpc://.",
        ".:99999",
        ".:x",
        "a..b",
        "10.0.0.0/33",
        "300.0.0.0/8",
    ] {
        assert!(k(bad).is_err(), "{bad}");
    }
    assert!(
        k("https://.:443")
            .unwrap_err()
            .to_string()
            .contains("not supported")
    );
}

#[test]
fn durations() {
    assert_eq!(parse_duration("5s"), Some(Duration::from_secs(5)));
    assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
    assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
    assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
    assert_eq!(parse_duration("0"), Some(Duration::ZERO));
    for bad in ["", "5", "s", "5x", "-1s", "1e400s"] {
        assert_eq!(parse_duration(bad), None, "{bad}");
    }
}
