//! A zone read from an RFC 1035 master file ([`ZoneData`], parsed with hickory-proto's zone
//! file parser) and the lookup that answers from it ([`ZoneData::lookup`]), as RFC 1034
//! section 4.3.2 describes an authoritative server's: a referral below a zone cut, the records
//! of the name, CNAMEs followed within the zone (a target outside it is left to the rest of the
//! chain), wildcards (RFC 4592), NODATA for a name without the type (an empty non-terminal
//! too), NXDOMAIN, and the SOA in the authority section of both negative answers (its TTL the
//! smaller of its own and its MINIMUM, RFC 2308).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{CNAME, NULL};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use hickory_proto::serialize::txt::Parser;

use crate::proto::{Answer, FlagEdit, Forwarded, Reply};

/// The TTL of records written before any `$TTL` or TTL of their own.
const DEFAULT_TTL: u32 = 3600;

/// The most CNAMEs followed within the zone for one question.
const MAX_CNAMES: usize = 8;

/// Why a zone file could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ZoneError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The zone file.
        path: PathBuf,
        /// What the read said.
        source: std::io::Error,
    },
    /// A line of the file is not valid zone file syntax.
    #[error("{}:{line}: {message}", path.display())]
    Syntax {
        /// The zone file.
        path: PathBuf,
        /// The first line whose reading fails (1-based).
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// The zone has no SOA record at its origin.
    #[error("{}: no SOA record for the zone {origin}", path.display())]
    NoSoa {
        /// The zone file.
        path: PathBuf,
        /// The zone.
        origin: String,
    },
    /// A record without data (an empty RDATA, which only a dynamic update's deletions carry).
    #[error("{}: the {rtype} record of {name} has no data", path.display())]
    NoData {
        /// Where the records came from.
        path: PathBuf,
        /// The record's owner.
        name: String,
        /// Its type.
        rtype: RecordType,
    },
    /// A record's owner is outside the zone.
    #[error("{}: {name} is outside the zone {origin}", path.display())]
    OutOfZone {
        /// The zone file.
        path: PathBuf,
        /// The record's owner.
        name: String,
        /// The zone.
        origin: String,
    },
    /// A name holds a CNAME and other data (RFC 1034 §3.6.2, RFC 2181 §10.1; with a DNAME,
    /// RFC 6672 §2.4), which NSD and Knot refuse to load too.
    #[error("{}: {name} has a CNAME and {other} data; a CNAME must be alone at its name (RFC 1034 section 3.6.2)", path.display())]
    CnameAndOtherData {
        /// The zone file.
        path: PathBuf,
        /// The name.
        name: String,
        /// One other type at it.
        other: RecordType,
    },
}

/// True when SOA serial `new` follows `old` (RFC 1982 serial number arithmetic; half the
/// space away is undefined, so not after). Every zone here compares serials with this.
pub fn serial_after(new: u32, old: u32) -> bool {
    new != old && new.wrapping_sub(old) < (1 << 31)
}

/// One zone's records.
#[derive(Debug)]
pub struct ZoneData {
    origin: Name,
    soa: Record,
    serial: u32,
    /// Every owner name (lower-case), in canonical order (RFC 4034 section 6.1: a name's
    /// descendants follow it), with its records grouped by type.
    nodes: BTreeMap<Name, Vec<Record>>,
    /// The DNAMEs (RFC 6672): owner (lower-case) to target. Their records are in `nodes` as
    /// opaque data (hickory-proto has no DNAME data), the target's uncompressed wire form.
    dnames: BTreeMap<Name, Name>,
    records: usize,
}

/// What the zone answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// An authoritative answer (AA set).
    Answer {
        /// NOERROR or NXDOMAIN.
        rcode: ResponseCode,
        /// The records (CNAMEs first, then what they lead to).
        answers: Vec<Record>,
        /// The apex NS for a positive answer; the SOA for a negative one.
        authority: Vec<Record>,
        /// Addresses in the zone of the answers' NS, MX and SRV targets.
        additional: Vec<Record>,
        /// The last CNAME's target, when it is outside the zone: the rest of the chain is
        /// asked for it.
        chase: Option<Name>,
    },
    /// A referral to a delegated child zone (AA clear): the NS records of the cut and their
    /// addresses (glue). (A CNAME that leads into a delegation is an [`Lookup::Answer`], the
    /// referral's records after it: the CNAME is this zone's data, RFC 1035 section 4.1.1.)
    Referral {
        /// The cut's NS records.
        authority: Vec<Record>,
        /// Their glue.
        additional: Vec<Record>,
    },
}

impl ZoneData {
    /// Reads zone `origin` from the master file at `path`.
    pub fn read(path: &Path, origin: &Name) -> Result<Self, ZoneError> {
        let text = std::fs::read_to_string(path).map_err(|source| ZoneError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path, origin)
    }

