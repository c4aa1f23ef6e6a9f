//! The whole query path on arbitrary bytes, against the conformance fixture's cluster: the
//! server must never panic, and every reply must parse, echo the ID, set QR and fit the UDP
//! limit it promised.
#![no_main]

use std::net::SocketAddr;
use std::sync::OnceLock;

use cluster_dns::proto::Transport;
use cluster_dns::server::DnsHandler;
use hickory_proto::op::Message;
use hickory_proto::serialize::binary::BinDecodable;
use libfuzzer_sys::fuzz_target;

fn handler() -> &'static DnsHandler {
    static H: OnceLock<DnsHandler> = OnceLock::new();
    H.get_or_init(|| cluster_dns::testing::fixture_handler().expect("fixture handler"))
}

fuzz_target!(|data: &[u8]| {
    let src: SocketAddr = "127.0.0.1:5353".parse().unwrap();
    for protocol in [Transport::Udp, Transport::Tcp] {
        if let Some(reply) = handler().answer_wire(data, src, protocol) {
            let m = Message::from_bytes(&reply).expect("our reply parses");
            assert_eq!(&reply[..2], &data[..2], "id echoed");
            assert!(m.metadata.message_type == hickory_proto::op::MessageType::Response);
            if matches!(protocol, Transport::Udp) {
                assert!(reply.len() <= 1232, "reply of {} bytes over UDP", reply.len());
            }
        }
    }
});
