//! A secondary zone's copy on disk (`snapshot DIR`), so a restarted server (or a reloaded
//! Corefile) answers at once, with neither API server nor primary reachable, and asks IXFR
//! from the serial it held (issue 46). One file per zone, `DIR/<zone>.zone-snapshot`, replaced
//! whole after each new copy: written to a temporary file in the same folder, synced, then
//! renamed over the old one, so a crash leaves the old snapshot or the new, never half of one.
//!
//! The format: the magic line `cluster-dns zone snapshot 1\n`; the Unix time (seconds) a
//! primary last confirmed the copy, the record count and the body's length (u64, u32, u64,
//! big-endian); the body, each record as its length (u16) and its uncompressed wire form; and
//! the FNV-1a 64 hash of the body. A file that is truncated, longer, of another magic, whose
//! hash or count does not match, or whose records do not make the zone is refused (logged,
//! never served).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hickory_proto::rr::{Name, Record};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};

use crate::plugin::kit::ZoneData;

const MAGIC: &[u8] = b"cluster-dns zone snapshot 1\n";
/// The fixed part after the magic: confirmed time, record count, body length.
const HEADER: usize = 8 + 4 + 8;

/// Where zone `origin`'s snapshot lives in `dir`.
pub fn path_of(dir: &Path, origin: &Name) -> PathBuf {
    let text = origin.to_lowercase().to_ascii();
    let stem = match text.trim_end_matches('.') {
        "" => "root",
        s => s,
    };
    dir.join(format!("{stem}.zone-snapshot"))
}

/// Writes `zone`'s snapshot, confirmed by a primary at `confirmed`, to `out`: the header
/// with its counts left zero, the body record by record (nothing of the zone copied whole),
/// the hash; then the counts written in place.
fn encode_into(out: &mut std::fs::File, zone: &ZoneData, confirmed: SystemTime) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let secs = confirmed.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut w = std::io::BufWriter::new(&mut *out);
    w.write_all(MAGIC)?;
    w.write_all(&[0u8; HEADER])?;
    let (mut count, mut body_len, mut hash) = (0u32, 0u64, Fnv1a::default());
    for r in zone.iter() {
        let wire = r.to_bytes().map_err(std::io::Error::other)?;
        let len = u16::try_from(wire.len()).map_err(std::io::Error::other)?;
        for part in [&len.to_be_bytes()[..], &wire] {
            w.write_all(part)?;
            hash.update(part);
            body_len += part.len() as u64;
        }
        count = count
            .checked_add(1)
            .ok_or_else(|| std::io::Error::other("too many records"))?;
    }
    w.write_all(&hash.0.to_be_bytes())?;
    w.flush()?;
    drop(w);
    out.seek(SeekFrom::Start(MAGIC.len() as u64))?;
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(&secs.to_be_bytes());
    header.extend_from_slice(&count.to_be_bytes());
    header.extend_from_slice(&body_len.to_be_bytes());
    out.write_all(&header)
}

/// FNV-1a, 64 bits, fed in parts.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn update(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Writes `zone`'s snapshot to `path`, atomically (see the module's top comment).
pub fn write(path: &Path, zone: &ZoneData, confirmed: SystemTime) -> std::io::Result<()> {
    let tmp = path.with_extension("zone-snapshot.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        encode_into(&mut f, zone, confirmed)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        // The rename itself survives a crash once the folder is synced.
        let _ = d.sync_all();
    }
    Ok(())
}

/// A snapshot file around `body` (records as [`write`] lays them out, or anything): the
/// magic, confirmed at `secs`, `count` records, the body's length, the body and its hash.
/// For the fuzz target, whose input is then read past the header and hash checks.
pub(super) fn framed(body: &[u8], count: u32, secs: u64) -> Vec<u8> {
    let mut file = MAGIC.to_vec();
    file.extend_from_slice(&secs.to_be_bytes());
    file.extend_from_slice(&count.to_be_bytes());
    file.extend_from_slice(&(body.len() as u64).to_be_bytes());
    file.extend_from_slice(body);
    let mut hash = Fnv1a::default();
    hash.update(body);
    file.extend_from_slice(&hash.0.to_be_bytes());
    file
}

/// Why a snapshot was not read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// There is none (the first start).
    #[error("{}: no snapshot", .0.display())]
    Missing(PathBuf),
    /// It could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the read said.
        source: std::io::Error,
    },
    /// It is damaged or not a snapshot.
    #[error("{}: refused, not served: {reason}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Reads zone `origin`'s snapshot at `path`: the zone and when a primary last confirmed it.
