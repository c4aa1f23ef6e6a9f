//! `file` (CoreDNS's README example zone, served with real `dig`): authoritative answers with
//! the apex NS, NXDOMAIN and NODATA with the SOA, a wildcard, a referral below a zone cut
//! (not authoritative), a CNAME out of the zone completed by the rest of the chain, and an
//! edited zone file picked up without a restart once its serial grows (and not before). A
//! zone file that does not parse stops `--check` at its own line.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use cluster_dns::app;

use crate::support::{self, peers};

/// The README's zone, with `www`'s address and the serial as given.
fn zone(serial: u32, www: &str) -> String {
    format!(
        "$ORIGIN example.org.
@\t3600 IN\tSOA sns.dns.icann.org. noc.dns.icann.org. {serial} 7200 3600 1209600 3600
\t3600 IN NS a.iana-servers.net.
\t3600 IN NS b.iana-servers.net.

www     IN A     {www}
        IN AAAA  ::1
*.wild  IN A     192.0.2.99
away    IN CNAME www.example.net.
child   IN NS    ns.child
ns.child IN A    192.0.2.77
"
    )
}

fn write(dir: &Path, text: &str) {
    // Written aside and renamed, so the reload never reads half a file.
    std::fs::write(dir.join("db.tmp"), text).unwrap();
    std::fs::rename(dir.join("db.tmp"), dir.join("db.example.org")).unwrap();
}

async fn dig(addr: SocketAddr, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        support::dig(addr, &args)
    })
    .await
    .unwrap()
}

/// `www.example.org`'s address once it is `want`, asking every 200 ms for up to 10 s; the last
/// one seen otherwise.
async fn address_soon(addr: SocketAddr, want: &str) -> String {
    let mut served = String::new();
    for _ in 0..50 {
        served = dig(addr, &["+short", "www.example.org"]).await.trim().to_owned();
        if served == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    served
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_zone_and_follows_the_file() {
    let dir = support::temp_dir("file");
    write(&dir, &zone(2017042745, "127.0.0.1"));
    let corefile = ".:0 {\n bind 127.0.0.1\n hosts {\n  192.0.2.80 www.example.net\n  fallthrough\n }\n file db.example.org example.org {\n  reload 1s\n }\n}\n";
    let running = support::start(corefile, &dir).await;
    let addr = running.dns_addrs()[0];

    let out = dig(addr, &["www.example.org", "A"]).await;
    assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
    assert!(out.contains("flags: qr aa rd;"), "{out}");
    let records = support::dig_records(&out);
    assert!(
        records.contains(&"www.example.org. 3600 IN A 127.0.0.1".to_owned()),
        "{out}"
    );
    assert!(
        records.contains(&"example.org. 3600 IN NS a.iana-servers.net.".to_owned()),
        "{out}"
    );
    let out = dig(addr, &["+short", "www.example.org", "AAAA"]).await;
    assert_eq!(out.trim(), "::1");

    for (name, qtype, status) in [
        ("nosuch.example.org", "A", "NXDOMAIN"),
        ("www.example.org", "MX", "NOERROR"),
    ] {
        let out = dig(addr, &[name, qtype]).await;
        assert_eq!(support::dig_status(&out), status, "{out}");
        assert!(out.contains("ANSWER: 0, AUTHORITY: 1"), "{out}");
        assert!(
            out.contains("example.org.\t\t3600\tIN\tSOA\tsns.dns.icann.org. noc.dns.icann.org."),
            "{out}"
        );
    }

    let out = dig(addr, &["+short", "a.b.wild.example.org"]).await;
    assert_eq!(out.trim(), "192.0.2.99");
    // The CNAME's target is outside the zone: the chain (hosts) completes it.
    let out = dig(addr, &["+noall", "+answer", "away.example.org"]).await;
    assert_eq!(
        support::dig_records(&out),
        [
            "away.example.org. 3600 IN CNAME www.example.net.",
            "www.example.net. 3600 IN A 192.0.2.80"
        ],
        "{out}"
    );
    // Below the cut: a referral, not authoritative, with the glue.
    let out = dig(addr, &["host.child.example.org", "A"]).await;
    assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
    assert!(out.contains("flags: qr rd;"), "{out}");
    assert!(out.contains("ANSWER: 0, AUTHORITY: 1, ADDITIONAL: 2"), "{out}");
    assert!(
        out.contains("ns.child.example.org.\t3600\tIN\tA\t192.0.2.77"),
        "{out}"
    );

    // Edited without a new serial: not read again (CoreDNS reloads on a serial increase).
    write(&dir, &zone(2017042745, "127.0.0.2"));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        dig(addr, &["+short", "www.example.org"]).await.trim(),
        "127.0.0.1"
    );
    // With one: served within a few reload periods, without a restart.
    write(&dir, &zone(2017042746, "127.0.0.3"));
    assert_eq!(address_soon(addr, "127.0.0.3").await, "127.0.0.3");
    // A broken edit keeps the zone served as it was.
    write(
        &dir,
        "$ORIGIN example.org.\n@ 3600 IN SOA a. b. 2017042747 1 1 1 1\nwww IN A 300.0.0.1\n",
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        dig(addr, &["+short", "www.example.org"]).await.trim(),
        "127.0.0.3"
    );
    running.stop().await.unwrap();
}

#[test]
fn a_zone_file_that_does_not_parse_is_refused_at_its_line() {
    let dir = support::temp_dir("file-check");
    std::fs::write(
        dir.join("db.example.org"),
        zone(1, "127.0.0.1").replace("*.wild  IN A     192.0.2.99", "*.wild  IN A     192.0.2.999"),
    )
    .unwrap();
    let e = support::check_corefile(&dir, "example.org {\n file db.example.org\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:2: file: ") && e.contains("db.example.org:8: "),
        "{e}"
    );
    // A missing file: an error at its line when it will never be read (`reload 0`); otherwise
    // the zone answers SERVFAIL until the file appears, as in CoreDNS.
    let e = support::check_corefile(&dir, "example.org {\n file db.none {\n  reload 0\n }\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:2: file: ") && e.contains("db.none: No such file"),
        "{e}"
    );
    support::check_corefile(&dir, "example.org {\n file db.none\n}\n").unwrap();
}