    /// Parses zone `origin` from `text`, the contents of `path` (which `$INCLUDE`s are relative
    /// to).
    pub fn parse(text: &str, path: &Path, origin: &Name) -> Result<Self, ZoneError> {
        let origin = origin.to_lowercase();
        // hickory-proto's parser (built without DNSSEC) has neither DNAME nor DS data: their
        // types are written as ones it reads, and the records turned back after.
        let (text, stand_ins) = match stand_in(text) {
            Ok(t) => t,
            Err((line, message)) => {
                return Err(ZoneError::Syntax {
                    path: path.to_owned(),
                    line,
                    message: message.to_owned(),
                });
            }
        };
        let text = text.as_str();
        // Records before any TTL get an hour, as in CoreDNS (miekg/dns's default); hickory's
        // parser would refuse them.
        let parse = |t: &str| {
            let with_default = format!("$TTL {DEFAULT_TTL}\n{t}");
            Parser::new(with_default, Some(path.to_owned()), Some(origin.clone())).parse()
        };
        let sets = match parse(text) {
            Ok((_, sets)) => sets,
            Err(e) => {
                let message = e.to_string();
                return Err(ZoneError::Syntax {
                    path: path.to_owned(),
                    line: failing_line(text, &message, parse),
                    message,
                });
            }
        };
        let mut records = Vec::new();
        for (_, set) in sets {
            for r in set.records_without_rrsigs() {
                let mut r = r.clone();
                if stand_ins.ds
                    && let RData::TXT(txt) = &r.data
                    && let Some(first) = txt.txt_data.first()
                    && let Some(line) = first.strip_prefix(DS_MARKER.as_bytes())
                {
                    let line = std::str::from_utf8(line)
                        .ok()
                        .and_then(|l| l.parse().ok())
                        .unwrap_or(0);
                    let wire = ds_wire(&txt.txt_data[1..]).map_err(|message| ZoneError::Syntax {
                        path: path.to_owned(),
                        line,
                        message: format!("DS: {message}"),
                    })?;
                    r.data = RData::Unknown {
                        code: RecordType::DS,
                        rdata: NULL::with(wire),
                    };
                }
                if stand_ins.dnames
                    && let RData::ANAME(target) = &r.data
                {
                    let target = target.0.clone();
                    let wire = target.to_bytes().map_err(|e| ZoneError::Syntax {
                        path: path.to_owned(),
                        line: 0,
                        message: format!("DNAME {target}: {e}"),
                    })?;
                    r.data = RData::Unknown {
                        code: RecordType::DNAME,
                        rdata: NULL::with(wire),
                    };
                }
                records.push(r);
            }
        }
        Self::from_records(records, path, &origin)
    }

    /// Zone `origin` from its `records` (a transfer's, or a file's as parsed), checked as a
    /// file is: every owner in the zone, an SOA at the apex, no CNAME beside other data.
    /// `source` names where they came from in errors (the file, or `AXFR from ADDRESS`).
    pub fn from_records(records: Vec<Record>, source: &Path, origin: &Name) -> Result<Self, ZoneError> {
        let path = source;
        let origin = origin.to_lowercase();
        let mut nodes: BTreeMap<Name, Vec<Record>> = BTreeMap::new();
        let mut dnames: BTreeMap<Name, Name> = BTreeMap::new();
        let count = records.len();
        for r in records {
            let name = r.name.to_lowercase();
            if !origin.zone_of(&name) {
                return Err(ZoneError::OutOfZone {
                    path: path.to_owned(),
                    name: name.to_string(),
                    origin: origin.to_string(),
                });
            }
            // From a transfer or a snapshot (a zone file has none): nothing to answer with, and
            // an SOA without its data would leave the zone without a serial.
            if matches!(r.data, RData::Update0(_)) {
                return Err(ZoneError::NoData {
                    path: path.to_owned(),
                    name: name.to_string(),
                    rtype: r.record_type(),
                });
            }
            if let RData::Unknown {
                code: RecordType::DNAME,
                rdata,
            } = &r.data
                && let Ok(target) = Name::from_bytes(&rdata.anything)
            {
                dnames.insert(name.clone(), target);
            }
            nodes.entry(name).or_default().push(r);
        }
        let records = count;
        for (name, node) in &mut nodes {
            node.sort_by_key(|r| u16::from(r.record_type()));
            let types = || node.iter().map(|r| r.record_type());
            if types().any(|t| t == RecordType::CNAME)
                && let Some(other) = types().find(|t| *t != RecordType::CNAME && *t != RecordType::NSEC)
            {
                return Err(ZoneError::CnameAndOtherData {
                    path: path.to_owned(),
                    name: name.to_string(),
                    other,
                });
            }
        }
        let soa = nodes
            .get(&origin)
            .and_then(|n| n.iter().find(|r| r.record_type() == RecordType::SOA))
            .cloned()
            .ok_or_else(|| ZoneError::NoSoa {
                path: path.to_owned(),
                origin: origin.to_string(),
            })?;
        let RData::SOA(s) = &soa.data else {
            return Err(ZoneError::NoData {
                path: path.to_owned(),
                name: origin.to_string(),
                rtype: RecordType::SOA,
            });
        };
        let serial = s.serial;
        Ok(Self {
            origin,
            soa,
            serial,
            nodes,
            dnames,
            records,
        })
    }

    /// The zone's name.
    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// The SOA record at the apex.
    pub fn soa(&self) -> &Record {
        &self.soa
    }

    /// The SOA serial.
    pub fn serial(&self) -> u32 {
        self.serial
    }

    /// Every record, for a zone transfer: the SOA, the rest in canonical name order, the SOA
    /// again (RFC 5936 section 2.2).
    pub fn transfer(&self) -> Vec<Record> {
        let mut out = Vec::with_capacity(self.records + 1);
        out.extend(self.iter().cloned());
        out.push(self.soa.clone());
        out
    }

    /// Every record once, borrowed: the SOA, then the rest in canonical name order (a
    /// transfer without its closing SOA, copying nothing).
    pub fn iter(&self) -> impl Iterator<Item = &Record> {
        std::iter::once(&self.soa).chain(
            self.nodes
                .values()
                .flat_map(|records| records.iter().filter(|r| r.record_type() != RecordType::SOA)),
        )
    }

    /// How many records it holds.
    pub fn records(&self) -> usize {
        self.records
    }

