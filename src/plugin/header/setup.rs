//! The `header` directive's Corefile syntax, as CoreDNS 1.14.7 reads it: a block of rules
//! `query|response set|clear FLAG...`, flags `aa`, `ra` and `rd` (any case), applied in order
//! so a later rule wins; at least one rule, no arguments.

use std::sync::Arc;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token};
use crate::proto::FlagEdit;

/// `header`, as configured: the bits its rules leave set or cleared, for the question and for
/// the reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeaderConfig {
    /// What `query` rules do to the question the rest of the chain is asked.
    pub query: FlagEdit,
    /// What `response` rules do to the reply.
    pub response: FlagEdit,
}

/// The `header` directive's setup (once per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.args().expect_none()?;
    if d.block.is_empty() {
        return Err(
            d.error("needs a block of rules such as 'response set ra' (query|response set|clear aa|ra|rd)")
        );
    }
    let mut config = HeaderConfig::default();
    for rule in &d.block {
        let edit = match rule.name.text.to_ascii_lowercase().as_str() {
            "query" => &mut config.query,
            "response" => &mut config.response,
            other => {
                return Err(d.error_at(
                    &rule.name,
                    format!("invalid selector '{other}': should be query or response"),
                ));
            }
        };
        *edit = edit.then(parse_rule(d, rule)?);
    }
    Ok(Arc::new(config))
}

/// One rule's `set|clear FLAG...`, as an edit.
fn parse_rule(d: &Directive, rule: &Directive) -> Result<FlagEdit, CorefileError> {
    let Some((action, flags)) = rule.args.split_first() else {
        return Err(d.error_at(&rule.name, "no flag action provided: set or clear"));
    };
    let on = match action.text.to_ascii_lowercase().as_str() {
        "set" => true,
        "clear" => false,
        other => {
            return Err(d.error_at(
                action,
                format!("unknown flag action '{other}': should be set or clear"),
            ));
        }
    };
    if flags.is_empty() {
        return Err(d.error_at(
            action,
            format!("{} needs at least one flag: aa, ra or rd", action.text),
        ));
    }
    flags
        .iter()
        .try_fold(FlagEdit::KEEP, |edit, flag| Ok(edit.then(one_flag(d, flag, on)?)))
}

/// The edit of `flag` set (`on`) or cleared.
fn one_flag(d: &Directive, flag: &Token, on: bool) -> Result<FlagEdit, CorefileError> {
    let mut edit = FlagEdit::KEEP;
    let bit = match flag.text.to_ascii_lowercase().as_str() {
        "aa" => &mut edit.authoritative,
        "ra" => &mut edit.recursion_available,
        "rd" => &mut edit.recursion_desired,
        other => {
            return Err(d.error_at(flag, format!("unknown/unsupported flag '{other}': aa, ra or rd")));
        }
    };
    *bit = Some(on);
    Ok(edit)
}

impl Configured for HeaderConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::Header::new(self.query, self.response)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HeaderConfig, String> {
        let c = crate::chain::set_up(text, setup)?;
        let any: &dyn std::any::Any = c.as_ref();
        Ok(*any.downcast_ref::<HeaderConfig>().unwrap())
    }

    fn edit(aa: Option<bool>, ra: Option<bool>, rd: Option<bool>) -> FlagEdit {
        FlagEdit {
            authoritative: aa,
            recursion_available: ra,
            recursion_desired: rd,
        }
    }

    #[test]
    fn the_readme_examples() {
        let c = parse("header {\n response set ra\n}").unwrap();
        assert_eq!(c.response, edit(None, Some(true), None));
        assert_eq!(c.query, FlagEdit::KEEP);
        let c = parse("header {\n response set ra aa\n response clear rd\n}").unwrap();
        assert_eq!(c.response, edit(Some(true), Some(true), Some(false)));
        let c = parse("header {\n query set rd\n}").unwrap();
        assert_eq!(c.query, edit(None, None, Some(true)));
        assert_eq!(c.response, FlagEdit::KEEP);
    }

    #[test]
    fn later_rules_win_and_case_does_not_matter() {
        let c = parse("header {\n RESPONSE Set RA rd\n response clear ra\n query clear RD\n}").unwrap();
        assert_eq!(c.response, edit(None, Some(false), Some(true)));
        assert_eq!(c.query, edit(None, None, Some(false)));
    }

    #[test]
    fn wrong_rules_fail_at_their_line() {
        for (bad, says) in [
            ("header", "Corefile:2: header: needs a block of rules"),
            ("header {\n}", "Corefile:2: header: needs a block of rules"),
            (
                "header on {\n response set ra\n}",
                "Corefile:2: unexpected argument 'on' to 'header'",
            ),
            (
                "header {\n set ra\n}",
                "Corefile:3: header: invalid selector 'set': should be query or response",
            ),
            (
                "header {\n response\n}",
                "Corefile:3: header: no flag action provided",
            ),
            (
                "header {\n response toggle ra\n}",
                "Corefile:3: header: unknown flag action 'toggle'",
            ),
            (
                "header {\n query set\n}",
                "Corefile:3: header: set needs at least one flag",
            ),
            (
                "header {\n response set ra\n query set cd\n}",
                "Corefile:4: header: unknown/unsupported flag 'cd'",
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
