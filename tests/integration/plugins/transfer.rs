//! `transfer` (CoreDNS's plugin, with real `dig`): an AXFR of the cluster zone over TCP to an
//! allowed address gives the SOA first and last and the Services' records; another client
//! address is refused, and so is a block without `transfer`; a `file` zone transfers too.

use crate::support;
use crate::support::peers::{Kind, Peer};

fn corefile(transfer: &str) -> String {
    format!(
        "cluster.local:0 example.org:0 {{\n bind 127.0.0.1\n{transfer} kubernetes cluster.local {{\n  manifests {}\n }}\n file db.example.org example.org\n}}\n",
        support::data_dir().join("conformance-fixture.yaml").display()
    )
}

const ZONE: &str = "$ORIGIN example.org.\n@ 3600 IN SOA ns.example.org. admin.example.org. 42 7200 3600 1209600 300\n@ 3600 IN NS ns\nns 3600 IN A 192.0.2.53\nwww 3600 IN A 192.0.2.80\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axfr_to_allowed_clients_only() {
    let dir = support::temp_dir("transfer");
    std::fs::write(dir.join("db.example.org"), ZONE).unwrap();
    let running = support::start(&corefile(" transfer {\n  to 127.0.0.1\n }\n"), &dir).await;
    let addr = running.dns_addrs()[0];
    let (cluster, refused, file) = tokio::task::spawn_blocking(move || {
        (
            support::dig(addr, &["+nocookie", "-b", "127.0.0.1", "AXFR", "cluster.local"]),
            support::dig(addr, &["+nocookie", "-b", "127.0.0.2", "AXFR", "cluster.local"]),
            support::dig(addr, &["+nocookie", "AXFR", "example.org"]),
        )
    })
    .await
    .unwrap();
    let records = support::dig_records(&cluster);
    assert!(records.len() > 3, "{cluster}");
    assert!(records[0].starts_with("cluster.local. 5 IN SOA "), "{cluster}");
    assert_eq!(records.first(), records.last(), "SOA first and last: {cluster}");
    assert!(
        records.contains(&"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1".to_owned()),
        "{cluster}"
    );
    assert!(
        records
            .iter()
            .any(|r| r.contains(" IN SRV ") && r.contains("kube-dns.kube-system.svc.cluster.local.")),
        "{cluster}"
    );
    assert!(refused.contains("Transfer failed"), "{refused}");
    assert_eq!(
        support::dig_records(&file),
        [
            "example.org. 3600 IN SOA ns.example.org. admin.example.org. 42 7200 3600 1209600 300",
            "example.org. 3600 IN NS ns.example.org.",
            "ns.example.org. 3600 IN A 192.0.2.53",
            "www.example.org. 3600 IN A 192.0.2.80",
            "example.org. 3600 IN SOA ns.example.org. admin.example.org. 42 7200 3600 1209600 300",
        ],
        "{file}"
    );
    running.stop().await.unwrap();

    // Without `transfer`, refused, as before.
    let running = support::start(&corefile(""), &dir).await;
    let addr = running.dns_addrs()[0];
    let out =
        tokio::task::spawn_blocking(move || support::dig(addr, &["+nocookie", "AXFR", "cluster.local"]))
            .await
            .unwrap();
    assert!(out.contains("Transfer failed"), "{out}");
    running.stop().await.unwrap();
}

#[test]
fn a_bad_to_address_is_refused_at_its_line() {
    let dir = support::temp_dir("transfer-check");
    let e = support::check_corefile(&dir, ".:53 {\n transfer {\n  to 10.0.0.0/8\n }\n}\n").unwrap_err();
    assert!(e.contains("Corefile:3: transfer: to: '10.0.0.0/8'"), "{e}");
}

/// A zone too big for one message goes out in several, every record once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_zone_goes_out_in_several_messages() {
    let dir = support::temp_dir("transfer-large");
    let mut zone = ZONE.to_owned();
    for i in 0..5000 {
        zone.push_str(&format!(
            "host-{i} 3600 IN TXT \"record number {i} of a zone that needs several messages\"\n"
        ));
    }
    std::fs::write(dir.join("db.example.org"), zone).unwrap();
    let running = support::start(&corefile(" transfer {\n  to *\n }\n"), &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || support::dig(addr, &["+nocookie", "AXFR", "example.org"]))
        .await
        .unwrap();
    let records = support::dig_records(&out);
    assert_eq!(records.len(), 5005, "{}", out.lines().last().unwrap_or(""));
    let messages: usize = out
        .split("messages ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        messages >= 2,
        "{}",
        out.lines().rev().take(3).collect::<Vec<_>>().join("\n")
    );
    running.stop().await.unwrap();
}

