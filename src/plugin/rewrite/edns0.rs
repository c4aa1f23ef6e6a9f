//! `edns0` rules: the EDNS options of the question the rest of the chain asks (and `forward`
//! sends upstream) are set, replaced, appended or removed. Parsed from
//!
//! ```text
//! edns0 local set|replace|append CODE DATA|{VARIABLE} [revert]
//! edns0 local unset CODE
//! edns0 nsid set|replace|append [revert]
//! edns0 nsid unset
//! edns0 subnet set|replace|append IPV4MASK IPV6MASK [revert]
//! edns0 subnet unset
//! ```
//!
//! and applied to a [`Question`]'s options. Imports no other file of the plugin.

use std::net::IpAddr;

use crate::corefile::{CorefileError, Directive, Token};
use crate::proto::{EdnsOpt, Question, transport_label};

/// The NSID option code (RFC 5001).
pub const NSID: u16 = 3;
/// The client subnet option code (RFC 7871).
pub const SUBNET: u16 = 8;
/// The most bytes of data a `local` option may carry: what fits a UDP query of cluster-dns's
/// payload size with room for the question.
pub const MAX_LOCAL_DATA: usize = 1024;

/// The most bytes of EDNS options (each with its code and length) a rule may grow a question's
/// options to: what the query `forward` sends with them holds beside its header, the longest
/// question and the OPT record's fixed part, in a DNS message (65,535 bytes). A client's
/// request over a stream can carry more options than that leaves room for a rule's data.
pub const MAX_OPTIONS_WIRE: usize = 65_535 - 12 - (255 + 4) - 11;

/// What an `edns0` rule does with the option it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edns0Action {
    /// The first option of the code gets the rule's data, or the option is added.
    Set,
    /// The first option of the code gets the rule's data; none is added.
    Replace,
    /// The option is added when the question has none of the code.
    Append,
    /// Every option of the code is removed.
    Unset,
}

/// A value a `local` option takes from the question, written `{NAME}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variable {
    /// `{qname}`: the question name, as text with its trailing dot.
    Qname,
    /// `{qtype}`: the question type, two bytes in network order.
    Qtype,
    /// `{client_ip}`: the client's address, 4 or 16 bytes.
    ClientIp,
    /// `{client_port}`: the client's port, two bytes in network order.
    ClientPort,
    /// `{protocol}`: `udp` or `tcp`.
    Protocol,
    /// `{server_ip}`: the address of the listener the question came to, 4 or 16 bytes.
    ServerIp,
    /// `{server_port}`: its port, two bytes in network order.
    ServerPort,
}

/// The data of a `local` option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalData {
    /// Fixed bytes (`0x` followed by hex, or the text's bytes).
    Bytes(Vec<u8>),
    /// A value of the question.
    Variable(Variable),
}

/// Which option a rule works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edns0Kind {
    /// `local CODE DATA`: an option of any code with the given data.
    Local {
        /// The option code.
        code: u16,
        /// Its data (empty for `unset`).
        data: LocalData,
    },
    /// `nsid`: the NSID option, with empty data (a request for the server's identifier).
    Nsid,
    /// `subnet V4 V6`: the client subnet option, made from the client's address cut to
    /// `v4` / `v6` bits.
    Subnet {
        /// The IPv4 source prefix length.
        v4: u8,
        /// The IPv6 source prefix length.
        v6: u8,
    },
}

/// One `edns0` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edns0Rule {
    /// What it does.
    pub action: Edns0Action,
    /// The option it works on.
    pub kind: Edns0Kind,
    /// `revert` was written: accepted; the client's response never carries the question's
    /// options (cluster-dns writes its own OPT record), so there is nothing to undo.
    pub revert: bool,
}

impl Edns0Kind {
    fn code(&self) -> u16 {
        match self {
            Self::Local { code, .. } => *code,
            Self::Nsid => NSID,
            Self::Subnet { .. } => SUBNET,
        }
    }
}

