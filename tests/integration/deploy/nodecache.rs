//! node-cache compatible mode (issue 33), run as root in private network and mount namespaces
//! (`unshare -n -m`, so nothing on the host is touched): the binary with NodeLocal DNSCache's
//! command line renders the base Corefile, makes the `nodelocaldns` interface with
//! 169.254.20.10, installs the NOTRACK/ACCEPT rules (iptables, or nftables when no iptables
//! program exists or kube-proxy's nftables table does), puts back a rule deleted by hand within
//! the sync interval, answers over UDP and TCP, and removes it all on SIGTERM (unless
//! `-skipteardown`, or another instance still serves the node: an upgrade loses no query).
//! Without NET_ADMIN it stops with an error naming it.
//!
//! The cluster DNS upstream is a second server on 127.0.0.2:53 inside the namespace (its
//! address reaches node-cache mode as `KUBE_DNS_UPSTREAM_SERVICE_HOST`, as the kubelet sets it
//! for the `kube-dns-upstream` Service), answering `web.default.svc.cluster.local` and
//! `example.org` from a hosts table; the kube-dns ConfigMap folder names it as the
//! `upstreamNameservers` too.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Kubernetes' nodelocaldns.yaml Corefile (its `__PILLAR__` variables left to the binary).
const BASE: &str = "cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    health __PILLAR__LOCAL__DNS__:8080
    }
in-addr.arpa:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    }
.:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__UPSTREAM__SERVERS__
    prometheus :9253
    }
";

const UPSTREAM: &str = ".:53 {
    bind 127.0.0.2
    hosts {
        10.0.0.7 web.default.svc.cluster.local
        192.0.2.1 example.org
    }
}
";

