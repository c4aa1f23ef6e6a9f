//! The tests of the `rewrite` handler (`handler.rs`), on configurations its setup (`setup.rs`)
//! parses: a file of their own, so that the handler itself never imports the setup.

use std::net::Ipv4Addr;
use std::path::Path;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use hickory_proto::rr::rdata::{A, CNAME, MX, SOA, SRV};

use super::super::setup::parse;
use super::*;
use crate::corefile::Corefile;

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
    let rw =
        rewrite("rewrite continue name exact a.example b.example\nrewrite name exact b.example c.example");
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
    let records = crate::proto::Records::with_owner(&n("a.example."), 5, [RData::A(A(Ipv4Addr::LOCALHOST))]);
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
