//! The `weighted` policy: the weight file (its format, read with the line of each mistake),
//! the weights in force (swapped whole when the file changes), and the choice of the first
//! address record by weight. Imports no other file of the plugin.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use hickory_proto::rr::{RData, Record};
use rand::RngExt;

/// The most bytes of weight file read: a larger file is refused (the weights of a few thousand
/// names fit in far less).
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// The weights of one weight file: for each name (lower-case, absolute), its addresses' weights
/// (1 to 255) in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Weights(HashMap<String, Vec<(IpAddr, u8)>>);

impl Weights {
    /// The weight of `ip` under `name` (lower-case, absolute): 1 when the file gives none.
    pub fn weight(&self, name: &str, ip: IpAddr) -> u8 {
        self.0
            .get(name)
            .and_then(|list| list.iter().find(|(a, _)| *a == ip))
            .map_or(1, |(_, w)| *w)
    }

    /// The number of names the file gives weights for.
    pub fn names(&self) -> usize {
        self.0.len()
    }
}

/// Reads a weight file's `text` (CoreDNS's format): blank lines and lines starting with `#`
/// are skipped; a line with one field is a domain name (made absolute), a line with two an
/// address of the last name and its weight, 1 to 255. A mistake is reported as
/// `FILE:LINE: what`.
pub fn parse_weights(text: &str, file: &Path) -> Result<Weights, String> {
    let mut out: HashMap<String, Vec<(IpAddr, u8)>> = HashMap::new();
    let mut current: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("{}:{}", file.display(), i + 1);
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [name] => {
                if name.parse::<IpAddr>().is_ok() {
                    return Err(format!(
                        "{at}: wrong domain name \"{name}\" (maybe a missing weight value?)"
                    ));
                }
                let mut name = name.to_ascii_lowercase();
                if !name.ends_with('.') {
                    name.push('.');
                }
                if hickory_proto::rr::Name::from_ascii(&name).is_err() {
                    return Err(format!("{at}: wrong domain name \"{}\"", fields[0]));
                }
                out.entry(name.clone()).or_default();
                current = Some(name);
            }
            [ip, weight] => {
                let ip: IpAddr = ip
                    .parse()
                    .map_err(|_| format!("{at}: wrong IP address \"{ip}\""))?;
                let weight = weight
                    .parse::<u8>()
                    .ok()
                    .filter(|w| *w > 0)
                    .ok_or_else(|| format!("{at}: wrong weight value \"{weight}\" (1 to 255)"))?;
                let Some(name) = &current else {
                    return Err(format!("{at}: missing domain name before the address {ip}"));
                };
                out.entry(name.clone()).or_default().push((ip, weight));
            }
            _ => return Err(format!("{at}: could not parse weight line \"{line}\"")),
        }
    }
    Ok(Weights(out))
}

/// Reads and parses the weight file at `path`: `Err(None)` when it cannot be opened or read,
/// `Err(Some(why))` when it is too large or wrong.
pub fn read_weights(path: &Path) -> Result<(Weights, Vec<u8>), Option<String>> {
    let meta = std::fs::metadata(path).map_err(|_| None)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(Some(format!(
            "{}: {} bytes, more than the {MAX_FILE_BYTES} a weight file may have",
            path.display(),
            meta.len()
        )));
    }
    let bytes = std::fs::read(path).map_err(|_| None)?;
    let text = String::from_utf8_lossy(&bytes);
    let weights = parse_weights(&text, path).map_err(Some)?;
    Ok((weights, bytes))
}

/// The `weighted` policy of one plugin: its file, the weights in force and the file content
/// they were read from (to tell a change).
#[derive(Debug)]
pub struct Weighted {
    /// The weight file.
    pub path: PathBuf,
    /// How often the file is checked for changes (zero: never).
    pub reload: Duration,
    state: RwLock<(Arc<Weights>, Vec<u8>)>,
}

impl Weighted {
    /// The policy for `path`, starting with `weights` read from `content` (empty when the file
    /// was missing at start).
    pub fn new(path: PathBuf, reload: Duration, weights: Weights, content: Vec<u8>) -> Self {
        Self {
            path,
            reload,
            state: RwLock::new((Arc::new(weights), content)),
        }
    }

    /// The weights in force.
    pub fn weights(&self) -> Arc<Weights> {
        Arc::clone(&self.state.read().unwrap_or_else(PoisonError::into_inner).0)
    }

    /// Reads the file again; when its content changed and parses, its weights replace the old
    /// ones (true). A missing or wrong file keeps the weights in force (logged).
    pub fn reload_if_changed(&self) -> bool {
        match read_weights(&self.path) {
            Ok((weights, content)) => {
                let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
                if state.1 == content {
                    return false;
                }
                tracing::info!(file = %self.path.display(), names = weights.names(), "loadbalance: weight file reloaded");
                *state = (Arc::new(weights), content);
                true
            }
            Err(Some(why)) => {
                tracing::error!("loadbalance: {why}; the weights in force are kept");
                false
            }
            Err(None) => {
                tracing::warn!(file = %self.path.display(), "loadbalance: cannot read the weight file; the weights in force are kept");
                false
            }
        }
    }

