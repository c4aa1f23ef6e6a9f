//! The `rewrite` directive's Corefile syntax, parsed into one [`RewriteRule`] per directive.
//! `name` and `ttl` rules are implemented:
//!
//! ```text
//! rewrite [continue|stop] name [exact|prefix|suffix|substring|regex] FROM TO [OPTIONS]
//! rewrite [continue|stop] ttl [exact|prefix|suffix|substring|regex] STRING SECONDS|MIN-MAX
//! rewrite [continue|stop] {
//!     name [exact|prefix|suffix|substring|regex] FROM TO
//!     answer name|value FROM TO
//! }
//! ```
//!
//! OPTIONS are `answer auto`, `answer name FROM TO` and `answer value FROM TO`, any number of
//! them; `answer` may be left out of all but the first. Without a match type, `exact` is taken
//! and no options may follow.
//!
//! And how the block's configured `rewrite` rules become its plugin: its [`Configured`] impl.
//! What a rule is is `rule.rs`'s, which the handler reads too, so the handler never imports this
//! file (the layer test finds import loops).

use std::sync::Arc;

use super::fields::{class_rule, cname_rule, rcode_rule, type_rule};
pub use super::rule::{Action, Mode, NameMatch, RewriteRule, Template, TtlRange};
use super::rule::{MATCH_TYPES, absolute, check_name, regex, template};
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token};
use crate::plugin::kit::previous;

const SUPPORTED: &str = "supported: name, ttl, type, class, rcode, cname, edns0";

fn name_rule(d: &Directive, at: &Token, toks: &[&Token], mode: Mode) -> Result<RewriteRule, CorefileError> {
    let usage = "name takes [exact|prefix|suffix|substring|regex] FROM TO [answer auto|answer name FROM TO|answer value FROM TO]";
    let (kind, rest) = match toks.split_first() {
        Some((t, rest)) if MATCH_TYPES.contains(&t.text.to_ascii_lowercase().as_str()) => {
            (t.text.to_ascii_lowercase(), rest)
        }
        _ => {
            if toks.len() > 2 {
                return Err(d.error_at(
                    toks[0],
                    format!(
                        "'{}' is not a match type (exact, prefix, suffix, substring, regex); the type must be written when answer options follow",
                        toks[0].text
                    ),
                ));
            }
            ("exact".to_owned(), toks)
        }
    };
    let (Some(from), Some(to)) = (rest.first(), rest.get(1)) else {
        return Err(d.error_at(at, usage));
    };
    if from.text.is_empty() {
        return Err(d.error_at(from, "FROM must not be empty"));
    }
    let name = match kind.as_str() {
        "exact" => {
            let (f, t) = (absolute(&from.text), absolute(&to.text));
            check_name(d, from, &f)?;
            check_name(d, to, &t)?;
            NameMatch::Exact { from: f, to: t }
        }
        "suffix" => NameMatch::Suffix {
            from: absolute(&from.text),
            to: absolute(&to.text),
        },
        "prefix" => NameMatch::Prefix {
            from: from.text.to_ascii_lowercase(),
            to: to.text.to_ascii_lowercase(),
        },
        "substring" => NameMatch::Substring {
            from: from.text.to_ascii_lowercase(),
            to: to.text.to_ascii_lowercase(),
        },
        _ => NameMatch::Regex(template(d, from, to)?),
    };
    let mut rule = RewriteRule {
        mode,
        action: Action::Name,
        auto: matches!(name, NameMatch::Exact { .. }),
        name,
        answer_names: Vec::new(),
        answer_values: Vec::new(),
        at: at.loc.to_string(),
    };
    let opts = &rest[2..];
    let mut i = 0;
    while i < opts.len() {
        let mut t = opts[i];
        if t.text.eq_ignore_ascii_case("answer") {
            i += 1;
            t = opts
                .get(i)
                .ok_or_else(|| d.error_at(t, "answer takes auto, name FROM TO or value FROM TO"))?;
        } else if i == 0 {
            return Err(d.error_at(
                t,
                format!(
                    "unexpected '{}' after FROM TO: options start with 'answer'",
                    t.text
                ),
            ));
        }
        match t.text.to_ascii_lowercase().as_str() {
            "auto" => {
                rule.auto = true;
                i += 1;
            }
            which @ ("name" | "value") => {
                let (Some(f), Some(to)) = (opts.get(i + 1), opts.get(i + 2)) else {
                    return Err(d.error_at(t, format!("answer {which} takes FROM TO")));
                };
                let tpl = template(d, f, to)?;
                if which == "name" {
                    rule.answer_names.push(tpl);
                } else {
                    rule.answer_values.push(tpl);
                }
                i += 3;
            }
            other => {
                return Err(d.error_at(
                    t,
                    format!("unknown answer option '{other}': expected auto, name FROM TO or value FROM TO"),
                ));
            }
        }
    }
    Ok(rule)
}

