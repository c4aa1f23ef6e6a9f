//! `chaos`: CH-class TXT questions for the server's identity answered over real UDP and TCP
//! with `dig`; CH questions are refused by blocks without `chaos`, IN questions in a block with
//! it go on to its other plugins.

use crate::support;

const COREFILE: &str = ".:0 {\n bind 127.0.0.1\n chaos CoreDNS-001 ann@example.org bob@example.org\n hosts {\n  192.0.2.9 version.bind\n }\n}\nexample.org:0 {\n bind 127.0.0.1\n hosts {\n  192.0.2.10 www.example.org\n }\n}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ch_txt_questions_get_the_servers_identity() {
    let dir = support::temp_dir("chaos");
    let running = support::start(COREFILE, &dir).await;
    let addr = running.dns_addrs()[0];
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let out = tokio::task::spawn_blocking(move || {
        let ch = |extra: &[&str]| {
            let mut args = vec!["+noall", "+comments", "+answer", "CH", "TXT"];
            args.extend_from_slice(extra);
            support::dig(addr, &args)
        };
        (
            ch(&["version.bind"]),
            ch(&["+tcp", "Version.Server"]),
            ch(&["authors.bind"]),
            ch(&["hostname.bind"]),
            ch(&["id.server"]),
            ch(&["nothing.bind"]),
            support::dig(addr, &["+noall", "+comments", "CH", "TXT", "version.example.org"]),
            support::dig(addr, &["+short", "IN", "A", "version.bind"]),
        )
    })
    .await
    .unwrap();
    let (version, server, authors, hostname, id, unknown, elsewhere, inet) = out;
    assert_eq!(
        support::dig_records(&version),
        ["version.bind. 0 CH TXT \"CoreDNS-001\""],
        "{version}"
    );
    assert_eq!(
        support::dig_records(&server),
        ["Version.Server. 0 CH TXT \"CoreDNS-001\""],
        "{server}"
    );
    let mut authors = support::dig_records(&authors);
    authors.sort();
    assert_eq!(
        authors,
        [
            "authors.bind. 0 CH TXT \"ann@example.org\"",
            "authors.bind. 0 CH TXT \"bob@example.org\""
        ]
    );
    for (reply, name) in [(&hostname, "hostname.bind."), (&id, "id.server.")] {
        assert_eq!(
            support::dig_records(reply),
            [format!("{name} 0 CH TXT \"{}\"", host.trim())],
            "{reply}"
        );
    }
    // A CH name it does not know is refused, not handed to plugins that answer IN.
    assert_eq!(support::dig_status(&unknown), "REFUSED", "{unknown}");
    // The example.org block has no chaos: CH is refused before its plugins.
    assert_eq!(support::dig_status(&elsewhere), "REFUSED", "{elsewhere}");
    // IN questions go on to the block's other plugins.
    assert_eq!(inet.trim(), "192.0.2.9");
    running.stop().await.unwrap();
}

#[test]
fn chaos_defaults_to_this_servers_version_and_takes_no_block() {
    let dir = support::temp_dir("chaos-setup");
    support::check_corefile(&dir, ".:53 {\n chaos\n}\n").unwrap();
    let e = support::check_corefile(&dir, ".:53 {\n any\n chaos v1 {\n }\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3") && e.contains("chaos: takes no block"),
        "{e}"
    );
    let e = support::check_corefile(&dir, ".:53 {\n chaos\n chaos v2\n}\n").unwrap_err();
    assert!(e.contains("Corefile:3") && e.contains("only once"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_version_it_answers_cluster_dns_and_its_version() {
    let dir = support::temp_dir("chaos-default");
    let running = support::start(".:0 {\n bind 127.0.0.1\n chaos\n}\n", &dir).await;
    let addr = running.dns_addrs()[0];
    let out =
        tokio::task::spawn_blocking(move || support::dig(addr, &["+short", "CH", "TXT", "version.bind"]))
            .await
            .unwrap();
    assert_eq!(
        out.trim(),
        format!("\"cluster-dns-{}\"", env!("CARGO_PKG_VERSION"))
    );
    running.stop().await.unwrap();
}