/// Shell functions every script has: the upstream started, `start_nc LOG ARGS...` (node-cache
/// mode in the background, its PID in `$NC`), `wait_answer` and `wait_log FILE PATTERN`
/// (bounded: 100 tries 100 ms apart), `nl_rules` (the NodeLocal iptables rules), and every
/// process stopped when the script ends.
const PRELUDE: &str = r#"
ip link set lo up || exit 97
ip addr add 127.0.0.2/8 dev lo
"$BIN" -conf "$DIR/Upstream" >"$DIR/upstream.log" 2>&1 &
UP=$!
NC=
trap 'kill $UP $NC 2>/dev/null; wait 2>/dev/null' EXIT
start_nc() {
    log=$1; shift
    KUBE_DNS_UPSTREAM_SERVICE_HOST=127.0.0.2 "$BIN" -localip 169.254.20.10 -conf "$DIR/Corefile" \
        -basecorefile "$DIR/Corefile.base" -upstreamsvc kube-dns-upstream -kubednscm "$DIR/cm" \
        -syncinterval 1 -instance-dir "$DIR/instances" -metrics-listen-address 127.0.0.1:9353 \
        "$@" >"$DIR/$log" 2>&1 &
    NC=$!
}
wait_answer() {
    i=0
    while [ $i -lt 100 ]; do
        out=$(dig @169.254.20.10 +short +time=1 +tries=1 web.default.svc.cluster.local 2>/dev/null)
        [ "$out" = 10.0.0.7 ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
wait_log() {
    i=0
    while [ $i -lt 100 ]; do
        grep -q "$2" "$1" && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
nl_rules() { (iptables -t raw -S; iptables -t filter -S) 2>/dev/null | grep -c 'NodeLocal DNS Cache'; }
i=0
until dig @127.0.0.2 +short +time=1 +tries=1 example.org 2>/dev/null | grep -q 192.0.2.1; do
    i=$((i + 1)); [ $i -gt 100 ] && { echo "upstream did not start"; exit 98; }; sleep 0.1
done
"#;

/// A folder with the base Corefile, the upstream's and the kube-dns ConfigMap.
fn setup(tag: &str) -> PathBuf {
    let dir = crate::support::temp_dir(tag);
    std::fs::write(dir.join("Corefile.base"), BASE).unwrap();
    std::fs::write(dir.join("Upstream"), UPSTREAM).unwrap();
    std::fs::create_dir_all(dir.join("cm")).unwrap();
    std::fs::write(dir.join("cm").join("upstreamNameservers"), r#"["127.0.0.2"]"#).unwrap();
    dir
}

/// Runs `script` (after [`PRELUDE`]) as root in new network and mount namespaces; its output
/// (standard output and error) and the node-cache logs.
fn in_namespaces(dir: &Path, script: &str) -> String {
    assert!(
        crate::deploy::privileges::nix_is_root(),
        "this test sets up interfaces and rules in a private network namespace and needs root, as CI has"
    );
    let out = Command::new("unshare")
        .args(["-n", "-m", "sh", "-c"])
        .arg(format!("{PRELUDE}\n{script}"))
        .env("BIN", env!("CARGO_BIN_EXE_cluster-dns"))
        .env("DIR", dir)
        .output()
        .expect("unshare (util-linux) runs");
    let mut text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for log in ["nc.log", "nc2.log"] {
        if let Ok(l) = std::fs::read_to_string(dir.join(log)) {
            text.push_str(&format!("\n--- {log}:\n{l}"));
        }
    }
    text
}

#[test]
fn interface_addresses_and_rules_exist_while_serving_and_go_on_sigterm() {
    let dir = setup("nodecache-iptables");
    let text = in_namespaces(
        &dir,
        r#"
start_nc nc.log
wait_answer || echo "no answer"
wait_log "$DIR/nc.log" "interface and rules in place"
echo "udp: $(dig @169.254.20.10 +short +time=2 web.default.svc.cluster.local)"
echo "tcp: $(dig @169.254.20.10 +tcp +short +time=2 web.default.svc.cluster.local)"
echo "tcp-upstream: $(dig @169.254.20.10 +tcp +short +time=2 example.org)"
echo "address: $(ip -o addr show dev nodelocaldns | grep -o '169.254.20.10/32')"
echo "rules: $(nl_rules)"
echo "notrack-prerouting-udp: $(iptables -t raw -S PREROUTING | grep -c -- '-d 169.254.20.10/32 -p udp -m udp --dport 53 .*NOTRACK')"
echo "accept-input-tcp: $(iptables -S INPUT | grep -c -- '-d 169.254.20.10/32 -p tcp -m tcp --dport 53 .*ACCEPT')"
echo "metric: $(curl -s 127.0.0.1:9353/metrics | grep -c 'coredns_nodecache_setup_errors_total{errortype="iptables"} 0')"
# A rule deleted by hand comes back within the sync interval (1 s; 100 tries 100 ms apart).
iptables -t raw -D PREROUTING -p udp -d 169.254.20.10 --dport 53 -j NOTRACK -m comment --comment 'NodeLocal DNS Cache: skip conntrack'
echo "after-delete: $(nl_rules)"
i=0
while [ $i -lt 100 ] && [ "$(nl_rules)" != 12 ]; do sleep 0.1; i=$((i + 1)); done
echo "restored: $(nl_rules)"
kill $NC; wait $NC; echo "exit: $?"; NC=
echo "gone-interface: $(ip link show dev nodelocaldns >/dev/null 2>&1 && echo no || echo yes)"
echo "gone-rules: $(nl_rules)"
"#,
    );
    for want in [
        "udp: 10.0.0.7",
        "tcp: 10.0.0.7",
        "tcp-upstream: 192.0.2.1",
        "address: 169.254.20.10/32",
        "rules: 12",
        "notrack-prerouting-udp: 1",
        "accept-input-tcp: 1",
        "metric: 1",
        "after-delete: 11",
        "restored: 12",
        "exit: 0",
        "gone-interface: yes",
        "gone-rules: 0",
    ] {
        assert!(text.contains(want), "missing '{want}':\n{text}");
    }
    // The rendered Corefile has no variable left.
    let corefile = std::fs::read_to_string(dir.join("Corefile")).unwrap();
    assert!(!corefile.contains("__PILLAR__"), "{corefile}");
    assert!(corefile.contains("forward . 127.0.0.2 {"), "{corefile}");
}

#[test]
fn skipteardown_leaves_the_interface_and_rules() {
    let dir = setup("nodecache-skip");
    let text = in_namespaces(
        &dir,
        r#"
start_nc nc.log -skipteardown
wait_answer || echo "no answer"
wait_log "$DIR/nc.log" "interface and rules in place"
kill $NC; wait $NC; echo "exit: $?"; NC=
echo "interface: $(ip -o addr show dev nodelocaldns | grep -o '169.254.20.10/32')"
echo "rules: $(nl_rules)"
"#,
    );
    for want in ["exit: 0", "interface: 169.254.20.10/32", "rules: 12"] {
        assert!(text.contains(want), "missing '{want}':\n{text}");
    }
}

/// The iptables programs hidden (bind-mounted over with /dev/null in the private mount
/// namespace): the rules go into nftables, table `inet cluster-dns-nodelocal`.
#[test]
fn with_only_nftables_the_rules_go_into_a_table_of_their_own() {
    let dir = setup("nodecache-nft");
    let text = in_namespaces(
        &dir,
        r#"
for p in iptables ip6tables iptables-legacy ip6tables-legacy iptables-nft ip6tables-nft \
         xtables-nft-multi xtables-legacy-multi; do
    for d in /usr/sbin /sbin /usr/bin /bin; do
        [ -e "$d/$p" ] && mount --bind /dev/null "$d/$p"
    done
done
echo "iptables-runs: $(iptables -S >/dev/null 2>&1 && echo yes || echo no)"
start_nc nc.log
wait_answer || echo "no answer"
wait_log "$DIR/nc.log" "interface and rules in place"
echo "udp: $(dig @169.254.20.10 +short +time=2 web.default.svc.cluster.local)"
echo "tcp: $(dig @169.254.20.10 +tcp +short +time=2 web.default.svc.cluster.local)"
count() { nft list table inet cluster-dns-nodelocal 2>/dev/null | grep -c 'NodeLocal DNS Cache'; }
echo "nft-rules: $(count)"
echo "raw-prio: $(nft list chain inet cluster-dns-nodelocal raw-prerouting | grep -c 'hook prerouting priority raw')"
h=$(nft -a list chain inet cluster-dns-nodelocal raw-prerouting | grep 'udp dport 53' | sed 's/.*# handle //')
nft delete rule inet cluster-dns-nodelocal raw-prerouting handle $h
echo "after-delete: $(count)"
i=0
while [ $i -lt 100 ] && [ "$(count)" != 12 ]; do sleep 0.1; i=$((i + 1)); done
echo "restored: $(count)"
kill $NC; wait $NC; echo "exit: $?"; NC=
echo "table-gone: $(nft list table inet cluster-dns-nodelocal >/dev/null 2>&1 && echo no || echo yes)"
echo "gone-interface: $(ip link show dev nodelocaldns >/dev/null 2>&1 && echo no || echo yes)"
"#,
    );
    for want in [
        "iptables-runs: no",
        "udp: 10.0.0.7",
        "tcp: 10.0.0.7",
        "nft-rules: 12",
        "raw-prio: 1",
        "after-delete: 11",
        "restored: 12",
        "exit: 0",
        "table-gone: yes",
        "gone-interface: yes",
        "no iptables program on PATH",
    ] {
        assert!(text.contains(want), "missing '{want}':\n{text}");
    }
}

/// kube-proxy in nftables mode (its `ip kube-proxy` table exists): nftables, though iptables is
/// there.
#[test]
fn kube_proxy_in_nftables_mode_selects_nftables() {
    let dir = setup("nodecache-kp");
    let text = in_namespaces(
        &dir,
        r#"
nft add table ip kube-proxy
start_nc nc.log
wait_answer || echo "no answer"
wait_log "$DIR/nc.log" "interface and rules in place"
echo "nft-rules: $(nft list table inet cluster-dns-nodelocal 2>/dev/null | grep -c 'NodeLocal DNS Cache')"
echo "iptables-rules: $(nl_rules)"
kill $NC; wait $NC; echo "exit: $?"; NC=
"#,
    );
    for want in [
        "nft-rules: 12",
        "iptables-rules: 0",
        "exit: 0",
        "kube-proxy runs in nftables mode",
    ] {
        assert!(text.contains(want), "missing '{want}':\n{text}");
    }
}

/// Every capability dropped (`setpriv`, root without a bounding set): the interface cannot be
/// made, and the error names NET_ADMIN; with no interface to make (`-setupinterface=false`, a
/// loopback address), the rules cannot go in, and the error names it too.
#[test]
fn without_net_admin_the_error_names_the_capability() {
    let dir = setup("nodecache-nocap");
    // The second run serves port 5300 (no NET_BIND_SERVICE either).
    std::fs::write(dir.join("Corefile5300.base"), BASE.replace(":53 {", ":5300 {")).unwrap();
    let text = in_namespaces(
        &dir,
        r#"
DROP="setpriv --inh-caps=-all --bounding-set=-all"
KUBE_DNS_UPSTREAM_SERVICE_HOST=127.0.0.2 $DROP "$BIN" -localip 169.254.20.10 -conf "$DIR/Corefile" \
    -basecorefile "$DIR/Corefile.base" -kubednscm "$DIR/cm" -upstreamsvc kube-dns-upstream \
    -instance-dir "$DIR/instances" -metrics-listen-address= >"$DIR/nocap.log" 2>&1
echo "exit-interface: $?"
echo "interface: $(ip link show dev nodelocaldns >/dev/null 2>&1 && echo yes || echo no)"
KUBE_DNS_UPSTREAM_SERVICE_HOST=127.0.0.2 $DROP "$BIN" -localip 127.0.0.1 -dns.port 5300 -conf "$DIR/Corefile5300" \
    -basecorefile "$DIR/Corefile5300.base" -kubednscm "$DIR/cm" -upstreamsvc kube-dns-upstream \
    -health-port 8081 -setupinterface=false -rules-backend iptables \
    -instance-dir "$DIR/instances" -metrics-listen-address= >"$DIR/nocap2.log" 2>&1
echo "exit-rules: $?"
echo "--- nocap.log"; cat "$DIR/nocap.log"
echo "--- nocap2.log"; cat "$DIR/nocap2.log"
"#,
    );
    assert!(text.contains("exit-interface: 1"), "{text}");
    assert!(text.contains("exit-rules: 1"), "{text}");
    assert!(text.contains("interface: no"), "{text}");
    let first = text.split("--- nocap.log").nth(1).unwrap_or_default();
    let (interface, rules) = first.split_once("--- nocap2.log").unwrap_or_default();
    assert!(
        interface.contains("creating interface nodelocaldns needs the NET_ADMIN capability"),
        "{text}"
    );
    assert!(
        rules.contains("needs the NET_ADMIN capability") && rules.contains("iptables"),
        "{text}"
    );
}

/// An upgrade on the node: a second instance starts beside the first (same addresses,
/// `SO_REUSEPORT`), the first gets SIGTERM, and a client asking all along loses nothing; the
/// interface and rules stay for the second, which removes them when it stops in turn.
#[test]
fn an_upgrade_on_the_node_loses_no_query() {
    let dir = setup("nodecache-upgrade");
    std::fs::write(
        dir.join("names"),
        "web.default.svc.cluster.local A\nexample.org A\n",
    )
    .unwrap();
    let text = in_namespaces(
        &dir,
        r#"
start_nc nc.log
OLD=$NC
wait_answer || echo "no answer"
wait_log "$DIR/nc.log" "interface and rules in place"
dnsperf -s 169.254.20.10 -d "$DIR/names" -l 6 -Q 2000 -c 4 -t 2 >"$DIR/dnsperf.txt" 2>&1 &
PERF=$!
sleep 1
start_nc nc2.log
NEW=$NC
wait_log "$DIR/nc2.log" "interface and rules in place" && echo "second: serving"
sleep 1
kill $OLD; wait $OLD; echo "old-exit: $?"
echo "kept-interface: $(ip -o addr show dev nodelocaldns | grep -o '169.254.20.10/32')"
echo "kept-rules: $(nl_rules)"
wait $PERF
cat "$DIR/dnsperf.txt"
echo "after: $(dig @169.254.20.10 +short +time=2 web.default.svc.cluster.local)"
kill $NEW; wait $NEW; echo "new-exit: $?"; NC=
echo "gone-interface: $(ip link show dev nodelocaldns >/dev/null 2>&1 && echo no || echo yes)"
echo "gone-rules: $(nl_rules)"
"#,
    );
    for want in [
        "second: serving",
        "old-exit: 0",
        "kept-interface: 169.254.20.10/32",
        "kept-rules: 12",
        "after: 10.0.0.7",
        "new-exit: 0",
        "gone-interface: yes",
        "gone-rules: 0",
        "another instance serves this node",
    ] {
        assert!(text.contains(want), "missing '{want}':\n{text}");
    }
    let sent = dnsperf_figure(&text, "Queries sent:");
    let lost = dnsperf_figure(&text, "Queries lost:");
    assert!(sent > 1000, "dnsperf sent {sent}:\n{text}");
    assert_eq!(lost, 0, "queries lost during the upgrade:\n{text}");
}

/// Two instances that do not share an instance folder (the DaemonSet without the hostPath): the
/// stopping one still sees the other by its bound DNS address and leaves the interface and
/// rules in place.
#[test]
fn without_a_shared_instance_dir_a_bound_address_still_keeps_the_interface() {
    let dir = setup("nodecache-unshared");
    let text = in_namespaces(
        &dir,
        r#"
start_nc nc.log
OLD=$NC
wait_log "$DIR/nc.log" "interface and rules in place"
start_nc nc2.log -instance-dir "$DIR/other"
NEW=$NC
wait_log "$DIR/nc2.log" "interface and rules in place" && echo "second: serving"
kill $OLD; wait $OLD; echo "old-exit: $?"
echo "kept-interface: $(ip -o addr show dev nodelocaldns | grep -o '169.254.20.10/32')"
echo "kept-rules: $(nl_rules)"
echo "after: $(dig @169.254.20.10 +short +time=2 web.default.svc.cluster.local)"
kill $NEW; wait $NEW; echo "new-exit: $?"; NC=
echo "gone-interface: $(ip link show dev nodelocaldns >/dev/null 2>&1 && echo no || echo yes)"
echo "gone-rules: $(nl_rules)"
"#,
    );
    for want in [
        "second: serving",
        "old-exit: 0",
        "kept-interface: 169.254.20.10/32",
        "kept-rules: 12",
        "after: 10.0.0.7",
        "new-exit: 0",
        "gone-interface: yes",
        "gone-rules: 0",
        "the DNS address is still bound",
    ] {
        assert!(text.contains(want), "missing '{want}':\n{text}");
    }
}

/// The number after `label` in dnsperf's report.
fn dnsperf_figure(text: &str, label: &str) -> u64 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no '{label}' in dnsperf's report:\n{text}"))
}
