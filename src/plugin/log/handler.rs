//! The `log` observer ([`QueryLog`]): one line per query of its names and classes, in its
//! format (CoreDNS's placeholders, [`format_entry`]) or as JSON ([`json_line`]).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Metadata, OpCode, ResponseCode};
use hickory_proto::rr::RecordType;

use super::config::LogConfig;
use crate::chain::{Exchange, Observer};
use crate::proto::{QueryMetadata, transport_label};
use crate::telemetry::rcode_label;

/// One query and its answer, as the log line shows it.
#[derive(Debug, Clone)]
pub struct LogEntry<'a> {
    /// Client address.
    pub remote: SocketAddr,
    /// Message ID.
    pub id: u16,
    /// Query type (`A`).
    pub qtype: &'a str,
    /// Query class (`IN`).
    pub qclass: &'a str,
    /// Query name as asked, absolute.
    pub name: &'a str,
    /// `udp` or `tcp`.
    pub proto: &'a str,
    /// Request size.
    pub size: usize,
    /// DO bit.
    pub dnssec_ok: bool,
    /// Advertised UDP size (512 without EDNS).
    pub bufsize: u16,
    /// Response rcode name.
    pub rcode: &'a str,
    /// Response flags, comma-separated (`qr,aa,rd`).
    pub rflags: &'a str,
    /// Response size.
    pub rsize: usize,
    /// Time to answer.
    pub duration: Duration,
    /// Opcode name.
    pub opcode: &'a str,
    /// What the plugins published about the query (`{/LABEL}`), in a block with `metadata`.
    pub metadata: Option<&'a QueryMetadata>,
}

/// The `log` plugin of one server block: which queries it logs and in what format. Lines go to
/// stdout with CoreDNS's `[INFO] ` prefix, one write per line.
#[derive(Debug, Clone)]
pub struct QueryLog {
    config: LogConfig,
    names: Vec<hickory_proto::rr::Name>,
}

impl QueryLog {
    /// The log for `config` (names that are not valid DNS names were refused by `parse`).
    pub fn new(config: &LogConfig) -> Self {
        Self {
            names: config
                .names
                .iter()
                .filter_map(|n| hickory_proto::rr::Name::from_ascii(n).ok())
                .map(|n| n.to_lowercase())
                .collect(),
            config: config.clone(),
        }
    }

    /// True when a query for `lower` (lower-case) answered with `rcode` is logged.
    pub fn wants(&self, lower: &hickory_proto::rr::Name, rcode: ResponseCode, nodata: bool) -> bool {
        self.config.classes.includes(rcode, nodata)
            && (self.names.is_empty() || self.names.iter().any(|n| n.zone_of(lower)))
    }

    /// The line for `e`.
    pub fn line(&self, e: &LogEntry<'_>) -> String {
        format_entry(&self.config.format, e)
    }

    /// Writes the line for `e` to stdout: CoreDNS's `[INFO] ` line, or with
    /// `--log-format json` one JSON object ([`json_line`]).
    pub fn write(&self, e: &LogEntry<'_>) {
        use std::io::Write as _;
        let mut line = if crate::telemetry::logs::json() {
            json_line(e, &self.line(e))
        } else {
            let mut line = String::with_capacity(160);
            line.push_str("[INFO] ");
            line.push_str(&self.line(e));
            line
        };
        line.push('\n');
        let _ = std::io::stdout().lock().write_all(line.as_bytes());
    }
}

impl Observer for QueryLog {
    fn name(&self) -> &'static str {
        "log"
    }

    /// Every query's line needs its question: a block with `log` is never replayed.
    fn needs_every_question(&self) -> bool {
        true
    }

    fn observe(&self, x: &Exchange<'_>) {
        let Some((name, qtype, qclass)) = x.query else {
            return;
        };
        if !self.wants(&name.to_lowercase(), x.rcode, x.answers == 0) {
            return;
        }
        if let Some(md) = x.metadata {
            let kind = response_type(qtype, x.rcode, x.answers);
            md.set("log/type", kind);
            md.set("log/class", response_class(kind));
        }
        let qtype = qtype.to_string();
        let qclass = qclass.to_string();
        let name = name.to_string();
        let rflags = flags(x.response);
        self.write(&LogEntry {
            remote: x.client,
            id: x.request.id,
            qtype: &qtype,
            qclass: &qclass,
            name: &name,
            proto: transport_label(x.proto),
            size: x.request_size,
            dnssec_ok: x.dnssec_ok,
            bufsize: x.bufsize,
            rcode: rcode_label(x.rcode),
            rflags: &rflags,
            rsize: x.response_size,
            duration: x.elapsed,
            opcode: opcode_label(x.request.op_code),
            metadata: x.metadata,
        });
    }
}

