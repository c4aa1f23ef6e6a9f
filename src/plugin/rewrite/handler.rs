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
mod tests {
    use super::super::setup::parse;
    use super::*;
    use crate::corefile::Corefile;
    use hickory_proto::op::ResponseCode;
    use hickory_proto::rr::RecordType;
    use hickory_proto::rr::rdata::{A, CNAME, MX, SOA, SRV};
    use std::net::Ipv4Addr;
    use std::path::Path;

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    fn rewrite(lines: &str) -> Rewrite {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{lines}\n}}\n"), Path::new("Corefile")).unwrap();
        Rewrite::new(
            cf.blocks[0]
                .directives
                .iter()
                .map(|d| parse(d).unwrap())
                .collect(),
        )
    }

    fn q(name: &str) -> Question {
        Question::new(n(name), RecordType::A)
    }

    fn rewritten(rw: &Rewrite, name: &str) -> Option<String> {
        rw.apply(&q(name)).map(|r| r.question.name.to_ascii())
    }

    fn a(owner: &str, ip: [u8; 4]) -> Record {
        Record::from_rdata(n(owner), 30, RData::A(A(Ipv4Addr::from(ip))))
    }

    fn cname(owner: &str, target: &str) -> Record {
        Record::from_rdata(n(owner), 30, RData::CNAME(CNAME(n(target))))
    }

    /// An upstream's NOERROR reply with `answers`.
    fn forwarded(answers: Vec<Record>) -> Reply {
        Reply::Forwarded(Forwarded {
            rcode: ResponseCode::NoError,
            recursion_available: true,
            authentic_data: false,
            truncated: false,
            flags: crate::proto::FlagEdit::KEEP,
            answers,
            authority: vec![],
            additional: vec![],
        })
    }

    fn show(records: &[Record]) -> Vec<String> {
        records
            .iter()
            .map(|r| {
                let data = match &r.data {
                    RData::A(x) => x.0.to_string(),
                    RData::CNAME(x) => x.0.to_ascii(),
                    RData::SRV(x) => x.target.to_ascii(),
                    RData::MX(x) => x.exchange.to_ascii(),
                    RData::SOA(x) => format!("{} {}", x.mname.to_ascii(), x.rname.to_ascii()),
                    other => format!("{other:?}"),
                };
                format!("{} {data}", r.name.to_ascii())
            })
            .collect()
    }

    #[test]
    fn match_types() {
        let rw = rewrite("rewrite name exact www.example.net www.example.org");
        assert_eq!(
            rewritten(&rw, "WWW.Example.NET."),
            Some("www.example.org.".into())
        );
        assert_eq!(rewritten(&rw, "a.www.example.net."), None);
        let rw = rewrite("rewrite name prefix www. web.");
        assert_eq!(
            rewritten(&rw, "Www.example.org."),
            Some("web.example.org.".into())
        );
        assert_eq!(rewritten(&rw, "ftp.example.org."), None);
        let rw = rewrite("rewrite name suffix .schmoogle.com .google.com");
        assert_eq!(
            rewritten(&rw, "mail.SCHMOOGLE.com."),
            Some("mail.google.com.".into())
        );
        assert_eq!(
            rewritten(&rw, "schmoogle.com."),
            None,
            "the suffix includes the dot"
        );
        let rw = rewrite("rewrite name substring service.us-west-1.example.org service.us-west-1.consul");
        assert_eq!(
            rewritten(&rw, "ftp.service.us-west-1.example.org."),
            Some("ftp.service.us-west-1.consul.".into())
        );
        let rw = rewrite(r"rewrite name regex (.*)-(us-west-1)\.example\.org {1}.service.{2}.consul");
        assert_eq!(
            rewritten(&rw, "FTP-us-west-1.example.org."),
            Some("ftp.service.us-west-1.consul.".into())
        );
        assert_eq!(rewritten(&rw, "ftp.example.org."), None);
        // The rewritten question keeps the other fields.
        let mut asked = Question::new(n("ftp-us-west-1.example.org."), RecordType::SRV);
        asked.transport = crate::proto::Transport::Tcp;
        asked.dnssec_ok = true;
        let out = rw.apply(&asked).unwrap();
        assert_eq!(out.question.qtype, RecordType::SRV);
        assert!(out.question.over_stream() && out.question.dnssec_ok);
        assert_eq!(out.original_name().to_ascii(), "ftp-us-west-1.example.org.");
    }

    #[test]
    fn stop_and_continue() {
        let text = "rewrite continue name suffix .a.example .b.example\nrewrite name suffix .b.example .c.example\nrewrite name suffix .c.example .d.example";
        let rw = rewrite(text);
        assert_eq!(
            rewritten(&rw, "x.a.example."),
            Some("x.c.example.".into()),
            "stops at the 2nd"
        );
        assert_eq!(rewritten(&rw, "x.b.example."), Some("x.c.example.".into()));
        assert_eq!(rewritten(&rw, "x.c.example."), Some("x.d.example.".into()));
        assert_eq!(rewritten(&rw, "x.e.example."), None);
        // Stop: the first matching rule is the last applied.
        let rw = rewrite("rewrite name exact a.example b.example\nrewrite name exact b.example c.example");
        assert_eq!(rewritten(&rw, "a.example."), Some("b.example.".into()));
        // The chain a -> b -> c is undone c -> b -> a.
        let rw = rewrite(
            "rewrite continue name exact a.example b.example\nrewrite name exact b.example c.example",
        );
        let out = rw.apply(&q("A.example.")).unwrap();
        assert_eq!(out.question.name.to_ascii(), "c.example.");
        let reply = Reply::Authoritative(Answer {
            rcode: ResponseCode::NoError,
            answers: vec![a("c.example.", [10, 0, 0, 1])].into(),
            authority: vec![],
            additional: vec![],
            chase_target: None,
            flags: crate::proto::FlagEdit::KEEP,
        });
        assert_eq!(show(out.restore(reply).answers()), ["A.example. 10.0.0.1"]);
    }

    #[test]
    fn illegal_results_leave_the_question_alone() {
        let long = "a".repeat(61);
        let rw = rewrite(&format!("rewrite name prefix x {long}"));
        assert_eq!(rewritten(&rw, "xyzw.example."), None, "a label over 63 bytes");
        let rw = rewrite("rewrite name substring .b. ..");
        assert_eq!(rewritten(&rw, "a.b.example."), None, "an empty label");
        let labels = vec!["a".repeat(63); 3].join(".");
        let rw = rewrite(&format!(
            "rewrite name suffix .example .{labels}.{}",
            "b".repeat(60)
        ));
        assert_eq!(rewritten(&rw, "c.example."), None, "over 255 bytes");
        assert!(legal_name(&format!("{labels}.{}.", "b".repeat(61))).is_some());
        assert!(legal_name(&format!("{labels}.{}.", "b".repeat(62))).is_none());
        assert!(legal_name(".").is_some());
        assert!(legal_name(".a.").is_none());
        assert!(legal_name("").is_none());
    }

    #[test]
    fn answer_auto_on_an_authoritative_reply() {
        let rw = rewrite("rewrite name suffix .corp.example .svc.cluster.local answer auto");
        let out = rw.apply(&q("Web.NS.corp.example.")).unwrap();
        assert_eq!(out.question.name.to_ascii(), "web.ns.svc.cluster.local.");
        let soa = SOA::new(
            n("ns.dns.svc.cluster.local."),
            n("hostmaster.svc.cluster.local."),
            1,
            7200,
            1800,
            86400,
            30,
        );
        let srv = SRV::new(0, 100, 80, n("pod-1.web.ns.svc.cluster.local."));
        let reply = Reply::Authoritative(Answer {
            rcode: ResponseCode::NoError,
            answers: vec![
                cname("web.ns.svc.cluster.local.", "db.ns.svc.cluster.local."),
                a("db.ns.svc.cluster.local.", [10, 0, 0, 2]),
                Record::from_rdata(n("web.ns.svc.cluster.local."), 30, RData::SRV(srv)),
                a("unrelated.example.", [10, 0, 0, 3]),
            ]
            .into(),
            authority: vec![Record::from_rdata(n("svc.cluster.local."), 30, RData::SOA(soa))],
            additional: vec![a("pod-1.web.ns.svc.cluster.local.", [10, 0, 0, 4])],
            chase_target: None,
            flags: crate::proto::FlagEdit::KEEP,
        });
        let Reply::Authoritative(back) = out.restore(reply) else {
            panic!("kind changed");
        };
        assert_eq!(
            show(&back.answers),
            [
                "Web.NS.corp.example. db.ns.corp.example.",
                "db.ns.corp.example. 10.0.0.2",
                "Web.NS.corp.example. pod-1.web.ns.corp.example.",
                "unrelated.example. 10.0.0.3",
            ]
        );
        // `svc.cluster.local.` does not end with `.svc.cluster.local.`: left alone.
        assert_eq!(
            show(&back.authority),
            ["svc.cluster.local. ns.dns.corp.example. hostmaster.corp.example."]
        );
        assert_eq!(show(&back.additional), ["pod-1.web.ns.corp.example. 10.0.0.4"]);
        assert_eq!(back.rcode, ResponseCode::NoError);
    }

    #[test]
    fn answer_auto_on_a_forwarded_reply() {
        let rw = rewrite("rewrite name prefix old- new- answer auto");
        let out = rw.apply(&q("OLD-api.example.")).unwrap();
        assert_eq!(out.question.name.to_ascii(), "new-api.example.");
        let reply = Reply::Forwarded(Forwarded {
            rcode: ResponseCode::NoError,
            recursion_available: true,
            authentic_data: false,
            truncated: false,
            flags: crate::proto::FlagEdit::KEEP,
            answers: vec![
                cname("new-api.example.", "new-lb.example."),
                a("new-lb.example.", [192, 0, 2, 1]),
            ],
            authority: vec![],
            additional: vec![Record::from_rdata(
                n("new-api.example."),
                30,
                RData::MX(MX::new(10, n("new-mx.example."))),
            )],
        });
        let Reply::Forwarded(back) = out.restore(reply) else {
            panic!("kind changed");
        };
        assert_eq!(
            show(&back.answers),
            ["OLD-api.example. old-lb.example.", "old-lb.example. 192.0.2.1"]
        );
        assert_eq!(show(&back.additional), ["OLD-api.example. old-mx.example."]);
        assert!(back.recursion_available);
        // Rcode replies pass unchanged.
        assert_eq!(
            out.restore(Reply::Rcode(ResponseCode::ServFail)),
            Reply::Rcode(ResponseCode::ServFail)
        );
    }

    #[test]
    fn without_answer_options_only_the_question_name_is_mapped_back() {
        let rw = rewrite("rewrite name suffix .corp.example .svc.cluster.local");
        let out = rw.apply(&q("web.Corp.example.")).unwrap();
        let reply = Reply::Forwarded(Forwarded {
            rcode: ResponseCode::NoError,
            recursion_available: true,
            authentic_data: false,
            truncated: false,
            flags: crate::proto::FlagEdit::KEEP,
            answers: vec![
                cname("web.svc.cluster.local.", "db.svc.cluster.local."),
                a("db.svc.cluster.local.", [10, 0, 0, 2]),
            ],
            authority: vec![],
            additional: vec![],
        });
        assert_eq!(
            show(out.restore(reply).answers()),
            [
                "web.Corp.example. db.svc.cluster.local.",
                "db.svc.cluster.local. 10.0.0.2"
            ]
        );
        // An exact rule maps back data names equal to the rewritten name too.
        let rw = rewrite("rewrite name exact a.example b.example");
        let out = rw.apply(&q("a.example.")).unwrap();
        let reply = Reply::Authoritative(Answer {
            rcode: ResponseCode::NXDomain,
            answers: vec![cname("x.example.", "b.example.")].into(),
            authority: vec![],
            additional: vec![],
            chase_target: None,
            flags: crate::proto::FlagEdit::KEEP,
        });
        let back = out.restore(reply);
        assert_eq!(back.rcode(), ResponseCode::NXDomain);
        assert_eq!(show(back.answers()), ["x.example. a.example."]);
    }

    #[test]
    fn answer_name_and_value_regexes() {
        let rw = rewrite(
            r"rewrite stop {
    name regex (.*)-(us-west-1)\.coredns\.rocks {1}.service.{2}.consul
    answer name (.*)\.service\.(us-west-1)\.consul {1}-{2}.coredns.rocks
    answer value (.*)\.service\.(us-west-1)\.consul {1}-{2}.coredns.rocks
}",
        );
        let out = rw.apply(&q("ftp-us-west-1.coredns.rocks.")).unwrap();
        assert_eq!(out.question.name.to_ascii(), "ftp.service.us-west-1.consul.");
        let reply = Reply::Forwarded(Forwarded {
            rcode: ResponseCode::NoError,
            recursion_available: true,
            authentic_data: false,
            truncated: false,
            flags: crate::proto::FlagEdit::KEEP,
            answers: vec![
                cname("ftp.service.us-west-1.consul.", "lb.service.us-west-1.consul."),
                a("lb.service.us-west-1.consul.", [10, 10, 10, 10]),
                a("other.consul.", [10, 20, 20, 20]),
            ],
            authority: vec![],
            additional: vec![],
        });
        assert_eq!(
            show(out.restore(reply).answers()),
            [
                "ftp-us-west-1.coredns.rocks. lb-us-west-1.coredns.rocks.",
                "lb-us-west-1.coredns.rocks. 10.10.10.10",
                "other.consul. 10.20.20.20",
            ]
        );
        // A regex rule with `answer auto` maps back the rewritten name itself, owner and data.
        let rw = rewrite(r"rewrite name regex ^(.*)\.old\.example\.$ {1}.new.example answer auto");
        let out = rw.apply(&q("X.old.example.")).unwrap();
        let reply = Reply::Authoritative(Answer {
            rcode: ResponseCode::NoError,
            answers: vec![
                a("x.new.example.", [10, 0, 0, 1]),
                cname("alias.new.example.", "x.new.example."),
            ]
            .into(),
            authority: vec![],
            additional: vec![],
            chase_target: None,
            flags: crate::proto::FlagEdit::KEEP,
        });
        assert_eq!(
            show(out.restore(reply).answers()),
            ["X.old.example. 10.0.0.1", "alias.new.example. X.old.example."]
        );
    }

    #[test]
    fn ttl_rules_hold_every_section_to_their_range() {
        let rw = rewrite(
            "rewrite continue name suffix .old.example .new.example\nrewrite continue ttl suffix .new.example 30-300\nrewrite ttl regex ^a\\. 5",
        );
        let out = rw.apply(&q("A.old.example.")).unwrap();
        assert_eq!(
            out.question.name.to_ascii(),
            "a.new.example.",
            "ttl rules match the rewritten name"
        );
        assert_eq!(out.original_name().to_ascii(), "A.old.example.");
        let with_ttl = |mut r: Record, ttl: u32| {
            r.ttl = ttl;
            r
        };
        let reply = Reply::Authoritative(Answer {
            rcode: ResponseCode::NoError,
            answers: vec![
                with_ttl(a("a.new.example.", [10, 0, 0, 1]), 3600),
                with_ttl(a("a.new.example.", [10, 0, 0, 2]), 5),
            ]
            .into(),
            authority: vec![with_ttl(a("ns.new.example.", [10, 0, 0, 3]), 100)],
            additional: vec![with_ttl(a("x.example.", [10, 0, 0, 4]), 0)],
            chase_target: None,
            flags: crate::proto::FlagEdit::KEEP,
        });
        let Reply::Authoritative(back) = out.restore(reply) else {
            panic!("kind changed");
        };
        // Exactly 5, then 30-300: the later rule's range first, as CoreDNS applies them.
        let ttls = |rs: &[Record]| rs.iter().map(|r| r.ttl).collect::<Vec<_>>();
        assert_eq!(ttls(&back.answers), [30, 30]);
        assert_eq!(ttls(&back.authority), [30]);
        assert_eq!(ttls(&back.additional), [30]);
        assert_eq!(show(&back.answers)[0], "A.old.example. 10.0.0.1");

        // A ttl rule alone passes the question on as asked.
        let rw = rewrite("rewrite ttl exact b.example 30-300\nrewrite ttl b.example 7");
        let out = rw.apply(&q("B.example.")).unwrap();
        assert_eq!(out.question.name.to_ascii(), "B.example.");
        let reply = Reply::Rcode(ResponseCode::NoError);
        assert_eq!(out.restore(reply.clone()), reply, "no records, nothing to hold");
        let upstream = forwarded(vec![
            with_ttl(a("b.example.", [10, 0, 0, 5]), 3600),
            with_ttl(a("b.example.", [10, 0, 0, 6]), 45),
        ]);
        let Reply::Forwarded(back) = out.restore(upstream) else {
            panic!("kind changed");
        };
        assert_eq!(
            ttls(&back.answers),
            [300, 45],
            "the first (stop) rule ends the list"
        );
        assert!(rw.apply(&q("c.example.")).is_none());
    }

    #[test]
    fn type_class_rcode_and_edns0_rules() {
        use crate::proto::Failure;
        let rw = rewrite(
            "rewrite continue type AAAA A\nrewrite continue class CH IN\nrewrite continue rcode suffix .example SERVFAIL NOERROR\nrewrite continue rcode suffix .example NOERROR REFUSED\nrewrite edns0 nsid set",
        );
        assert_eq!(rw.classes(), &[DNSClass::CH]);
        let mut asked = Question::new(n("A.example."), RecordType::AAAA);
        asked.qclass = DNSClass::CH;
        let out = rw.apply(&asked).unwrap();
        assert_eq!(
            (out.question.qtype, out.question.qclass),
            (RecordType::A, DNSClass::IN)
        );
        assert_eq!(out.question.edns_options.len(), 1);
        assert_eq!(out.question.name, asked.name);
        // Last rule first: NOERROR -> REFUSED is tried before SERVFAIL -> NOERROR.
        assert_eq!(
            out.restore(Reply::Rcode(ResponseCode::ServFail)),
            Reply::Rcode(ResponseCode::NoError)
        );
        assert_eq!(
            out.restore(Reply::Rcode(ResponseCode::NoError)),
            Reply::Rcode(ResponseCode::Refused)
        );
        let failed = out.restore(Reply::Failed(Failure {
            rcode: ResponseCode::ServFail,
            reason: "no upstream answered",
        }));
        assert!(
            matches!(failed, Reply::Failed(f) if f.rcode == ResponseCode::NoError && f.reason == "no upstream answered")
        );
        // Records are left alone (and their one-owner mark kept) when no rule maps names or TTLs.
        let records =
            crate::proto::Records::with_owner(&n("a.example."), 5, [RData::A(A(Ipv4Addr::LOCALHOST))]);
        let mut answer = Answer::empty(ResponseCode::NoError);
        answer.answers = records;
        let Reply::Authoritative(back) = out.restore(Reply::Authoritative(answer)) else {
            panic!("kind changed");
        };
        assert!(back.answers.share_one_owner());
        assert_eq!(back.rcode, ResponseCode::Refused);
        // No rule matches an A IN question of another name (but the unconditional edns0 one).
        let plain = rw.apply(&q("b.other.")).unwrap();
        assert_eq!(plain.question.qtype, RecordType::A);
        assert_eq!(
            plain.restore(Reply::Rcode(ResponseCode::ServFail)),
            Reply::Rcode(ResponseCode::ServFail)
        );
        assert!(rewrite("rewrite type AAAA A").apply(&q("b.other.")).is_none());
        assert_eq!(rewrite("rewrite type AAAA A").classes(), &[] as &[DNSClass]);
    }

    #[test]
    fn no_match_no_rewrite() {
        let rw = Rewrite::new(Vec::new());
        assert!(rw.apply(&q("a.example.")).is_none());
        let rw = rewrite("rewrite name exact a.example b.example");
        assert!(rw.apply(&q("c.example.")).is_none());
    }
}
