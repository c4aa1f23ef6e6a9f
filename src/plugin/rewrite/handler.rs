//! [`Rewrite`]: applies the rules to a question ([`Rewrite::apply`]: its name, type, class and
//! EDNS options) and maps the reply for the rewritten question back for the client
//! ([`Rewritten::restore`]): names mapped back, TTLs held to the ranges of the `ttl` rules that
//! matched, rcodes changed by the `rcode` ones. `cname` rules send the reply's CNAME target
//! elsewhere ([`Rewrite::follow_cnames`]).

use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, Name, RData, Record};

use super::rule::{Action, Mode, RewriteRule, Template, TtlRange};
use crate::chain::{Next, Plugin, Replay, ReplyFuture};
use crate::proto::{Answer, Forwarded, Question, Reply};

/// The `rewrite` rules of one server block, in Corefile order. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Rewrite {
    rules: Arc<[RewriteRule]>,
    /// The classes other than IN that `class` rules rewrite: questions of these enter the chain.
    classes: &'static [DNSClass],
}

/// One `name` rule that matched: the name before and after it.
#[derive(Debug, Clone)]
struct Step {
    rule: usize,
    before: Name,
    after: Name,
}

/// A question after the rules, and what is needed to map its reply back.
#[derive(Debug, Clone)]
pub struct Rewritten {
    /// The question to pass on.
    pub question: Question,
    rules: Arc<[RewriteRule]>,
    steps: Vec<Step>,
    /// The ranges of the `ttl` rules that matched, in rule order.
    ttls: Vec<TtlRange>,
    /// The rcode changes of the `rcode` rules that matched, in rule order.
    rcodes: Vec<(ResponseCode, ResponseCode)>,
    /// The `cname` rules reached, in rule order.
    cnames: Vec<usize>,
}

/// The name for the presentation form `s` (made absolute), if it is a legal domain name: no
/// empty label, labels of at most 63 bytes, at most 255 bytes in wire form (all checked by
/// `Name::from_ascii`).
fn legal_name(s: &str) -> Option<Name> {
    if s.is_empty() {
        return None;
    }
    if s.ends_with('.') {
        Name::from_ascii(s).ok()
    } else {
        Name::from_ascii(format!("{s}.")).ok()
    }
}

fn lower_text(name: &Name) -> String {
    name.to_lowercase().to_ascii()
}

/// The names inside a record's data that response rewrites touch.
fn data_names(data: &mut RData) -> Vec<&mut Name> {
    match data {
        RData::CNAME(x) => vec![&mut x.0],
        RData::NS(x) => vec![&mut x.0],
        RData::ANAME(x) => vec![&mut x.0],
        RData::MX(x) => vec![&mut x.exchange],
        RData::SRV(x) => vec![&mut x.target],
        RData::NAPTR(x) => vec![&mut x.replacement],
        RData::SOA(x) => vec![&mut x.mname, &mut x.rname],
        _ => Vec::new(),
    }
}

fn apply_templates(name: &mut Name, templates: &[Template]) {
    for t in templates {
        if let Some(new) = t.apply(&lower_text(name)).as_deref().and_then(legal_name) {
            *name = new;
        }
    }
}

/// Every subset of the classes a `class` rule may rewrite from (other than IN), indexed by
/// bits CH=1, HS=2, NONE=4, ANY=8: [`Plugin::classes`] hands out a static list.
const CLASS_SETS: [&[DNSClass]; 16] = {
    use DNSClass::{ANY, CH, HS, NONE};
    [
        &[],
        &[CH],
        &[HS],
        &[CH, HS],
        &[NONE],
        &[CH, NONE],
        &[HS, NONE],
        &[CH, HS, NONE],
        &[ANY],
        &[CH, ANY],
        &[HS, ANY],
        &[CH, HS, ANY],
        &[NONE, ANY],
        &[CH, NONE, ANY],
        &[HS, NONE, ANY],
        &[CH, HS, NONE, ANY],
    ]
};

fn class_bit(c: DNSClass) -> usize {
    match c {
        DNSClass::CH => 1,
        DNSClass::HS => 2,
        DNSClass::NONE => 4,
        DNSClass::ANY => 8,
        _ => 0,
    }
}

impl Plugin for Rewrite {
    fn name(&self) -> &'static str {
        "rewrite"
    }

    /// Never replayed from the memo (its `answer` rules and counters run per reply); what the
    /// rest of the chain answers to its rewritten question is no one client's.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Never
    }

    fn classes(&self) -> &'static [DNSClass] {
        self.classes
    }

    /// Rewritten questions are not replayed (the default), as before the plugin contract.
    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            match self.apply(q) {
                Some(rewritten) => {
                    let mut reply = next.serve(&rewritten.question).await;
                    if !rewritten.cnames.is_empty() {
                        reply = self.follow_cnames(reply, &rewritten, &next).await;
                    }
                    rewritten.restore(reply)
                }
                None => next.serve(q).await,
            }
        })
    }
}

