//! The parsers of the `type`, `class`, `rcode` and `cname` rules:
//!
//! ```text
//! rewrite [continue|stop] type FROM TO
//! rewrite [continue|stop] class FROM TO
//! rewrite [continue|stop] rcode [exact|prefix|suffix|substring|regex] STRING FROM TO
//! rewrite [continue|stop] cname [exact|prefix|suffix|substring|regex] FROM TO
//! ```

use std::str::FromStr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, RecordType};

use super::rule::{Action, MATCH_TYPES, Mode, NameMatch, RewriteRule, Template, absolute, regex, template};
use crate::corefile::{CorefileError, Directive, Token};

/// A rule of `mode` doing `action` for names matching `name`, written at `at`.
fn rule(at: &Token, mode: Mode, action: Action, name: NameMatch) -> RewriteRule {
    RewriteRule {
        mode,
        action,
        name,
        auto: false,
        answer_names: Vec::new(),
        answer_values: Vec::new(),
        at: at.loc.to_string(),
    }
}

fn two<'t>(
    d: &Directive,
    at: &Token,
    toks: &[&'t Token],
    field: &str,
) -> Result<(&'t Token, &'t Token), CorefileError> {
    match toks {
        [from, to] => Ok((from, to)),
        [_, _, extra, ..] => Err(d.error_at(
            extra,
            format!(
                "unexpected '{}': {field} rules must have exactly two arguments",
                extra.text
            ),
        )),
        _ => Err(d.error_at(
            at,
            format!("{field} rules must have exactly two arguments: FROM TO"),
        )),
    }
}

/// A record type by its mnemonic (`A`, `hinfo`), as CoreDNS reads it.
fn record_type(d: &Directive, t: &Token) -> Result<RecordType, CorefileError> {
    let upper = t.text.to_ascii_uppercase();
    match RecordType::from_str(&upper) {
        Ok(RecordType::Unknown(_)) | Err(_) => Err(d.error_at(t, format!("invalid type \"{upper}\""))),
        Ok(RecordType::OPT) => Err(d.error_at(t, "invalid type \"OPT\": a question never has it")),
        // Zone transfers are decided before the chain (over TCP only, where `transfer` is).
        Ok(RecordType::AXFR | RecordType::IXFR) => Err(d.error_at(
            t,
            format!("type {upper} cannot be rewritten in cluster-dns: zone transfers are answered by the transfer plugin only"),
        )),
        Ok(rt) => Ok(rt),
    }
}

/// `type FROM TO`.
pub fn type_rule(
    d: &Directive,
    at: &Token,
    toks: &[&Token],
    mode: Mode,
) -> Result<RewriteRule, CorefileError> {
    let (from, to) = two(d, at, toks, "type")?;
    let action = Action::Type {
        from: record_type(d, from)?,
        to: record_type(d, to)?,
    };
    Ok(rule(at, mode, action, NameMatch::Any))
}

/// The classes a `class` rule names: the ones a question can carry (`CS` is obsolete).
fn class(d: &Directive, t: &Token) -> Result<DNSClass, CorefileError> {
    match t.text.to_ascii_uppercase().as_str() {
        "IN" => Ok(DNSClass::IN),
        "CH" | "CHAOS" => Ok(DNSClass::CH),
        "HS" | "HESIOD" => Ok(DNSClass::HS),
        "NONE" => Ok(DNSClass::NONE),
        "ANY" => Ok(DNSClass::ANY),
        other => Err(d.error_at(
            t,
            format!("invalid class \"{other}\": expected IN, CH, HS, NONE or ANY"),
        )),
    }
}

/// `class FROM TO`.
pub fn class_rule(
    d: &Directive,
    at: &Token,
    toks: &[&Token],
    mode: Mode,
) -> Result<RewriteRule, CorefileError> {
    let (from, to) = two(d, at, toks, "class")?;
    let action = Action::Class {
        from: class(d, from)?,
        to: class(d, to)?,
    };
    Ok(rule(at, mode, action, NameMatch::Any))
}

/// The rcodes a rule may name, as CoreDNS lists them: by number (0 to 23) or mnemonic.
const RCODES: &[(&str, u16)] = &[
    ("NOERROR", 0),
    ("FORMERR", 1),
    ("SERVFAIL", 2),
    ("NXDOMAIN", 3),
    ("NOTIMP", 4),
    ("REFUSED", 5),
    ("YXDOMAIN", 6),
    ("YXRRSET", 7),
    ("NXRRSET", 8),
    ("NOTAUTH", 9),
    ("NOTZONE", 10),
    ("BADSIG", 16),
    ("BADVERS", 16),
    ("BADKEY", 17),
    ("BADTIME", 18),
    ("BADMODE", 19),
    ("BADNAME", 20),
    ("BADALG", 21),
    ("BADTRUNC", 22),
    ("BADCOOKIE", 23),
];