    /// Orders `records` as CoreDNS's weighted policy: CNAMEs first, then the other records,
    /// then the A/AAAA records, then the MX ones, each in their order, except that one address
    /// record, drawn at random with the probability of its weight (1 for an address the file
    /// does not name under the record's owner), swaps places with the first address record.
    /// Records without addresses are left as they were.
    pub fn order(&self, records: &mut [Record]) {
        let is_address = |r: &Record| matches!(r.data, RData::A(_) | RData::AAAA(_));
        if !records.iter().any(is_address) {
            return;
        }
        let rank = |r: &Record| match r.data {
            RData::CNAME(_) => 0,
            RData::A(_) | RData::AAAA(_) => 2,
            RData::MX(_) => 3,
            _ => 1,
        };
        records.sort_by_key(rank);
        let start = records.iter().position(is_address).unwrap_or(0);
        let end = start + records[start..].iter().take_while(|r| is_address(r)).count();
        let weights = self.weights();
        let list: Vec<u32> = records[start..end]
            .iter()
            .map(|r| {
                let ip: IpAddr = match &r.data {
                    RData::A(a) => a.0.into(),
                    RData::AAAA(a) => a.0.into(),
                    _ => return 1,
                };
                u32::from(weights.weight(&r.name.to_lowercase().to_ascii(), ip))
            })
            .collect();
        if let Some(top) = draw(
            &list,
            rand::rng().random_range(0..list.iter().sum::<u32>().max(1)),
        ) {
            records.swap(start, start + top);
        }
    }
}

/// The index drawn from `weights` by `v` (0 to their sum - 1): the heaviest first, as CoreDNS
/// walks them (ties in their order), each covering as many values as its weight.
pub fn draw(weights: &[u32], v: u32) -> Option<usize> {
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(weights[i]));
    let mut sum = 0;
    order.into_iter().find(|&i| {
        sum += weights[i];
        v < sum
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Name;
    use hickory_proto::rr::rdata::{A, CNAME, MX};
    use std::net::Ipv4Addr;

    #[test]
    fn the_file_format_and_its_mistakes() {
        let w = parse_weights(
            "# weights\n\nwww.Example.com\n100.64.1.1 3\n100.64.1.2 1\n  100.64.1.3 2\nsix.example.com.\n2001:db8::1 255\n",
            Path::new("w.txt"),
        )
        .unwrap();
        assert_eq!(w.names(), 2);
        assert_eq!(w.weight("www.example.com.", "100.64.1.1".parse().unwrap()), 3);
        assert_eq!(w.weight("www.example.com.", "100.64.1.3".parse().unwrap()), 2);
        assert_eq!(w.weight("www.example.com.", "100.64.1.9".parse().unwrap()), 1);
        assert_eq!(w.weight("six.example.com.", "2001:db8::1".parse().unwrap()), 255);
        for (text, want) in [
            ("a.example\n10.0.0.1 0\n", "w.txt:2: wrong weight value \"0\""),
            ("a.example\n10.0.0.1 256\n", "w.txt:2: wrong weight value \"256\""),
            (
                "a.example\n10.0.0.x 2\n",
                "w.txt:2: wrong IP address \"10.0.0.x\"",
            ),
            ("\n10.0.0.1 2\n", "w.txt:2: missing domain name"),
            (
                "10.0.0.1\n",
                "w.txt:1: wrong domain name \"10.0.0.1\" (maybe a missing weight value?)",
            ),
            (
                "a.example\n10.0.0.1 2 3\n",
                "w.txt:2: could not parse weight line",
            ),
            ("a..example\n", "w.txt:1: wrong domain name"),
        ] {
            let e = parse_weights(text, Path::new("w.txt")).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_draw_follows_the_weights() {
        // Weights 3, 1, 2: the heaviest covers 0..3, then 2 covers 3..5, then 1 covers 5.
        let picks: Vec<Option<usize>> = (0..7).map(|v| draw(&[3, 1, 2], v)).collect();
        assert_eq!(
            picks,
            [Some(0), Some(0), Some(0), Some(2), Some(2), Some(1), None]
        );
        assert_eq!(draw(&[], 0), None);
    }

    #[test]
    fn order_moves_one_address_to_the_top() {
        let n = Name::from_ascii("www.example.com.").unwrap();
        let w = Weighted::new(
            PathBuf::from("unused"),
            Duration::ZERO,
            parse_weights("www.example.com\n10.0.0.3 255\n", Path::new("w")).unwrap(),
            Vec::new(),
        );
        let a = |i: u8| Record::from_rdata(n.clone(), 5, RData::A(A(Ipv4Addr::new(10, 0, 0, i))));
        let mut tops = [0u32; 4];
        for _ in 0..300 {
            let mut r = vec![
                a(1),
                Record::from_rdata(n.clone(), 5, RData::MX(MX::new(1, n.clone()))),
                a(2),
                Record::from_rdata(n.clone(), 5, RData::CNAME(CNAME(n.clone()))),
                a(3),
            ];
            w.order(&mut r);
            assert!(matches!(r[0].data, RData::CNAME(_)));
            assert!(matches!(r[4].data, RData::MX(_)));
            let RData::A(top) = &r[1].data else {
                panic!("{r:?}");
            };
            tops[usize::from(top.0.octets()[3])] += 1;
        }
        // 255 : 1 : 1: address 3 is first nearly always, and the others keep their order.
        assert!(tops[3] > 280, "{tops:?}");
    }
}