/// Whether a query for `name` carrying `options` fits a DNS message: header, question (name,
/// type, class), the OPT record's fixed part and its options, in 65,535 bytes.
fn query_fits(name: &Name, options: &[crate::proto::EdnsOpt]) -> bool {
    let options: usize = options.iter().map(|o| 4 + o.data.len()).sum();
    12 + name.len() + 4 + 11 + options <= usize::from(u16::MAX)
}

impl Rewrite {
    /// The rules, applied in this order.
    pub fn new(rules: Vec<RewriteRule>) -> Self {
        let bits = rules.iter().fold(0, |bits, r| match r.action {
            Action::Class { from, .. } => bits | class_bit(from),
            _ => bits,
        });
        Self {
            rules: rules.into(),
            classes: CLASS_SETS[bits],
        }
    }

    /// Applies the rules to `q` in order: each matching `name` rule rewrites the name its
    /// predecessors left (matched lower-case), `type` / `class` rules change a question of
    /// their FROM, `edns0` rules its options; matching `ttl` and `rcode` rules, and every
    /// `cname` rule reached, are kept for the reply. A matching `stop` rule ends the list.
    /// `None` when no rule matched, or when a `name` rule produced a name that is not a legal
    /// domain name (the question then goes on as asked; logged at debug).
    pub fn apply(&self, q: &Question) -> Option<Rewritten> {
        let mut out = q.clone();
        let mut steps = Vec::new();
        let mut ttls = Vec::new();
        let mut rcodes = Vec::new();
        let mut cnames = Vec::new();
        let mut any = false;
        for (i, rule) in self.rules.iter().enumerate() {
            let matched = match &rule.action {
                Action::Ttl(range) => {
                    let m = rule.name.matches(&lower_text(&out.name));
                    if m {
                        ttls.push(*range);
                    }
                    m
                }
                Action::Rcode { from, to } => {
                    let m = rule.name.matches(&lower_text(&out.name));
                    if m {
                        rcodes.push((*from, *to));
                    }
                    m
                }
                Action::Cname => {
                    cnames.push(i);
                    true
                }
                Action::Type { from, to } => {
                    let m = out.qtype == *from;
                    if m {
                        out.qtype = *to;
                    }
                    m
                }
                Action::Class { from, to } => {
                    let m = out.qclass == *from;
                    if m {
                        out.qclass = *to;
                    }
                    m
                }
                Action::Edns0(e) => e.apply(&mut out),
                Action::Name => {
                    let Some(text) = rule.name.rewrite(&lower_text(&out.name)) else {
                        continue;
                    };
                    let Some(new) = legal_name(&text) else {
                        tracing::debug!(
                            rule = %rule.at,
                            qname = %q.name,
                            result = %text,
                            "rewrite: the result is not a legal domain name; question left as asked"
                        );
                        return None;
                    };
                    // A name that would not leave room for the question's options in the query
                    // sent on (a client's request over a stream may fill 64 KiB) is not made:
                    // the rule does not match, as an edns0 rule that would not fit.
                    if !query_fits(&new, &out.edns_options) {
                        tracing::debug!(rule = %rule.at, qname = %q.name, "rewrite: the new name does not fit a query beside the options; rule skipped");
                        continue;
                    }
                    steps.push(Step {
                        rule: i,
                        before: out.name.clone(),
                        after: new.clone(),
                    });
                    out.name = new;
                    true
                }
            };
            if matched {
                tracing::debug!(rule = %rule.at, qname = %out.name, qtype = %out.qtype, "rewrite: rule matched");
                any = true;
                if rule.mode == Mode::Stop {
                    break;
                }
            }
        }
        any.then(|| Rewritten {
            question: out,
            rules: Arc::clone(&self.rules),
            steps,
            ttls,
            rcodes,
            cnames,
        })
    }

