//! The test harness (`cluster_dns::testing`, which the benches and fuzz targets use) builds
//! through the server's own builder: a Corefile with `bufsize` and `view` answers the same
//! bytes through the harness as through the binary over a real UDP socket.

use std::net::SocketAddr;
use std::time::Duration;

use cluster_dns::proto::Transport;
use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};

use crate::runtime::cli::Server;
use crate::support;

/// Two blocks of one zone: clients at 127.0.0.1 get the first (a 512-byte UDP limit), the
/// rest the second (4096), over 150 addresses of one name (about 2,450 bytes).
fn corefile() -> String {
    let mut hosts = String::new();
    for i in 0..150 {
        hosts.push_str(&format!("  10.1.{}.{} many.example.org\n", i / 250, i % 250 + 1));
    }
    format!(
        ".:0 {{\n bind 127.0.0.1\n view loopback-one {{\n  expr client_ip() == '127.0.0.1'\n }}\n bufsize 512\n hosts {{\n{hosts} }}\n}}\n.:0 {{\n bind 127.0.0.1\n bufsize 4096\n hosts {{\n{hosts} }}\n}}\n"
    )
}

/// `many.example.org A` with EDNS offering 4096 bytes, as wire bytes.
fn request(id: u16) -> Vec<u8> {
    let mut q = support::query_edns("many.example.org.", RecordType::A, 4096);
    q.metadata.id = id;
    q.to_bytes().unwrap()
}

/// The binary's UDP reply to `bytes`, sent from `from`.
fn over_udp(server: SocketAddr, from: &str, bytes: &[u8]) -> Vec<u8> {
    let socket = std::net::UdpSocket::bind(format!("{from}:0")).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket.send_to(bytes, server).unwrap();
    let mut buf = vec![0u8; 65_535];
    let (n, _) = socket.recv_from(&mut buf).expect("a reply within 2 s");
    buf.truncate(n);
    buf
}

#[test]
fn bufsize_and_view_answer_the_same_through_the_harness_and_the_binary() {
    let dir = support::temp_dir("harness");
    let path = dir.join("Corefile");
    std::fs::write(&path, corefile()).unwrap();
    let zone = cluster_dns::testing::zone_from_yaml("").unwrap();
    let handler = cluster_dns::testing::handler_on_zone(&corefile(), &zone, true).unwrap();
    let server = Server::start(&path);
    for (from, id, limit) in [("127.0.0.1", 7, 512), ("127.0.0.2", 8, 4096)] {
        let bytes = request(id);
        let binary = over_udp(server.addr, from, &bytes);
        let client: SocketAddr = format!("{from}:5353").parse().unwrap();
        let harness = handler.answer_wire(&bytes, client, Transport::Udp).unwrap();
        assert_eq!(harness, binary, "from {from}: the harness and the binary differ");
        let reply = Message::from_bytes(&binary).unwrap();
        assert_eq!(
            reply.edns.as_ref().map(|e| e.max_payload()),
            Some(limit),
            "from {from}"
        );
        assert!(
            binary.len() <= usize::from(limit),
            "from {from}: {} bytes",
            binary.len()
        );
        assert_eq!(reply.metadata.truncation, limit == 512, "from {from}: TC");
    }
    assert!(server.stop());
}
