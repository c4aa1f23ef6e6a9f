//! The bodies of the `secondary_transfer` and `zone_snapshot` fuzz targets (`fuzz/`), kept
//! beside the code they drive so `cargo test` replays their committed corpora through the same
//! code (`tests/integration/project/fuzz_corpus.rs`): what a primary sends back, and what a
//! snapshot file holds, are input from outside the process. Not part of the server.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::BinEncodable;

use super::apply::apply;
use super::snapshot;
use super::xfr::{exchange, request, serial_of};
use crate::plugin::kit::ZoneData;

/// The ID of the fuzzed requests (the seeds' responses carry it).
pub const ID: u16 = 0x2b1d;
/// The Unix time of the fuzzed snapshots.
const CONFIRMED: u64 = 1_800_000_000;

/// The zone followed.
pub fn origin() -> Name {
    Name::from_ascii("example.org.").expect("a name")
}

/// The copy held before an IXFR: `example.org.` at serial 5, with `www` at 192.0.2.1.
pub fn held() -> ZoneData {
    let origin = origin();
    let records = vec![
        Record::from_rdata(
            origin.clone(),
            60,
            RData::SOA(SOA::new(origin.clone(), origin.clone(), 5, 3600, 600, 86400, 60)),
        ),
        Record::from_rdata(
            Name::from_ascii("www.example.org.").expect("a name"),
            60,
            RData::A(A::new(192, 0, 2, 1)),
        ),
    ];
    ZoneData::from_records(records, Path::new("fuzz"), &origin).expect("the held zone")
}

/// Checks a zone the secondary would serve: every record at or under the origin, its
/// transfer starts and ends with the SOA of its serial.
fn check_zone(zone: &ZoneData) {
    let origin = origin();
    assert!(
        zone.iter().all(|r| origin.zone_of(&r.name)),
        "a record out of the zone"
    );
    let t = zone.transfer();
    assert!(t.len() >= 2, "a transfer of {} records", t.len());
    assert_eq!(t.first().and_then(serial_of), Some(zone.serial()));
    assert_eq!(t.last().and_then(serial_of), Some(zone.serial()));
}

/// Arbitrary bytes as what a primary sends back on the TCP connection (length-framed
/// messages) to the secondary's AXFR (first byte even) or IXFR from [`held`] (odd), read by
/// the secondary's own client, then made into the next copy. Invariants: no panic; a response
/// taken starts with an SOA; a copy made holds only records of the zone, its transfer starts
/// and ends with its SOA, and its serial is the response's first SOA's.
pub fn secondary_transfer(data: &[u8]) {
    let Some((&mode, stream)) = data.split_first() else {
        return;
    };
    let origin = origin();
    let held = (mode & 1 == 1).then(held);
    let qtype = if held.is_some() {
        RecordType::IXFR
    } else {
        RecordType::AXFR
    };
    let m = request(ID, &origin, qtype, held.as_ref().map(ZoneData::soa));
    let primary = SocketAddr::from(([127, 0, 0, 1], 53));
    let mut io = tokio::io::join(stream, tokio::io::sink());
    let Ok(records) = futures::executor::block_on(exchange(primary, &mut io, None, m)) else {
        return;
    };
    let newest = records.first().and_then(serial_of);
    assert!(
        newest.is_some(),
        "a response taken that does not start with an SOA"
    );
    if let Ok(Some(zone)) = apply(held.as_ref(), records, "fuzz", &origin) {
        check_zone(&zone);
        assert_eq!(Some(zone.serial()), newest);
    }
}

