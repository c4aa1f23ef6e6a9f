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

use regex::{Regex, RegexBuilder};

use crate::chain::{Configured, SetupCtx, previous};
use crate::corefile::{CorefileError, Directive, Token};
use std::sync::Arc;

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

/// What a rule does when its name match succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `name`: the question name is rewritten (and the reply's names mapped back).
    Name,
    /// `ttl`: the question goes on as asked; the TTLs of the reply's records are held to the
    /// range.
    Ttl(TtlRange),
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

const MATCH_TYPES: &[&str] = &["exact", "prefix", "suffix", "substring", "regex"];
const OTHER_FIELDS: &[&str] = &["type", "class", "edns0", "rcode", "cname"];
const SUPPORTED: &str = "supported: name, ttl";

fn absolute(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    if lower.ends_with('.') {
        lower
    } else {
        format!("{lower}.")
    }
}

fn regex(d: &Directive, from: &Token) -> Result<Regex, CorefileError> {
    RegexBuilder::new(&from.text)
        .case_insensitive(true)
        .build()
        .map_err(|e| {
            let why = e.to_string();
            let why = why.lines().last().unwrap_or_default().trim().to_owned();
            d.error_at(from, format!("invalid regex '{}': {why}", from.text))
        })
}

fn template(d: &Directive, from: &Token, to: &Token) -> Result<Template, CorefileError> {
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

fn check_name(d: &Directive, t: &Token, s: &str) -> Result<(), CorefileError> {
    hickory_proto::rr::Name::from_ascii(s)
        .map(drop)
        .map_err(|e| d.error_at(t, format!("'{}' is not a domain name: {e}", t.text)))
}

/// Parses the tokens after `name`: `[TYPE] FROM TO [OPTIONS]`.
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
    let field = t.text.to_ascii_lowercase();
    if OTHER_FIELDS.contains(&field.as_str()) {
        d.error_at(
            t,
            format!("'{field}' rules are not supported by cluster-dns; {SUPPORTED}"),
        )
    } else if field == "answer" {
        d.error_at(t, "an answer rewrite must follow a name rule")
    } else {
        d.error_at(t, format!("unknown field '{}'; {SUPPORTED}", t.text))
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
        if field.text.eq_ignore_ascii_case("ttl") {
            return ttl_rule(d, field, &toks, mode);
        }
        if !field.text.eq_ignore_ascii_case("name") {
            return Err(field_error(d, field));
        }
        return name_rule(d, field, &toks, mode);
    }
    // The block form: one `name` line, then `answer` lines; or one `ttl` line.
    let Some((first, more)) = d.block.split_first() else {
        return Err(d.error("expected [continue|stop] name [TYPE] FROM TO"));
    };
    if first.name.text.eq_ignore_ascii_case("ttl") {
        if let Some(extra) = more.first() {
            return Err(d.error_at(&extra.name, "a ttl rewrite block holds its ttl line alone"));
        }
        let toks: Vec<&Token> = first.args.iter().collect();
        return ttl_rule(d, &first.name, &toks, mode);
    }
    if !first.name.text.eq_ignore_ascii_case("name") {
        return Err(field_error(d, &first.name));
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
            (
                "rewrite class CH IN",
                "Corefile:2: rewrite: 'class' rules are not supported by cluster-dns; supported: name, ttl",
            ),
            (
                "rewrite continue type ANY HINFO",
                "'type' rules are not supported",
            ),
            (
                "rewrite edns0 local set 0xffee abcd",
                "'edns0' rules are not supported",
            ),
            (
                "rewrite rcode servfail refused",
                "'rcode' rules are not supported",
            ),
            ("rewrite cname exact a. b.", "'cname' rules are not supported"),
            (
                "rewrite stop {\n rcode servfail refused\n}",
                "Corefile:3: rewrite: 'rcode' rules are not supported",
            ),
            ("rewrite bogus a b", "unknown field 'bogus'; supported: name, ttl"),
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
            ("rewrite", "expected [continue|stop] name"),
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
            ("rewrite {\n}", "expected [continue|stop] name"),
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
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
