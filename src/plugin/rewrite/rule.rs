//! What a `rewrite` rule is once parsed: its mode, its name match, its action, and the
//! helpers the parsers of every rule kind share (match types, regexes and their templates).
//! It imports no other file of the plugin but `edns0` (whose rules it holds).

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, RecordType};
use regex::{Regex, RegexBuilder};

use super::edns0::Edns0Rule;
use crate::corefile::{CorefileError, Directive, Token};

/// Whether later rules run after this one matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The rule is the last one applied when it matches (the default).
    #[default]
    Stop,
    /// The next rules are tried on the rewritten name.
    Continue,
}

/// A regex replacement: the pattern (case-insensitive) and the target, whose `{N}` stand for
/// the pattern's groups (`{0}` the whole match).
#[derive(Debug, Clone)]
pub struct Template {
    /// The pattern, matched anywhere in the lower-case absolute name (`www.example.org.`).
    pub pattern: Regex,
    /// The result, lower-case; made absolute when it lacks the trailing dot.
    pub to: String,
}

impl Template {
    /// The result for `name` if the pattern matches it.
    pub fn apply(&self, name: &str) -> Option<String> {
        let caps = self.pattern.captures(name)?;
        let mut out = String::with_capacity(self.to.len() + name.len());
        let mut rest = self.to.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            match (digits, after.as_bytes().get(digits)) {
                (1.., Some(b'}')) => {
                    if let Some(m) = after[..digits].parse::<usize>().ok().and_then(|i| caps.get(i)) {
                        out.push_str(m.as_str());
                    }
                    rest = &after[digits + 1..];
                }
                _ => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        Some(out)
    }
}

/// How the question name is matched, and what it becomes. Strings are lower-case; `exact` and
/// `suffix` ones are absolute (a trailing dot is added when missing), as in CoreDNS.
#[derive(Debug, Clone)]
pub enum NameMatch {
    /// The whole name equals `from`.
    Exact {
        /// Matched name.
        from: String,
        /// Replacement name.
        to: String,
    },
    /// The name starts with `from`, which is replaced by `to`.
    Prefix {
        /// Matched start.
        from: String,
        /// Replacement.
        to: String,
    },
    /// The name ends with `from`, which is replaced by `to`.
    Suffix {
        /// Matched end.
        from: String,
        /// Replacement.
        to: String,
    },
    /// Every occurrence of `from` is replaced by `to`.
    Substring {
        /// Matched text.
        from: String,
        /// Replacement.
        to: String,
    },
    /// A regular expression; the name becomes the template's result.
    Regex(Template),
    /// Every name (the rules that match on something else: `type`, `class`, `edns0`).
    Any,
}

/// The TTL range a `ttl` rule holds the reply's records to: a TTL below `min` becomes `min`,
/// one above `max` becomes `max`, one inside is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlRange {
    /// The lowest TTL let through.
    pub min: u32,
    /// The highest TTL let through.
    pub max: u32,
}

impl TtlRange {
    /// `ttl` held to the range.
    pub fn clamp(self, ttl: u32) -> u32 {
        ttl.clamp(self.min, self.max)
    }
}

/// What a rule does when it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `name`: the question name is rewritten (and the reply's names mapped back).
    Name,
    /// `ttl`: the question goes on as asked; the TTLs of the reply's records are held to the
    /// range.
    Ttl(TtlRange),
    /// `type FROM TO`: a question of type `from` goes on as type `to`.
    Type {
        /// The type matched.
        from: RecordType,
        /// The type asked instead.
        to: RecordType,
    },
    /// `class FROM TO`: a question of class `from` goes on as class `to`.
    Class {
        /// The class matched.
        from: DNSClass,
        /// The class asked instead.
        to: DNSClass,
    },
    /// `rcode [TYPE] STRING FROM TO`: for a matching name, a reply with rcode `from` gets `to`.
    Rcode {
        /// The rcode matched in the reply.
        from: ResponseCode,
        /// The rcode the client gets instead.
        to: ResponseCode,
    },
    /// `cname [TYPE] FROM TO`: a CNAME in the reply whose target matches the rule's name match
    /// gets the rewritten target, and the records after it are those of the new target.
    Cname,
    /// `edns0 ...`: an EDNS option of the question is set, replaced, appended or removed.
    Edns0(Edns0Rule),
}