/// A zone file missing at start (with `reload` on): SERVFAIL for the zone's names until it
/// appears, then its answers, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_zone_file_is_served_once_it_appears() {
    let dir = support::temp_dir("file-late");
    let corefile = ".:0 {\n bind 127.0.0.1\n file db.example.org example.org {\n  reload 1s\n }\n}\n";
    let running = support::start(corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let out = dig(addr, &["www.example.org"]).await;
    assert_eq!(support::dig_status(&out), "SERVFAIL", "{out}");
    write(&dir, &zone(1, "127.0.0.9"));
    assert_eq!(address_soon(addr, "127.0.0.9").await, "127.0.0.9");
    running.stop().await.unwrap();
}

/// Issue 44's zone: a CNAME out of the server's zones, a delegation (with glue) and a CNAME
/// into it.
const ISSUE_44_ZONE: &str = "$ORIGIN example.org.
$TTL 3600
@\tIN SOA ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 300
\tIN NS ns1
ns1\tIN A 192.0.2.53
www\tIN A 192.0.2.1
ext\tIN CNAME www.example.net.
child\tIN NS ns.child
ns.child IN A 192.0.2.77
tochild\tIN CNAME host.child
signed\tIN NS ns.child
signed\tIN DS 60485 5 1 2BB183AF5F22588179A53B0A98631FAD1A292118
";

/// [`ISSUE_44_ZONE`] with DNAMEs out of the zone, into it, and one whose substitutions
/// overflow.
const ISSUE_44_DNAME_ZONE: &str = "$ORIGIN example.org.
$TTL 3600
@\tIN SOA ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 300
\tIN NS ns1
ns1\tIN A 192.0.2.53
www\tIN A 192.0.2.1
ext\tIN CNAME www.example.net.
child\tIN NS ns.child
ns.child IN A 192.0.2.77
tochild\tIN CNAME host.child
dn\tIN DNAME example.net.
alias\tIN DNAME inner.example.org.
www.inner IN A 192.0.2.9
long\tIN DNAME aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc.dddddddddddddddddddddddddddddddddddddddddddddddd.
";

/// The reply without the apex NS in the authority section of a positive answer and its glue:
/// RFC 1034 section 4.3.2 step 6 lets a server add them or not (cluster-dns and NSD do, Knot
/// does not).
fn without_apex_ns(mut seen: peers::Seen) -> peers::Seen {
    if seen.answer.is_empty() {
        return seen;
    }
    seen.authority
        .retain(|r| !r.starts_with("example.org. ") || !r.contains(" IN NS "));
    seen.additional.retain(|r| !r.starts_with("ns1.example.org. "));
    seen
}

