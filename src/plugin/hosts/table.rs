//! The hosts data: the lines of a hosts file read into entries (malformed lines skipped with a
//! warning naming `file:line`), and the lookup [`Table`] built from the file's and the inline
//! entries: names to addresses, `*.` wildcards, and addresses to names for PTR.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::SystemTime;

use hickory_proto::rr::Name;

use super::config::{InlineEntry, parse_host_name, parse_ip};

/// One usable line of a hosts file: an address and its names (lower-case, absolute).
pub type FileEntry = (IpAddr, Vec<Name>);

/// Reads the entries of a hosts file's `content`. Text after `#` is a comment; a line is
/// `IP NAME [ALIASES...]`. A line whose address does not parse, or that has no valid name, is
/// skipped; so is each invalid name on an otherwise good line. Each is logged with `path:line`.
pub fn parse_hosts(content: &str, path: &Path) -> Vec<FileEntry> {
    let mut out = Vec::new();
    for (i, line) in content.lines().enumerate() {
        let line_no = i + 1;
        let text = line.split('#').next().unwrap_or_default();
        let mut fields = text.split_whitespace();
        let Some(first) = fields.next() else {
            continue;
        };
        let Some(ip) = parse_ip(first) else {
            tracing::warn!(
                "{}:{line_no}: hosts: '{first}' is not an IP address; line skipped",
                path.display()
            );
            continue;
        };
        let mut names = Vec::new();
        for f in fields {
            match parse_host_name(f) {
                Ok(n) => names.push(n),
                Err(m) => tracing::warn!("{}:{line_no}: hosts: {m}; name skipped", path.display()),
            }
        }
        if names.is_empty() {
            tracing::warn!(
                "{}:{line_no}: hosts: no valid host name after {first}; line skipped",
                path.display()
            );
            continue;
        }
        out.push((ip, names));
    }
    out
}

/// The addresses of one name, in the order written, without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addrs {
    /// IPv4 addresses.
    pub v4: Vec<Ipv4Addr>,
    /// IPv6 addresses.
    pub v6: Vec<Ipv6Addr>,
}

impl Addrs {
    fn add(&mut self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) if !self.v4.contains(&a) => self.v4.push(a),
            IpAddr::V6(a) if !self.v6.contains(&a) => self.v6.push(a),
            _ => return false,
        }
        true
    }
}

/// The lookup table served from: built anew on every (re)load and swapped in whole.
#[derive(Debug, Clone)]
pub struct Table {
    /// Exact names (case-insensitive: `Name` compares and hashes ignoring case).
    forward: HashMap<Name, Addrs>,
    /// `*.parent` entries, keyed by `parent`.
    wildcards: HashMap<Name, Addrs>,
    /// Reverse names (`4.3.2.1.in-addr.arpa.`) to host names, in the order written.
    reverse: HashMap<Name, Vec<Name>>,
    /// Distinct (name, address) pairs.
    entries: usize,
    /// When this table was built.
    loaded_at: SystemTime,
}

