//! `whoami` over real sockets with `dig` (the client's address and port in the additional
//! section, `_udp` or `_tcp` by transport, IPv4 and IPv6, never one client's answer to
//! another), and `debug` turning the binary's own messages to debug level.

use std::net::SocketAddr;
use std::process::Command;

use crate::runtime::cli::Server;
use crate::support::{self, dig_records};

/// dig from `addr`'s family with `args`; the additional section's records.
fn additional(addr: SocketAddr, args: &[&str]) -> Vec<String> {
    let mut all = vec!["+noall", "+additional", "+comments"];
    all.extend_from_slice(args);
    dig_records(&support::dig(addr, &all))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whoami_answers_each_client_with_its_own_address_and_port() {
    let dir = support::temp_dir("whoami");
    let running = support::start(".:0 {\n bind 127.0.0.1 ::1\n whoami\n}\n", &dir).await;
    let addrs = running.dns_addrs();
    let v4 = *addrs.iter().find(|a| a.is_ipv4()).unwrap();
    let v6 = *addrs.iter().find(|a| a.is_ipv6()).unwrap();
    let (udp, tcp, six, other) = tokio::task::spawn_blocking(move || {
        (
            additional(v4, &["-b", "127.0.0.1#45101", "example.org"]),
            additional(v4, &["+tcp", "example.org"]),
            additional(v6, &["-b", "::1#45102", "AAAA", "example.org"]),
            additional(v4, &["-b", "127.0.0.2#45103", "example.org"]),
        )
    })
    .await
    .unwrap();
    assert_eq!(
        udp,
        [
            "example.org. 0 IN A 127.0.0.1",
            "_udp.example.org. 0 IN SRV 0 0 45101 ."
        ],
    );
    assert_eq!(tcp.len(), 2, "{tcp:?}");
    assert!(tcp[1].starts_with("_tcp.example.org. 0 IN SRV 0 0 "), "{tcp:?}");
    assert_eq!(
        six,
        [
            "example.org. 0 IN AAAA ::1",
            "_udp.example.org. 0 IN SRV 0 0 45102 ."
        ]
    );
    // Another client gets its own address, not the first one's (never memoized).
    assert_eq!(
        other,
        [
            "example.org. 0 IN A 127.0.0.2",
            "_udp.example.org. 0 IN SRV 0 0 45103 ."
        ],
    );
    running.stop().await.unwrap();
}

/// `debug` sets the binary's default log level for its own messages to debug; without it they
/// stay at info.
#[test]
fn debug_turns_the_servers_own_messages_to_debug_level() {
    let dir = support::temp_dir("debug");
    for (debug, want) in [(true, true), (false, false)] {
        let corefile = dir.join(format!("Corefile.{debug}"));
        let line = if debug { " debug\n" } else { "" };
        std::fs::write(&corefile, format!(".:0 {{\n bind 127.0.0.1\n{line} whoami\n}}\n")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cluster-dns"));
        cmd.env_remove("RUST_LOG").arg("-conf").arg(&corefile);
        let mut server = Server::start_cmd(cmd);
        // The TCP listener's limits are logged at debug level once it is up.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let lines = server.log_lines();
        let has_debug = lines
            .iter()
            .any(|l| l.contains("DEBUG") && l.contains("TCP limits"));
        assert_eq!(has_debug, want, "debug {debug}: {lines:#?}");
        assert!(server.stop());
    }
}