impl NameMatch {
    /// Whether `name` (lower-case, absolute) matches, whatever it would be rewritten to.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Self::Exact { from, .. } => name == from,
            Self::Prefix { from, .. } => name.starts_with(from.as_str()),
            Self::Suffix { from, .. } => name.ends_with(from.as_str()),
            Self::Substring { from, .. } => name.contains(from.as_str()),
            Self::Regex(t) => t.pattern.is_match(name),
            Self::Any => true,
        }
    }

    /// The rewritten name (presentation form, not yet checked) if `name` (lower-case,
    /// absolute) matches.
    pub fn rewrite(&self, name: &str) -> Option<String> {
        match self {
            Self::Exact { from, to } => (name == from).then(|| to.clone()),
            Self::Prefix { from, to } => name.strip_prefix(from.as_str()).map(|rest| format!("{to}{rest}")),
            Self::Suffix { from, to } => name.strip_suffix(from.as_str()).map(|head| format!("{head}{to}")),
            Self::Substring { from, to } => name
                .contains(from.as_str())
                .then(|| name.replace(from.as_str(), to)),
            Self::Regex(t) => t.apply(name),
            Self::Any => None,
        }
    }

    /// The reverse mapping `answer auto` applies to names in the response: `to` back to
    /// `from`. A regex cannot be reversed (only the rewritten question name is mapped back, by
    /// the caller), nor can an empty `to`.
    pub fn revert(&self, name: &str) -> Option<String> {
        match self {
            Self::Exact { from, to } => (name == to).then(|| from.clone()),
            Self::Prefix { from, to } if !to.is_empty() => {
                name.strip_prefix(to.as_str()).map(|rest| format!("{from}{rest}"))
            }
            Self::Suffix { from, to } if !to.is_empty() => {
                name.strip_suffix(to.as_str()).map(|head| format!("{head}{from}"))
            }
            Self::Substring { from, to } if !to.is_empty() => name
                .contains(to.as_str())
                .then(|| name.replace(to.as_str(), from)),
            _ => None,
        }
    }
}

/// One `rewrite` directive.
#[derive(Debug, Clone)]
pub struct RewriteRule {
    /// `stop` or `continue`.
    pub mode: Mode,
    /// What the rule does when it matches.
    pub action: Action,
    /// The question name match and its replacement (a `ttl` rule only matches: its `to` is
    /// unused).
    pub name: NameMatch,
    /// `answer auto` (always on for `exact`): names in the response are mapped back, owner
    /// names and the names in CNAME, NS, MX, SRV, SOA, NAPTR and ANAME data.
    pub auto: bool,
    /// `answer name FROM TO`: rewrites of owner names in the response.
    pub answer_names: Vec<Template>,
    /// `answer value FROM TO`: rewrites of the names in record data (CNAME, NS, MX, SRV, SOA,
    /// NAPTR, ANAME) in the response.
    pub answer_values: Vec<Template>,
    /// Where the directive stands (`file:line`), for logs.
    pub at: String,
}

pub(super) const MATCH_TYPES: &[&str] = &["exact", "prefix", "suffix", "substring", "regex"];

/// `s` lower-cased and absolute (a trailing dot added when missing).
pub(super) fn absolute(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    if lower.ends_with('.') {
        lower
    } else {
        format!("{lower}.")
    }
}

/// The case-insensitive regex FROM, or its error at FROM's line.
pub(super) fn regex(d: &Directive, from: &Token) -> Result<Regex, CorefileError> {
    RegexBuilder::new(&from.text)
        .case_insensitive(true)
        .build()
        .map_err(|e| {
            let why = e.to_string();
            let why = why.lines().last().unwrap_or_default().trim().to_owned();
            d.error_at(from, format!("invalid regex '{}': {why}", from.text))
        })
}

/// The regex FROM and the template TO, whose `{N}` must name groups FROM has.
pub(super) fn template(d: &Directive, from: &Token, to: &Token) -> Result<Template, CorefileError> {
    let pattern = regex(d, from)?;
    let groups = pattern.captures_len() - 1;
    let mut rest = to.text.as_str();
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0
            && after.as_bytes().get(digits) == Some(&b'}')
            && !matches!(after[..digits].parse::<usize>(), Ok(i) if i <= groups)
        {
            return Err(d.error_at(
                to,
                format!(
                    "'{}' uses {{{}}} but the regex '{}' has {groups} group(s)",
                    to.text,
                    &after[..digits],
                    from.text
                ),
            ));
        }
        rest = after;
    }
    Ok(Template {
        pattern,
        to: to.text.to_ascii_lowercase(),
    })
}

/// An error at `t` when `s` is not a domain name.
pub(super) fn check_name(d: &Directive, t: &Token, s: &str) -> Result<(), CorefileError> {
    hickory_proto::rr::Name::from_ascii(s)
        .map(drop)
        .map_err(|e| d.error_at(t, format!("'{}' is not a domain name: {e}", t.text)))
}
