//! The body of the `rewrite_edns0` fuzz target (`fuzz/`), kept beside the code it drives so
//! `cargo test` replays its committed corpus through the same code
//! (`tests/integration/project/fuzz_corpus.rs`): a request's EDNS options rewritten by one of a few
//! `rewrite edns0 ...` rules (or its name by a `rewrite name` rule that lengthens it), then made
//! into the query a forwarder sends. Not part of the
//! server.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::OnceLock;

use hickory_proto::op::Message;
use hickory_proto::rr::{Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};

use super::Rewrite;
use crate::corefile::Corefile;
use crate::proto::{EdnsOpt, Question, Transport};

/// The rules the first byte of an input chooses from (as written in a Corefile).
pub fn rule_lines() -> Vec<String> {
    let mut lines: Vec<String> = [
        "rewrite edns0 local set 0xffee 0x61626364",
        "rewrite edns0 local replace 65518 {client_ip} revert",
        "rewrite edns0 local append 0xffee {qname}",
        "rewrite edns0 local set 0xffef {client_port}",
        "rewrite edns0 local replace 0xffee {protocol}",
        "rewrite edns0 local set 0xfff1 {server_ip}",
        "rewrite edns0 local unset 0xffee",
        "rewrite edns0 local set 8 0x0001180ac00002",
        "rewrite edns0 nsid set",
        "rewrite edns0 nsid append revert",
        "rewrite edns0 nsid unset",
        "rewrite edns0 subnet set 24 56",
        "rewrite edns0 subnet replace 32 128",
        "rewrite edns0 subnet append 0 0",
        "rewrite edns0 subnet unset",
    ]
    .map(String::from)
    .into();
    // The most data a `local` rule may carry, set and appended.
    let most = "a".repeat(super::edns0::MAX_LOCAL_DATA);
    lines.push(format!("rewrite edns0 local set 0xfff0 {most}"));
    lines.push(format!("rewrite edns0 local append 0xfff0 {most}"));
    // A name rule that grows the question's name to 249 bytes: beside a client's options that
    // fill its request, the upstream query would not fit.
    let long = ["a", "b", "c"].map(|c| c.repeat(63)).join(".");
    lines.push(format!(
        "rewrite name exact www.example.org. www.{long}.d.example.org."
    ));
    lines
}

fn rewrites() -> &'static [Rewrite] {
    static R: OnceLock<Vec<Rewrite>> = OnceLock::new();
    R.get_or_init(|| {
        rule_lines()
            .iter()
            .map(|line| {
                let cf = Corefile::parse_str(&format!(".:53 {{\n{line}\n}}\n"), Path::new("Corefile"))
                    .expect("a Corefile");
                let rule = super::setup::parse(&cf.blocks[0].directives[0]).expect("a rule");
                Rewrite::new(vec![rule])
            })
            .collect()
    })
}

/// The code of the filler option an input asks for (an experimental code, RFC 6891 §9).
pub const FILLER: u16 = 65001;

/// The EDNS options of a request as the server passes them on with its question.
fn travelling(msg: &Message) -> Vec<EdnsOpt> {
    msg.edns
        .as_ref()
        .map(crate::proto::travelling_options)
        .unwrap_or_default()
}

/// The wire size of `options` in an OPT record's data.
fn wire_size(options: &[EdnsOpt]) -> usize {
    options.iter().map(|o| 4 + o.data.len()).sum()
}

