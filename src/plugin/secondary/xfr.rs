//! The client side of a zone transfer over TCP: one request to one primary (an SOA check, an
//! AXFR, RFC 5936, or an IXFR, RFC 1995) and the records of its response, read message by
//! message until the response is complete, under bounds on time, messages and records so a
//! primary that never ends, or sends without end, costs a bounded amount.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::plugin::kit::serial_after;
use crate::plugin::kit::tsig::{ResponseCheck, TsigError, TsigKey, unix_now};

/// How long a whole exchange (connect, request, every message) may take.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The most records one transfer may bring (a cluster zone of 10,000 Services and 150,000
/// endpoints is about 400,000).
pub const MAX_RECORDS: usize = 4_000_000;

/// Why a transfer brought no usable response.
#[derive(Debug, thiserror::Error)]
pub enum XfrError {
    /// Connecting, writing or reading failed.
    #[error("{primary}: {source}")]
    Io {
        /// The primary.
        primary: SocketAddr,
        /// What the socket said.
        source: std::io::Error,
    },
    /// The exchange took longer than [`EXCHANGE_TIMEOUT`].
    #[error("{primary}: no complete response within {}s", EXCHANGE_TIMEOUT.as_secs())]
    Timeout {
        /// The primary.
        primary: SocketAddr,
    },
    /// The primary closed the connection before the response was complete.
    #[error("{primary}: the connection closed after {records} records, before the closing SOA")]
    BrokeOff {
        /// The primary.
        primary: SocketAddr,
        /// Records read by then.
        records: usize,
    },
    /// A message, or the sequence of records, is not a valid response to the request.
    #[error("{primary}: {reason}")]
    Malformed {
        /// The primary.
        primary: SocketAddr,
        /// What is wrong.
        reason: String,
    },
    /// The request was signed and a message of the response fails its check (RFC 8945).
    #[error("{primary}: TSIG: {source}")]
    Tsig {
        /// The primary.
        primary: SocketAddr,
        /// What failed.
        source: TsigError,
    },
    /// The primary answered with an error rcode (REFUSED, NOTAUTH, SERVFAIL...).
    #[error("{primary}: answered {rcode}")]
    Rcode {
        /// The primary.
        primary: SocketAddr,
        /// Its rcode.
        rcode: ResponseCode,
    },
}

impl XfrError {
    /// Its kind as a metric label: `unreachable`, `timeout`, `rcode`, `tsig` or `malformed`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Io { .. } | Self::BrokeOff { .. } => "unreachable",
            Self::Timeout { .. } => "timeout",
            Self::Rcode { .. } => "rcode",
            Self::Tsig { .. } => "tsig",
            Self::Malformed { .. } => "malformed",
        }
    }
}

/// The serial of an SOA record; `None` for another record.
pub fn serial_of(r: &Record) -> Option<u32> {
    match &r.data {
        RData::SOA(soa) => Some(soa.serial),
        _ => None,
    }
}