/// IXFR (RFC 1995): a client that holds the zone's current serial gets the SOA alone (up to
/// date, as CoreDNS answers it); one with an older serial gets the whole zone, SOA first and
/// last (the whole-transfer fallback section 4 allows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ixfr_from_the_current_serial_gets_the_soa_alone() {
    let dir = support::temp_dir("transfer-ixfr");
    std::fs::write(dir.join("db.example.org"), ZONE).unwrap();
    let running = support::start(&corefile(" transfer {\n  to *\n }\n"), &dir).await;
    let addr = running.dns_addrs()[0];
    let (current, older) = tokio::task::spawn_blocking(move || {
        (
            support::dig(addr, &["+nocookie", "IXFR=42", "example.org"]),
            support::dig(addr, &["+nocookie", "IXFR=41", "example.org"]),
        )
    })
    .await
    .unwrap();
    let soa = "example.org. 3600 IN SOA ns.example.org. admin.example.org. 42 7200 3600 1209600 300";
    assert_eq!(support::dig_records(&current), [soa], "{current}");
    let whole = support::dig_records(&older);
    assert_eq!(whole.len(), 5, "{older}");
    assert_eq!((whole[0].as_str(), whole[4].as_str()), (soa, soa), "{older}");
    running.stop().await.unwrap();
}

/// NOTIFY (RFC 1996): a `to` address with a port is told when the `file` zone is loaded at
/// start and again when an edited file with a higher serial is read; each NOTIFY is the zone's
/// SOA question with AA set, and the server stops sending it once acknowledged. `to *` is
/// never notified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_goes_to_the_to_addresses_at_start_and_when_the_zone_changes() {
    use hickory_proto::op::{Message, MessageType, OpCode};
    use hickory_proto::rr::RecordType;
    use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
    use std::time::Duration;

    let secondary = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = secondary.local_addr().unwrap().port();
    let dir = support::temp_dir("transfer-notify");
    std::fs::write(dir.join("db.example.org"), ZONE).unwrap();
    let corefile = format!(
        "example.org:0 {{\n bind 127.0.0.1\n transfer {{\n  to * 127.0.0.1:{port}\n  source 127.0.0.1\n }}\n file db.example.org {{\n  reload 1s\n }}\n}}\n"
    );
    let running = support::start(&corefile, &dir).await;

    // Receives one NOTIFY (acknowledging it), checks it, and gives the serial the zone now has.
    let receive = || async {
        let mut buf = vec![0u8; 512];
        let (n, from) = tokio::time::timeout(Duration::from_secs(5), secondary.recv_from(&mut buf))
            .await
            .expect("a NOTIFY within 5 s")
            .unwrap();
        let m = Message::from_bytes(&buf[..n]).unwrap();
        assert_eq!(m.metadata.op_code, OpCode::Notify);
        assert_eq!(m.metadata.message_type, MessageType::Query);
        assert!(m.metadata.authoritative, "AA set");
        assert_eq!(m.queries[0].name().to_ascii(), "example.org.");
        assert_eq!(m.queries[0].query_type(), RecordType::SOA);
        assert_eq!(from.ip().to_string(), "127.0.0.1", "from source");
        let mut ack = Message::response(m.metadata.id, OpCode::Notify);
        ack.metadata.authoritative = true;
        ack.queries = m.queries.clone();
        secondary.send_to(&ack.to_bytes().unwrap(), from).await.unwrap();
    };
    receive().await;
    // The zone file is edited: serial 42 to 43.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    std::fs::write(
        dir.join("db.example.org"),
        ZONE.replace(" 42 ", " 43 ").replace("192.0.2.80", "192.0.2.81"),
    )
    .unwrap();
    receive().await;
    // Acknowledged: no more tries come.
    let mut buf = vec![0u8; 512];
    assert!(
        tokio::time::timeout(Duration::from_millis(2500), secondary.recv_from(&mut buf))
            .await
            .is_err(),
        "no NOTIFY after the acknowledgement"
    );
    running.stop().await.unwrap();
}