/// `SECONDS`, `MIN-MAX`, `MIN-` (up to 2147483647) or `-MAX` (from 0), as CoreDNS reads them.
fn ttl_range(text: &str) -> Option<TtlRange> {
    let number = |s: &str| s.parse::<u32>().ok();
    let range = match text.split_once('-') {
        None => {
            let ttl = number(text)?;
            TtlRange { min: ttl, max: ttl }
        }
        Some(("", "")) => return None,
        Some((min, max)) => TtlRange {
            min: if min.is_empty() { 0 } else { number(min)? },
            max: if max.is_empty() {
                2_147_483_647
            } else {
                number(max)?
            },
        },
    };
    (range.min <= range.max).then_some(range)
}

/// Parses the tokens after `ttl`: `[TYPE] STRING SECONDS|MIN-MAX`.
fn ttl_rule(d: &Directive, at: &Token, toks: &[&Token], mode: Mode) -> Result<RewriteRule, CorefileError> {
    let usage = "ttl takes [exact|prefix|suffix|substring|regex] STRING SECONDS|MIN-MAX";
    let (kind, from, value) = match toks {
        [from, value] => ("exact".to_owned(), *from, *value),
        [kind, from, value] => {
            let kind_text = kind.text.to_ascii_lowercase();
            if !MATCH_TYPES.contains(&kind_text.as_str()) {
                return Err(d.error_at(
                    kind,
                    format!(
                        "'{}' is not a match type (exact, prefix, suffix, substring, regex)",
                        kind.text
                    ),
                ));
            }
            (kind_text, *from, *value)
        }
        [] => return Err(d.error_at(at, usage)),
        [only] => return Err(d.error_at(only, usage)),
        [.., extra] => return Err(d.error_at(extra, format!("unexpected '{}': {usage}", extra.text))),
    };
    let range = ttl_range(&value.text).ok_or_else(|| {
        d.error_at(
            value,
            format!(
                "invalid TTL '{}': expected SECONDS, MIN-MAX, MIN- or -MAX (0 to 4294967295, MIN <= MAX)",
                value.text
            ),
        )
    })?;
    // CoreDNS normalises every non-regex STRING to a lower-case absolute name.
    let (from_name, to) = (absolute(&from.text), absolute(&from.text));
    let name = match kind.as_str() {
        "exact" => NameMatch::Exact { from: from_name, to },
        "prefix" => NameMatch::Prefix { from: from_name, to },
        "suffix" => NameMatch::Suffix { from: from_name, to },
        "substring" => NameMatch::Substring { from: from_name, to },
        _ => NameMatch::Regex(Template {
            pattern: regex(d, from)?,
            to: String::new(),
        }),
    };
    Ok(RewriteRule {
        mode,
        action: Action::Ttl(range),
        name,
        auto: false,
        answer_names: Vec::new(),
        answer_values: Vec::new(),
        at: at.loc.to_string(),
    })
}

fn field_error(d: &Directive, t: &Token) -> CorefileError {
    if t.text.eq_ignore_ascii_case("answer") {
        d.error_at(t, "an answer rewrite must follow a name rule")
    } else {
        d.error_at(t, format!("unknown field '{}'; {SUPPORTED}", t.text))
    }
}

/// One rule of any field but `name` (whose block form takes `answer` lines), at `field`.
fn field_rule(
    d: &Directive,
    field: &Token,
    toks: &[&Token],
    mode: Mode,
) -> Result<RewriteRule, CorefileError> {
    match field.text.to_ascii_lowercase().as_str() {
        "name" => name_rule(d, field, toks, mode),
        "ttl" => ttl_rule(d, field, toks, mode),
        "type" => type_rule(d, field, toks, mode),
        "class" => class_rule(d, field, toks, mode),
        "rcode" => rcode_rule(d, field, toks, mode),
        "cname" => cname_rule(d, field, toks, mode),
        "edns0" => Ok(RewriteRule {
            mode,
            action: Action::Edns0(super::edns0::parse(d, field, toks)?),
            name: NameMatch::Any,
            auto: false,
            answer_names: Vec::new(),
            answer_values: Vec::new(),
            at: field.loc.to_string(),
        }),
        _ => Err(field_error(d, field)),
    }
}