/// Where a response stands after the records read so far.
#[derive(Debug, PartialEq, Eq)]
enum Progress {
    /// More records must come.
    More,
    /// The response is complete.
    Done,
    /// The records are no valid response.
    Invalid(&'static str),
}

/// Whether `records`, the answer records of a response to a `qtype` request (from a client
/// holding `held`, for IXFR), make a complete response.
fn progress(qtype: RecordType, held: Option<u32>, records: &[Record]) -> Progress {
    let Some(first) = records.first() else {
        return Progress::More;
    };
    let Some(newest) = serial_of(first) else {
        return Progress::Invalid("the response does not start with the zone's SOA");
    };
    if qtype == RecordType::SOA {
        return Progress::Done;
    }
    // IXFR: a lone SOA no later than the one held says the zone is up to date (RFC 1995
    // section 2). A lone SOA of a later serial may be the start of either form: wait.
    if qtype == RecordType::IXFR && records.len() == 1 && held.is_some_and(|h| !serial_after(newest, h)) {
        return Progress::Done;
    }
    if records.len() < 2 {
        return Progress::More;
    }
    let incremental = qtype == RecordType::IXFR && serial_of(&records[1]).is_some();
    if !incremental {
        // AXFR, or IXFR answered in AXFR form: the SOA again closes it.
        return match records[1..].iter().position(|r| serial_of(r).is_some()) {
            None => Progress::More,
            Some(i) if i + 2 == records.len() => Progress::Done,
            Some(_) => Progress::Invalid("records follow the closing SOA"),
        };
    }
    // Incremental: (old SOA, removed..., new SOA, added...)*, then the newest SOA again.
    let mut at = 1;
    loop {
        // `records[at]` is an SOA: the start of a difference, or the closing SOA.
        let Some(this) = records.get(at).and_then(serial_of) else {
            return Progress::Invalid("a difference sequence does not start with an SOA");
        };
        if this == newest && at > 1 {
            return if at + 1 == records.len() {
                Progress::Done
            } else {
                Progress::Invalid("records follow the closing SOA")
            };
        }
        // Removed records, up to the version's new SOA, then added records, up to the next SOA.
        for _ in 0..2 {
            at += 1;
            match records[at..].iter().position(|r| serial_of(r).is_some()) {
                None => return Progress::More,
                Some(i) => at += i,
            }
        }
    }
}

/// The request `id`: `qtype` for `zone`, with the SOA held (IXFR) in its authority section.
pub(super) fn request(id: u16, zone: &Name, qtype: RecordType, held: Option<&Record>) -> Message {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    let mut q = Query::query(zone.clone(), qtype);
    q.set_query_class(DNSClass::IN);
    m.add_query(q);
    if let Some(soa) = held.filter(|_| qtype == RecordType::IXFR) {
        m.add_authority(soa.clone());
    }
    m
}

/// One TCP connection to a primary, for an SOA check and the transfer after it: behind a
/// Service address (the central replicas of the cluster zone) both then reach the same
/// replica, so the transfer is of the serial the check saw (RFC 7766 lets a connection carry
/// several requests).
pub struct Session {
    primary: SocketAddr,
    stream: TcpStream,
    /// The key each request is signed with, and each response checked against.
    tsig: Option<TsigKey>,
}

impl Session {
    /// Connects to `primary`; its requests signed with `tsig` when given.
    pub async fn open(primary: SocketAddr, tsig: Option<TsigKey>) -> Result<Self, XfrError> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(primary))
            .await
            .map_err(|_| XfrError::Timeout { primary })?
            .map_err(|source| XfrError::Io { primary, source })?;
        Ok(Self {
            primary,
            stream,
            tsig,
        })
    }

    /// Asks for `qtype` (SOA, AXFR or IXFR) of `zone`, as a secondary holding `held` (its SOA,
    /// for IXFR): the answer records of the whole response, in order.
    pub async fn ask(
        &mut self,
        zone: &Name,
        qtype: RecordType,
        held: Option<&Record>,
    ) -> Result<Vec<Record>, XfrError> {
        let primary = self.primary;
        tokio::time::timeout(
            EXCHANGE_TIMEOUT,
            exchange(
                primary,
                &mut self.stream,
                self.tsig.as_ref(),
                request(rand::random(), zone, qtype, held),
            ),
        )
        .await
        .unwrap_or(Err(XfrError::Timeout { primary }))
    }
}

/// A message of a response, checked against the request's signature when it had one: a
/// response to a signed request that is an unsigned error (a primary without the key answers
/// NOTAUTH or REFUSED unsigned) is reported by its rcode.
fn checked(
    primary: SocketAddr,
    check: Option<&mut ResponseCheck>,
    reply: &Message,
    wire: &[u8],
) -> Result<(), XfrError> {
    let Some(check) = check else {
        return Ok(());
    };
    match check.message(wire, unix_now()) {
        Ok(()) => Ok(()),
        Err(TsigError::Unsigned) if reply.metadata.response_code != ResponseCode::NoError => {
            Err(XfrError::Rcode {
                primary,
                rcode: reply.metadata.response_code,
            })
        }
        Err(source) => Err(XfrError::Tsig { primary, source }),
    }
}

