//! `view`: two blocks for the same zone and port, told apart by their views (split horizon),
//! checked with `dig -b` from two loopback addresses; a view on the question type; and the
//! Corefile errors.

use std::net::SocketAddr;

use crate::support;

const COREFILE: &str = ".:0 {
 bind 127.0.0.1
 prometheus 127.0.0.1:0
 view internal {
  expr incidr(client_ip(), '127.0.0.2/32')
 }
 hosts {
  10.0.0.1 www.example.org
 }
}
.:0 {
 bind 127.0.0.1
 view txt {
  expr type() in ['TXT', 'SRV'] && name() endsWith 'example.org.'
 }
 template IN TXT example.org {
  answer \"{{ .Name }} 60 IN TXT from-the-txt-view\"
 }
}
.:0 {
 bind 127.0.0.1
 prometheus 127.0.0.1:0
 hosts {
  192.0.2.1 www.example.org
 }
}
";

fn short(server: SocketAddr, from: &str, qtype: &str) -> String {
    let (at, port) = (format!("@{}", server.ip()), server.port().to_string());
    let out = support::run_dig(&[
        &at,
        "-p",
        &port,
        "-b",
        from,
        "+time=2",
        "+tries=1",
        "+short",
        qtype,
        "www.example.org",
    ]);
    assert!(out.status.success(), "dig failed");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_of_one_zone_are_told_apart_by_their_views() {
    let dir = support::temp_dir("view");
    let running = support::start(COREFILE, &dir).await;
    let addrs = running.dns_addrs();
    assert_eq!(addrs.len(), 1, "one listener shared by the three blocks");
    let addr = addrs[0];
    let got = tokio::task::spawn_blocking(move || {
        [
            short(addr, "127.0.0.2", "A"),
            short(addr, "127.0.0.1", "A"),
            short(addr, "127.0.0.3", "A"),
            short(addr, "127.0.0.1", "TXT"),
            // The internal view comes first: its hosts has no TXT (NODATA).
            short(addr, "127.0.0.2", "TXT"),
        ]
    })
    .await
    .unwrap();
    assert_eq!(got[0], "10.0.0.1", "127.0.0.2 sees the internal view");
    assert_eq!(got[1], "192.0.2.1", "others see the default block");
    assert_eq!(got[2], "192.0.2.1");
    assert_eq!(got[3], "\"from-the-txt-view\"");
    assert_eq!(got[4], "");
    // Each block's requests are counted under its view's name (`view=""` without one).
    let m = crate::support::scrape(running.http_addr("metrics").expect("/metrics listener")).await;
    let requests =
        |view: &str| crate::support::sum(&m, "coredns_dns_requests_total", &[&format!("view=\"{view}\"")]);
    assert_eq!(requests("internal"), 2.0);
    assert_eq!(requests(""), 2.0);
    running.stop().await.unwrap();
}

#[test]
fn view_errors_name_the_line() {
    let dir = support::temp_dir("view-config");
    let check = |text: &str| support::check_corefile(&dir, text);
    let e = check(".:53 {\n}\n.:53 {\n view v {\n  expr type() == 'A'\n }\n}\n").unwrap_err();
    assert!(e.contains("Corefile:3") && e.contains("already served"), "{e}");
    let e = check(".:53 {\n view v {\n  expr server_ip() == 'y'\n }\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3") && e.contains("not a supported function"),
        "{e}"
    );
    let e = check(".:53 {\n view v\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:2") && e.contains("at least one 'expr"),
        "{e}"
    );
    assert!(check(".:53 {\n view v {\n  expr type() == 'A'\n }\n}\n.:53 {\n}\n").is_ok());
}