/// Parses one `rewrite` directive into its rule.
pub fn parse(d: &Directive) -> Result<RewriteRule, CorefileError> {
    let mut args = d.args();
    let mode = match args.peek().map(|t| t.text.to_ascii_lowercase()) {
        Some(m) if m == "stop" || m == "continue" => {
            args.next();
            if m == "stop" { Mode::Stop } else { Mode::Continue }
        }
        _ => Mode::Stop,
    };
    let rest = args.remaining();
    if let Some((field, toks)) = rest.split_first() {
        if d.has_block {
            return Err(d.error("takes either a rule on its line or a block, not both"));
        }
        let toks: Vec<&Token> = toks.iter().collect();
        return field_rule(d, field, &toks, mode);
    }
    // The block form: one `name` line, then `answer` lines; or one line of another field.
    let Some((first, more)) = d.block.split_first() else {
        return Err(
            d.error("expected [continue|stop] FIELD ... (name, ttl, type, class, rcode, cname, edns0)")
        );
    };
    if !first.name.text.eq_ignore_ascii_case("name") {
        if let Some(extra) = more.first() {
            let field = first.name.text.to_ascii_lowercase();
            return Err(d.error_at(
                &extra.name,
                format!("a {field} rewrite block holds its {field} line alone"),
            ));
        }
        let toks: Vec<&Token> = first.args.iter().collect();
        return field_rule(d, &first.name, &toks, mode);
    }
    let mut toks: Vec<&Token> = first.args.iter().collect();
    for line in more {
        if line.name.text.eq_ignore_ascii_case("name") {
            return Err(d.error_at(&line.name, "one name rule per rewrite block"));
        }
        if !line.name.text.eq_ignore_ascii_case("answer") {
            return Err(field_error(d, &line.name));
        }
        toks.push(&line.name);
        toks.extend(line.args.iter());
    }
    if toks.len() > 2 && !more.is_empty() {
        // Answer lines after a type-less `name FROM TO` line: the exact type is meant.
        let first_is_type = MATCH_TYPES.contains(&toks[0].text.to_ascii_lowercase().as_str());
        if !first_is_type && first.args.len() == 2 {
            let exact = Token {
                text: "exact".to_owned(),
                loc: first.name.loc.clone(),
            };
            let mut with_type: Vec<&Token> = vec![&exact];
            with_type.extend(toks.iter().copied());
            return name_rule(d, &first.name, &with_type, mode);
        }
    }
    name_rule(d, &first.name, &toks, mode)
}

/// A block's `rewrite` rules, in file order (every `rewrite` line adds one).
#[derive(Debug, Clone)]
pub struct RewriteRules(pub Vec<RewriteRule>);

/// The `rewrite` directive's setup: each line adds its rule after the earlier ones.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    let mut rules = previous::<RewriteRules>(ctx)
        .map(|r| r.0.clone())
        .unwrap_or_default();
    rules.push(parse(d)?);
    Ok(Arc::new(RewriteRules(rules)))
}

