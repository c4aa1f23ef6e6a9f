//! The `template` plugin's answers. Templates are tried in file order. One whose class, type
//! and zones cover the question and one of whose expressions matches the name answers it: its
//! rcode, and its answer, additional and authority lines rendered and parsed as records
//! (authoritative). A template that covers the question but whose expressions do not match
//! makes it NXDOMAIN, unless its `fallthrough` covers the name; then the next template is tried,
//! and after the last, the next plugin. A line that fails to render or parse makes the reply
//! SERVFAIL, counted in the failure metrics.
//!
//! Replay: answers depend on the question alone, unless a template uses `.Remote`.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, Record};

use super::config::{TemplateConfig, TemplateRule};
use super::metrics::TemplateMetrics;
use super::text::{Data, Template, parse_record};
use crate::chain::{Next, Plugin, Replay, ReplyFuture};
use crate::proto::{Answer, Failure, FlagEdit, Question, Reply};

/// The plugin. See the module docs.
#[derive(Debug)]
pub struct TemplatePlugin {
    rules: Vec<TemplateRule>,
    metrics: Option<TemplateMetrics>,
    server: String,
    per_client: bool,
}

/// The failure reason of a template that could not be rendered or parsed.
const TEMPLATE_FAILED: &str = "template: an answer line failed to render or parse";

enum Outcome {
    Answer(Reply),
    NxDomain,
    Next,
}

impl TemplatePlugin {
    /// The plugin for `config`, counting into `metrics` under the block's `server` label.
    pub fn new(config: TemplateConfig, metrics: Option<TemplateMetrics>, server: &str) -> Self {
        let per_client = config.rules.iter().any(|r| {
            r.answer
                .iter()
                .chain(&r.additional)
                .chain(&r.authority)
                .any(Template::uses_remote)
        });
        Self {
            rules: config.rules,
            metrics,
            server: server.to_owned(),
            per_client,
        }
    }

    fn render(
        &self,
        rule: &TemplateRule,
        zone: &str,
        section: &str,
        templates: &[Template],
        data: &Data<'_>,
    ) -> Result<Vec<Record>, ()> {
        let labels = |t: &Template| {
            [
                self.server.clone(),
                zone.to_owned(),
                String::new(),
                rule.labels.0.clone(),
                rule.labels.1.clone(),
                section.to_owned(),
                t.source.clone(),
            ]
        };
        let mut out = Vec::new();
        for t in templates {
            let line = t.render(data).map_err(|e| {
                tracing::warn!(target: "cluster_dns::template", template = %t.source, error = %e, "template failed");
                if let Some(m) = &self.metrics {
                    m.template_failures.with_label_values(&labels(t)).inc();
                }
            })?;
            let record = parse_record(&line).map_err(|e| {
                tracing::warn!(target: "cluster_dns::template", template = %t.source, line = %line, error = %e, "template rendered an invalid record");
                if let Some(m) = &self.metrics {
                    m.rr_failures.with_label_values(&labels(t)).inc();
                }
            })?;
            out.push(record);
        }
        Ok(out)
    }

    fn decide(&self, q: &Question) -> Outcome {
        let lower = q.name.to_lowercase();
        let text = {
            let mut t = q.name.to_string();
            if !t.ends_with('.') {
                t.push('.');
            }
            t
        };
        for rule in &self.rules {
            if rule.class.is_some_and(|c| c != q.qclass) || rule.qtype.is_some_and(|t| t != q.qtype) {
                continue;
            }
            let Some(zone) = rule
                .zones
                .iter()
                .filter(|z| z.zone_of(&lower))
                .max_by_key(|z| z.num_labels())
            else {
                continue;
            };
            let caps = rule
                .regexes
                .iter()
                .find_map(|re| re.captures(&text).map(|c| (re, c)));
            let Some((re, caps)) = caps else {
                let falls = rule
                    .fallthrough
                    .as_ref()
                    .is_some_and(|zs| zs.is_empty() || zs.iter().any(|z: &Name| z.zone_of(&lower)));
                if falls {
                    continue;
                }
                return Outcome::NxDomain;
            };
            let zone_text = zone.to_string();
            if let Some(m) = &self.metrics {
                m.matches
                    .with_label_values(&[&self.server, &zone_text, "", &rule.labels.0, &rule.labels.1])
                    .inc();
            }
            let data = Data {
                name: &text,
                zone: &zone_text,
                class: &q.qclass.to_string(),
                qtype: &q.qtype.to_string(),
                remote: q.client.ip().to_string(),
                matches: caps
                    .iter()
                    .map(|m| m.map_or_else(String::new, |m| m.as_str().to_owned()))
                    .collect(),
                groups: re
                    .capture_names()
                    .flatten()
                    .map(|n| (n.to_owned(), caps.name(n).map_or("", |m| m.as_str()).to_owned()))
                    .collect(),
            };
            let sections = (
                self.render(rule, &zone_text, "answer", &rule.answer, &data),
                self.render(rule, &zone_text, "additional", &rule.additional, &data),
                self.render(rule, &zone_text, "authority", &rule.authority, &data),
            );
            let (Ok(answers), Ok(additional), Ok(authority)) = sections else {
                return Outcome::Answer(Reply::Failed(Failure {
                    rcode: ResponseCode::ServFail,
                    reason: TEMPLATE_FAILED,
                }));
            };
            let chase_target = if rule.upstream {
                cname_to_chase(&answers, q.qtype)
            } else {
                None
            };
            return Outcome::Answer(Reply::Authoritative(Answer {
                rcode: rule.rcode,
                answers: answers.into(),
                authority,
                additional,
                chase_target,
                flags: FlagEdit::KEEP,
            }));
        }
        Outcome::Next
    }
}

/// With `upstream`: the target of the answer's last CNAME, when the question is not for the
/// CNAME itself and the answer holds no records of that target.
fn cname_to_chase(
    answers: &[hickory_proto::rr::Record],
    qtype: hickory_proto::rr::RecordType,
) -> Option<Name> {
    if qtype == hickory_proto::rr::RecordType::CNAME {
        return None;
    }
    let target = answers.iter().rev().find_map(|r| match &r.data {
        hickory_proto::rr::RData::CNAME(c) => Some(c.0.clone()),
        _ => None,
    })?;
    let answered = answers
        .iter()
        .any(|r| r.name.to_lowercase() == target.to_lowercase());
    (!answered).then_some(target)
}

impl Plugin for TemplatePlugin {
    fn name(&self) -> &'static str {
        "template"
    }

    fn replay(&self, _q: &Question) -> Replay {
        if self.per_client {
            Replay::Client
        } else {
            Replay::Same
        }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        let outcome = self.decide(q);
        if matches!(outcome, Outcome::Answer(_)) && self.metrics.is_some() {
            // A rule matched and was counted (`coredns_template_matches_total`): a replay from
            // the memo would not count it.
            next.forbid_replay();
        }
        match outcome {
            Outcome::Answer(Reply::Authoritative(mut a)) if a.chase_target.is_some() => {
                Box::pin(async move {
                    match a.chase_target.take() {
                        Some(target) => next.chase(a, target, q).await,
                        None => Reply::Authoritative(a),
                    }
                })
            }
            Outcome::Answer(r) => Box::pin(std::future::ready(r)),
            Outcome::NxDomain => Box::pin(std::future::ready(Reply::Rcode(ResponseCode::NXDomain))),
            Outcome::Next => next.serve(q),
        }
    }
}