/// Arbitrary bytes as (a rule, a request's EDNS options): byte 0 picks a rule of
/// [`rule_lines`]; bytes 1 and 2 the length of a filler option (code [`FILLER`], zeros) put
/// first; bit 0 of byte 3 an IPv6 client, bit 1 TCP; the rest is the rest of the OPT record's
/// data. The request (`www.example.org. A` with that OPT record, at most 65,535 bytes) is read
/// by hickory-proto as the server reads it, the rule applied to its question, and the query
/// `forward` sends made from the result. Invariants: no panic; the options after the rewrite
/// fit an OPT record (65,535 bytes of data), and the query sent upstream is made, fits a DNS
/// message (65,535 bytes), as the request did, and carries the question and options whole.
pub fn rewrite_edns0(data: &[u8]) {
    let [pick, hi, lo, flags, rest @ ..] = data else {
        return;
    };
    let rewrites = rewrites();
    let rewrite = &rewrites[usize::from(*pick) % rewrites.len()];
    let filler = usize::from(u16::from_be_bytes([*hi, *lo]));
    let mut rdata = Vec::with_capacity(4 + filler + rest.len());
    if filler > 0 {
        rdata.extend_from_slice(&FILLER.to_be_bytes());
        rdata.extend_from_slice(&(filler as u16).to_be_bytes());
        rdata.resize(4 + filler, 0);
    }
    rdata.extend_from_slice(rest);
    let Ok(rdlen) = u16::try_from(rdata.len()) else {
        return;
    };
    let mut wire = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
    for label in ["www", "example", "org"] {
        wire.push(label.len() as u8);
        wire.extend_from_slice(label.as_bytes());
    }
    wire.extend_from_slice(&[0, 0, 1, 0, 1]);
    wire.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, 0, 0]);
    wire.extend_from_slice(&rdlen.to_be_bytes());
    wire.extend_from_slice(&rdata);
    if wire.len() > usize::from(u16::MAX) {
        return;
    }
    let Ok(msg) = Message::from_bytes(&wire) else {
        return;
    };
    let mut q = Question::new(
        Name::from_ascii("www.example.org.").expect("a name"),
        RecordType::A,
    );
    q.client = if flags & 1 == 0 {
        SocketAddr::from(([192, 0, 2, 77], 5353))
    } else {
        SocketAddr::from(([0x2001, 0xdb8, 1, 2, 3, 0, 0, 1], 5353))
    };
    q.server = Some(SocketAddr::from(([10, 96, 0, 10], 53)));
    q.transport = if flags & 2 == 0 {
        Transport::Udp
    } else {
        Transport::Tcp
    };
    q.edns_options = travelling(&msg);
    let out = rewrite.apply(&q).map_or(q, |r| r.question);
    let size = wire_size(&out.edns_options);
    assert!(
        size <= usize::from(u16::MAX),
        "options of {size} bytes after the rewrite"
    );
    let upstream = upstream_query(&out).expect("the upstream query is made");
    assert!(
        upstream.len() <= usize::from(u16::MAX),
        "an upstream query of {} bytes",
        upstream.len()
    );
    // Whole: hickory-proto drops what does not fit (the OPT record) rather than fail, so the
    // query read back carries the question and every option the rewrite left, untruncated.
    let sent = Message::from_bytes(&upstream).expect("the upstream query parses");
    assert!(!sent.metadata.truncation, "the upstream query was cut");
    assert_eq!(sent.queries.len(), 1);
    assert_eq!(sent.queries[0].name(), &out.name);
    assert_eq!(
        travelling(&sent),
        out.edns_options,
        "the upstream query lost options"
    );
}

/// The query a forwarder sends for `q`: its question and RD bit, and an OPT record carrying
/// its EDNS options as the rule left them (what `forward` builds; plugins do not import each
/// other, so the harness writes it out).
fn upstream_query(q: &Question) -> Result<Vec<u8>, hickory_proto::ProtoError> {
    use hickory_proto::op::{Edns, MessageType, OpCode, Query};
    use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
    let mut msg = Message::new(0, MessageType::Query, OpCode::Query);
    msg.metadata.recursion_desired = q.recursion_desired;
    msg.add_query(Query::query(q.name.clone(), q.qtype));
    let mut edns = Edns::new();
    edns.set_max_payload(crate::proto::MAX_UDP_PAYLOAD);
    for o in &q.edns_options {
        edns.options_mut().as_mut().push((
            EdnsCode::from(o.code),
            EdnsOption::Unknown(o.code, o.data.clone()),
        ));
    }
    msg.set_edns(edns);
    msg.to_bytes()
}
