//! `minimal`: positive answers from the cluster zone lose their additional (glue) section over
//! real UDP and TCP with `dig`; NXDOMAIN and NODATA keep their SOA; without `minimal` the same
//! question has its glue (so the test can tell the two apart).

use crate::support;

fn corefile(minimal: bool) -> String {
    format!(
        ".:0 {{\n bind 127.0.0.1\n{} kubernetes cluster.local {{\n  manifests {}\n }}\n}}\n",
        if minimal { " minimal\n" } else { "" },
        support::data_dir().join("conformance-fixture.yaml").display()
    )
}

const SRV: &str = "_http._tcp.svc1.testns.svc.cluster.local";

/// dig's output for each question, against a server with or without `minimal`.
async fn answers(minimal: bool) -> Vec<String> {
    let dir = support::temp_dir("minimal");
    let running = support::start(&corefile(minimal), &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        let ask = |args: &[&str]| {
            let mut all = vec!["+noall", "+comments", "+answer", "+authority", "+additional"];
            all.extend_from_slice(args);
            support::dig(addr, &all)
        };
        vec![
            ask(&["SRV", SRV]),
            ask(&["+tcp", "SRV", SRV]),
            ask(&["SRV", "_grpc._tcp.svc1.testns.svc.cluster.local"]),
            ask(&["TXT", "svc1.testns.svc.cluster.local"]),
        ]
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positive_answers_lose_their_glue_and_negative_ones_keep_the_soa() {
    let plain = answers(false).await;
    assert!(
        plain[0].contains("ADDITIONAL: 2"),
        "glue without minimal: {}",
        plain[0]
    );
    let minimal = answers(true).await;
    for srv in &minimal[..2] {
        assert_eq!(support::dig_status(srv), "NOERROR", "{srv}");
        // OPT only: dig counts it in ADDITIONAL.
        assert!(srv.contains("ANSWER: 1, AUTHORITY: 0, ADDITIONAL: 1"), "{srv}");
        assert_eq!(
            support::dig_records(srv),
            [format!("{SRV}. 5 IN SRV 0 100 80 svc1.testns.svc.cluster.local.")],
            "{srv}"
        );
    }
    for (reply, status) in [(&minimal[2], "NXDOMAIN"), (&minimal[3], "NOERROR")] {
        assert_eq!(support::dig_status(reply), status, "{reply}");
        let records = support::dig_records(reply);
        assert!(
            records.len() == 1 && records[0].starts_with("cluster.local. ") && records[0].contains(" SOA "),
            "{reply}"
        );
    }
}

#[test]
fn minimal_takes_no_arguments() {
    let dir = support::temp_dir("minimal-setup");
    let e = support::check_corefile(&dir, ".:53 {\n any\n minimal yes\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3") && e.contains("unexpected argument 'yes'"),
        "{e}"
    );
}
