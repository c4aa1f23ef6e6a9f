//! The tests of the `hosts` handler (`handler.rs`), on configurations its setup (`setup.rs`)
//! parses: a file of their own, so that the handler itself never imports the setup.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::corefile::Corefile;

fn n(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "cluster-dns-hosts-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn hosts(corefile_body: &str, dir: &Path) -> Hosts {
    let cf = Corefile::parse_str(
        &format!("example.org:53 {{\n{corefile_body}\n}}\n"),
        &dir.join("Corefile"),
    )
    .unwrap();
    let c =
        super::super::setup::parse(&cf.blocks[0].directives[0], &["example.org.".to_owned()], dir).unwrap();
    Hosts::new(&c)
}

fn ask(h: &Hosts, name: &str, qtype: RecordType) -> Option<Answer> {
    h.answer(&Question::new(n(name), qtype)).map(|r| match r {
        Reply::Authoritative(a) => a,
        other => panic!("not authoritative: {other:?}"),
    })
}

fn rdata(a: &Answer) -> Vec<String> {
    a.answers
        .iter()
        .map(|r| match &r.data {
            RData::A(x) => x.0.to_string(),
            RData::AAAA(x) => x.0.to_string(),
            RData::PTR(x) => x.0.to_ascii(),
            other => format!("{other:?}"),
        })
        .collect()
}

const FILE: &str = "# The hosts file\n127.0.0.1 localhost\n10.0.0.1 www.example.org www # web\n10.0.0.2 www.example.org\n2001:db8::1 www.example.org six.example.org\nbogus line here\n10.0.0.3\n10.0.0.4 other.net\n";

