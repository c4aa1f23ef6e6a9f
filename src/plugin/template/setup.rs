//! The `template` directive's Corefile syntax (CoreDNS's):
//!
//! ```text
//! template CLASS TYPE [ZONE...] {
//!     match REGEX...
//!     answer RR
//!     additional RR
//!     authority RR
//!     rcode CODE
//!     fallthrough [ZONE...]
//! }
//! ```
//!
//! A block may hold several `template` directives, tried in file order.
//!
//! And how a configured `template` directive becomes its plugin: its [`Configured`] impl, what it
//! checks against its block and offers it. What it parses into is `config.rs`'s, which the
//! handler reads too, so the handler never imports this file (the layer test finds import loops).

use std::str::FromStr;
use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, Name, RecordType};
use regex::Regex;

use super::config::{TemplateConfig, TemplateRule};
use super::text::Template;
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token, normalize_zone_or_cidr};
use crate::plugin::kit::previous;

fn zone_names(toks: &[Token]) -> Result<Vec<Name>, CorefileError> {
    toks.iter()
        .map(|t| {
            let z = normalize_zone_or_cidr(&t.text).map_err(|e| t.error(e))?;
            Name::from_ascii(&z)
                .map(|n| n.to_lowercase())
                .map_err(|_| t.error(format!("template: '{}' is not a zone", t.text)))
        })
        .collect()
}

fn rcode(t: &Token) -> Result<ResponseCode, CorefileError> {
    let code = match t.text.to_ascii_uppercase().as_str() {
        "NOERROR" | "SUCCESS" => ResponseCode::NoError,
        "FORMERR" => ResponseCode::FormErr,
        "SERVFAIL" => ResponseCode::ServFail,
        "NXDOMAIN" => ResponseCode::NXDomain,
        "NOTIMP" => ResponseCode::NotImp,
        "REFUSED" => ResponseCode::Refused,
        _ => {
            return Err(t.error(format!(
                "template: rcode '{}' is not one of NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED",
                t.text
            )));
        }
    };
    Ok(code)
}

fn rule(d: &Directive, ctx: &SetupCtx<'_>) -> Result<TemplateRule, CorefileError> {
    let mut args = d.args();
    let class_tok = args.expect("a class (IN or ANY)")?;
    let type_tok = args.expect("a record type (or ANY)")?;
    let class = match class_tok.text.to_ascii_uppercase().as_str() {
        "ANY" => None,
        c => Some(
            DNSClass::from_str(c)
                .map_err(|_| class_tok.error(format!("template: '{}' is not a class", class_tok.text)))?,
        ),
    };
    let qtype = match type_tok.text.to_ascii_uppercase().as_str() {
        "ANY" => None,
        t => Some(
            RecordType::from_str(t)
                .ok()
                .filter(|rt| !matches!(rt, RecordType::Unknown(_)))
                .ok_or_else(|| {
                    type_tok.error(format!("template: '{}' is not a record type", type_tok.text))
                })?,
        ),
    };
    let zone_toks = args.remaining();
    let zones = if zone_toks.is_empty() {
        zone_names(
            &ctx.zones
                .iter()
                .map(|z| Token {
                    text: z.clone(),
                    loc: d.name.loc.clone(),
                })
                .collect::<Vec<_>>(),
        )?
    } else {
        zone_names(zone_toks)?
    };
    let mut r = TemplateRule {
        class,
        qtype,
        labels: (
            class_tok.text.to_ascii_uppercase(),
            type_tok.text.to_ascii_uppercase(),
        ),
        zones,
        regexes: Vec::new(),
        answer: Vec::new(),
        additional: Vec::new(),
        authority: Vec::new(),
        rcode: ResponseCode::NoError,
        fallthrough: None,
        upstream: false,
    };
    for opt in &d.block {
        let template = |t: &Token| Template::parse(&t.text).map_err(|e| t.error(format!("template: {e}")));
        match opt.name.text.as_str() {
            "match" => {
                if opt.args.is_empty() {
                    return Err(opt
                        .name
                        .error("template: match needs at least one regular expression"));
                }
                for t in &opt.args {
                    r.regexes.push(Regex::new(&t.text).map_err(|e| {
                        t.error(format!("template: '{}' is not a regular expression: {e}", t.text))
                    })?);
                }
            }
            "answer" => r.answer.push(template(d.option_arg(opt)?)?),
            "additional" => r.additional.push(template(d.option_arg(opt)?)?),
            "authority" => r.authority.push(template(d.option_arg(opt)?)?),
            "rcode" => r.rcode = rcode(d.option_arg(opt)?)?,
            "fallthrough" => r.fallthrough = Some(zone_names(&opt.args)?),
            "upstream" => {
                // CoreDNS ignores upstream addresses since 1.7 and resolves through itself.
                if let Some(a) = opt.args.first() {
                    tracing::warn!(
                        at = %a.loc,
                        "template: upstream addresses are ignored; CNAME targets are resolved through this server, as CoreDNS does"
                    );
                }
                r.upstream = true;
            }
            other => {
                return Err(opt.name.error(format!(
                    "template: unknown option '{other}' (expected match, answer, additional, authority, rcode, fallthrough or upstream)"
                )));
            }
        }
    }
    if r.regexes.is_empty() {
        r.regexes
            .push(Regex::new(".*").map_err(|e| d.error(e.to_string()))?);
    }
    // Every group a template names must exist in some expression.
    for t in r.answer.iter().chain(&r.additional).chain(&r.authority) {
        for g in t.groups() {
            if !r
                .regexes
                .iter()
                .any(|re| re.capture_names().flatten().any(|n| n == g))
            {
                return Err(d.error(format!(
                    "template: '{}' uses .Group.{g}, which no match expression names",
                    t.source
                )));
            }
        }
    }
    Ok(r)
}

/// The `template` directive's setup: each directive adds a template to the block's earlier ones.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    let mut config = previous::<TemplateConfig>(ctx).cloned().unwrap_or_default();
    config.rules.push(rule(d, ctx)?);
    Ok(Arc::new(config))
}

impl Configured for TemplateConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let metrics = ctx
            .metrics
            .and_then(|m| m.families::<super::TemplateMetrics>().ok());
        Built::Plugin(Arc::new(super::TemplatePlugin::new(
            self.clone(),
            metrics,
            ctx.server,
        )))
    }
}