/// Arbitrary bytes as the body of a snapshot of `example.org.` (records as the writer lays
/// them out), framed with a header whose count is the body's length-prefixed pieces and its
/// hash, so the reader's record and zone checks are reached. Invariants: no panic; a snapshot
/// read is a sound zone, and written and read again it gives the same records.
pub fn zone_snapshot(data: &[u8]) {
    let mut count = 0u32;
    let mut at = 0usize;
    while let Some(len) = data.get(at..at + 2) {
        at += 2 + usize::from(u16::from_be_bytes([len[0], len[1]]));
        count += 1;
    }
    let origin = origin();
    let file = snapshot::framed(data, count, CONFIRMED);
    let Ok((zone, confirmed)) = snapshot::decode(&file, Path::new("fuzz"), &origin) else {
        return;
    };
    check_zone(&zone);
    assert_eq!(confirmed, UNIX_EPOCH + Duration::from_secs(CONFIRMED));
    let dir = std::env::temp_dir().join(format!("cluster-dns-fuzz-snapshot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let path = snapshot::path_of(&dir, &origin);
    snapshot::write(&path, &zone, confirmed).expect("the snapshot is written");
    let (again, _) = snapshot::read(&path, &origin).expect("a written snapshot reads back");
    assert_eq!(
        again.transfer(),
        zone.transfer(),
        "the snapshot does not read back the same"
    );
}

/// Seeds for the corpora: a framed AXFR and IXFR response (with [`ID`]), and a snapshot body.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    use hickory_proto::op::{Message, MessageType, OpCode};
    let origin = origin();
    let soa = |serial| {
        Record::from_rdata(
            origin.clone(),
            60,
            RData::SOA(SOA::new(
                origin.clone(),
                origin.clone(),
                serial,
                3600,
                600,
                86400,
                60,
            )),
        )
    };
    let a = |last| {
        Record::from_rdata(
            Name::from_ascii("www.example.org.").expect("a name"),
            60,
            RData::A(A::new(192, 0, 2, last)),
        )
    };
    let framed = |mode: u8, answers: Vec<Record>| {
        let mut m = Message::new(ID, MessageType::Response, OpCode::Query);
        m.metadata.authoritative = true;
        for r in answers {
            m.add_answer(r);
        }
        let wire = m.to_bytes().expect("a message");
        let mut out = vec![mode];
        out.extend_from_slice(&u16::try_from(wire.len()).expect("short").to_be_bytes());
        out.extend_from_slice(&wire);
        out
    };
    let body: Vec<u8> = [soa(7), a(1), a(2)]
        .iter()
        .flat_map(|r| {
            let wire = r.to_bytes().expect("a record");
            let mut piece = u16::try_from(wire.len()).expect("short").to_be_bytes().to_vec();
            piece.extend_from_slice(&wire);
            piece
        })
        .collect();
    vec![
        ("transfer-axfr", framed(0, vec![soa(6), a(3), soa(6)])),
        (
            "transfer-ixfr",
            framed(1, vec![soa(6), soa(5), a(1), soa(6), a(2), soa(6)]),
        ),
        ("transfer-ixfr-current", framed(1, vec![soa(5)])),
        ("snapshot", body),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds take the paths they are for: a copy is made from each transfer, the snapshot
    /// reads back.
    #[test]
    fn the_seeds_reach_the_copy() {
        for (name, seed) in seeds() {
            if name == "snapshot" {
                let file = snapshot::framed(&seed, 3, CONFIRMED);
                let (zone, _) = snapshot::decode(&file, Path::new("seed"), &origin()).unwrap();
                assert_eq!((zone.serial(), zone.records()), (7, 3));
                zone_snapshot(&seed);
                continue;
            }
            let (mode, stream) = seed.split_first().unwrap();
            let held = (mode & 1 == 1).then(held);
            let qtype = if held.is_some() {
                RecordType::IXFR
            } else {
                RecordType::AXFR
            };
            let m = request(ID, &origin(), qtype, held.as_ref().map(ZoneData::soa));
            let mut io = tokio::io::join(stream, tokio::io::sink());
            let primary = SocketAddr::from(([127, 0, 0, 1], 53));
            let records = futures::executor::block_on(exchange(primary, &mut io, None, m)).unwrap();
            let made = apply(held.as_ref(), records, "seed", &origin()).unwrap();
            assert_eq!(made.is_some(), name != "transfer-ixfr-current", "{name}");
            secondary_transfer(&seed);
        }
    }
}