pub fn read(path: &Path, origin: &Name) -> Result<(ZoneData, SystemTime), SnapshotError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SnapshotError::Missing(path.to_owned()));
        }
        Err(source) => {
            return Err(SnapshotError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    decode(&bytes, path, origin).map_err(|reason| SnapshotError::Damaged {
        path: path.to_owned(),
        reason,
    })
}

pub(super) fn decode(bytes: &[u8], path: &Path, origin: &Name) -> Result<(ZoneData, SystemTime), String> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a cluster-dns zone snapshot (its first line differs)")?;
    if rest.len() < HEADER + 8 {
        return Err(format!("truncated: {} bytes", bytes.len()));
    }
    let (header, rest) = rest.split_at(HEADER);
    let word = |at: usize, n: usize| {
        header[at..at + n]
            .iter()
            .fold(0u64, |v, b| (v << 8) | u64::from(*b))
    };
    let secs = word(0, 8);
    let count = word(8, 4);
    let body_len = usize::try_from(word(12, 8)).map_err(|_| "body length out of range")?;
    if rest.len() != body_len + 8 {
        return Err(format!(
            "truncated or overlong: the body should be {body_len} bytes and its hash 8, the file holds {}",
            rest.len()
        ));
    }
    let (body, hash) = rest.split_at(body_len);
    let mut check = Fnv1a::default();
    check.update(body);
    if check.0.to_be_bytes() != hash {
        return Err("the body does not match its hash".into());
    }
    let mut records: Vec<Record> = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let len = body
            .get(at..at + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            .ok_or("a record's length is cut off")?;
        let wire = body.get(at + 2..at + 2 + len).ok_or("a record is cut off")?;
        records.push(Record::from_bytes(wire).map_err(|e| format!("record {}: {e}", records.len() + 1))?);
        at += 2 + len;
    }
    if records.len() as u64 != count {
        return Err(format!("{} records, the header says {count}", records.len()));
    }
    let zone = ZoneData::from_records(records, path, origin).map_err(|e| e.to_string())?;
    Ok((zone, UNIX_EPOCH + Duration::from_secs(secs)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::secondary::xfr::tests::{a, soa};

    fn zone() -> ZoneData {
        let origin = Name::from_ascii("example.org.").unwrap();
        ZoneData::from_records(vec![soa(7), a(1), a(2)], Path::new("test"), &origin).unwrap()
    }

    #[test]
    fn a_snapshot_reads_back_and_any_damage_is_refused() {
        let origin = Name::from_ascii("example.org.").unwrap();
        let dir = std::env::temp_dir().join(format!("cluster-dns-snapshot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = path_of(&dir, &origin);
        assert!(path.ends_with("example.org.zone-snapshot"));
        assert!(matches!(read(&path, &origin), Err(SnapshotError::Missing(_))));
        let confirmed = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        write(&path, &zone(), confirmed).unwrap();
        let (back, when) = read(&path, &origin).unwrap();
        assert_eq!((back.serial(), back.records(), when), (7, 3, confirmed));
        assert_eq!(back.transfer(), zone().transfer());

        let good = std::fs::read(&path).unwrap();
        let mut damaged = Vec::new();
        for cut in [1, 10, MAGIC.len() + 3, good.len() - 9, good.len() - 1] {
            damaged.push(("truncated", good[..cut].to_vec()));
        }
        let mut flipped = good.clone();
        flipped[MAGIC.len() + HEADER + 5] ^= 0x40;
        damaged.push(("a flipped bit", flipped));
        let mut longer = good.clone();
        longer.push(0);
        damaged.push(("overlong", longer));
        for (what, bytes) in damaged {
            std::fs::write(&path, &bytes).unwrap();
            let e = read(&path, &origin).unwrap_err();
            assert!(matches!(e, SnapshotError::Damaged { .. }), "{what}: {e}");
            assert!(e.to_string().contains("refused, not served"), "{what}: {e}");
        }
        // Another zone's snapshot under this name: out of zone, refused.
        write(&path, &zone(), confirmed).unwrap();
        let other = Name::from_ascii("example.net.").unwrap();
        assert!(matches!(read(&path, &other), Err(SnapshotError::Damaged { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