/// Issue 42: the coredns/helm chart's zone-file layout (`file` + `transfer { to ADDR }` +
/// `cache 30` in one block). After the allowed secondary's transfer, another client's AXFR is
/// still refused: the cache never keeps a transfer, nor the refusal made for one client (the
/// allowed one then still gets its zone). CoreDNS's cache never stores transfers either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_is_never_replayed_from_the_cache_to_another_client() {
    let dir = support::temp_dir("transfer-cache");
    std::fs::write(dir.join("db.example.org"), ZONE).unwrap();
    let corefile = "example.org:0 {\n bind 127.0.0.1\n file db.example.org\n transfer {\n  to 127.0.0.53\n }\n cache 30\n}\n";
    let running = support::start(corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let outs = tokio::task::spawn_blocking(move || {
        let axfr = |from: &str| support::dig(addr, &["+nocookie", "-b", from, "AXFR", "example.org"]);
        let ixfr = |from: &str| support::dig(addr, &["+nocookie", "-b", from, "IXFR=41", "example.org"]);
        [
            axfr("127.0.0.1"),
            axfr("127.0.0.53"),
            axfr("127.0.0.1"),
            axfr("127.0.0.53"),
            ixfr("127.0.0.53"),
            ixfr("127.0.0.1"),
        ]
    })
    .await
    .unwrap();
    for (i, out) in outs.iter().enumerate() {
        let allowed = i % 2 == 1 && i != 5 || i == 4;
        if allowed {
            assert_eq!(
                support::dig_records(out).len(),
                5,
                "transfer {i} to the allowed client: {out}"
            );
        } else {
            assert!(
                out.contains("Transfer failed"),
                "transfer {i} to another client: {out}"
            );
            assert!(
                !out.contains("www.example.org."),
                "transfer {i} leaked the zone: {out}"
            );
        }
    }
    running.stop().await.unwrap();
}