    fn rrset(&self, name: &Name, qtype: RecordType) -> Vec<Record> {
        self.nodes
            .get(name)
            .map(|n| {
                n.iter()
                    .filter(|r| qtype == RecordType::ANY || r.record_type() == qtype)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// True when some name of the zone is strictly below `name` (which then exists, as an empty
    /// non-terminal if it owns nothing).
    fn has_descendant(&self, name: &Name) -> bool {
        use std::ops::Bound::{Excluded, Unbounded};
        self.nodes
            .range((Excluded(name), Unbounded))
            .next()
            .is_some_and(|(n, _)| name.zone_of(n))
    }

    fn exists(&self, name: &Name) -> bool {
        self.nodes.contains_key(name) || self.has_descendant(name)
    }

    /// What redirects a question for `qtype` at `name` before its own node is reached, going
    /// down from the apex: a zone cut (NS records of a name below the apex, at or above `name`;
    /// at `name` itself not for DS, which is the parent side's data, RFC 4035 section 3.1.4.1)
    /// or a DNAME strictly above `name` (RFC 6672 section 3.2), whichever is highest (at one
    /// name, the cut).
    fn above(&self, name: &Name, qtype: RecordType) -> Option<Above<'_>> {
        let mut found = None;
        let mut n = name.clone();
        while n.num_labels() >= self.origin.num_labels() {
            if &n != name
                && let Some((owner, target)) = self.dnames.get_key_value(&n)
            {
                found = Some(Above::Dname { owner, target });
            }
            if n.num_labels() > self.origin.num_labels()
                && !(&n == name && qtype == RecordType::DS)
                && let Some((owner, records)) = self.nodes.get_key_value(&n)
                && records.iter().any(|r| r.record_type() == RecordType::NS)
            {
                found = Some(Above::Cut(owner));
            }
            if n.is_root() {
                break;
            }
            n = n.base_name();
        }
        found
    }

    /// The SOA for a negative answer, its TTL the smaller of its own and its MINIMUM.
    fn negative_soa(&self) -> Vec<Record> {
        let mut soa = self.soa.clone();
        if let RData::SOA(s) = &self.soa.data {
            soa.ttl = soa.ttl.min(s.minimum);
        }
        vec![soa]
    }

    /// Addresses held in the zone for the targets of `records` (NS, MX, SRV).
    fn additional_for(&self, records: &[Record]) -> Vec<Record> {
        let mut out: Vec<Record> = Vec::new();
        for r in records {
            let target = match &r.data {
                RData::NS(ns) => &ns.0,
                RData::MX(mx) => &mx.exchange,
                RData::SRV(srv) => &srv.target,
                _ => continue,
            };
            let target = target.to_lowercase();
            for qtype in [RecordType::A, RecordType::AAAA] {
                for a in self.rrset(&target, qtype) {
                    if !out.contains(&a) {
                        out.push(a);
                    }
                }
            }
        }
        out
    }

    /// The records of `source` (a name of the zone, or the wildcard covering `owner`) of
    /// `qtype`, owned by `owner` as the question spells it.
    fn records_at(&self, owner: &Name, source: &Name, qtype: RecordType) -> Vec<Record> {
        let mut out = self.rrset(source, qtype);
        // Names compare without case: the client's spelling of its name is kept too.
        if owner.cmp_case(source) != std::cmp::Ordering::Equal {
            for r in &mut out {
                r.name = owner.clone();
            }
        }
        out
    }

    /// The wildcard that covers `name` (which does not exist): `*.` under its closest
    /// encloser, if the zone has it.
    fn wildcard_for(&self, name: &Name) -> Option<Name> {
        let mut encloser = name.base_name();
        while encloser.num_labels() > self.origin.num_labels() && !self.exists(&encloser) {
            encloser = encloser.base_name();
        }
        let wild = Name::from_ascii("*").ok()?.append_domain(&encloser).ok()?;
        self.nodes.contains_key(&wild).then_some(wild)
    }

    /// The reply to `qtype` at `qname` (in the zone) as a plugin sends it: an authoritative
    /// answer, with the target the rest of the chain is asked for when a CNAME leads out of the
    /// zone, or a referral (AA and RA clear).
    pub fn reply(&self, qname: &Name, qtype: RecordType) -> (Reply, Option<Name>) {
        match self.lookup(qname, qtype) {
            Lookup::Answer {
                rcode,
                answers,
                authority,
                additional,
                chase,
            } => {
                let answer = Answer {
                    rcode,
                    answers: answers.into(),
                    authority,
                    additional,
                    chase_target: chase.clone(),
                    flags: FlagEdit::KEEP,
                };
                (Reply::Authoritative(answer), chase)
            }
            Lookup::Referral {
                authority,
                additional,
            } => (
                Reply::Forwarded(Forwarded {
                    rcode: ResponseCode::NoError,
                    recursion_available: false,
                    authentic_data: false,
                    truncated: false,
                    flags: FlagEdit::KEEP,
                    answers: Vec::new(),
                    authority,
                    additional,
                }),
                None,
            ),
        }
    }

    /// Answers `qtype` at `qname` (which must be in the zone).
    pub fn lookup(&self, qname: &Name, qtype: RecordType) -> Lookup {
        let mut answers: Vec<Record> = Vec::new();
        let mut name = qname.to_lowercase();
        for _ in 0..=MAX_CNAMES {
            // The client's name for what it asked; the zone's for names a CNAME led to.
            let owner = if answers.is_empty() {
                qname.clone()
            } else {
                name.clone()
            };
            match self.above(&name, qtype) {
                Some(Above::Cut(cut)) => {
                    let authority = self.rrset(cut, RecordType::NS);
                    let additional = self.additional_for(&authority);
                    if answers.is_empty() {
                        return Lookup::Referral {
                            authority,
                            additional,
                        };
                    }
                    // The CNAMEs are this zone's, authoritative; the referral follows them
                    // (as Knot and NSD answer).
                    return Lookup::Answer {
                        rcode: ResponseCode::NoError,
                        answers,
                        authority,
                        additional,
                        chase: None,
                    };
                }
                Some(Above::Dname { owner: at, target }) => {
                    answers.extend(self.rrset(at, RecordType::DNAME));
                    let Some(new) = substitute(&owner, at, target) else {
                        // Too long once substituted (RFC 6672 section 2.2).
                        return Lookup::Answer {
                            rcode: ResponseCode::YXDomain,
                            answers,
                            authority: Vec::new(),
                            additional: Vec::new(),
                            chase: None,
                        };
                    };
                    let ttl = self
                        .rrset(at, RecordType::DNAME)
                        .first()
                        .map_or(DEFAULT_TTL, |r| r.ttl);
                    answers.push(Record::from_rdata(
                        owner.clone(),
                        ttl,
                        RData::CNAME(CNAME(new.clone())),
                    ));
                    // Asked for the CNAME: it is the answer, not followed (as Knot and NSD).
                    if qtype == RecordType::CNAME {
                        return self.positive(answers, None);
                    }
                    let new = new.to_lowercase();
                    if !self.origin.zone_of(&new) {
                        return self.positive(answers, Some(new));
                    }
                    name = new;
                    continue;
                }
                None => {}
            }
            let source = if self.nodes.contains_key(&name) {
                Some(name.clone())
            } else if self.has_descendant(&name) {
                None
            } else {
                match self.wildcard_for(&name) {
                    Some(wild) => Some(wild),
                    None => return self.negative(ResponseCode::NXDomain, answers),
                }
            };
            let Some(source) = source else {
                // An empty non-terminal: the name exists, with nothing of any type.
                return self.negative(ResponseCode::NoError, answers);
            };
            let found = self.records_at(&owner, &source, qtype);
            if !found.is_empty() {
                answers.extend(found);
                return self.positive(answers, None);
            }
            let cname = self.records_at(&owner, &source, RecordType::CNAME);
            let Some(RData::CNAME(target)) = cname.first().map(|r| r.data.clone()) else {
                return self.negative(ResponseCode::NoError, answers);
            };
            answers.extend(cname);
            let target = target.0.to_lowercase();
            if !self.origin.zone_of(&target) {
                return self.positive(answers, Some(target));
            }
            name = target;
        }
        // A CNAME chain longer than MAX_CNAMES: what was followed.
        self.positive(answers, None)
    }

    fn positive(&self, answers: Vec<Record>, chase: Option<Name>) -> Lookup {
        let apex_ns = self.rrset(&self.origin, RecordType::NS);
        let authority = if answers
            .iter()
            .any(|a| a.record_type() == RecordType::NS && a.name == self.origin)
        {
            Vec::new()
        } else {
            apex_ns
        };
        Lookup::Answer {
            rcode: ResponseCode::NoError,
            additional: self.additional_for(&answers),
            answers,
            authority,
            chase,
        }
    }

    fn negative(&self, rcode: ResponseCode, answers: Vec<Record>) -> Lookup {
        Lookup::Answer {
            rcode,
            answers,
            authority: self.negative_soa(),
            additional: Vec::new(),
            chase: None,
        }
    }
}

/// What [`ZoneData::lookup`] meets above a name.
enum Above<'a> {
    /// A zone cut (its owner).
    Cut(&'a Name),
    /// A DNAME: its owner and target.
    Dname {
        /// Its owner.
        owner: &'a Name,
        /// Its target.
        target: &'a Name,
    },
}

/// `name` (below `owner`) with `owner` replaced by `target` (RFC 6672 section 2.2); `None`
/// when the result would be longer than 255 octets.
fn substitute(name: &Name, owner: &Name, target: &Name) -> Option<Name> {
    let keep = usize::from(name.num_labels().checked_sub(owner.num_labels())?);
    Name::from_labels(name.iter().take(keep))
        .ok()?
        .append_name(target)
        .ok()
        .map(|n| {
            let mut n = n;
            n.set_fqdn(true);
            n
        })
}

/// The first string of the TXT record a DS record is read as (followed by its line).
const DS_MARKER: &str = "cluster-dns-ds:";

/// Which stand-ins [`stand_in`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct StandIns {
    /// DNAME records written as ANAME.
    dnames: bool,
    /// DS records written as TXT.
    ds: bool,
}

/// `text` with the records hickory-proto's parser has no data for written as ones it reads:
/// the type of each DNAME record as ANAME (the same data, one domain name; ANAME is an expired
/// draft no zone should hold), and each DS record as a TXT record whose first string is
/// [`DS_MARKER`] and the line, its fields the strings after (turned back by [`ds_wire`]). Only
/// the type field of a record's first line is touched (owner, TTL and class before it), never
/// an owner, data, quoted string or comment; the text keeps its lines, so errors keep their
/// line. A file with both DNAME and ANAME records, or with a quoted string that starts with the
/// marker, is refused: `Err` with the line.
/// (A DNAME or DS in an `$INCLUDE`d file is not seen: the parser refuses it.)
fn stand_in(text: &str) -> Result<(String, StandIns), (usize, &'static str)> {
    let (out, dnames, ds) = scan_for_stand_ins(text)?;
    Ok((out, StandIns { dnames, ds }))
}

/// The DS data (RFC 4034 section 5.3's presentation: key tag, algorithm, digest type, the
/// digest in hexadecimal, maybe split by spaces) from the strings of its stand-in, in wire form.
fn ds_wire(fields: &[Box<[u8]>]) -> Result<Vec<u8>, String> {
    let text = |f: &[u8]| String::from_utf8_lossy(f).into_owned();
    let [tag, algorithm, digest_type, digest @ ..] = fields else {
        return Err("expected key tag, algorithm, digest type and digest".to_owned());
    };
    let number = |f: &[u8], what: &str| {
        text(f)
            .parse::<u16>()
            .map_err(|_| format!("{what} {:?} is not a number", text(f)))
    };
    let tag = number(tag, "key tag")?;
    let byte = |f: &[u8], what: &str| {
        u8::try_from(number(f, what)?).map_err(|_| format!("{what} {:?} is above 255", text(f)))
    };
    let mut wire = tag.to_be_bytes().to_vec();
    wire.push(byte(algorithm, "algorithm")?);
    wire.push(byte(digest_type, "digest type")?);
    let hex: Vec<u8> = digest.iter().flat_map(|d| d.iter().copied()).collect();
    if hex.is_empty() || !hex.len().is_multiple_of(2) {
        return Err("the digest is not an even number of hexadecimal digits".to_owned());
    }
    for pair in hex.chunks(2) {
        let digit = |c: u8| char::from(c).to_digit(16);
        match (digit(pair[0]), digit(pair[1])) {
            (Some(hi), Some(lo)) => wire.push(u8::try_from(hi * 16 + lo).unwrap_or(0)),
            _ => return Err(format!("the digest {:?} is not hexadecimal", text(&hex))),
        }
    }
    Ok(wire)
}

/// [`stand_in`]'s work: the text, and whether it wrote DNAME and DS stand-ins.
fn scan_for_stand_ins(text: &str) -> Result<(String, bool, bool), (usize, &'static str)> {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    let mut dnames = false;
    let mut ds = false;
    let mut aname_line = None;
    let mut marker_line = None;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let starts_record = depth == 0 && !line.starts_with('$');
        let owner = starts_record && !line.starts_with([' ', '\t']);
        // (start, end) of each word of the line, and the parenthesis depth after it.
        let mut words: Vec<(usize, usize)> = Vec::new();
        let bytes = line.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            match bytes[at] {
                b';' | b'\n' | b'\r' => break,
                b' ' | b'\t' => at += 1,
                b'(' => {
                    depth += 1;
                    at += 1;
                }
                b')' => {
                    depth = depth.saturating_sub(1);
                    at += 1;
                }
                b'"' => {
                    if line[at + 1..].starts_with(DS_MARKER) {
                        marker_line.get_or_insert(i + 1);
                    }
                    at += 1;
                    while at < bytes.len() && bytes[at] != b'"' {
                        at += if bytes[at] == b'\\' { 2 } else { 1 };
                    }
                    at += 1;
                    words.push((0, 0));
                }
                _ => {
                    let start = at;
                    while at < bytes.len() && !b" \t\r\n;()\"".contains(&bytes[at]) {
                        at += if bytes[at] == b'\\' { 2 } else { 1 };
                    }
                    words.push((start, at.min(bytes.len())));
                }
            }
        }
        let mut rewritten = None;
        if starts_record {
            let word = |&(s, e): &(usize, usize)| &line[s..e];
            let typ = words
                .iter()
                .skip(usize::from(owner))
                .find(|w| {
                    let w = word(w);
                    !(w.starts_with(|c: char| c.is_ascii_digit())
                        || ["IN", "CH", "HS", "CS"].iter().any(|c| w.eq_ignore_ascii_case(c)))
                })
                .copied();
            if let Some(w @ (s, e)) = typ {
                if word(&w).eq_ignore_ascii_case("DNAME") {
                    dnames = true;
                    rewritten = Some(format!("{}ANAME{}", &line[..s], &line[e..]));
                } else if word(&w).eq_ignore_ascii_case("DS") {
                    ds = true;
                    rewritten = Some(format!(
                        "{}TXT \"{DS_MARKER}{}\"{}",
                        &line[..s],
                        i + 1,
                        &line[e..]
                    ));
                } else if word(&w).eq_ignore_ascii_case("ANAME") {
                    aname_line.get_or_insert(i + 1);
                }
            }
        }
        out.push_str(rewritten.as_deref().unwrap_or(line));
    }
    if let Some(line) = marker_line {
        return Err((line, "a quoted string starting \"cluster-dns-ds:\" is reserved"));
    }
    match aname_line {
        Some(line) if dnames => Err((line, "ANAME and DNAME records in one file are not supported")),
        _ => Ok((out, dnames, ds)),
    }
}

