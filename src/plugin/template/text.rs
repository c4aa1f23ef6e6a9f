//! The two small languages of the `template` plugin: the Go-template subset its answer lines
//! use (`{{ .Name }}`, `{{ .Zone }}`, `{{ .Class }}`, `{{ .Type }}`, `{{ .Remote }}`,
//! `{{ index .Match N }}`, `{{ .Group.NAME }}`), parsed once at setup; and the zone-file
//! record lines they render to (`NAME [TTL] [CLASS] TYPE RDATA`, for A, AAAA, CNAME, PTR, NS,
//! MX, SRV and TXT), parsed per answer.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use hickory_proto::rr::rdata::{A, AAAA, CNAME, MX, NS, PTR, SRV, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Name,
    Zone,
    Class,
    Type,
    Remote,
    Match(usize),
    Group(String),
}

/// A parsed template line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// The line as written (the `template` label of the failure metric).
    pub source: String,
    pieces: Vec<Piece>,
}

/// What a template is rendered with.
#[derive(Debug)]
pub struct Data<'a> {
    /// The question name as asked (absolute).
    pub name: &'a str,
    /// The zone that matched.
    pub zone: &'a str,
    /// The question's class and type, as text.
    pub class: &'a str,
    /// The question's type.
    pub qtype: &'a str,
    /// The client's address.
    pub remote: String,
    /// The regex captures: index 0 the whole match.
    pub matches: Vec<String>,
    /// The named captures.
    pub groups: Vec<(String, String)>,
}

impl Template {
    /// Parses `source`; the error says which action is not understood.
    pub fn parse(source: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut rest = source;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| format!("'{{{{' without '}}}}' in '{source}'"))?;
            let action = after[..close]
                .trim()
                .trim_start_matches('-')
                .trim_end_matches('-')
                .trim();
            pieces.push(Self::action(action)?);
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        Ok(Self {
            source: source.to_owned(),
            pieces,
        })
    }

    fn action(action: &str) -> Result<Piece, String> {
        let words: Vec<&str> = action.split_whitespace().collect();
        match words.as_slice() {
            [".Name"] => Ok(Piece::Name),
            [".Zone"] => Ok(Piece::Zone),
            [".Class"] => Ok(Piece::Class),
            [".Type"] => Ok(Piece::Type),
            [".Remote"] => Ok(Piece::Remote),
            ["index", ".Match", n] => n
                .parse()
                .map(Piece::Match)
                .map_err(|_| format!("'{{{{ {action} }}}}': '{n}' is not a group number")),
            [g] if g.starts_with(".Group.") && g.len() > ".Group.".len() => {
                Ok(Piece::Group(g[".Group.".len()..].to_owned()))
            }
            _ => Err(format!(
                "'{{{{ {action} }}}}' is not supported (use .Name, .Zone, .Class, .Type, .Remote, index .Match N or .Group.NAME)"
            )),
        }
    }

    /// True when the template uses the client's address (its answers are per client).
    pub fn uses_remote(&self) -> bool {
        self.pieces.contains(&Piece::Remote)
    }

    /// The names of the groups it uses.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Group(g) => Some(g.as_str()),
            _ => None,
        })
    }

    /// The line for `data`. A missing group renders empty, as Go's templates render a missing
    /// map key; a missing match index is an error (Go's `index` fails).
    pub fn render(&self, data: &Data<'_>) -> Result<String, String> {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Name => out.push_str(data.name),
                Piece::Zone => out.push_str(data.zone),
                Piece::Class => out.push_str(data.class),
                Piece::Type => out.push_str(data.qtype),
                Piece::Remote => out.push_str(&data.remote),
                Piece::Match(n) => out.push_str(
                    data.matches
                        .get(*n)
                        .ok_or_else(|| format!("index .Match {n}: out of range"))?,
                ),
                Piece::Group(g) => {
                    if let Some((_, v)) = data.groups.iter().find(|(k, _)| k == g) {
                        out.push_str(v);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Splits a record line into fields; a `"..."` string is one field (quotes removed).
fn fields(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => s.extend(chars.next()),
                    Some(c) => s.push(c),
                    None => return Err("a '\"' string is not closed".into()),
                }
            }
            out.push(s);
        } else {
            let mut s = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                s.push(c);
                chars.next();
            }
            out.push(s);
        }
    }
    Ok(out)
}

fn name(s: &str) -> Result<Name, String> {
    let mut n = Name::from_ascii(s).map_err(|e| format!("'{s}' is not a name: {e}"))?;
    n.set_fqdn(true);
    Ok(n)
}

fn num<T: FromStr>(s: Option<&String>, what: &str) -> Result<T, String> {
    s.and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("expected {what}"))
}

