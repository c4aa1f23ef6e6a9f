//! dnstap's protobuf encoding (dnstap.proto, dnstap.info), written by hand: a `Dnstap` of type
//! MESSAGE carrying one `Message`. Only the fields cluster-dns sends are here; every field is
//! a varint, a fixed32 or a length-delimited byte string, so a few helpers cover them all.

use std::net::{IpAddr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

use super::extra::Extra;
use crate::plugin::kit::{TapKind, TapMessage};

/// Wire type 0: varint.
const VARINT: u64 = 0;
/// Wire type 2: length-delimited.
const BYTES: u64 = 2;
/// Wire type 5: 32-bit little-endian.
const FIXED32: u64 = 5;

/// `Dnstap.Type.MESSAGE`.
const DNSTAP_MESSAGE: u64 = 1;

/// The fields every message of one output carries: `identity`, `version`, `extra`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// `identity` (the host name unless configured).
    pub identity: Vec<u8>,
    /// `version`.
    pub version: Vec<u8>,
    /// `extra`, when configured: its `{/LABEL}` placeholders are filled per message.
    pub extra: Option<Extra>,
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u64, wire: u64) {
    varint(out, (field << 3) | wire);
}

fn uint(out: &mut Vec<u8>, field: u64, v: u64) {
    key(out, field, VARINT);
    varint(out, v);
}

fn bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    key(out, field, BYTES);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn fixed32(out: &mut Vec<u8>, field: u64, v: u32) {
    key(out, field, FIXED32);
    out.extend_from_slice(&v.to_le_bytes());
}

/// `Message.Type` of `kind`.
fn message_type(kind: TapKind) -> u64 {
    match kind {
        TapKind::ClientQuery => 5,
        TapKind::ClientResponse => 6,
        TapKind::ForwarderQuery => 7,
        TapKind::ForwarderResponse => 8,
    }
}

/// The address bytes and `SocketFamily` (INET = 1, INET6 = 2) of `ip`: an IPv4-mapped IPv6
/// address is the IPv4 address it carries (4 bytes), as dnstap.proto asks.
fn family_and_bytes(ip: IpAddr) -> (u64, Vec<u8>) {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => (1, v4.octets().to_vec()),
        IpAddr::V6(v6) => (2, v6.octets().to_vec()),
    }
}

fn time(t: SystemTime) -> (u64, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs(), d.subsec_nanos())
}

/// The `Message` of `m` (its wire messages only when `full`).
fn message(m: &TapMessage<'_>, full: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    uint(&mut out, 1, message_type(m.kind));
    let family = m
        .query_address
        .or(m.response_address)
        .map(|a| family_and_bytes(a.ip()).0);
    if let Some(f) = family {
        uint(&mut out, 2, f);
    }
    uint(&mut out, 3, if m.tcp { 2 } else { 1 });
    let mut ports = Vec::new();
    if let Some(a) = m.query_address {
        bytes(&mut out, 4, &family_and_bytes(a.ip()).1);
        ports.push((6, a));
    }
    if let Some(a) = m.response_address {
        bytes(&mut out, 5, &family_and_bytes(a.ip()).1);
        ports.push((7, a));
    }
    for (field, a) in ports {
        uint(&mut out, field, u64::from(SocketAddr::port(&a)));
    }
    let (sec, nsec) = time(m.query_time);
    uint(&mut out, 8, sec);
    fixed32(&mut out, 9, nsec);
    if full && let Some(q) = m.query_message {
        bytes(&mut out, 10, q);
    }
    if let Some(t) = m.response_time {
        let (sec, nsec) = time(t);
        uint(&mut out, 12, sec);
        fixed32(&mut out, 13, nsec);
    }
    if full && let Some(r) = m.response_message {
        bytes(&mut out, 14, r);
    }
    out
}

/// One `Dnstap` payload: `header`'s fields, type MESSAGE and the `Message` of `m`.
pub fn dnstap(header: &Header, m: &TapMessage<'_>, full: bool) -> Vec<u8> {
    let msg = message(m, full);
    let mut out = Vec::with_capacity(msg.len() + header.identity.len() + header.version.len() + 16);
    bytes(&mut out, 1, &header.identity);
    bytes(&mut out, 2, &header.version);
    if let Some(extra) = &header.extra {
        bytes(&mut out, 3, &extra.render(m.metadata));
    }
    bytes(&mut out, 14, &msg);
    uint(&mut out, 15, DNSTAP_MESSAGE);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_client_query_encodes_as_dnstap_proto_says() {
        let m = TapMessage {
            kind: TapKind::ClientQuery,
            tcp: false,
            query_address: Some("[::ffff:10.0.0.1]:5353".parse().unwrap()),
            response_address: None,
            query_time: UNIX_EPOCH + Duration::new(300, 7),
            response_time: None,
            query_message: Some(b"\x01\x02"),
            response_message: None,
            metadata: None,
        };
        let header = Header {
            identity: b"h".to_vec(),
            version: b"v".to_vec(),
            extra: None,
        };
        let got = dnstap(&header, &m, true);
        let msg = [
            0x08, 5, // type CLIENT_QUERY
            0x10, 1, // INET
            0x18, 1, // UDP
            0x22, 4, 10, 0, 0, 1, // query_address
            0x30, 0xe9, 0x29, // query_port 5353
            0x40, 0xac, 0x02, // query_time_sec 300
            0x4d, 7, 0, 0, 0, // query_time_nsec
            0x52, 2, 1, 2, // query_message
        ];
        let mut want = vec![0x0a, 1, b'h', 0x12, 1, b'v', 0x72, msg.len() as u8];
        want.extend_from_slice(&msg);
        want.extend_from_slice(&[0x78, 1]);
        assert_eq!(got, want);
        // Without `full`, no wire message.
        assert!(dnstap(&header, &m, false).len() == want.len() - 4);
    }
}