fn rcode(d: &Directive, t: &Token, which: &str) -> Result<ResponseCode, CorefileError> {
    let upper = t.text.to_ascii_uppercase();
    let value = match upper.parse::<u16>() {
        Ok(n) if n <= 23 => Some(n),
        Ok(_) => None,
        Err(_) => RCODES.iter().find(|(name, _)| *name == upper).map(|(_, n)| *n),
    };
    value.map(<ResponseCode as From<u16>>::from).ok_or_else(|| {
        d.error_at(
            t,
            format!("invalid {which} RCODE '{}' for a rcode rule: expected 0 to 23 or NOERROR, SERVFAIL, NXDOMAIN, REFUSED...", t.text),
        )
    })
}

/// Splits `[TYPE] REST...` into the match type (`exact` when left out) and the rest, when the
/// rest has `n` tokens.
fn typed<'a, 't>(toks: &'a [&'t Token], n: usize) -> Option<(String, &'a [&'t Token])> {
    if toks.len() == n {
        return Some(("exact".to_owned(), toks));
    }
    let (kind, rest) = toks.split_first()?;
    (rest.len() == n).then(|| (kind.text.to_ascii_lowercase(), rest))
}

fn check_kind(d: &Directive, toks: &[&Token], kind: &str, field: &str) -> Result<(), CorefileError> {
    if MATCH_TYPES.contains(&kind) {
        Ok(())
    } else {
        Err(d.error_at(
            toks[0],
            format!("'{}' is not a match type of a {field} rule: expected exact, prefix, suffix, substring or regex", toks[0].text),
        ))
    }
}

/// `rcode [TYPE] STRING FROM TO`.
pub fn rcode_rule(
    d: &Directive,
    at: &Token,
    toks: &[&Token],
    mode: Mode,
) -> Result<RewriteRule, CorefileError> {
    let usage = "rcode takes [exact|prefix|suffix|substring|regex] STRING FROM TO";
    let Some((kind, rest)) = typed(toks, 3) else {
        return Err(match toks.get(4) {
            Some(extra) => d.error_at(extra, format!("unexpected '{}': {usage}", extra.text)),
            None => d.error_at(at, usage),
        });
    };
    check_kind(d, toks, &kind, "rcode")?;
    let action = Action::Rcode {
        from: rcode(d, rest[1], "matching")?,
        to: rcode(d, rest[2], "replacement")?,
    };
    // As CoreDNS: STRING is a lower-case absolute name for every type but regex.
    let s = absolute(&rest[0].text);
    let name = match kind.as_str() {
        "exact" => NameMatch::Exact {
            from: s.clone(),
            to: s,
        },
        "prefix" => NameMatch::Prefix {
            from: s.clone(),
            to: s,
        },
        "suffix" => NameMatch::Suffix {
            from: s.clone(),
            to: s,
        },
        "substring" => NameMatch::Substring {
            from: s.clone(),
            to: s,
        },
        _ => NameMatch::Regex(Template {
            pattern: regex(d, rest[0])?,
            to: String::new(),
        }),
    };
    Ok(rule(at, mode, action, name))
}

/// `cname [TYPE] FROM TO`: the match is on a CNAME target in the reply. As in CoreDNS, FROM
/// and TO are lower-cased, and made absolute only for `exact`.
pub fn cname_rule(
    d: &Directive,
    at: &Token,
    toks: &[&Token],
    mode: Mode,
) -> Result<RewriteRule, CorefileError> {
    let usage = "cname takes [exact|prefix|suffix|substring|regex] FROM TO";
    let Some((kind, rest)) = typed(toks, 2) else {
        return Err(match toks.get(3) {
            Some(extra) => d.error_at(extra, format!("unexpected '{}': {usage}", extra.text)),
            None => d.error_at(at, usage),
        });
    };
    check_kind(d, toks, &kind, "cname")?;
    let (from, to) = (rest[0], rest[1]);
    if from.text.is_empty() || to.text.is_empty() {
        return Err(d.error_at(at, "cname FROM and TO must not be empty"));
    }
    let lower = |t: &Token| t.text.to_ascii_lowercase();
    let name = match kind.as_str() {
        "exact" => NameMatch::Exact {
            from: absolute(&from.text),
            to: absolute(&to.text),
        },
        "prefix" => NameMatch::Prefix {
            from: lower(from),
            to: lower(to),
        },
        "suffix" => NameMatch::Suffix {
            from: lower(from),
            to: lower(to),
        },
        "substring" => NameMatch::Substring {
            from: lower(from),
            to: lower(to),
        },
        _ => NameMatch::Regex(template(d, from, to)?),
    };
    Ok(rule(at, mode, Action::Cname, name))
}