/// Parses a rendered record line (`NAME [TTL] [CLASS] TYPE RDATA`, TTL 3600 when left out).
pub fn parse_record(line: &str) -> Result<Record, String> {
    let f = fields(line)?;
    let mut it = f.iter();
    let owner = name(it.next().ok_or("an empty record line")?)?;
    let mut ttl = 3600;
    let mut next = it.next();
    if let Some(t) = next.and_then(|t| t.parse::<u32>().ok()) {
        ttl = t;
        next = it.next();
    }
    if let Some(c) = next
        && DNSClass::from_str(&c.to_ascii_uppercase()).is_ok()
        && RecordType::from_str(&c.to_ascii_uppercase()).is_err()
    {
        next = it.next();
    }
    let rtype = next.ok_or("no record type")?.to_ascii_uppercase();
    let rest: Vec<&String> = it.collect();
    let one = |what: &str| -> Result<&String, String> {
        match rest.as_slice() {
            [v] => Ok(v),
            _ => Err(format!("{rtype} takes one {what}")),
        }
    };
    let data = match rtype.as_str() {
        "A" => RData::A(A(one("IPv4 address")?
            .parse::<Ipv4Addr>()
            .map_err(|_| "A: not an IPv4 address".to_owned())?)),
        "AAAA" => RData::AAAA(AAAA(
            one("IPv6 address")?
                .parse::<Ipv6Addr>()
                .map_err(|_| "AAAA: not an IPv6 address".to_owned())?,
        )),
        "CNAME" => RData::CNAME(CNAME(name(one("name")?)?)),
        "PTR" => RData::PTR(PTR(name(one("name")?)?)),
        "NS" => RData::NS(NS(name(one("name")?)?)),
        "MX" => {
            let [pref, host] = rest.as_slice() else {
                return Err("MX takes PREFERENCE HOST".into());
            };
            RData::MX(MX::new(num(Some(pref), "an MX preference")?, name(host)?))
        }
        "SRV" => {
            let [prio, weight, port, target] = rest.as_slice() else {
                return Err("SRV takes PRIORITY WEIGHT PORT TARGET".into());
            };
            RData::SRV(SRV::new(
                num(Some(prio), "an SRV priority")?,
                num(Some(weight), "an SRV weight")?,
                num(Some(port), "an SRV port")?,
                name(target)?,
            ))
        }
        "TXT" => {
            if rest.is_empty() {
                return Err("TXT takes at least one string".into());
            }
            RData::TXT(TXT::new(rest.iter().map(|s| (*s).clone()).collect()))
        }
        other => return Err(format!("record type {other} is not supported in templates")),
    };
    Ok(Record::from_rdata(owner, ttl, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Data<'static> {
        Data {
            name: "ip-10-32-0-1.example.",
            zone: "example.",
            class: "IN",
            qtype: "A",
            remote: "127.0.0.1".into(),
            matches: vec!["ip-10-32-0-1.example.".into(), "10".into(), "32".into()],
            groups: vec![("a".into(), "10".into())],
        }
    }

    #[test]
    fn renders_the_supported_actions() {
        let t =
            Template::parse("{{ .Name }} 60 {{ .Class }} {{.Type}} {{ .Group.a }}.{{ index .Match 2 }}.0.1")
                .unwrap();
        assert_eq!(
            t.render(&data()).unwrap(),
            "ip-10-32-0-1.example. 60 IN A 10.32.0.1"
        );
        assert!(!t.uses_remote());
        assert!(Template::parse("{{ .Remote }}").unwrap().uses_remote());
        assert!(Template::parse("{{ .Name ").unwrap_err().contains("without"));
        assert!(
            Template::parse("{{ .Message }}")
                .unwrap_err()
                .contains("not supported")
        );
        let out = Template::parse("{{ index .Match 9 }}").unwrap().render(&data());
        assert!(out.unwrap_err().contains("out of range"));
    }

    #[test]
    fn record_lines() {
        let r = parse_record("a.example. 60 IN A 10.0.0.1").unwrap();
        assert_eq!((r.ttl, r.record_type()), (60, RecordType::A));
        let r = parse_record("a.example. CNAME b.example").unwrap();
        assert_eq!(r.ttl, 3600);
        assert_eq!(r.data, RData::CNAME(CNAME(name("b.example.").unwrap())));
        let r = parse_record("_x._tcp.example. 5 IN SRV 0 10 8080 a.example.").unwrap();
        assert_eq!(r.record_type(), RecordType::SRV);
        let r = parse_record("t.example. 5 IN TXT \"hello world\" two").unwrap();
        assert_eq!(
            r.data,
            RData::TXT(TXT::new(vec!["hello world".into(), "two".into()]))
        );
        assert!(
            parse_record("a.example. 60 IN A 300.0.0.1")
                .unwrap_err()
                .contains("IPv4")
        );
        assert!(
            parse_record("a.example. 60 IN HINFO x y")
                .unwrap_err()
                .contains("not supported")
        );
    }
}