/// Sends `m` (a request of [`request`]) to `primary` over `stream`, signed with `tsig` when
/// given, and reads its whole response.
pub(super) async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    primary: SocketAddr,
    stream: &mut S,
    tsig: Option<&TsigKey>,
    m: Message,
) -> Result<Vec<Record>, XfrError> {
    let io = |source| XfrError::Io { primary, source };
    let malformed = |reason: String| XfrError::Malformed { primary, reason };
    let qtype = m.queries.first().map_or(RecordType::SOA, |q| q.query_type);
    let held = m.authorities.first();
    let mut bytes = m.to_bytes().map_err(|e| malformed(e.to_string()))?;
    let mut check = match tsig {
        Some(key) => {
            let mac = key
                .sign(&mut bytes, unix_now())
                .map_err(|source| XfrError::Tsig { primary, source })?;
            Some(key.response_check(mac))
        }
        None => None,
    };
    let len = u16::try_from(bytes.len()).map_err(|_| malformed("request too long".into()))?;
    let mut framed = Vec::with_capacity(bytes.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(&bytes);
    stream.write_all(&framed).await.map_err(io)?;
    let held_serial = held.and_then(serial_of);
    let mut records: Vec<Record> = Vec::new();
    let mut buf = Vec::new();
    loop {
        let mut len = [0u8; 2];
        if let Err(e) = stream.read_exact(&mut len).await {
            return Err(if e.kind() == std::io::ErrorKind::UnexpectedEof {
                XfrError::BrokeOff {
                    primary,
                    records: records.len(),
                }
            } else {
                io(e)
            });
        }
        buf.resize(usize::from(u16::from_be_bytes(len)), 0);
        stream.read_exact(&mut buf).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                XfrError::BrokeOff {
                    primary,
                    records: records.len(),
                }
            } else {
                io(e)
            }
        })?;
        let reply =
            Message::from_bytes(&buf).map_err(|e| malformed(format!("a message does not parse: {e}")))?;
        if reply.metadata.id != m.metadata.id || reply.metadata.message_type != MessageType::Response {
            return Err(malformed("a message is not the response to the request".into()));
        }
        checked(primary, check.as_mut(), &reply, &buf)?;
        if reply.metadata.response_code != ResponseCode::NoError {
            return Err(XfrError::Rcode {
                primary,
                rcode: reply.metadata.response_code,
            });
        }
        if records.len() + reply.answers.len() > MAX_RECORDS {
            return Err(malformed(format!("more than {MAX_RECORDS} records")));
        }
        records.extend(reply.answers);
        match progress(qtype, held_serial, &records) {
            Progress::Done => {
                if let Some(c) = &check {
                    c.finish().map_err(|source| XfrError::Tsig { primary, source })?;
                }
                return Ok(records);
            }
            Progress::More if qtype == RecordType::SOA => {
                return Err(malformed("the SOA question got no SOA".into()));
            }
            Progress::More => {}
            Progress::Invalid(reason) => return Err(malformed(reason.into())),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, SOA};

    /// The SOA of `example.org.` at `serial` (shared with `apply`'s tests).
    pub(in super::super) fn soa(serial: u32) -> Record {
        let n = Name::from_ascii("example.org.").unwrap();
        Record::from_rdata(
            n.clone(),
            60,
            RData::SOA(SOA::new(n.clone(), n, serial, 3600, 600, 86400, 60)),
        )
    }

    /// `www.example.org. A 192.0.2.LAST`.
    pub(in super::super) fn a(last: u8) -> Record {
        Record::from_rdata(
            Name::from_ascii("www.example.org.").unwrap(),
            60,
            RData::A(A::new(192, 0, 2, last)),
        )
    }

    #[test]
    fn a_transfer_is_complete_at_its_closing_soa() {
        use Progress::{Done, Invalid, More};
        let axfr = RecordType::AXFR;
        assert_eq!(progress(axfr, None, &[]), More);
        assert_eq!(progress(axfr, None, &[soa(5)]), More);
        assert_eq!(progress(axfr, None, &[soa(5), a(1)]), More);
        assert_eq!(progress(axfr, None, &[soa(5), a(1), soa(5)]), Done);
        assert!(matches!(progress(axfr, None, &[a(1)]), Invalid(_)));
        assert!(matches!(
            progress(axfr, None, &[soa(5), soa(5), a(1)]),
            Invalid(_)
        ));

        let ixfr = RecordType::IXFR;
        // Up to date, and a held serial ahead of the primary's: one SOA.
        assert_eq!(progress(ixfr, Some(5), &[soa(5)]), Done);
        assert_eq!(progress(ixfr, Some(6), &[soa(5)]), Done);
        assert_eq!(progress(ixfr, Some(4), &[soa(5)]), More);
        // AXFR form.
        assert_eq!(progress(ixfr, Some(4), &[soa(5), a(1), soa(5)]), Done);
        // Two differences: 3 -> 4 (remove .1, add .2), 4 -> 5 (add .3).
        let seq = [soa(5), soa(3), a(1), soa(4), a(2), soa(4), soa(5), a(3), soa(5)];
        for end in 1..seq.len() {
            assert_eq!(progress(ixfr, Some(3), &seq[..end]), More, "after {end}");
        }
        assert_eq!(progress(ixfr, Some(3), &seq), Done);
        let mut extra = seq.to_vec();
        extra.push(a(9));
        assert!(matches!(progress(ixfr, Some(3), &extra), Invalid(_)));
    }
}