/// The query line for `e` as a JSON object, in the shape of the process's other JSON lines
/// (`time`, `level`, `target`, `plugin`, `message`: the line `format` makes) with each field
/// of CoreDNS's common log format as its own key.
pub fn json_line(e: &LogEntry<'_>, message: &str) -> String {
    let time = humantime_now();
    serde_json::json!({
        "time": time,
        "level": "info",
        "target": "cluster_dns::plugin::log",
        "plugin": "log",
        "message": message,
        "remote": e.remote.ip().to_string(),
        "port": e.remote.port(),
        "id": e.id,
        "type": e.qtype,
        "class": e.qclass,
        "name": e.name,
        "proto": e.proto,
        "size": e.size,
        "do": e.dnssec_ok,
        "bufsize": e.bufsize,
        "rcode": e.rcode,
        "rflags": e.rflags,
        "rsize": e.rsize,
        "duration": e.duration.as_secs_f64(),
        "opcode": e.opcode,
    })
    .to_string()
}

/// The time now as RFC 3339 UTC with microseconds (as the process's other JSON lines write it).
fn humantime_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    k8s_openapi::jiff::Timestamp::from_microsecond(i64::try_from(now.as_micros()).unwrap_or(0))
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// CoreDNS's `log/type` of a response (its `response.Typify`, for the responses this server
/// sends): META for transfers, NOERROR with answers, NXDOMAIN, NODATA (NOERROR without answers),
/// SERVERERROR for SERVFAIL, OTHERERROR for the rest.
fn response_type(qtype: RecordType, rcode: ResponseCode, answers: usize) -> &'static str {
    match rcode {
        _ if matches!(qtype, RecordType::AXFR | RecordType::IXFR) => "META",
        ResponseCode::NoError if answers > 0 => "NOERROR",
        ResponseCode::NoError => "NODATA",
        ResponseCode::NXDomain if answers == 0 => "NXDOMAIN",
        ResponseCode::ServFail => "SERVERERROR",
        _ => "OTHERERROR",
    }
}

/// CoreDNS's `log/class` of a `log/type` (its `response.Classify`).
fn response_class(kind: &str) -> &'static str {
    match kind {
        "NOERROR" | "META" => "success",
        "NXDOMAIN" | "NODATA" => "denial",
        _ => "error",
    }
}

/// The response flags as CoreDNS's `{>rflags}` writes them.
fn flags(m: &Metadata) -> String {
    let mut out = Vec::with_capacity(6);
    out.push("qr");
    for (set, name) in [
        (m.authoritative, "aa"),
        (m.truncation, "tc"),
        (m.recursion_desired, "rd"),
        (m.recursion_available, "ra"),
        (m.authentic_data, "ad"),
        (m.checking_disabled, "cd"),
    ] {
        if set {
            out.push(name);
        }
    }
    out.join(",")
}

fn opcode_label(op: OpCode) -> &'static str {
    match op {
        OpCode::Query => "QUERY",
        OpCode::Status => "STATUS",
        OpCode::Notify => "NOTIFY",
        OpCode::Update => "UPDATE",
        _ => "OTHER",
    }
}

/// Formats `e` with `format` (CoreDNS placeholders; unknown ones are left as written).
pub fn format_entry(format: &str, e: &LogEntry<'_>) -> String {
    let mut out = String::with_capacity(128);
    let mut rest = format;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let key = &rest[start + 1..start + end];
        match key {
            "remote" => {
                let _ = write!(out, "{}", e.remote.ip());
            }
            "port" => {
                let _ = write!(out, "{}", e.remote.port());
            }
            ">id" => {
                let _ = write!(out, "{}", e.id);
            }
            "type" => out.push_str(e.qtype),
            "class" => out.push_str(e.qclass),
            "name" => out.push_str(e.name),
            "proto" => out.push_str(e.proto),
            "size" => {
                let _ = write!(out, "{}", e.size);
            }
            ">do" => out.push_str(if e.dnssec_ok { "true" } else { "false" }),
            ">bufsize" => {
                let _ = write!(out, "{}", e.bufsize);
            }
            "rcode" => out.push_str(e.rcode),
            ">rflags" => out.push_str(e.rflags),
            "rsize" => {
                let _ = write!(out, "{}", e.rsize);
            }
            "duration" => {
                let _ = write!(out, "{:.9}s", e.duration.as_secs_f64());
                // CoreDNS prints Go's duration: trim trailing zeros of the fraction.
                while out.ends_with("0s") && !out.ends_with(".0s") {
                    out.truncate(out.len() - 2);
                    out.push('s');
                }
            }
            ">opcode" => out.push_str(e.opcode),
            // A metadata label: its value, or "-" when no plugin set it (as CoreDNS).
            label if label.len() > 1 && label.starts_with('/') => {
                match e.metadata.and_then(|md| md.get(&label[1..])) {
                    Some(v) => out.push_str(&v),
                    None => out.push('-'),
                }
            }
            _ => out.push_str(&rest[start..start + end + 1]),
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests;