#[test]
fn answers_nodata_nxdomain_and_ptr() {
    let dir = temp_dir("answers");
    std::fs::write(dir.join("hosts"), FILE).unwrap();
    let h = hosts("hosts hosts {\n ttl 60\n}", &dir);
    let a = ask(&h, "WWW.Example.ORG.", RecordType::A).unwrap();
    assert_eq!(a.rcode, ResponseCode::NoError);
    assert_eq!(rdata(&a), ["10.0.0.1", "10.0.0.2"]);
    assert_eq!(
        a.answers[0].name.to_ascii(),
        "WWW.Example.ORG.",
        "the client's spelling"
    );
    assert_eq!(a.answers[0].ttl, 60);
    assert!(a.authority.is_empty() && a.additional.is_empty());
    let a = ask(&h, "www.example.org.", RecordType::AAAA).unwrap();
    assert_eq!(rdata(&a), ["2001:db8::1"]);
    // The other family, and other types: NODATA.
    let a = ask(&h, "six.example.org.", RecordType::A).unwrap();
    assert_eq!(
        (a.rcode, a.answers.len(), a.authority.len()),
        (ResponseCode::NoError, 0, 0)
    );
    let a = ask(&h, "www.example.org.", RecordType::MX).unwrap();
    assert_eq!((a.rcode, a.answers.len()), (ResponseCode::NoError, 0));
    // Not in the file: NXDOMAIN without fallthrough, no SOA.
    let a = ask(&h, "nope.example.org.", RecordType::A).unwrap();
    assert_eq!(
        (a.rcode, a.answers.len(), a.authority.len()),
        (ResponseCode::NXDomain, 0, 0)
    );
    // Outside the zones: next plugin, whatever the file holds.
    assert!(ask(&h, "other.net.", RecordType::A).is_none());
    assert!(ask(&h, "localhost.", RecordType::A).is_none());
    // PTR, whatever the zones; unknown addresses go to the next plugin.
    let a = ask(&h, "1.0.0.10.IN-ADDR.ARPA.", RecordType::PTR).unwrap();
    assert_eq!(rdata(&a), ["www.example.org."]);
    let v6 = Name::from("2001:db8::1".parse::<std::net::IpAddr>().unwrap());
    let a = ask(&h, &v6.to_ascii(), RecordType::PTR).unwrap();
    assert_eq!(rdata(&a), ["www.example.org.", "six.example.org."]);
    assert!(ask(&h, "9.9.9.9.in-addr.arpa.", RecordType::PTR).is_none());
    assert!(ask(&h, "www.example.org.", RecordType::PTR).is_none());
    // localhost and other.net are outside example.org: not loaded, so no PTR either.
    assert!(ask(&h, "1.0.0.127.in-addr.arpa.", RecordType::PTR).is_none());
    // www.example.org (3 addresses) + six.example.org.
    assert_eq!(h.entries(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fallthrough_no_reverse_inline_and_missing_file() {
    let dir = temp_dir("fallthrough");
    std::fs::write(dir.join("hosts"), FILE).unwrap();
    let h = hosts(
        "hosts hosts {\n 10.9.9.9 www.example.org inline.example.org\n fallthrough sub.example.org\n no_reverse\n}",
        &dir,
    );
    // The inline entry overrides the file's addresses of www.example.org.
    assert_eq!(
        rdata(&ask(&h, "www.example.org.", RecordType::A).unwrap()),
        ["10.9.9.9"]
    );
    assert_eq!(
        ask(&h, "www.example.org.", RecordType::AAAA)
            .unwrap()
            .answers
            .len(),
        0
    );
    assert_eq!(
        rdata(&ask(&h, "inline.example.org.", RecordType::A).unwrap()),
        ["10.9.9.9"]
    );
    assert_eq!(
        rdata(&ask(&h, "six.example.org.", RecordType::AAAA).unwrap()),
        ["2001:db8::1"]
    );
    assert!(
        ask(&h, "x.sub.example.org.", RecordType::A).is_none(),
        "falls through"
    );
    assert_eq!(
        ask(&h, "x.example.org.", RecordType::A).unwrap().rcode,
        ResponseCode::NXDomain,
        "outside the fallthrough zones"
    );
    assert!(
        ask(&h, "9.9.9.10.in-addr.arpa.", RecordType::PTR).is_none(),
        "no_reverse"
    );

    let h = hosts(
        "hosts missing-file {\n 10.0.0.8 a.example.org\n fallthrough\n fallthrough_unsupported\n}",
        &dir,
    );
    assert_eq!(
        rdata(&ask(&h, "a.example.org.", RecordType::A).unwrap()),
        ["10.0.0.8"]
    );
    assert_eq!(
        ask(&h, "a.example.org.", RecordType::AAAA).unwrap().answers.len(),
        0
    );
    assert!(
        ask(&h, "a.example.org.", RecordType::TXT).is_none(),
        "fallthrough_unsupported"
    );
    assert!(ask(&h, "b.example.org.", RecordType::A).is_none());
    assert_eq!(
        rdata(&ask(&h, "8.0.0.10.in-addr.arpa.", RecordType::PTR).unwrap()),
        ["a.example.org."]
    );
    assert_eq!(h.entries(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wildcards() {
    let dir = temp_dir("wildcards");
    std::fs::write(
        dir.join("hosts"),
        "192.168.1.10 *.example.org\n192.168.1.11 a.example.org\n",
    )
    .unwrap();
    let h = hosts("hosts hosts", &dir);
    assert_eq!(
        rdata(&ask(&h, "apps.example.org.", RecordType::A).unwrap()),
        ["192.168.1.10"]
    );
    assert_eq!(
        rdata(&ask(&h, "a.example.org.", RecordType::A).unwrap()),
        ["192.168.1.11"]
    );
    assert_eq!(
        ask(&h, "example.org.", RecordType::A).unwrap().rcode,
        ResponseCode::NXDomain
    );
    assert_eq!(
        ask(&h, "deep.apps.example.org.", RecordType::A).unwrap().rcode,
        ResponseCode::NXDomain
    );
    assert!(ask(&h, "10.1.168.192.in-addr.arpa.", RecordType::PTR).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reload_now_follows_the_file() {
    let dir = temp_dir("reload-now");
    let path = dir.join("hosts");
    std::fs::write(&path, "10.0.0.1 a.example.org\n").unwrap();
    let h = hosts("hosts hosts {\n reload 0\n 10.0.0.9 inline.example.org\n}", &dir);
    assert!(!h.reload_now(), "unchanged");
    std::fs::write(&path, "10.0.0.2 a.example.org\n10.0.0.3 b.example.org\n").unwrap();
    assert!(h.reload_now());
    assert_eq!(
        rdata(&ask(&h, "a.example.org.", RecordType::A).unwrap()),
        ["10.0.0.2"]
    );
    assert_eq!(h.entries(), 3);
    // Deleted: the inline entries stay; restored: used again.
    std::fs::remove_file(&path).unwrap();
    assert!(h.reload_now());
    assert_eq!(
        ask(&h, "a.example.org.", RecordType::A).unwrap().rcode,
        ResponseCode::NXDomain
    );
    assert_eq!(
        rdata(&ask(&h, "inline.example.org.", RecordType::A).unwrap()),
        ["10.0.0.9"]
    );
    std::fs::write(&path, "10.0.0.4 a.example.org\n").unwrap();
    assert!(h.reload_now());
    assert_eq!(
        rdata(&ask(&h, "a.example.org.", RecordType::A).unwrap()),
        ["10.0.0.4"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_task_picks_up_a_changed_file_and_stops_when_dropped() {
    let dir = temp_dir("reload-task");
    let path = dir.join("hosts");
    std::fs::write(&path, "10.0.0.1 a.example.org\n").unwrap();
    let h = hosts("hosts hosts {\n reload 20ms\n}", &dir);
    h.start_reload();
    h.start_reload(); // a second call starts nothing more
    assert_eq!(
        rdata(&ask(&h, "a.example.org.", RecordType::A).unwrap()),
        ["10.0.0.1"]
    );
    // A different size, so the change shows even where mtimes are coarse.
    std::fs::write(&path, "10.0.0.2 a.example.org\n10.0.0.3 b.example.org\n").unwrap();
    let mut seen = false;
    for _ in 0..500 {
        if ask(&h, "b.example.org.", RecordType::A).is_some_and(|a| a.rcode == ResponseCode::NoError) {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(seen, "the reload task did not pick up the change");
    assert_eq!(
        rdata(&ask(&h, "a.example.org.", RecordType::A).unwrap()),
        ["10.0.0.2"]
    );
    // Once every clone is gone, the task's weak reference no longer upgrades.
    let weak = Arc::downgrade(&h.inner);
    drop(h);
    let mut gone = false;
    for _ in 0..500 {
        if weak.upgrade().is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gone, "the reload task kept the hosts alive");
    let _ = std::fs::remove_dir_all(&dir);
}