/// The line of `text` that `parse` first fails on with `message`: the shortest prefix of whole
/// lines that fails with the same message (a prefix before that line parses, or fails
/// otherwise, for example inside an unclosed parenthesis). Binary search: a few dozen parses
/// of a file that failed, none of one that did not.
fn failing_line<T, E: std::fmt::Display>(
    text: &str,
    message: &str,
    parse: impl Fn(&str) -> Result<T, E>,
) -> usize {
    let ends: Vec<usize> = text
        .char_indices()
        .filter(|(_, c)| *c == '\n')
        .map(|(i, _)| i + 1)
        .chain((!text.ends_with('\n')).then_some(text.len()))
        .collect();
    let fails_same = |lines: usize| {
        let end = ends.get(lines.wrapping_sub(1)).copied().unwrap_or(0);
        matches!(parse(&text[..end]), Err(e) if e.to_string() == message)
    };
    let (mut lo, mut hi) = (1, ends.len().max(1));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fails_same(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records without data (an empty RDATA, as a transfer or a snapshot can carry) are refused
    /// with the name and type, the SOA's too (it panicked: the `zone_snapshot` fuzz target).
    #[test]
    fn a_record_without_data_is_refused() {
        use hickory_proto::rr::rdata::{A, SOA};
        let origin = Name::from_ascii("example.org.").unwrap();
        let soa = Record::from_rdata(
            origin.clone(),
            60,
            RData::SOA(SOA::new(origin.clone(), origin.clone(), 1, 60, 60, 60, 60)),
        );
        let www = Name::from_ascii("www.example.org.").unwrap();
        let a = Record::from_rdata(www.clone(), 60, RData::A(A::new(192, 0, 2, 1)));
        let empty = |name: &Name, rtype| {
            let mut r = Record::update0(name.clone(), 60, rtype);
            r.dns_class = hickory_proto::rr::DNSClass::IN;
            r
        };
        let path = Path::new("transfer");
        assert!(ZoneData::from_records(vec![soa.clone(), a.clone()], path, &origin).is_ok());
        for (records, want) in [
            (
                vec![empty(&origin, RecordType::SOA), a.clone()],
                "the SOA record of example.org. has no data",
            ),
            (
                vec![soa, empty(&www, RecordType::A)],
                "the A record of www.example.org. has no data",
            ),
        ] {
            let e = ZoneData::from_records(records, path, &origin)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn serials_follow_rfc_1982() {
        assert!(serial_after(2, 1));
        assert!(!serial_after(1, 1));
        assert!(!serial_after(1, 2));
        assert!(serial_after(0, u32::MAX), "wraps");
        assert!(
            !serial_after(1 << 31, 0),
            "half the space away is undefined: not after"
        );
    }

    const ZONE: &str = "$ORIGIN example.org.
@	3600 IN	SOA sns.dns.icann.org. noc.dns.icann.org. 2017042745 7200 3600 1209600 300
	3600 IN NS a.iana-servers.net.
	3600 IN NS ns1
ns1	IN A	192.0.2.53
www     IN A     127.0.0.1
        IN AAAA  ::1
alias	IN CNAME www
away	IN CNAME www.example.net.
loop1	IN CNAME loop2
loop2	IN CNAME loop1
mail	IN MX 10 mx.example.org.
mx	IN A 192.0.2.25
*.wild	IN A 192.0.2.99
a.b.deep IN TXT \"ent above\"
child	IN NS ns.child
ns.child IN A 192.0.2.77
";

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    fn zone() -> ZoneData {
        ZoneData::parse(ZONE, Path::new("db.example.org"), &n("example.org.")).unwrap()
    }

    fn show(records: &[Record]) -> Vec<String> {
        records
            .iter()
            .map(|r| format!("{} {} {}", r.name, r.record_type(), r.data))
            .collect()
    }

    fn answer(
        z: &ZoneData,
        name: &str,
        qtype: RecordType,
    ) -> (ResponseCode, Vec<String>, Vec<String>, Vec<String>, Option<Name>) {
        match z.lookup(&n(name), qtype) {
            Lookup::Answer {
                rcode,
                answers,
                authority,
                additional,
                chase,
            } => (rcode, show(&answers), show(&authority), show(&additional), chase),
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn answers_as_rfc_1034_says() {
        let z = zone();
        assert_eq!(z.serial(), 2017042745);
        let (rcode, ans, auth, _, _) = answer(&z, "WWW.example.org.", RecordType::A);
        assert_eq!(rcode, ResponseCode::NoError);
        assert_eq!(ans, ["WWW.example.org. A 127.0.0.1"]);
        assert_eq!(auth.len(), 2, "apex NS: {auth:?}");
        // NODATA and NXDOMAIN carry the SOA, its TTL capped at MINIMUM.
        for (name, qtype, want) in [
            ("www.example.org.", RecordType::MX, ResponseCode::NoError),
            ("nosuch.example.org.", RecordType::A, ResponseCode::NXDomain),
            ("deep.example.org.", RecordType::A, ResponseCode::NoError),
            ("b.deep.example.org.", RecordType::TXT, ResponseCode::NoError),
        ] {
            let (rcode, ans, _, _, _) = answer(&z, name, qtype);
            assert_eq!((rcode, ans.len()), (want, 0), "{name}");
            let Lookup::Answer { authority, .. } = z.lookup(&n(name), qtype) else {
                unreachable!()
            };
            assert_eq!(authority[0].ttl, 300);
            assert_eq!(authority[0].record_type(), RecordType::SOA);
        }
        // CNAME followed in the zone; outside it, left to the chain.
        let (_, ans, _, _, chase) = answer(&z, "alias.example.org.", RecordType::AAAA);
        assert_eq!(
            ans,
            [
                "alias.example.org. CNAME www.example.org.",
                "www.example.org. AAAA ::1"
            ]
        );
        assert_eq!(chase, None);
        let (_, ans, _, _, chase) = answer(&z, "away.example.org.", RecordType::A);
        assert_eq!(ans, ["away.example.org. CNAME www.example.net."]);
        assert_eq!(chase, Some(n("www.example.net.")));
        let (_, ans, _, _, _) = answer(&z, "alias.example.org.", RecordType::CNAME);
        assert_eq!(ans, ["alias.example.org. CNAME www.example.org."]);
        let (rcode, ans, _, _, _) = answer(&z, "loop1.example.org.", RecordType::A);
        assert_eq!((rcode, ans.len()), (ResponseCode::NoError, MAX_CNAMES + 1));
        // MX target's address in additional; wildcard with the asked name as owner.
        let (_, _, _, add, _) = answer(&z, "mail.example.org.", RecordType::MX);
        assert_eq!(add, ["mx.example.org. A 192.0.2.25"]);
        let (_, ans, _, _, _) = answer(&z, "x.y.wild.example.org.", RecordType::A);
        assert_eq!(ans, ["x.y.wild.example.org. A 192.0.2.99"]);
        let (rcode, ans, _, _, _) = answer(&z, "x.wild.example.org.", RecordType::MX);
        assert_eq!((rcode, ans.len()), (ResponseCode::NoError, 0));
        // The apex NS answer has its glue and no authority.
        let (_, ans, auth, add, _) = answer(&z, "example.org.", RecordType::NS);
        assert_eq!(ans.len(), 2);
        assert!(auth.is_empty());
        assert_eq!(add, ["ns1.example.org. A 192.0.2.53"]);
    }

    #[test]
    fn below_a_cut_is_a_referral_with_glue() {
        let z = zone();
        for name in [
            "child.example.org.",
            "www.child.example.org.",
            "ns.child.example.org.",
        ] {
            match z.lookup(&n(name), RecordType::A) {
                Lookup::Referral {
                    authority,
                    additional,
                } => {
                    assert_eq!(show(&authority), ["child.example.org. NS ns.child.example.org."]);
                    assert_eq!(show(&additional), ["ns.child.example.org. A 192.0.2.77"]);
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn ds_at_a_cut_is_the_parents_and_a_cname_into_a_delegation_is_authoritative() {
        let z = zone();
        let (rcode, ans, auth, _, _) = answer(&z, "child.example.org.", RecordType::DS);
        assert_eq!((rcode, ans.len()), (ResponseCode::NoError, 0));
        assert_eq!(auth.len(), 1);
        assert!(auth[0].starts_with("example.org. SOA "), "{auth:?}");
        // Below the cut, DS is the child's: a referral.
        assert!(matches!(
            z.lookup(&n("x.child.example.org."), RecordType::DS),
            Lookup::Referral { .. }
        ));
        let z = ZoneData::parse(
            &format!("{ZONE}tochild IN CNAME host.child\n"),
            Path::new("db"),
            &n("example.org."),
        )
        .unwrap();
        let (rcode, ans, auth, add, chase) = answer(&z, "tochild.example.org.", RecordType::A);
        assert_eq!(rcode, ResponseCode::NoError);
        assert_eq!(ans, ["tochild.example.org. CNAME host.child.example.org."]);
        assert_eq!(auth, ["child.example.org. NS ns.child.example.org."]);
        assert_eq!(add, ["ns.child.example.org. A 192.0.2.77"]);
        assert_eq!(chase, None);
    }

    #[test]
    fn stand_ins_are_written_in_the_type_field_only() {
        let text = "@ IN SOA a. b. 1 2 3 4 5\n\
                    dname 300 IN TXT \"DNAME x\" dname ; DNAME\n\
                    dn dname target\n\
                    \tin 60 DNAME ( x\n\
                    DNAME )\n\
                    $ORIGIN dname.example.org.\n";
        let (out, any, ds) = scan_for_stand_ins(text).unwrap();
        assert!(any && !ds);
        assert_eq!(
            out,
            "@ IN SOA a. b. 1 2 3 4 5\n\
             dname 300 IN TXT \"DNAME x\" dname ; DNAME\n\
             dn ANAME target\n\
             \tin 60 ANAME ( x\n\
             DNAME )\n\
             $ORIGIN dname.example.org.\n"
        );
        assert_eq!(
            scan_for_stand_ins("a ANAME b.\nc DNAME d.\n"),
            Err((1, "ANAME and DNAME records in one file are not supported"))
        );
        assert!(!scan_for_stand_ins("a ANAME b.\n").unwrap().1);
        assert_eq!(
            scan_for_stand_ins("a IN DS 1 2 3 ab\n").unwrap(),
            ("a IN TXT \"cluster-dns-ds:1\" 1 2 3 ab\n".to_owned(), false, true)
        );
        assert_eq!(
            scan_for_stand_ins("a TXT \"cluster-dns-ds:9\"\n").unwrap_err().0,
            1
        );
        // Odd bytes never panic.
        for text in [
            "\"\\",
            "a \\\u{e9} DNAME",
            "(\n)\n)",
            "x\\",
            "\u{e9}\\\u{e9} IN DNAME",
        ] {
            let _ = scan_for_stand_ins(text);
        }
    }

    #[test]
    fn ds_records_load_and_answer_at_their_cut() {
        let z = ZoneData::parse(
            &format!("{ZONE}child 300 IN DS 60485 5 1 ( 2BB183AF5F22588179A53B0A\n 98631FAD1A292118 )\n"),
            Path::new("db"),
            &n("example.org."),
        )
        .unwrap();
        let Lookup::Answer { rcode, answers, .. } = z.lookup(&n("child.example.org."), RecordType::DS) else {
            panic!("not an answer")
        };
        assert_eq!(rcode, ResponseCode::NoError);
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].ttl, 300);
        let RData::Unknown { code, rdata } = &answers[0].data else {
            panic!("{answers:?}")
        };
        assert_eq!(*code, RecordType::DS);
        let mut want = vec![0xec, 0x45, 5, 1];
        want.extend_from_slice(&[
            0x2b, 0xb1, 0x83, 0xaf, 0x5f, 0x22, 0x58, 0x81, 0x79, 0xa5, 0x3b, 0x0a, 0x98, 0x63, 0x1f, 0xad,
            0x1a, 0x29, 0x21, 0x18,
        ]);
        assert_eq!(rdata.anything, want);
        // Other questions at the cut: still the referral.
        assert!(matches!(
            z.lookup(&n("child.example.org."), RecordType::A),
            Lookup::Referral { .. }
        ));
        for bad in ["1 2 3 xyz", "70000 5 1 ab", "1 300 1 ab", "1 5 1 abc", "1 5"] {
            let e = ZoneData::parse(
                &format!("{ZONE}\nchild IN DS {bad}\n"),
                Path::new("db"),
                &n("example.org."),
            )
            .unwrap_err();
            assert!(e.to_string().starts_with("db:19: DS: "), "{bad}: {e}");
        }
    }

    #[test]
    fn dnames_substitute() {
        let z = ZoneData::parse(
            &format!("{ZONE}dn 600 IN DNAME example.net.\nin IN DNAME sub.example.org.\nwww.sub IN A 192.0.2.9\nhop IN DNAME in.example.org.\n"),
            Path::new("db"),
            &n("example.org."),
        )
        .unwrap();
        let (rcode, ans, _, _, chase) = answer(&z, "A.dn.example.org.", RecordType::A);
        assert_eq!(rcode, ResponseCode::NoError);
        assert_eq!(ans.len(), 2);
        assert!(ans[0].starts_with("dn.example.org. DNAME "), "{ans:?}");
        assert_eq!(ans[1], "A.dn.example.org. CNAME A.example.net.");
        assert_eq!(chase, Some(n("a.example.net.")));
        let Lookup::Answer { answers, .. } = z.lookup(&n("a.dn.example.org."), RecordType::A) else {
            unreachable!()
        };
        assert_eq!(answers[1].ttl, 600, "the DNAME's TTL");
        // Into the zone: followed, then the target's records (through another DNAME too).
        let (_, ans, _, _, chase) = answer(&z, "www.hop.example.org.", RecordType::A);
        assert_eq!(ans.len(), 5, "{ans:?}");
        assert_eq!(
            [&ans[1], &ans[3], &ans[4]],
            [
                "www.hop.example.org. CNAME www.in.example.org.",
                "www.in.example.org. CNAME www.sub.example.org.",
                "www.sub.example.org. A 192.0.2.9"
            ],
            "{ans:?}"
        );
        assert_eq!(chase, None);
        // Asked for the CNAME: the synthesized one is the answer, not followed.
        let (rcode, ans, _, _, chase) = answer(&z, "x.in.example.org.", RecordType::CNAME);
        assert_eq!(
            (rcode, ans.len(), chase),
            (ResponseCode::NoError, 2, None),
            "{ans:?}"
        );
        // The owner itself: as any name.
        let (rcode, ans, _, _, _) = answer(&z, "dn.example.org.", RecordType::A);
        assert_eq!((rcode, ans.len()), (ResponseCode::NoError, 0));
        let (_, ans, _, _, _) = answer(&z, "dn.example.org.", RecordType::DNAME);
        assert_eq!(ans.len(), 1);
        // Too long once substituted.
        let long = format!(
            "{}.{}.{}.{}.",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(50)
        );
        let z = ZoneData::parse(
            &format!("{ZONE}long IN DNAME {long}\n"),
            Path::new("db"),
            &n("example.org."),
        )
        .unwrap();
        let (rcode, ans, _, _, _) = answer(
            &z,
            &format!("{}.long.example.org.", "x".repeat(20)),
            RecordType::A,
        );
        assert_eq!((rcode, ans.len()), (ResponseCode::YXDomain, 1));
        // The transfer carries it.
        assert!(z.transfer().iter().any(|r| r.record_type() == RecordType::DNAME));
    }

    #[test]
    fn bad_files_are_refused_with_their_line() {
        let bad = ZONE.replace("mx\tIN A 192.0.2.25", "mx\tIN A 192.0.2.256");
        let e = ZoneData::parse(&bad, Path::new("db.example.org"), &n("example.org.")).unwrap_err();
        assert!(e.to_string().starts_with("db.example.org:13: "), "{e}");
        let e = ZoneData::parse("www IN A 192.0.2.1\n", Path::new("db"), &n("example.org.")).unwrap_err();
        assert_eq!(e.to_string(), "db: no SOA record for the zone example.org.");
        let e = ZoneData::parse(
            "@ IN SOA a. b. 1 2 3 4 5\nwww.example.net. IN A 192.0.2.1\n",
            Path::new("db"),
            &n("example.org."),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "db: www.example.net. is outside the zone example.org."
        );
        // No TTL anywhere: an hour.
        let z = ZoneData::parse(
            "@ IN SOA a. b. 1 2 3 4 5\nwww IN A 192.0.2.1\n",
            Path::new("db"),
            &n("example.org."),
        )
        .unwrap();
        let Lookup::Answer { answers, .. } = z.lookup(&n("www.example.org."), RecordType::A) else {
            unreachable!()
        };
        assert_eq!(answers[0].ttl, DEFAULT_TTL);
    }

    #[test]
    fn a_cname_with_other_data_is_refused() {
        for other in ["x IN TXT \"hi\"", "x IN DNAME other.example.", "x IN A 192.0.2.9"] {
            let text = format!("@ IN SOA a. b. 1 2 3 4 5\nx IN CNAME www\n{other}\nwww IN A 192.0.2.1\n");
            let e = ZoneData::parse(&text, Path::new("db"), &n("example.org.")).unwrap_err();
            assert!(
                e.to_string().starts_with("db: x.example.org. has a CNAME and "),
                "{other}: {e}"
            );
        }
        // Alone, or with other data at another name, it loads.
        let text = "@ IN SOA a. b. 1 2 3 4 5\nx IN CNAME www\nwww IN A 192.0.2.1\nwww IN TXT \"t\"\n";
        ZoneData::parse(text, Path::new("db"), &n("example.org.")).unwrap();
    }
}
