//! What a configured `hosts` directive holds once parsed (`setup.rs` reads the Corefile into it):
//! the file, its zones, its inline entries and options, and how a hosts line's address and names
//! are read (the Corefile's inline lines and the file's, `table.rs`, alike).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use hickory_proto::rr::Name;

use crate::corefile::Location;

/// One `IP NAME...` line written in the Corefile block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineEntry {
    /// The address (an IPv4-mapped IPv6 address is stored as IPv4).
    pub ip: IpAddr,
    /// The names, lower-case and absolute.
    pub names: Vec<Name>,
    /// Where the line stands, `file:line`.
    pub at: String,
}

/// The `hosts` plugin's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostsConfig {
    /// The hosts file (relative paths joined to the Corefile's directory).
    pub path: PathBuf,
    /// Where the Corefile names the file; `None` for the default `/etc/hosts`.
    pub path_at: Option<Location>,
    /// The zones served (normalized): the arguments after FILE, else the server block's zones.
    pub zones: Vec<String>,
    /// The inline entries, in Corefile order. They take precedence over the file's entries for
    /// the same name.
    pub inline: Vec<InlineEntry>,
    /// TTL of the A, AAAA and PTR records.
    pub ttl: u32,
    /// `no_reverse`: no PTR records from the entries.
    pub no_reverse: bool,
    /// How often the file is checked for changes (zero: never).
    pub reload: Duration,
    /// `fallthrough [ZONES...]`: `None` off; an empty list for every zone served.
    pub fallthrough: Option<Vec<String>>,
    /// `fallthrough_unsupported`: types other than A/AAAA/PTR at a name in the hosts data go to the
    /// next plugin too (within the fallthrough zones) instead of NODATA.
    pub fallthrough_unsupported: bool,
}

/// Parses the address of a hosts line: an IPv4 or IPv6 address, an IPv6 zone (`%eth0`) dropped,
/// an IPv4-mapped IPv6 address taken as IPv4.
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    let bare = s.split('%').next().unwrap_or(s);
    bare.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
}

/// Checks and normalizes one host name of a hosts line: lower-case and absolute; labels of 1 to
/// 63 letters, digits, `-` or `_`; a `*` only as the whole leftmost label (a wildcard); at most
/// 255 bytes in wire form.
pub fn parse_host_name(s: &str) -> Result<Name, String> {
    let lower = s.to_ascii_lowercase();
    let body = lower.strip_suffix('.').unwrap_or(&lower);
    if body.is_empty() {
        return Err(format!("'{s}' is not a host name"));
    }
    for (i, label) in body.split('.').enumerate() {
        if label.is_empty() {
            return Err(format!("'{s}' has an empty label"));
        }
        if label.len() > 63 {
            return Err(format!("'{s}' has a label longer than 63 characters"));
        }
        if label == "*" && i == 0 {
            continue;
        }
        if !label
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        {
            return Err(format!("'{s}' is not a valid host name"));
        }
    }
    if body.len() + 2 > 255 {
        return Err(format!("'{s}' is longer than 255 bytes"));
    }
    Name::from_ascii(format!("{body}.")).map_err(|e| format!("'{s}': {e}"))
}