impl Table {
    /// A table of `inline` and `file` entries; only names inside one of `zones` are kept. A name
    /// that has an inline entry takes its addresses from the inline entries only (the file's
    /// entries for it are overridden). `reverse: false` builds no PTR map.
    pub fn build(inline: &[InlineEntry], file: &[FileEntry], zones: &[Name], reverse: bool) -> Self {
        let inline_names: HashSet<&Name> = inline.iter().flat_map(|e| e.names.iter()).collect();
        let mut t = Self {
            forward: HashMap::new(),
            wildcards: HashMap::new(),
            reverse: HashMap::new(),
            entries: 0,
            loaded_at: SystemTime::now(),
        };
        let inline_pairs = inline.iter().map(|e| (e.ip, &e.names, true));
        let file_pairs = file.iter().map(|(ip, names)| (*ip, names, false));
        for (ip, names, is_inline) in inline_pairs.chain(file_pairs) {
            for name in names {
                if !is_inline && inline_names.contains(name) {
                    continue;
                }
                if !zones.iter().any(|z| z.zone_of(name)) {
                    continue;
                }
                let (map, key) = if name.is_wildcard() {
                    (&mut t.wildcards, name.base_name())
                } else {
                    (&mut t.forward, name.clone())
                };
                if !map.entry(key).or_default().add(ip) {
                    continue;
                }
                t.entries += 1;
                if reverse && !name.is_wildcard() {
                    let names = t.reverse.entry(Name::from(ip)).or_default();
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
            }
        }
        t
    }

    /// The addresses of `name`: its own entries, else those of a `*.` entry one label above it
    /// (only when the name has no entry of its own; the wildcard's own parent is not matched).
    pub fn lookup(&self, name: &Name) -> Option<&Addrs> {
        if let Some(a) = self.forward.get(name) {
            return Some(a);
        }
        if name.num_labels() == 0 {
            return None;
        }
        self.wildcards.get(&name.base_name())
    }

    /// The host names of the reverse name `name`, if any.
    pub fn reverse(&self, name: &Name) -> Option<&[Name]> {
        self.reverse
            .get(name)
            .map(Vec::as_slice)
            .filter(|n| !n.is_empty())
    }

    /// Distinct (name, address) pairs in the table.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// When the table was built.
    pub fn loaded_at(&self) -> SystemTime {
        self.loaded_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    #[test]
    fn file_lines_comments_and_bad_lines() {
        let content = "# comment\n\n127.0.0.1 localhost\n10.0.0.1\tWeb.Example.org web # trailing\nnot-an-ip foo\n10.0.0.2\n10.0.0.3 bad..name ok.example.org\nfe80::1%eth0 six.example.org\n  \t \n";
        let e = parse_hosts(content, Path::new("/etc/hosts"));
        assert_eq!(e.len(), 4);
        assert_eq!(e[1].0, "10.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(e[1].1, [n("web.example.org."), n("web.")]);
        assert_eq!(e[2].1, [n("ok.example.org.")]);
        assert_eq!(e[3].0, "fe80::1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn table_zones_override_dedup_wildcards_reverse() {
        let file = parse_hosts(
            "10.0.0.1 a.example.org\n10.0.0.1 a.example.org\n10.0.0.9 inline.example.org\n::1 a.example.org other.net\n10.0.0.5 *.example.org\n10.0.0.2 b.example.org a.example.org\n",
            Path::new("h"),
        );
        let inline = vec![InlineEntry {
            ip: "10.0.0.7".parse().unwrap(),
            names: vec![n("inline.example.org.")],
            at: "Corefile:3".into(),
        }];
        let t = Table::build(&inline, &file, &[n("example.org.")], true);
        let a = t.lookup(&n("A.EXAMPLE.org.")).unwrap();
        assert_eq!(
            a.v4,
            [
                "10.0.0.1".parse::<Ipv4Addr>().unwrap(),
                "10.0.0.2".parse().unwrap()
            ]
        );
        assert_eq!(a.v6, ["::1".parse::<Ipv6Addr>().unwrap()]);
        assert_eq!(
            t.lookup(&n("inline.example.org.")).unwrap().v4,
            ["10.0.0.7".parse::<Ipv4Addr>().unwrap()]
        );
        assert!(t.lookup(&n("other.net.")).is_none(), "outside the zones");
        assert_eq!(
            t.lookup(&n("x.example.org.")).unwrap().v4,
            ["10.0.0.5".parse::<Ipv4Addr>().unwrap()]
        );
        assert!(
            t.lookup(&n("y.x.example.org.")).is_none(),
            "a wildcard matches one label"
        );
        assert!(
            t.lookup(&n("example.org.")).is_none(),
            "not the wildcard's parent"
        );
        // a, a(v6), b, a(10.0.0.2), inline, wildcard
        assert_eq!(t.entries(), 6);
        let r = t.reverse(&n("1.0.0.10.in-addr.arpa.")).unwrap();
        assert_eq!(r, [n("a.example.org.")]);
        let r = t.reverse(&n("2.0.0.10.in-addr.arpa.")).unwrap();
        assert_eq!(r, [n("b.example.org."), n("a.example.org.")]);
        assert!(t.reverse(&n("9.0.0.10.in-addr.arpa.")).is_none(), "overridden");
        assert!(
            t.reverse(&n("5.0.0.10.in-addr.arpa.")).is_none(),
            "no PTR for wildcards"
        );
        assert!(t.reverse(&Name::from("::1".parse::<IpAddr>().unwrap())).is_some());
        let t = Table::build(&inline, &file, &[n("example.org.")], false);
        assert!(t.reverse(&n("1.0.0.10.in-addr.arpa.")).is_none());
    }
}