/// cluster-dns serving `ISSUE_44_ZONE` from `file` (no `forward` in the block), and each
/// reference server installed serving the same file.
async fn issue_44_servers(zone: &'static str) -> (app::Running, SocketAddr, Vec<peers::Peer>) {
    let dir = support::temp_dir("file-44");
    std::fs::write(dir.join("db.example.org"), zone).unwrap();
    let corefile = ".:0 {\n bind 127.0.0.1\n file db.example.org example.org\n}\n";
    let running = support::start(corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let peers = tokio::task::spawn_blocking(|| {
        peers::Kind::ALL
            .into_iter()
            .map(|k| peers::Peer::start(k, "example.org.", zone))
            .collect()
    })
    .await
    .unwrap();
    (running, addr, peers)
}

/// cluster-dns's reply to `name` `qtype`, after checking that each peer's is the same (the
/// apex NS aside, see [`without_apex_ns`]).
async fn as_the_peers(addr: SocketAddr, peers: &[peers::Peer], name: &str, qtype: &str) -> peers::Seen {
    let (name, qtype) = (name.to_owned(), qtype.to_owned());
    let ours = {
        let (name, qtype) = (name.clone(), qtype.clone());
        tokio::task::spawn_blocking(move || peers::ask(addr, &name, &qtype))
            .await
            .unwrap()
    };
    for peer in peers {
        let theirs = peer.ask(&name, &qtype);
        assert_eq!(
            without_apex_ns(ours.clone()),
            without_apex_ns(theirs.clone()),
            "{name} {qtype}: cluster-dns answered\n{ours}{} answered\n{theirs}",
            peer.kind
        );
    }
    ours
}

/// Issue 44 (1): a CNAME to a name outside every zone of the server, with nothing in the
/// chain to complete it, is answered with the CNAME alone, authoritatively (RFC 1034 section
/// 4.3.2 step 3a), not SERVFAIL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cname_out_of_the_servers_zones_is_the_cname_alone() {
    let (running, addr, peers) = issue_44_servers(ISSUE_44_ZONE).await;
    let seen = as_the_peers(addr, &peers, "ext.example.org", "A").await;
    assert_eq!(seen.rcode, "NOERROR", "{seen}");
    assert!(seen.aa, "{seen}");
    assert_eq!(
        seen.answer.iter().collect::<Vec<_>>(),
        ["ext.example.org. 3600 IN CNAME www.example.net."],
        "{seen}"
    );
    running.stop().await.unwrap();
}

/// Issue 44 (2): DS at a delegation point is the parent's data (RFC 4035 section 3.1.4.1):
/// NODATA with the SOA, authoritative, not a referral; the DS records where the zone has some.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ds_at_a_delegation_is_answered_by_the_parent() {
    let (running, addr, peers) = issue_44_servers(ISSUE_44_ZONE).await;
    let seen = as_the_peers(addr, &peers, "child.example.org", "DS").await;
    assert_eq!(seen.rcode, "NOERROR", "{seen}");
    assert!(seen.aa, "{seen}");
    assert!(seen.answer.is_empty(), "{seen}");
    assert_eq!(
        seen.authority.iter().collect::<Vec<_>>(),
        ["example.org. 300 IN SOA ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 300"],
        "{seen}"
    );
    // A cut with DS records: they are the answer, authoritative.
    let seen = as_the_peers(addr, &peers, "signed.example.org", "DS").await;
    assert_eq!((seen.rcode.as_str(), seen.aa), ("NOERROR", true), "{seen}");
    assert_eq!(
        seen.answer.iter().collect::<Vec<_>>(),
        ["signed.example.org. 3600 IN DS 60485 5 1 2BB183AF5F22588179A53B0A98631FAD1A292118"],
        "{seen}"
    );
    // Below the cut, DS is the child's: still a referral.
    let seen = as_the_peers(addr, &peers, "sub.child.example.org", "DS").await;
    assert!(!seen.aa, "{seen}");
    running.stop().await.unwrap();
}