/// RFC 1995 with a secondary no one here wrote: Knot DNS takes the `file` zone by AXFR, then,
/// told by NOTIFY of each edit of the file (serial 42 to 43 to 44), asks IXFR and gets the
/// differences from the zone's journal: its log shows incoming IXFRs and no fall back to
/// AXFR, and it answers the new data. `dig IXFR=42` shows the difference sequence (RFC 1995
/// section 4: the current SOA, the old SOA, what was removed, the next SOA, what was added,
/// ..., the current SOA), and a serial the journal does not reach gets the whole zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn knot_follows_a_file_zone_by_ixfr() {
    use std::time::Duration;
    let dir = support::temp_dir("transfer-knot-ixfr");
    std::fs::write(dir.join("db.example.org"), ZONE).unwrap();
    let knot_port = crate::support::upstream::free_port();
    let corefile = format!(
        "example.org:0 {{\n bind 127.0.0.1\n transfer {{\n  to * 127.0.0.1:{knot_port}\n }}\n file db.example.org {{\n  reload 1s\n }}\n}}\n"
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let zone = dir.clone();
    let (log, diff, whole) = tokio::task::spawn_blocking(move || {
        let knot = Peer::secondary_on(Kind::Knot, "example.org.", addr, knot_port);
        knot.answers("www.example.org", "A", "192.0.2.80");
        // Edit 1: www moves, a TXT record appears.
        std::thread::sleep(Duration::from_millis(1100));
        let v43 = ZONE.replace(" 42 ", " 43 ").replace("192.0.2.80", "192.0.2.81")
            + "txt 3600 IN TXT \"added in 43\"\n";
        std::fs::write(zone.join("db.example.org"), &v43).unwrap();
        knot.answers("www.example.org", "A", "192.0.2.81");
        knot.answers("txt.example.org", "TXT", "\"added in 43\"");
        // Edit 2: the TXT record goes again.
        std::thread::sleep(Duration::from_millis(1100));
        let v44 = v43
            .replace(" 43 ", " 44 ")
            .replace("txt 3600 IN TXT \"added in 43\"\n", "");
        std::fs::write(zone.join("db.example.org"), v44).unwrap();
        knot.answers(
            "example.org",
            "SOA",
            "ns.example.org. admin.example.org. 44 7200 3600 1209600 300",
        );
        knot.answers("txt.example.org", "TXT", "");
        let diff = support::dig(addr, &["+nocookie", "IXFR=42", "example.org"]);
        let whole = support::dig(addr, &["+nocookie", "IXFR=7", "example.org"]);
        (knot.logs(), diff, whole)
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    let incoming: Vec<&str> = log.lines().filter(|l| l.contains("IXFR, incoming")).collect();
    assert!(
        incoming.iter().filter(|l| l.contains("finished")).count() >= 2,
        "Knot did not take two IXFRs:\n{log}"
    );
    // (Given the whole zone for an IXFR, Knot logs "receiving AXFR-style IXFR".)
    assert!(
        !log.contains("AXFR-style") && !log.contains("fallback to AXFR"),
        "Knot took the whole zone for an IXFR:\n{log}"
    );
    let soa = |n: u32| {
        format!("example.org. 3600 IN SOA ns.example.org. admin.example.org. {n} 7200 3600 1209600 300")
    };
    assert_eq!(
        support::dig_records(&diff),
        [
            soa(44),
            soa(42),
            "www.example.org. 3600 IN A 192.0.2.80".to_owned(),
            soa(43),
            "txt.example.org. 3600 IN TXT \"added in 43\"".to_owned(),
            "www.example.org. 3600 IN A 192.0.2.81".to_owned(),
            soa(43),
            "txt.example.org. 3600 IN TXT \"added in 43\"".to_owned(),
            soa(44),
            soa(44),
        ],
        "{diff}"
    );
    let whole = support::dig_records(&whole);
    assert_eq!(
        whole.len(),
        5,
        "a serial the journal does not reach: the whole zone"
    );
    assert_eq!((whole[0].clone(), whole[4].clone()), (soa(44), soa(44)));
}

/// Issue 46: the cluster zone tells its secondaries when it changes, and sends the change by
/// IXFR. Knot DNS follows `cluster.local` from a server whose `kubernetes` zone comes from the
/// fake API server; a Service created afterwards reaches Knot within seconds, by the NOTIFY the
/// zone's change sends (batched: at most one a second; without it Knot would wait for the
/// SOA's two-hour refresh), as the difference from the version Knot holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn knot_follows_the_cluster_zone_on_notify() {
    let fake = fake_apiserver::FakeApiServer::start().await.unwrap();
    fake.create(fake_apiserver::synthetic::namespace("default"))
        .unwrap();
    let service =
        |name: &str, ip: &str| fake_apiserver::synthetic::service("default", name, Some(ip.parse().unwrap()));
    fake.create(service("first", "10.96.0.51")).unwrap();
    let dir = support::temp_dir("transfer-knot-cluster");
    let knot_port = crate::support::upstream::free_port();
    let corefile = format!(
        "cluster.local:0 {{\n bind 127.0.0.1\n transfer {{\n  to * 127.0.0.1:{knot_port}\n }}\n kubernetes cluster.local {{\n  endpoint {}\n }}\n}}\n",
        fake.url()
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let knot = tokio::task::spawn_blocking(move || {
        let knot = Peer::secondary_on(Kind::Knot, "cluster.local.", addr, knot_port);
        knot.answers("first.default.svc.cluster.local", "A", "10.96.0.51");
        knot
    })
    .await
    .unwrap();
    fake.create(service("second", "10.96.0.52")).unwrap();
    let log = tokio::task::spawn_blocking(move || {
        knot.answers("second.default.svc.cluster.local", "A", "10.96.0.52");
        knot.logs()
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    // The first copy by AXFR, the change by IXFR from the journal of transferred versions.
    assert!(
        log.lines()
            .any(|l| l.contains("IXFR, incoming") && l.contains("finished")),
        "Knot did not take the change by IXFR:\n{log}"
    );
    assert!(!log.contains("AXFR-style"), "{log}");
}

/// Issue 46, the central side of the fabric: many secondaries asking after one change cost one
/// build of the cluster zone. Five transfers (AXFR and IXFR) of an unchanged zone build it
/// once and give the kept version out for the other four; a change moves the serial, and the next
/// transfer builds again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_of_an_unchanged_cluster_zone_build_it_once() {
    let fake = fake_apiserver::FakeApiServer::start().await.unwrap();
    fake.create(fake_apiserver::synthetic::namespace("default"))
        .unwrap();
    let service =
        |name: &str, ip: &str| fake_apiserver::synthetic::service("default", name, Some(ip.parse().unwrap()));
    fake.create(service("first", "10.96.0.51")).unwrap();
    let dir = support::temp_dir("transfer-kept");
    let corefile = format!(
        "cluster.local:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n transfer {{\n  to *\n }}\n kubernetes cluster.local {{\n  endpoint {}\n }}\n}}\n",
        fake.url()
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").unwrap();
    let count = async |version: &str| {
        support::sum(
            &support::scrape(metrics).await,
            "cluster_dns_kubernetes_transfers_total",
            &[&format!("version=\"{version}\"")],
        )
    };
    let axfr = move || support::dig_records(&support::dig(addr, &["+nocookie", "AXFR", "cluster.local"]));
    let first = tokio::task::spawn_blocking(move || {
        let mut got = Vec::new();
        for _ in 0..200 {
            got = axfr();
            if got.len() > 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        got
    })
    .await
    .unwrap();
    assert!(first.len() > 2, "no transfer: {first:?}");
    let built = count("built").await;
    let kept = count("kept").await;
    let serial: String = first[0].split(' ').nth(6).unwrap().to_owned();
    let again = tokio::task::spawn_blocking(move || {
        let mut outs = Vec::new();
        for _ in 0..2 {
            outs.push(axfr());
        }
        for held in ["1", &serial] {
            outs.push(support::dig_records(&support::dig(
                addr,
                &["+nocookie", &format!("IXFR={held}"), "cluster.local"],
            )));
        }
        outs
    })
    .await
    .unwrap();
    assert_eq!(again[0], first, "the kept version is the zone as built");
    assert_eq!(again[1], first);
    assert_eq!(count("built").await, built, "an unchanged zone was built again");
    // (An IXFR the journal does not answer reads the kept version twice: for the
    // differences, then whole.)
    assert!(count("kept").await >= kept + 4.0);
    fake.create(service("second", "10.96.0.52")).unwrap();
    let changed = tokio::task::spawn_blocking(move || {
        for _ in 0..200 {
            let now = axfr();
            if now
                .iter()
                .any(|r| r.starts_with("second.default.svc.cluster.local."))
            {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        false
    })
    .await
    .unwrap();
    assert!(changed, "the new Service never reached a transfer");
    assert!(count("built").await > built, "a changed zone was not built again");
    running.stop().await.unwrap();
}

/// Issue 46 with the second secondary no one here wrote: NSD follows the cluster zone from a
/// server whose `kubernetes` zone comes from the fake API server. Its first copy is a whole
/// transfer; told of a new Service by NOTIFY, it asks IXFR, and the server, whose journal
/// holds the step from the version NSD has, answers with the difference: NSD logs an
/// incremental transfer and answers the new name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nsd_follows_the_cluster_zone_by_ixfr() {
    let fake = fake_apiserver::FakeApiServer::start().await.unwrap();
    fake.create(fake_apiserver::synthetic::namespace("default"))
        .unwrap();
    let service =
        |name: &str, ip: &str| fake_apiserver::synthetic::service("default", name, Some(ip.parse().unwrap()));
    fake.create(service("first", "10.96.0.61")).unwrap();
    let dir = support::temp_dir("transfer-nsd-cluster");
    let nsd_port = crate::support::upstream::free_port();
    let corefile = format!(
        "cluster.local:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n transfer {{\n  to * 127.0.0.1:{nsd_port}\n }}\n kubernetes cluster.local {{\n  endpoint {}\n }}\n}}\n",
        fake.url()
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let (nsd, held) = tokio::task::spawn_blocking(move || {
        let nsd = Peer::secondary_on(Kind::Nsd, "cluster.local.", addr, nsd_port);
        nsd.answers("first.default.svc.cluster.local", "A", "10.96.0.61");
        let soa = nsd.answers_any("cluster.local", "SOA");
        (nsd, soa.split_whitespace().nth(2).unwrap_or_default().to_owned())
    })
    .await
    .unwrap();
    fake.create(service("second", "10.96.0.62")).unwrap();
    let (log, diff) = tokio::task::spawn_blocking(move || {
        nsd.answers("second.default.svc.cluster.local", "A", "10.96.0.62");
        // What NSD was sent for its IXFR from the serial it held.
        let diff = support::dig(addr, &["+nocookie", &format!("IXFR={held}"), "cluster.local"]);
        (nsd.logs(), diff)
    })
    .await
    .unwrap();
    let m = support::scrape(running.http_addr("metrics").unwrap()).await;
    running.stop().await.unwrap();
    let requests = |t: &str| support::sum(&m, "coredns_dns_requests_total", &[&format!("type=\"{t}\"")]);
    assert_eq!(requests("AXFR"), 1.0, "NSD's first copy only is whole:\n{log}");
    assert!(requests("IXFR") >= 1.0, "NSD asked no IXFR:\n{log}");
    assert!(
        log.contains("received update to serial"),
        "NSD took no update:\n{log}"
    );
    // The difference sequence (its second record an SOA), not the whole zone again.
    let records = support::dig_records(&diff);
    assert!(
        records.len() >= 4
            && records[1].contains(" SOA ")
            && records.iter().all(|r| !r.starts_with("first.")),
        "the IXFR from NSD's serial is not the difference:\n{diff}"
    );
}