/// The client subnet option data (RFC 7871 section 6) for `ip` cut to `v4` / `v6` bits: the
/// family, the source prefix, a scope prefix of 0, and only the address bytes the prefix
/// covers, the bits after it zero.
pub fn subnet_data(ip: IpAddr, v4: u8, v6: u8) -> Vec<u8> {
    let (family, prefix, bytes): (u16, u8, Vec<u8>) = match ip {
        IpAddr::V4(a) => (1, v4, a.octets().to_vec()),
        IpAddr::V6(a) => (2, v6, a.octets().to_vec()),
    };
    let keep = usize::from(prefix).div_ceil(8);
    let mut out = Vec::with_capacity(4 + keep);
    out.extend_from_slice(&family.to_be_bytes());
    out.push(prefix);
    out.push(0);
    for (i, b) in bytes.iter().take(keep).enumerate() {
        let bits_left = usize::from(prefix).saturating_sub(i * 8);
        let mask = if bits_left >= 8 {
            0xff
        } else {
            0xffu8 << (8 - bits_left)
        };
        out.push(b & mask);
    }
    out
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// The variable's value for `q`; `None` when the question does not know it (a question not
/// from a listener has no server address).
fn variable_data(v: Variable, q: &Question) -> Option<Vec<u8>> {
    Some(match v {
        Variable::Qname => q.name.to_ascii().into_bytes(),
        Variable::Qtype => u16::from(q.qtype).to_be_bytes().to_vec(),
        Variable::ClientIp => ip_bytes(q.client.ip()),
        Variable::ClientPort => q.client.port().to_be_bytes().to_vec(),
        Variable::Protocol => transport_label(q.transport).as_bytes().to_vec(),
        Variable::ServerIp => ip_bytes(q.server?.ip()),
        Variable::ServerPort => q.server?.port().to_be_bytes().to_vec(),
    })
}

impl Edns0Rule {
    /// Applies the rule to `q`'s options; true when it changed them (the rule "matched", for
    /// `stop`). `unset` always matches, as in CoreDNS.
    pub fn apply(&self, q: &mut Question) -> bool {
        let code = self.kind.code();
        if self.action == Edns0Action::Unset {
            q.edns_options.retain(|o| o.code != code);
            return true;
        }
        let data = match &self.kind {
            Edns0Kind::Local {
                data: LocalData::Bytes(b),
                ..
            } => b.clone(),
            Edns0Kind::Local {
                data: LocalData::Variable(v),
                ..
            } => match variable_data(*v, q) {
                Some(data) => data,
                None => return false,
            },
            Edns0Kind::Nsid => Vec::new(),
            Edns0Kind::Subnet { v4, v6 } => subnet_data(q.client.ip(), *v4, *v6),
        };
        // A change that would grow the options past what a query can carry is not made (the
        // rule does not match); the client's own options, however large, fit its request.
        let size: usize = q.edns_options.iter().map(|o| 4 + o.data.len()).sum();
        let fits = |grown: usize| grown <= size.max(MAX_OPTIONS_WIRE);
        if let Some(existing) = q.edns_options.iter_mut().find(|o| o.code == code) {
            return match self.action {
                Edns0Action::Set | Edns0Action::Replace if fits(size - existing.data.len() + data.len()) => {
                    existing.data = data;
                    true
                }
                _ => false,
            };
        }
        match self.action {
            Edns0Action::Set | Edns0Action::Append if fits(size + 4 + data.len()) => {
                q.edns_options.push(EdnsOpt { code, data });
                true
            }
            _ => false,
        }
    }
}

const USAGE: &str = "edns0 takes local|nsid|subnet set|replace|append|unset ...";

/// `0x1f`, `31` or `0o37`, as Go's ParseUint with base 0 reads them.
fn number(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    if let Some(hex) = lower.strip_prefix("0x") {
        u64::from_str_radix(hex, 16).ok()
    } else if let Some(oct) = lower.strip_prefix("0o") {
        u64::from_str_radix(oct, 8).ok()
    } else if let Some(bin) = lower.strip_prefix("0b") {
        u64::from_str_radix(bin, 2).ok()
    } else if lower.len() > 1 && lower.starts_with('0') {
        u64::from_str_radix(&lower[1..], 8).ok()
    } else {
        lower.parse().ok()
    }
}

fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn code(d: &Directive, t: &Token) -> Result<u16, CorefileError> {
    number(&t.text)
        .and_then(|n| u16::try_from(n).ok())
        .ok_or_else(|| {
            d.error_at(
                t,
                format!(
                    "invalid EDNS0 option code '{}': expected 0 to 65535 (0x0 to 0xffff)",
                    t.text
                ),
            )
        })
}

fn local_data(d: &Directive, t: &Token) -> Result<LocalData, CorefileError> {
    let text = t.text.as_str();
    if text.starts_with('{') && text.ends_with('}') {
        let v = match text {
            "{qname}" => Variable::Qname,
            "{qtype}" => Variable::Qtype,
            "{client_ip}" => Variable::ClientIp,
            "{client_port}" => Variable::ClientPort,
            "{protocol}" => Variable::Protocol,
            "{server_ip}" => Variable::ServerIp,
            "{server_port}" => Variable::ServerPort,
            _ => {
                return Err(d.error_at(
                    t,
                    format!("unsupported variable name '{text}': expected {{qname}}, {{qtype}}, {{client_ip}}, {{client_port}}, {{protocol}}, {{server_ip}} or {{server_port}} (metadata labels are not implemented in cluster-dns)"),
                ));
            }
        };
        return Ok(LocalData::Variable(v));
    }
    let bytes = if let Some(hex) = text.strip_prefix("0x") {
        hex_bytes(hex).ok_or_else(|| d.error_at(t, format!("invalid hex data '{text}'")))?
    } else {
        text.as_bytes().to_vec()
    };
    if bytes.len() > MAX_LOCAL_DATA {
        return Err(d.error_at(
            t,
            format!(
                "EDNS0 local data of {} bytes: at most {MAX_LOCAL_DATA}",
                bytes.len()
            ),
        ));
    }
    Ok(LocalData::Bytes(bytes))
}

fn mask(d: &Directive, t: &Token, most: u8, family: &str) -> Result<u8, CorefileError> {
    number(&t.text)
        .filter(|n| *n <= u64::from(most))
        .and_then(|n| u8::try_from(n).ok())
        .ok_or_else(|| {
            d.error_at(
                t,
                format!(
                    "invalid {family} bit mask length '{}': expected 0 to {most}",
                    t.text
                ),
            )
        })
}

/// Parses the tokens after `edns0` (`at`).
pub fn parse(d: &Directive, at: &Token, toks: &[&Token]) -> Result<Edns0Rule, CorefileError> {
    let (Some(kind), Some(action)) = (toks.first(), toks.get(1)) else {
        return Err(d.error_at(at, USAGE));
    };
    let action_word = action.text.to_ascii_lowercase();
    let act = match action_word.as_str() {
        "set" => Edns0Action::Set,
        "replace" => Edns0Action::Replace,
        "append" => Edns0Action::Append,
        "unset" => Edns0Action::Unset,
        _ => {
            return Err(d.error_at(
                action,
                format!(
                    "invalid action '{}': expected set, replace, append or unset",
                    action.text
                ),
            ));
        }
    };
    let mut args = &toks[2..];
    let mut revert = false;
    if act != Edns0Action::Unset && args.last().is_some_and(|t| t.text == "revert") {
        revert = true;
        args = &args[..args.len() - 1];
    }
    let kind_word = kind.text.to_ascii_lowercase();
    let want = match (kind_word.as_str(), act) {
        ("local", Edns0Action::Unset) => 1,
        ("local", _) | ("subnet", Edns0Action::Set | Edns0Action::Replace | Edns0Action::Append) => 2,
        ("nsid" | "subnet", _) => 0,
        _ => {
            return Err(d.error_at(
                kind,
                format!(
                    "invalid EDNS0 rule type '{}': expected local, nsid or subnet",
                    kind.text
                ),
            ));
        }
    };
    if args.len() != want {
        let shape = match (kind_word.as_str(), act) {
            ("local", Edns0Action::Unset) => "edns0 local unset CODE",
            ("local", _) => "edns0 local set|replace|append CODE DATA [revert]",
            ("nsid", Edns0Action::Unset) => "edns0 nsid unset",
            ("nsid", _) => "edns0 nsid set|replace|append [revert]",
            ("subnet", Edns0Action::Unset) => "edns0 subnet unset",
            _ => "edns0 subnet set|replace|append IPV4MASK IPV6MASK [revert]",
        };
        let near = args.get(want).copied().unwrap_or(action);
        return Err(d.error_at(near, format!("expected {shape}")));
    }
    let kind = match kind_word.as_str() {
        "local" => Edns0Kind::Local {
            code: code(d, args[0])?,
            data: match args.get(1) {
                Some(t) => local_data(d, t)?,
                None => LocalData::Bytes(Vec::new()),
            },
        },
        "nsid" => Edns0Kind::Nsid,
        _ => match args {
            [v4, v6] => Edns0Kind::Subnet {
                v4: mask(d, v4, 32, "IPv4")?,
                v6: mask(d, v6, 128, "IPv6")?,
            },
            _ => Edns0Kind::Subnet { v4: 0, v6: 0 },
        },
    };
    Ok(Edns0Rule {
        action: act,
        kind,
        revert,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::{Name, RecordType};
    use std::net::SocketAddr;

    fn q() -> Question {
        let mut q = Question::new(Name::from_ascii("Www.example.").unwrap(), RecordType::AAAA);
        q.client = SocketAddr::from(([192, 0, 2, 77], 5353));
        q
    }

    fn rule(action: Edns0Action, kind: Edns0Kind) -> Edns0Rule {
        Edns0Rule {
            action,
            kind,
            revert: false,
        }
    }

    fn local(code: u16, data: &[u8]) -> Edns0Kind {
        Edns0Kind::Local {
            code,
            data: LocalData::Bytes(data.to_vec()),
        }
    }

    fn opts(q: &Question) -> Vec<(u16, Vec<u8>)> {
        q.edns_options.iter().map(|o| (o.code, o.data.clone())).collect()
    }

    #[test]
    fn actions() {
        let mut asked = q();
        assert!(!rule(Edns0Action::Replace, local(0xffee, b"ab")).apply(&mut asked));
        assert!(opts(&asked).is_empty(), "replace adds nothing");
        assert!(rule(Edns0Action::Append, local(0xffee, b"ab")).apply(&mut asked));
        assert!(!rule(Edns0Action::Append, local(0xffee, b"cd")).apply(&mut asked));
        assert_eq!(
            opts(&asked),
            [(0xffee, b"ab".to_vec())],
            "append only when absent"
        );
        assert!(rule(Edns0Action::Set, local(0xffee, b"cd")).apply(&mut asked));
        assert!(rule(Edns0Action::Set, Edns0Kind::Nsid).apply(&mut asked));
        assert_eq!(opts(&asked), [(0xffee, b"cd".to_vec()), (NSID, vec![])]);
        assert!(rule(Edns0Action::Unset, local(0xffee, b"")).apply(&mut asked));
        assert!(
            rule(Edns0Action::Unset, local(0xffee, b"")).apply(&mut asked),
            "unset always matches"
        );
        assert_eq!(opts(&asked), [(NSID, vec![])]);
    }

    #[test]
    fn variables_and_subnets() {
        let mut asked = q();
        for (code, v) in [
            (1, Variable::Qname),
            (2, Variable::Qtype),
            (3, Variable::ClientIp),
            (4, Variable::ClientPort),
            (5, Variable::Protocol),
        ] {
            let kind = Edns0Kind::Local {
                code: 0xff00 + code,
                data: LocalData::Variable(v),
            };
            assert!(rule(Edns0Action::Set, kind).apply(&mut asked));
        }
        let data: Vec<Vec<u8>> = asked.edns_options.iter().map(|o| o.data.clone()).collect();
        assert_eq!(
            data,
            [
                b"Www.example.".to_vec(),
                vec![0, 28],
                vec![192, 0, 2, 77],
                5353u16.to_be_bytes().to_vec(),
                b"udp".to_vec()
            ]
        );
        assert_eq!(
            subnet_data("192.0.2.77".parse().unwrap(), 24, 56),
            [0, 1, 24, 0, 192, 0, 2]
        );
        assert_eq!(
            subnet_data("192.0.2.77".parse().unwrap(), 20, 56),
            [0, 1, 20, 0, 192, 0, 0]
        );
        assert_eq!(subnet_data("192.0.2.77".parse().unwrap(), 0, 56), [0, 1, 0, 0]);
        assert_eq!(
            subnet_data("2001:db8:1:2:3::1".parse().unwrap(), 24, 56),
            [0, 2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0]
        );
        assert_eq!(subnet_data("192.0.2.77".parse().unwrap(), 32, 0).len(), 8);
    }

    #[test]
    fn numbers() {
        assert_eq!(number("0xffee"), Some(0xffee));
        assert_eq!(number("65518"), Some(65518));
        assert_eq!(number("010"), Some(8));
        assert_eq!(number("0"), Some(0));
        assert_eq!(number("x"), None);
        assert_eq!(hex_bytes("61626364"), Some(b"abcd".to_vec()));
        assert_eq!(hex_bytes("6"), None);
        assert_eq!(hex_bytes("zz"), None);
    }
}
