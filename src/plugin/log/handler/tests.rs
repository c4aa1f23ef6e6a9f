//! The tests of the `log` observer (`handler.rs`), on configurations its setup (`setup.rs`)
//! parses: a file of their own, so that the handler itself never imports the setup.

use std::path::Path;

use super::super::config::{COMMON_FORMAT, Classes};
use super::super::setup::parse;
use super::*;
use crate::corefile::Corefile;
use crate::corefile::CorefileError;

fn cfg(body: &str) -> Result<LogConfig, CorefileError> {
    let cf = Corefile::parse_str(&format!(".:53 {{\n{body}\n}}\n"), Path::new("Corefile"))?;
    parse(&cf.blocks[0].directives[0])
}

#[test]
fn common_format_line() {
    let e = LogEntry {
        remote: "10.0.0.1:53952".parse().unwrap(),
        id: 1233,
        qtype: "A",
        qclass: "IN",
        name: "example.org.",
        proto: "udp",
        size: 45,
        dnssec_ok: false,
        bufsize: 1232,
        rcode: "NOERROR",
        rflags: "qr,aa,rd",
        rsize: 121,
        duration: Duration::from_nanos(151_000),
        opcode: "QUERY",
        metadata: None,
    };
    assert_eq!(
        format_entry(COMMON_FORMAT, &e),
        "10.0.0.1:53952 - 1233 \"A IN example.org. udp 45 false 1232\" NOERROR qr,aa,rd 121 0.000151s"
    );
    assert_eq!(format_entry("{name} {nope}", &e), "example.org. {nope}");
    // Metadata labels: "-" when unset or without `metadata`, the value otherwise.
    assert_eq!(format_entry("{/kubernetes/client-namespace}", &e), "-");
    let md = QueryMetadata::default();
    md.set("kubernetes/client-namespace", "ns-a");
    let e = LogEntry {
        metadata: Some(&md),
        ..e
    };
    assert_eq!(
        format_entry("{name} {/kubernetes/client-namespace} {/forward/upstream}", &e),
        "example.org. ns-a -"
    );
}

#[test]
fn response_types_and_classes() {
    for (qtype, rcode, answers, kind, class) in [
        (RecordType::A, ResponseCode::NoError, 1, "NOERROR", "success"),
        (RecordType::A, ResponseCode::NoError, 0, "NODATA", "denial"),
        (RecordType::A, ResponseCode::NXDomain, 0, "NXDOMAIN", "denial"),
        (RecordType::A, ResponseCode::ServFail, 0, "SERVERERROR", "error"),
        (RecordType::A, ResponseCode::Refused, 0, "OTHERERROR", "error"),
        (RecordType::AXFR, ResponseCode::NoError, 9, "META", "success"),
    ] {
        assert_eq!(response_type(qtype, rcode, answers), kind);
        assert_eq!(response_class(kind), class);
    }
}

#[test]
fn syntax() {
    let c = cfg(" log").unwrap();
    assert_eq!((c.names.len(), c.classes), (0, Classes::ALL));
    let c = cfg(" log example.org {\n  class denial error\n }").unwrap();
    assert_eq!(c.names, ["example.org."]);
    assert!(
        !c.classes.includes(ResponseCode::NoError, false)
            && c.classes.includes(ResponseCode::NXDomain, false)
    );
    // NODATA is a denial, as CoreDNS classes it.
    assert!(c.classes.includes(ResponseCode::NoError, true));
    assert!(
        cfg(" log {\n  class sometimes\n }")
            .unwrap_err()
            .to_string()
            .contains("Corefile:2")
    );
    assert!(cfg(" log {name} extra").is_err());
}

#[test]
fn response_flags_in_coredns_order() {
    let mut m = Metadata::new(1, hickory_proto::op::MessageType::Response, OpCode::Query);
    m.authoritative = true;
    m.recursion_desired = true;
    m.truncation = true;
    assert_eq!(flags(&m), "qr,aa,tc,rd");
}
