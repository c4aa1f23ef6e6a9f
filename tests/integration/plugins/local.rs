//! `local`: the README's `. { local }` over real UDP and TCP with `dig`: loopback addresses for
//! `localhost.`, names under `.localhost.` and legacy `localhost.<domain>`, the loopback PTR,
//! NXDOMAIN with the zone's SOA elsewhere in `127.in-addr.arpa.`, no AA; the non-apex
//! localhost questions counted in `coredns_local_localhost_requests_total`, also when asked
//! again (the answer memo); `localhost_prefix off` passes `localhost.<domain>` on. A wrong
//! option fails `--check` at its line.

use crate::support;

fn corefile(options: &str) -> String {
    format!(".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n local{options}\n}}\n")
}

fn ask(addr: std::net::SocketAddr, args: &[&str]) -> String {
    // No cookie: dig's is new each run, and the memo keeps answers by the request's bytes.
    let mut all = vec!["+nocookie", "+noall", "+comments", "+answer", "+authority"];
    all.extend_from_slice(args);
    support::dig(addr, &all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localhost_names_and_the_loopback_zones_are_answered_here() {
    let dir = support::temp_dir("local");
    let running = support::start(&corefile(""), &dir).await;
    let addr = running.dns_addrs()[0];
    let metrics = running.http_addr("metrics").expect("/metrics listener");
    let counted = || async {
        crate::support::scrape(metrics)
            .await
            .get("coredns_local_localhost_requests_total{}")
            .copied()
    };
    assert_eq!(counted().await, Some(0.0), "registered at start-up");
    let out = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        // Each twice: the second UDP one comes from the answer memo.
        for _ in 0..2 {
            out.push(ask(addr, &["A", "localhost."]));
            out.push(ask(addr, &["AAAA", "foo.localhost."]));
            out.push(ask(addr, &["A", "localhost.example.com."]));
        }
        out.push(ask(addr, &["+tcp", "A", "Bar.Localhost."]));
        out.push(ask(addr, &["-x", "127.0.0.1"]));
        out.push(ask(addr, &["-x", "127.0.0.2"]));
        out.push(ask(addr, &["MX", "foo.localhost."]));
        out
    })
    .await
    .unwrap();
    for (i, want) in [
        "localhost. 604800 IN A 127.0.0.1",
        "foo.localhost. 604800 IN AAAA ::1",
        "localhost.example.com. 604800 IN A 127.0.0.1",
    ]
    .iter()
    .enumerate()
    {
        for reply in [&out[i], &out[i + 3]] {
            assert_eq!(support::dig_status(reply), "NOERROR", "{reply}");
            assert_eq!(support::dig_records(reply), [*want], "{reply}");
            // Neither AA nor RA, as CoreDNS's SetReply.
            assert!(reply.contains(";; flags: qr rd;"), "{reply}");
        }
    }
    assert_eq!(
        support::dig_records(&out[6]),
        ["Bar.Localhost. 604800 IN A 127.0.0.1"]
    );
    assert_eq!(
        support::dig_records(&out[7]),
        ["1.0.0.127.in-addr.arpa. 604800 IN PTR localhost."]
    );
    assert_eq!(support::dig_status(&out[8]), "NXDOMAIN", "{}", out[8]);
    assert_eq!(
        support::dig_records(&out[8]),
        ["127.in-addr.arpa. 604800 IN SOA localhost. root.localhost. 1 0 0 0 604800"]
    );
    assert_eq!(support::dig_status(&out[9]), "NOERROR", "{}", out[9]);
    assert_eq!(
        support::dig_records(&out[9]),
        ["foo.localhost. 604800 IN SOA localhost. root.localhost. 1 0 0 0 604800"]
    );
    // foo.localhost. and localhost.example.com. twice each, Bar.Localhost. and the MX: not
    // localhost. itself nor the reverse names.
    assert_eq!(counted().await, Some(6.0));
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_prefix_localhost_dot_domain_goes_on() {
    let dir = support::temp_dir("local-strict");
    let running = support::start(&corefile(" {\n  localhost_prefix off\n }"), &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        [
            ask(addr, &["A", "localhost.example.com."]),
            ask(addr, &["A", "foo.localhost."]),
        ]
    })
    .await
    .unwrap();
    // Nothing after `local` answers it.
    assert_eq!(support::dig_status(&out[0]), "SERVFAIL", "{}", out[0]);
    assert_eq!(
        support::dig_records(&out[1]),
        ["foo.localhost. 604800 IN A 127.0.0.1"]
    );
    running.stop().await.unwrap();
}

#[test]
fn a_wrong_prefix_value_fails_at_its_line() {
    let dir = support::temp_dir("local-setup");
    let e = support::check_corefile(&dir, ".:53 {\n local {\n  localhost_prefix yes\n }\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3") && e.contains("localhost_prefix expects 'on' or 'off', got 'yes'"),
        "{e}"
    );
}