/// Issue 44 (3): a CNAME into a delegation is authoritative data (RFC 1035 section 4.1.1):
/// AA set, with the referral's NS in authority and its glue in additional.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cname_into_a_delegation_is_authoritative() {
    let (running, addr, peers) = issue_44_servers(ISSUE_44_ZONE).await;
    let seen = as_the_peers(addr, &peers, "tochild.example.org", "A").await;
    assert_eq!(seen.rcode, "NOERROR", "{seen}");
    assert!(seen.aa, "{seen}");
    assert_eq!(
        seen.answer.iter().collect::<Vec<_>>(),
        ["tochild.example.org. 3600 IN CNAME host.child.example.org."],
        "{seen}"
    );
    assert_eq!(
        seen.authority.iter().collect::<Vec<_>>(),
        ["child.example.org. 3600 IN NS ns.child.example.org."],
        "{seen}"
    );
    assert_eq!(
        seen.additional.iter().collect::<Vec<_>>(),
        ["ns.child.example.org. 3600 IN A 192.0.2.77"],
        "{seen}"
    );
    running.stop().await.unwrap();
}

/// Issue 44 (4): DNAME (RFC 6672) loads and answers: below its owner the DNAME, a CNAME
/// synthesized with its TTL, and the target's records when they are in the zone; its owner as
/// any other name; YXDOMAIN when the substituted name would be too long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dname_is_loaded_and_substitutes() {
    let (running, addr, peers) = issue_44_servers(ISSUE_44_DNAME_ZONE).await;
    let seen = as_the_peers(addr, &peers, "x.dn.example.org", "A").await;
    assert_eq!((seen.rcode.as_str(), seen.aa), ("NOERROR", true), "{seen}");
    assert_eq!(
        seen.answer.iter().collect::<Vec<_>>(),
        [
            "dn.example.org. 3600 IN DNAME example.net.",
            "x.dn.example.org. 3600 IN CNAME x.example.net."
        ],
        "{seen}"
    );
    let seen = as_the_peers(addr, &peers, "www.alias.example.org", "A").await;
    assert_eq!((seen.rcode.as_str(), seen.aa), ("NOERROR", true), "{seen}");
    assert_eq!(
        seen.answer.iter().collect::<Vec<_>>(),
        [
            "alias.example.org. 3600 IN DNAME inner.example.org.",
            "www.alias.example.org. 3600 IN CNAME www.inner.example.org.",
            "www.inner.example.org. 3600 IN A 192.0.2.9",
        ],
        "{seen}"
    );
    let seen = as_the_peers(addr, &peers, "dn.example.org", "DNAME").await;
    assert_eq!(
        seen.answer.iter().collect::<Vec<_>>(),
        ["dn.example.org. 3600 IN DNAME example.net."],
        "{seen}"
    );
    let seen = as_the_peers(addr, &peers, "dn.example.org", "A").await;
    assert_eq!((seen.rcode.as_str(), seen.answer.len()), ("NOERROR", 0), "{seen}");
    let long = format!("{}.long.example.org", "x".repeat(20));
    let seen = as_the_peers(addr, &peers, &long, "A").await;
    assert_eq!((seen.rcode.as_str(), seen.aa), ("YXDOMAIN", true), "{seen}");
    running.stop().await.unwrap();
}

/// A CNAME with other data at its name (here a DNAME, then a TXT) is refused at load, as NSD's
/// own checker refuses the same file (RFC 1034 §3.6.2, RFC 6672 §2.4); the Corefile check names
/// the file and the name.
#[test]
fn a_cname_with_other_data_is_refused_as_nsd_refuses_it() {
    let dir = support::temp_dir("file-cname-other");
    for other in ["alias IN DNAME example.net.", "alias IN TXT \"also\""] {
        let text = format!("{}alias IN CNAME www\n{other}\n", zone(1, "127.0.0.1"));
        std::fs::write(dir.join("db.example.org"), &text).unwrap();
        let nsd = std::process::Command::new("nsd-checkzone")
            .args(["example.org"])
            .arg(dir.join("db.example.org"))
            .output()
            .expect("nsd-checkzone runs (Debian's nsd; test.sh installs it)");
        let said = String::from_utf8_lossy(&nsd.stderr);
        assert!(
            !nsd.status.success() && said.contains("CNAME and other data"),
            "{other}: NSD loads it: {said}"
        );
        let e = support::check_corefile(&dir, "example.org {\n file db.example.org\n}\n").unwrap_err();
        assert!(
            e.contains("Corefile:2: file: ")
                && e.contains("alias.example.org. has a CNAME and")
                && e.contains("RFC 1034"),
            "{other}: {e}"
        );
    }
}