impl Configured for RewriteRules {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::Rewrite::new(self.0.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::Path;

    fn parse_text(text: &str) -> Result<RewriteRule, CorefileError> {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{text}\n}}\n"), Path::new("Corefile")).unwrap();
        parse(&cf.blocks[0].directives[0])
    }

    #[test]
    fn forms_and_defaults() {
        let r = parse_text("rewrite name Example.NET example.org").unwrap();
        assert_eq!(r.mode, Mode::Stop);
        assert!(r.auto, "exact rules always map the answer back");
        assert!(
            matches!(&r.name, NameMatch::Exact { from, to } if from == "example.net." && to == "example.org.")
        );
        assert_eq!(r.at, "Corefile:2");
        let r = parse_text("rewrite continue name suffix .a.example .b.example answer auto").unwrap();
        assert_eq!(r.mode, Mode::Continue);
        assert!(r.auto);
        assert!(
            matches!(&r.name, NameMatch::Suffix { from, to } if from == ".a.example." && to == ".b.example.")
        );
        let r = parse_text("rewrite name prefix WWW. web.").unwrap();
        assert!(!r.auto);
        assert!(matches!(&r.name, NameMatch::Prefix { from, to } if from == "www." && to == "web."));
        let r = parse_text("rewrite stop name substring svc.example svc.consul").unwrap();
        assert!(matches!(&r.name, NameMatch::Substring { .. }));
        let r = parse_text(
            r"rewrite name regex (.*)-(us-west-1)\.example\.org {1}.service.{2}.consul answer name (.*)\.service\.(us-west-1)\.consul {1}-{2}.example.org value (.*)\.consul {1}.example.org",
        )
        .unwrap();
        assert!(!r.auto);
        assert_eq!((r.answer_names.len(), r.answer_values.len()), (1, 1));
        let r = parse_text(
            "rewrite continue {\n name regex (.*)\\.a\\.example {1}.b.example\n answer name (.*)\\.b\\.example {1}.a.example\n answer auto\n}",
        )
        .unwrap();
        assert_eq!(r.mode, Mode::Continue);
        assert!(r.auto);
        assert_eq!(r.answer_names.len(), 1);
        let r = parse_text("rewrite {\n name a.example b.example\n answer auto\n}").unwrap();
        assert!(matches!(r.name, NameMatch::Exact { .. }));
    }

    #[test]
    fn ttl_rules() {
        let r = parse_text("rewrite ttl Example.COM 30-300").unwrap();
        assert_eq!(r.action, Action::Ttl(TtlRange { min: 30, max: 300 }));
        assert_eq!(r.mode, Mode::Stop);
        assert!(r.name.matches("example.com.") && !r.name.matches("a.example.com."));
        let r = parse_text("rewrite ttl example.com. -30").unwrap();
        assert_eq!(r.action, Action::Ttl(TtlRange { min: 0, max: 30 }));
        let r = parse_text("rewrite ttl example.com. 30-").unwrap();
        assert_eq!(
            r.action,
            Action::Ttl(TtlRange {
                min: 30,
                max: 2_147_483_647
            })
        );
        let r = parse_text("rewrite ttl example.com. 30").unwrap();
        assert_eq!(r.action, Action::Ttl(TtlRange { min: 30, max: 30 }));
        let r = parse_text("rewrite continue {\n ttl regex (.*)\\.coredns\\.rocks 15\n}").unwrap();
        assert_eq!(r.mode, Mode::Continue);
        assert!(r.name.matches("www.coredns.rocks.") && !r.name.matches("coredns.rocks."));
        let r = parse_text("rewrite ttl suffix .Example.com 5").unwrap();
        assert!(r.name.matches("a.example.com.") && !r.name.matches("example.com."));
        let r = parse_text("rewrite ttl prefix www 5").unwrap();
        assert!(
            r.name.matches("www.a.") && !r.name.matches("wwwa."),
            "the STRING is made absolute, as in CoreDNS"
        );
        let r = parse_text("rewrite ttl substring svc 5").unwrap();
        assert!(r.name.matches("a.svc.b.") && !r.name.matches("a.svcb."));
        assert_eq!(TtlRange { min: 30, max: 300 }.clamp(5), 30);
        assert_eq!(TtlRange { min: 30, max: 300 }.clamp(3600), 300);
        assert_eq!(TtlRange { min: 30, max: 300 }.clamp(60), 60);
    }

    #[test]
    fn other_fields() {
        use super::super::edns0::{Edns0Action, Edns0Kind, LocalData, Variable};
        use hickory_proto::op::ResponseCode;
        use hickory_proto::rr::{DNSClass, RecordType};
        let r = parse_text("rewrite type ANY HINFO").unwrap();
        assert_eq!(
            r.action,
            Action::Type {
                from: RecordType::ANY,
                to: RecordType::HINFO
            }
        );
        let r = parse_text("rewrite continue class ch in").unwrap();
        assert_eq!(r.mode, Mode::Continue);
        assert_eq!(
            r.action,
            Action::Class {
                from: DNSClass::CH,
                to: DNSClass::IN
            }
        );
        let r = parse_text("rewrite continue {\n rcode regex (.*)\\.coredns\\.rocks SERVFAIL NOERROR\n}")
            .unwrap();
        assert_eq!(
            r.action,
            Action::Rcode {
                from: ResponseCode::ServFail,
                to: ResponseCode::NoError
            }
        );
        assert!(r.name.matches("www.coredns.rocks.") && !r.name.matches("coredns.rocks."));
        let r = parse_text("rewrite rcode A.Example 2 0").unwrap();
        assert!(matches!(&r.name, NameMatch::Exact { from, .. } if from == "a.example."));
        assert_eq!(
            r.action,
            Action::Rcode {
                from: ResponseCode::ServFail,
                to: ResponseCode::NoError
            }
        );
        let r = parse_text("rewrite rcode suffix .example nxdomain badcookie").unwrap();
        assert!(r.name.matches("a.example.") && !r.name.matches("example."));
        let r = parse_text(r"rewrite cname regex (.*).cdn.example.net. {1}.other.cdn.com.").unwrap();
        assert_eq!(r.action, Action::Cname);
        assert_eq!(
            r.name.rewrite("my-app.com.cdn.example.net."),
            Some("my-app.com.other.cdn.com.".to_owned())
        );
        let r = parse_text("rewrite cname Old.Example. new.example").unwrap();
        assert_eq!(r.name.rewrite("old.example."), Some("new.example.".to_owned()));
        let r = parse_text("rewrite edns0 local set 0xffee 0x61626364").unwrap();
        let Action::Edns0(e) = &r.action else {
            panic!("{r:?}");
        };
        assert_eq!(
            (e.action, &e.kind),
            (
                Edns0Action::Set,
                &Edns0Kind::Local {
                    code: 0xffee,
                    data: LocalData::Bytes(b"abcd".to_vec())
                }
            )
        );
        let r = parse_text("rewrite edns0 local replace 65518 {client_ip} revert").unwrap();
        let Action::Edns0(e) = &r.action else {
            panic!("{r:?}");
        };
        assert!(e.revert);
        assert_eq!(
            e.kind,
            Edns0Kind::Local {
                code: 0xffee,
                data: LocalData::Variable(Variable::ClientIp)
            }
        );
        for (text, kind) in [
            ("rewrite edns0 nsid append", Edns0Kind::Nsid),
            (
                "rewrite edns0 subnet set 24 56",
                Edns0Kind::Subnet { v4: 24, v6: 56 },
            ),
            ("rewrite edns0 subnet unset", Edns0Kind::Subnet { v4: 0, v6: 0 }),
            (
                "rewrite edns0 local unset 0xffee",
                Edns0Kind::Local {
                    code: 0xffee,
                    data: LocalData::Bytes(vec![]),
                },
            ),
        ] {
            let r = parse_text(text).unwrap();
            assert!(
                matches!(&r.action, Action::Edns0(e) if e.kind == kind),
                "{text}: {r:?}"
            );
        }
    }

    #[test]
    fn templates() {
        let r = parse_text(r"rewrite name regex ^(.*)-(US-WEST-1)\.example\.org\.$ {1}.service.{2}.consul")
            .unwrap();
        assert_eq!(
            r.name.rewrite("ftp-us-west-1.example.org."),
            Some("ftp.service.us-west-1.consul".to_owned())
        );
        assert_eq!(r.name.rewrite("ftp.example.org."), None);
        let r = parse_text("rewrite name regex (a)(b)? \"{2}{1}{0}{x}{\"").unwrap();
        let NameMatch::Regex(t) = &r.name else {
            panic!("not a regex rule: {r:?}");
        };
        assert_eq!(t.apply("xa."), Some("aa{x}{".to_owned()));
        assert_eq!(t.apply("xyz."), None);
    }

    #[test]
    fn mistakes_name_their_line() {
        for (text, want) in [
            ("rewrite class CH XX", "Corefile:2: rewrite: invalid class \"XX\""),
            ("rewrite class CH", "class rules must have exactly two arguments"),
            ("rewrite class CH IN HS", "unexpected 'HS'"),
            ("rewrite continue type ANY BOGUS", "invalid type \"BOGUS\""),
            ("rewrite type A", "type rules must have exactly two arguments"),
            ("rewrite type OPT A", "invalid type \"OPT\""),
            ("rewrite type A AXFR", "type AXFR cannot be rewritten"),
            ("rewrite rcode servfail refused", "rcode takes"),
            (
                "rewrite rcode a.example servfail nonsense",
                "invalid replacement RCODE 'nonsense'",
            ),
            ("rewrite rcode a.example 24 0", "invalid matching RCODE '24'"),
            (
                "rewrite rcode glob a.example 2 0",
                "'glob' is not a match type of a rcode rule",
            ),
            ("rewrite rcode regex (a 2 0", "invalid regex '(a'"),
            ("rewrite rcode exact a.example 2 0 9", "unexpected '9'"),
            ("rewrite cname a.", "cname takes"),
            (
                "rewrite cname glob a. b.",
                "'glob' is not a match type of a cname rule",
            ),
            ("rewrite cname regex (.*)x {2}", "uses {2} but the regex"),
            (
                "rewrite edns0 local set 0xffee",
                "expected edns0 local set|replace|append CODE DATA",
            ),
            ("rewrite edns0 local put 0xffee ab", "invalid action 'put'"),
            (
                "rewrite edns0 local set 0x10000 ab",
                "invalid EDNS0 option code '0x10000'",
            ),
            ("rewrite edns0 local set 0xffee 0xabc", "invalid hex data '0xabc'"),
            (
                "rewrite edns0 local set 0xffee {kubernetes/pod}",
                "metadata labels are not implemented",
            ),
            (
                "rewrite edns0 local set 0xffee {bogus}",
                "unsupported variable name '{bogus}'",
            ),
            (
                "rewrite edns0 local unset 0xffee ab",
                "unexpected|expected edns0 local unset CODE",
            ),
            (
                "rewrite edns0 nsid set x",
                "expected edns0 nsid set|replace|append",
            ),
            (
                "rewrite edns0 subnet set 33 56",
                "invalid IPv4 bit mask length '33'",
            ),
            (
                "rewrite edns0 subnet set 24 129",
                "invalid IPv6 bit mask length '129'",
            ),
            ("rewrite edns0 subnet unset 24", "expected edns0 subnet unset"),
            ("rewrite edns0 cookie set", "invalid EDNS0 rule type 'cookie'"),
            ("rewrite edns0", "edns0 takes"),
            (
                "rewrite stop {\n rcode a.example servfail refused\n answer auto\n}",
                "Corefile:4: rewrite: a rcode rewrite block holds its rcode line alone",
            ),
            (
                "rewrite bogus a b",
                "unknown field 'bogus'; supported: name, ttl, type",
            ),
            ("rewrite answer name a b", "must follow a name rule"),
            (
                "rewrite name regex (.* x",
                "Corefile:2: rewrite: invalid regex '(.*'",
            ),
            (
                "rewrite name regex (a) {2}.example",
                "uses {2} but the regex '(a)' has 1 group(s)",
            ),
            ("rewrite name a", "name takes"),
            ("rewrite name", "name takes"),
            ("rewrite", "expected [continue|stop] FIELD"),
            ("rewrite name a b answer auto", "not a match type"),
            ("rewrite name exact a b auto", "options start with 'answer'"),
            ("rewrite name exact a b answer", "answer takes auto"),
            (
                "rewrite name exact a b answer name x",
                "answer name takes FROM TO",
            ),
            ("rewrite name exact a b answer foo", "unknown answer option 'foo'"),
            ("rewrite name exact a b answer value ( x", "invalid regex"),
            ("rewrite name exact a..b c", "is not a domain name"),
            ("rewrite name exact a b {\n answer auto\n}", "not both"),
            (
                "rewrite {\n name a b\n name c d\n}",
                "Corefile:4: rewrite: one name rule per rewrite block",
            ),
            ("rewrite {\n}", "expected [continue|stop] FIELD"),
            ("rewrite ttl a.example", "Corefile:2: rewrite: ttl takes"),
            ("rewrite ttl", "Corefile:2: rewrite: ttl takes"),
            ("rewrite ttl a.example 15s", "invalid TTL '15s'"),
            ("rewrite ttl a.example -", "invalid TTL '-'"),
            ("rewrite ttl a.example 300-30", "invalid TTL '300-30'"),
            ("rewrite ttl a.example 4294967296", "invalid TTL"),
            ("rewrite ttl a.example 1-2-3", "invalid TTL"),
            ("rewrite ttl glob a.example 15", "'glob' is not a match type"),
            ("rewrite ttl exact a.example 15 30", "unexpected '30'"),
            ("rewrite ttl regex (a 15", "invalid regex '(a'"),
            (
                "rewrite {\n ttl a.example 15\n answer auto\n}",
                "Corefile:4: rewrite: a ttl rewrite block holds its ttl line alone",
            ),
        ] {
            let e = parse_text(text).unwrap_err().to_string();
            assert!(want.split('|').any(|w| e.contains(w)), "{text}: {e}");
        }
    }
}