    /// The `cname` rules on `reply`: the first CNAME record of the answer whose target a
    /// reached rule rewrites gets the new target; the CNAME records before it are kept, and
    /// what the whole chain answers for the new target (bounded by the chain's chase limit)
    /// follows them, with its rcode. A reply with no such CNAME is returned as it was.
    pub async fn follow_cnames(&self, reply: Reply, rewritten: &Rewritten, next: &Next<'_>) -> Reply {
        let found = reply.answers().iter().enumerate().find_map(|(at, r)| {
            let RData::CNAME(c) = &r.data else {
                return None;
            };
            let target = lower_text(&c.0);
            rewritten.cnames.iter().find_map(|&i| {
                let rule = self.rules.get(i)?;
                let new = rule.name.rewrite(&target).as_deref().and_then(legal_name)?;
                tracing::debug!(rule = %rule.at, from = %target, to = %new, "rewrite: cname target");
                Some((at, new))
            })
        });
        let Some((at, target)) = found else {
            return reply;
        };
        let forwarded = match &reply {
            Reply::Forwarded(f) => Some(f.recursion_available),
            _ => None,
        };
        let mut kept: Vec<Record> = reply.answers()[..=at]
            .iter()
            .filter(|r| matches!(r.data, RData::CNAME(_)))
            .cloned()
            .collect();
        if let Some(RData::CNAME(c)) = kept.last_mut().map(|r| &mut r.data) {
            c.0 = target.clone();
        }
        let mut answer = Answer::empty(ResponseCode::NoError);
        answer.answers = kept.into();
        let chased = next.chase(answer, target, &rewritten.question).await;
        match (chased, forwarded) {
            // An upstream's reply stays one (AA=0, its RA), with the new records.
            (Reply::Authoritative(a), Some(ra)) => Reply::Forwarded(Forwarded {
                rcode: a.rcode,
                recursion_available: ra,
                authentic_data: false,
                truncated: false,
                flags: a.flags,
                answers: a.answers.into_vec(),
                authority: a.authority,
                additional: a.additional,
            }),
            (other, _) => other,
        }
    }
}

impl Rewritten {
    /// The question's name as the client asked it.
    pub fn original_name(&self) -> &Name {
        self.steps.first().map_or(&self.question.name, |s| &s.before)
    }

    /// Maps `reply` back for the client, undoing the rules that matched, last first, on every
    /// record of the answer, authority and additional sections:
    ///
    /// * an owner name equal to the rewritten name gets the name before the rule (for the
    ///   first rule: the client's question name, in the client's case);
    /// * `answer auto` (always on for `exact`): other owner names, and the names in CNAME, NS,
    ///   MX, SRV, SOA, NAPTR and ANAME data, are mapped back by the reverse of the rule
    ///   (`to` back to `from`; for a regex only the rewritten name itself);
    /// * `answer name` / `answer value` rewrite owner names / data names by their regex;
    /// * the TTL of every record is held to the range of each `ttl` rule that matched, the last
    ///   rule first.
    ///
    /// A result that is not a legal name leaves that name as it was. Then each `rcode` rule
    /// that matched, the last first, changes the reply's rcode when it is the rule's FROM (a
    /// failure keeps its reason for `errors`). The question section the client sees is always
    /// its own: the server writes it from the request.
    pub fn restore(&self, reply: Reply) -> Reply {
        // Only rules that map names or TTLs touch records (any mutable access to a section
        // forgets that its records share one owner: see `proto::Records`).
        let touch = !self.steps.is_empty() || !self.ttls.is_empty();
        let mut reply = match reply {
            Reply::Authoritative(mut a) if touch => {
                for r in a
                    .answers
                    .iter_mut()
                    .chain(a.authority.iter_mut())
                    .chain(a.additional.iter_mut())
                {
                    self.restore_record(r);
                }
                Reply::Authoritative(a)
            }
            Reply::Forwarded(mut f) if touch => {
                for r in f
                    .answers
                    .iter_mut()
                    .chain(f.authority.iter_mut())
                    .chain(f.additional.iter_mut())
                {
                    self.restore_record(r);
                }
                Reply::Forwarded(f)
            }
            other => other,
        };
        for &(from, to) in self.rcodes.iter().rev() {
            match &mut reply {
                Reply::Authoritative(a) if a.rcode == from => a.rcode = to,
                Reply::Forwarded(f) if f.rcode == from => f.rcode = to,
                Reply::Rcode(r) if *r == from => *r = to,
                Reply::Failed(f) if f.rcode == from => f.rcode = to,
                _ => {}
            }
        }
        reply
    }

    fn restore_record(&self, record: &mut Record) {
        // Last rule first, as CoreDNS undoes its rules: the first matching rule has the last word.
        for range in self.ttls.iter().rev() {
            record.ttl = range.clamp(record.ttl);
        }
        for step in self.steps.iter().rev() {
            let Some(rule) = self.rules.get(step.rule) else {
                continue;
            };
            if record.name == step.after {
                record.name = step.before.clone();
            } else {
                if rule.auto {
                    revert(rule, step, &mut record.name);
                }
                apply_templates(&mut record.name, &rule.answer_names);
            }
            for n in data_names(&mut record.data) {
                if rule.auto {
                    revert(rule, step, n);
                }
                apply_templates(n, &rule.answer_values);
            }
        }
    }
}

/// `answer auto` on one name: the rewritten question name back to the name before the rule,
/// any other name by the rule's reverse mapping.
fn revert(rule: &RewriteRule, step: &Step, name: &mut Name) {
    if *name == step.after {
        *name = step.before.clone();
        return;
    }
    if let Some(new) = rule
        .name
        .revert(&lower_text(name))
        .as_deref()
        .and_then(legal_name)
    {
        *name = new;
    }
}

#[cfg(test)]
mod tests;
