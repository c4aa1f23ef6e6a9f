//! `multisocket N` (CoreDNS 1.12+): the listener binds N UDP sockets on its port (the kernel's
//! socket table shows them), and questions over each of many client ports are answered.

use std::net::SocketAddr;

use crate::support;

/// How many UDP sockets of this network namespace are bound to local `port` (the kernel's
/// `/proc/net/udp` and `udp6` tables: the local address is the second field, `ADDR:PORT` in
/// hexadecimal).
fn udp_sockets_on(port: u16) -> usize {
    let want = format!(":{port:04X}");
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|local| local.ends_with(&want))
        })
        .count()
}

async fn sockets_with(block: &str) -> (usize, SocketAddr, cluster_dns::app::Running) {
    let dir = support::temp_dir("multisocket");
    let corefile = format!(".:0 {{\n bind 127.0.0.1\n{block} whoami\n}}\n");
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    (udp_sockets_on(addr.port()), addr, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_that_many_sockets_and_answers_on_them() {
    let (n, addr, running) = sockets_with(" multisocket 5\n").await;
    assert_eq!(n, 5);
    // Clients on 20 source ports are spread over the sockets; every one is answered.
    let out = tokio::task::spawn_blocking(move || {
        (0..20)
            .map(|_| support::dig_status(&support::dig(addr, &["+notcp", "whoami.example."])))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    assert!(out.iter().all(|s| s == "NOERROR"), "{out:?}");
    running.stop().await.unwrap();

    let (n, _, running) = sockets_with(" multisocket 1\n").await;
    assert_eq!(n, 1);
    running.stop().await.unwrap();
}

#[test]
fn a_count_out_of_range_is_refused_at_its_line() {
    let dir = support::temp_dir("multisocket-check");
    let e = support::check_corefile(&dir, ".:53 {\n multisocket 2048\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:2: multisocket: '2048' is not a number of sockets from 1 to 1024"),
        "{e}"
    );
}
