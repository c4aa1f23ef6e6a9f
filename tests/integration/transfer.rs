//! `transfer` (CoreDNS's plugin, with real `dig`): an AXFR of the cluster zone over TCP to an
//! allowed address gives the SOA first and last and the Services' records; another client
//! address is refused, and so is a block without `transfer`; a `file` zone transfers too.

use crate::support;

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
