//! `acl` over real UDP with `dig` from several loopback source addresses (`dig -b`): allow,
//! block (REFUSED), filter (empty NOERROR) and drop (no reply), first matching rule first.

use std::net::SocketAddr;

use crate::support;

const COREFILE: &str = ".:0 {
 bind 127.0.0.1
 acl example.org {
  drop net 127.0.0.3
  block type AAAA net 127.0.0.2
  filter type TXT
  allow net 127.0.0.0/8
  block
 }
 hosts {
  192.0.2.1 www.example.org
  2001:db8::1 www.example.org
  192.0.2.9 www.example.net
 }
}
";

/// `dig -b FROM TYPE NAME` against `server`: its status (`NOERROR`, ...) and answer count,
/// or `None` when no reply came.
fn dig_from(server: SocketAddr, from: &str, qtype: &str, name: &str) -> Option<(String, usize)> {
    let (at, port) = (format!("@{}", server.ip()), server.port().to_string());
    let out = support::run_dig(&[
        &at,
        "-p",
        &port,
        "-b",
        from,
        "+time=1",
        "+tries=1",
        "+noall",
        "+comments",
        "+answer",
        qtype,
        name,
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        assert!(text.contains("timed out"), "dig failed otherwise: {text}");
        return None;
    }
    let status = text
        .split("status: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or("")
        .to_owned();
    let answers = text
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .count();
    Some((status, answers))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_allow_block_filter_and_drop_by_source_and_type() {
    let dir = support::temp_dir("acl");
    let running = support::start(COREFILE, &dir).await;
    let addr = running.dns_addrs()[0];
    let got = tokio::task::spawn_blocking(move || {
        [
            ("127.0.0.1", "A", "www.example.org"),
            ("127.0.0.1", "AAAA", "www.example.org"),
            ("127.0.0.2", "A", "www.example.org"),
            ("127.0.0.2", "AAAA", "www.example.org"),
            ("127.0.0.1", "TXT", "www.example.org"),
            ("127.0.0.3", "A", "www.example.org"),
            // Outside the policy's zone: no rule applies.
            ("127.0.0.3", "A", "www.example.net"),
        ]
        .map(|(from, t, name)| dig_from(addr, from, t, name))
    })
    .await
    .unwrap();
    let some = |s: &str, n: usize| Some((s.to_owned(), n));
    assert_eq!(got[0], some("NOERROR", 1), "allowed");
    assert_eq!(got[1], some("NOERROR", 1), "allowed");
    assert_eq!(got[2], some("NOERROR", 1), "A from .2 is allowed");
    assert_eq!(got[3], some("REFUSED", 0), "AAAA from .2 is blocked");
    assert_eq!(got[4], some("NOERROR", 0), "TXT is filtered");
    assert_eq!(got[5], None, "127.0.0.3 is dropped");
    assert_eq!(got[6], some("NOERROR", 1), "outside the zone");
    running.stop().await.unwrap();
}

/// The names `rewrite` and `autopath` make are judged by `acl`, and a blocked client is not
/// answered from the `cache` (CoreDNS 1.14.7's plugin order: CVE-2026-26017,
/// coredns/coredns#7882, #8290, #8289). Before the order was changed, the first two were
/// answered with the blocked name's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewrite_autopath_and_cache_cannot_get_past_acl() {
    let dir = support::temp_dir("acl-bypass");
    std::fs::write(
        dir.join("resolv.conf"),
        "search default.svc.cluster.local svc.cluster.local cluster.local\n",
    )
    .unwrap();
    let corefile = ".:0 {
 bind 127.0.0.1
 acl secret.example.org {
  block
 }
 acl cached.example.org {
  block net 127.0.0.2
 }
 rewrite name exact public.example.org secret.example.org
 autopath resolv.conf
 cache 30
 hosts {
  192.0.2.66 secret.example.org
  192.0.2.77 cached.example.org
 }
}
";
    let running = support::start(corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let got = tokio::task::spawn_blocking(move || {
        [
            ("127.0.0.1", "secret.example.org"),
            // rewrite: asked under another name, renamed to the blocked one.
            ("127.0.0.1", "public.example.org"),
            // autopath: asked under the first search domain; its last try is the blocked name.
            ("127.0.0.1", "secret.example.org.default.svc.cluster.local"),
            // cache: an allowed client fills it, then a blocked one asks the same name.
            ("127.0.0.1", "cached.example.org"),
            ("127.0.0.2", "cached.example.org"),
        ]
        .map(|(from, name)| dig_from(addr, from, "A", name))
    })
    .await
    .unwrap();
    let some = |s: &str, n: usize| Some((s.to_owned(), n));
    assert_eq!(got[0], some("REFUSED", 0), "the blocked name itself");
    assert_eq!(got[1], some("REFUSED", 0), "rewritten to the blocked name");
    assert_eq!(got[2], some("REFUSED", 0), "autopath's try of the blocked name");
    assert_eq!(got[3], some("NOERROR", 1), "allowed client");
    assert_eq!(got[4], some("REFUSED", 0), "blocked client, name in the cache");
    running.stop().await.unwrap();
}
