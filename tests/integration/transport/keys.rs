//! Server block keys on different ports (`example.com example.io:1053`, as CoreDNS allows):
//! each zone is served on its own port, by one set of directives; and `bind` by interface name.

use std::net::SocketAddr;

use crate::support;
use crate::support::upstream::free_port;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_one_block_on_two_ports_serve_each_zone_on_its_own() {
    let (p1, p2) = (free_port(), free_port());
    assert_ne!(p1, p2);
    let corefile = format!(
        "a.test:{p1} b.test:{p2} {{\n bind 127.0.0.1\n hosts {{\n  192.0.2.1 x.a.test\n  192.0.2.2 x.b.test\n }}\n}}\n"
    );
    let dir = support::temp_dir("keys");
    let running = support::start(&corefile, &dir).await;
    let mut ports: Vec<u16> = running.dns_addrs().iter().map(SocketAddr::port).collect();
    ports.sort_unstable();
    let mut want = vec![p1, p2];
    want.sort_unstable();
    assert_eq!(ports, want, "one listener per port");
    let out = tokio::task::spawn_blocking(move || {
        let at = |port: u16, name: &str| {
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            support::dig(addr, &["+noall", "+comments", "+answer", "A", name])
        };
        [
            at(p1, "x.a.test"),
            at(p1, "x.b.test"),
            at(p2, "x.b.test"),
            at(p2, "x.a.test"),
        ]
    })
    .await
    .unwrap();
    let [a_on_1, b_on_1, b_on_2, a_on_2] = out;
    assert!(
        a_on_1.contains("status: NOERROR") && a_on_1.contains("192.0.2.1"),
        "{a_on_1}"
    );
    assert!(
        b_on_2.contains("status: NOERROR") && b_on_2.contains("192.0.2.2"),
        "{b_on_2}"
    );
    // A zone is served only on its key's port.
    assert!(b_on_1.contains("status: REFUSED"), "{b_on_1}");
    assert!(a_on_2.contains("status: REFUSED"), "{a_on_2}");
    running.stop().await.unwrap();
}

/// `bind lo` listens on the loopback interface's addresses (as CoreDNS's `bind IFACE`), and
/// answers there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_by_interface_name_listens_on_its_addresses() {
    let dir = support::temp_dir("bind-iface");
    let running = support::start(
        ".:0 {\n bind lo\n hosts {\n  192.0.2.9 iface.example.org\n }\n}\n",
        &dir,
    )
    .await;
    let addrs = running.dns_addrs();
    let v4 = *addrs
        .iter()
        .find(|a| a.ip() == std::net::IpAddr::from([127, 0, 0, 1]))
        .unwrap_or_else(|| panic!("127.0.0.1 among {addrs:?}"));
    let out = tokio::task::spawn_blocking(move || support::dig(v4, &["+short", "iface.example.org"]))
        .await
        .unwrap();
    assert_eq!(out.trim(), "192.0.2.9");
    running.stop().await.unwrap();
}
