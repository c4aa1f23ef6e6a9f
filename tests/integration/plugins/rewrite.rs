//! `rewrite`: rules other than `name` against the real server with `dig`, over UDP and TCP,
//! each question asked twice (the second time may be answered again from memory). `hosts`
//! holds the data (TTL 3600) behind the rules.
//!
//! * `ttl`: the README's `rewrite continue { ttl regex (.*)\.coredns\.rocks 15 }`, a range
//!   (`30-300`) and a cap (`-30`) hold the answer's TTL; an unmatched name keeps hosts' TTL.
//! * `type` / `class`: the question goes on as the rule's TO, the client sees its own question
//!   back with the answer for TO; without the rule, none (a CH question is even refused).
//! * `rcode`: an upstream's SERVFAIL becomes NOERROR for the names the rule matches only.
//! * `cname`: the README's CDN example, the CNAME target rewritten and the records after it
//!   those of the new target; rules that send targets round in a circle end (the chase limit).
//! * `edns0`: a scripted upstream records the options `forward` sent it: set, append, nsid,
//!   subnet from the client's address (replacing the client's own), `{qname}`, `{server_ip}`
//!   and `{server_port}` (the listener's), and `unset` removing a client's option while another
//!   travels on.

use std::net::SocketAddr;

use crate::support::upstream::{Mode, Scripted};
use hickory_proto::op::ResponseCode;

use crate::support;

fn corefile(rules: &str) -> String {
    format!(
        ".:0 {{\n bind 127.0.0.1\n{rules} hosts {{\n  10.0.0.1 www.coredns.rocks\n  10.0.0.2 example.com\n  10.0.0.3 a.cap.example\n  10.0.0.4 other.example\n }}\n}}\n"
    )
}

/// The answer records (`name ttl class type data`) dig shows for each of `asks`, each asked
/// over UDP twice then TCP twice.
async fn answers_of(rules: &str, asks: &'static [&'static str]) -> Vec<(String, Vec<String>)> {
    let dir = support::temp_dir("rewrite");
    let running = support::start(&corefile(rules), &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for name in asks {
            for transport in ["+notcp", "+notcp", "+tcp", "+tcp"] {
                let got = support::dig(addr, &["+nocookie", "+noall", "+answer", transport, "A", name]);
                out.push((format!("{name} {transport}"), support::dig_records(&got)));
            }
        }
        out
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    out
}

const TTL_RULES: &str = " rewrite continue {\n  ttl regex (.*)\\.coredns\\.rocks 15\n }\n rewrite ttl example.com. 30-300\n rewrite ttl suffix .cap.example -30\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_rules_hold_the_answer_ttl() {
    let asks: &'static [&'static str] = &[
        "www.coredns.rocks",
        "example.com",
        "a.cap.example",
        "other.example",
    ];
    let want = [
        "www.coredns.rocks. 15 IN A 10.0.0.1",
        "example.com. 300 IN A 10.0.0.2",
        "a.cap.example. 30 IN A 10.0.0.3",
        "other.example. 3600 IN A 10.0.0.4",
    ];
    let got = answers_of(TTL_RULES, asks).await;
    assert_eq!(got.len(), 16);
    for (i, (asked, records)) in got.iter().enumerate() {
        assert_eq!(records, &[want[i / 4]], "{asked}");
    }
    // Without the rules, hosts' own TTL: the test can tell the two apart.
    for (asked, records) in answers_of("", &["www.coredns.rocks"]).await {
        assert_eq!(records, ["www.coredns.rocks. 3600 IN A 10.0.0.1"], "{asked}");
    }
}

#[test]
fn a_wrong_ttl_rule_names_its_line() {
    let dir = support::temp_dir("rewrite-check");
    let err = support::check_corefile(&dir, &corefile(" rewrite ttl example.com. 300-30\n")).unwrap_err();
    assert!(
        err.contains("Corefile:3") && err.contains("invalid TTL '300-30'"),
        "{err}"
    );
}

/// dig's output for `args`, asked of `addr` off the runtime.
async fn dig(addr: SocketAddr, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        support::dig(addr, &args)
    })
    .await
    .unwrap()
}

/// The question line dig prints (`;name. IN AAAA`), single-spaced.
fn question_of(out: &str) -> String {
    out.lines()
        .skip_while(|l| !l.starts_with(";; QUESTION SECTION"))
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The ANSWER section's records of dig's full output.
fn answer_of(out: &str) -> Vec<String> {
    out.lines()
        .skip_while(|l| !l.starts_with(";; ANSWER SECTION"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(support::single_spaced)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_and_class_rules_ask_the_rest_of_the_chain_for_their_to() {
    let up = Scripted::start().await;
    let dir = support::temp_dir("rewrite-type");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n rewrite type AAAA A\n rewrite type ANY TXT\n rewrite class CH IN\n template IN TXT example.org {{\n  answer \"{{{{ .Name }}}} 60 IN TXT rewritten\"\n }}\n hosts {{\n  10.0.0.1 www.coredns.rocks\n  fallthrough\n }}\n forward . {}\n}}\n",
        up.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    for transport in ["+notcp", "+tcp"] {
        // AAAA goes upstream as A: the client sees its AAAA question and the A record.
        let out = dig(addr, &["+nocookie", transport, "AAAA", "www.example.com"]).await;
        assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
        assert_eq!(question_of(&out), ";www.example.com. IN AAAA", "{out}");
        assert_eq!(answer_of(&out), ["www.example.com. 300 IN A 192.0.2.1"], "{out}");
        // The README's ANY rule, to a type the template answers.
        let out = dig(addr, &["+nocookie", transport, "ANY", "x.example.org"]).await;
        assert_eq!(question_of(&out), ";x.example.org. IN ANY", "{out}");
        assert_eq!(
            answer_of(&out),
            ["x.example.org. 60 IN TXT \"rewritten\""],
            "{out}"
        );
        // A CH question is answered as IN, its question kept (dig warns that the IN record
        // under a CH question is malformed, as it does with CoreDNS's answer).
        let out = dig(addr, &["+nocookie", transport, "www.coredns.rocks", "CH", "A"]).await;
        assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
        assert_eq!(question_of(&out), ";www.coredns.rocks. CH A", "{out}");
        assert_eq!(
            answer_of(&out),
            ["www.coredns.rocks. 3600 IN A 10.0.0.1"],
            "{out}"
        );
        // Types no rule names are left alone.
        let out = dig(addr, &["+nocookie", transport, "TXT", "www.coredns.rocks"]).await;
        assert!(answer_of(&out).is_empty(), "{out}");
    }
    running.stop().await.unwrap();
    // Without the rules: no A for an AAAA question, and a CH question is refused.
    let running = support::start(
        &format!(".:0 {{\n bind 127.0.0.1\n hosts {{\n  10.0.0.1 www.coredns.rocks\n  fallthrough\n }}\n forward . {}\n}}\n", up.addr),
        &dir,
    )
    .await;
    let addr = running.dns_addrs()[0];
    let out = dig(addr, &["+nocookie", "AAAA", "www.example.com"]).await;
    assert!(answer_of(&out).is_empty(), "{out}");
    let out = dig(addr, &["+nocookie", "www.coredns.rocks", "CH", "A"]).await;
    assert_eq!(support::dig_status(&out), "REFUSED", "{out}");
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rcode_rules_change_the_reply_rcode_of_matching_names() {
    let up = Scripted::start().await;
    up.set_mode(Mode::Rcode(ResponseCode::ServFail));
    let dir = support::temp_dir("rewrite-rcode");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n rewrite continue {{\n  rcode regex (.*)\\.coredns\\.rocks SERVFAIL NOERROR\n }}\n rewrite rcode exact nxa.example.com 3 5\n forward . {}\n}}\n",
        up.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    for transport in ["+notcp", "+tcp"] {
        let out = dig(addr, &["+nocookie", transport, "A", "www.coredns.rocks"]).await;
        assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
        assert_eq!(question_of(&out), ";www.coredns.rocks. IN A", "{out}");
        let out = dig(addr, &["+nocookie", transport, "A", "coredns.rocks"]).await;
        assert_eq!(
            support::dig_status(&out),
            "SERVFAIL",
            "the regex needs a label before: {out}"
        );
    }
    up.set_mode(Mode::Answer);
    let out = dig(addr, &["+nocookie", "A", "nxa.example.com"]).await;
    assert_eq!(
        support::dig_status(&out),
        "REFUSED",
        "NXDOMAIN (3) to REFUSED (5): {out}"
    );
    let out = dig(addr, &["+nocookie", "A", "nxb.example.com"]).await;
    assert_eq!(support::dig_status(&out), "NXDOMAIN", "{out}");
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cname_rules_send_the_target_elsewhere() {
    let dir = support::temp_dir("rewrite-cname");
    let zone = |rule: &str| {
        format!(
            ".:0 {{\n bind 127.0.0.1\n{rule} template IN A my-app.com {{\n  match ^my-app\\.com\\.$\n  answer \"my-app.com. 200 IN CNAME my-app.example.\"\n  answer \"my-app.example. 200 IN CNAME my-app.com.cdn.example.net.\"\n  answer \"my-app.com.cdn.example.net. 300 IN A 20.2.0.1\"\n  fallthrough\n }}\n hosts {{\n  20.2.0.1 my-app.com.cdn.example.net\n  30.3.1.2 my-app.com.other.cdn.com\n }}\n}}\n"
        )
    };
    let running = support::start(
        &zone(" rewrite cname regex (.*).cdn.example.net. {1}.other.cdn.com.\n"),
        &dir,
    )
    .await;
    let addr = running.dns_addrs()[0];
    for transport in ["+notcp", "+tcp"] {
        let out = dig(addr, &["+nocookie", transport, "A", "my-app.com"]).await;
        assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
        assert_eq!(question_of(&out), ";my-app.com. IN A", "{out}");
        assert_eq!(
            answer_of(&out),
            [
                "my-app.com. 200 IN CNAME my-app.example.",
                "my-app.example. 200 IN CNAME my-app.com.other.cdn.com.",
                "my-app.com.other.cdn.com. 3600 IN A 30.3.1.2",
            ],
            "{out}"
        );
    }
    running.stop().await.unwrap();
    // Without the rule, the CDN's own records.
    let running = support::start(&zone(""), &dir).await;
    let out = dig(running.dns_addrs()[0], &["+nocookie", "A", "my-app.com"]).await;
    assert_eq!(
        answer_of(&out),
        [
            "my-app.com. 200 IN CNAME my-app.example.",
            "my-app.example. 200 IN CNAME my-app.com.cdn.example.net.",
            "my-app.com.cdn.example.net. 300 IN A 20.2.0.1",
        ],
        "{out}"
    );
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edns0_rules_change_the_options_forward_sends_upstream() {
    let up = Scripted::start().await;
    let dir = support::temp_dir("rewrite-edns0");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n rewrite continue edns0 local set 0xffee 0x61626364\n rewrite continue edns0 local append 0xffef {{qname}}\n rewrite continue edns0 local set 0xfff2 {{server_ip}}\n rewrite continue edns0 local set 0xfff3 {{server_port}}\n rewrite continue edns0 nsid set\n rewrite continue edns0 local unset 0xfff0\n rewrite edns0 subnet set 24 56\n forward . {}\n}}\n",
        up.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let ecs = |prefix: u8, addr: &[u8]| {
        let mut v = vec![0, 1, prefix, 0];
        v.extend_from_slice(addr);
        v
    };
    // dig's own options: a client subnet (replaced), 0xfff0 (removed), 0xfff1 (kept).
    let out = dig(
        addr,
        &[
            "+nocookie",
            "+subnet=10.1.2.3/32",
            "+ednsopt=65520:1234",
            "+ednsopt=65521:abcd",
            "A",
            "www.example.com",
        ],
    )
    .await;
    assert_eq!(answer_of(&out), ["www.example.com. 300 IN A 192.0.2.1"], "{out}");
    let out = dig(addr, &["+nocookie", "+tcp", "A", "Two.example.com"]).await;
    assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
    let got = up.options();
    assert_eq!(got.len(), 2, "{got:?}");
    let mut first = got[0].clone();
    first.sort();
    let mut want = vec![
        (3u16, vec![]),
        (8, ecs(24, &[127, 0, 0])),
        (0xffee, b"abcd".to_vec()),
        (0xffef, b"www.example.com.".to_vec()),
        (0xfff1, vec![0xab, 0xcd]),
        (0xfff2, vec![127, 0, 0, 1]),
        (0xfff3, addr.port().to_be_bytes().to_vec()),
    ];
    want.sort();
    assert_eq!(first, want);
    let mut second = got[1].clone();
    second.sort();
    let mut want = vec![
        (3u16, vec![]),
        (8, ecs(24, &[127, 0, 0])),
        (0xffee, b"abcd".to_vec()),
        (0xffef, b"Two.example.com.".to_vec()),
        (0xfff2, vec![127, 0, 0, 1]),
        (0xfff3, addr.port().to_be_bytes().to_vec()),
    ];
    want.sort();
    assert_eq!(second, want, "over TCP too; the name as the client spelt it");
    running.stop().await.unwrap();
    // Without the rules, the client's options travel as sent (the cookie never does).
    let running = support::start(
        &format!(".:0 {{\n bind 127.0.0.1\n forward . {}\n}}\n", up.addr),
        &dir,
    )
    .await;
    let out = dig(
        running.dns_addrs()[0],
        &["+cookie", "+ednsopt=65521:abcd", "A", "three.example.com"],
    )
    .await;
    assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
    assert_eq!(up.options().last().unwrap(), &[(0xfff1, vec![0xab, 0xcd])]);
    running.stop().await.unwrap();
}

#[test]
fn wrong_rules_name_their_line() {
    let dir = support::temp_dir("rewrite-check");
    for (rule, want) in [
        (" rewrite type AAAA BOGUS\n", "invalid type \"BOGUS\""),
        (" rewrite class CH XX\n", "invalid class \"XX\""),
        (
            " rewrite rcode a.example SERVFAIL NOPE\n",
            "invalid replacement RCODE 'NOPE'",
        ),
        (" rewrite cname regex (a b\n", "invalid regex '(a'"),
        (
            " rewrite edns0 subnet set 33 56\n",
            "invalid IPv4 bit mask length '33'",
        ),
        (
            " rewrite edns0 local set 0xffee {kubernetes/namespace}\n",
            "not implemented",
        ),
    ] {
        let err = support::check_corefile(&dir, &corefile(rule)).unwrap_err();
        assert!(err.contains("Corefile:3") && err.contains(want), "{rule}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cname_rules_that_loop_end() {
    // The template answers a.loop.example with a CNAME to b.loop.example, and the rule sends
    // b back to a: each lookup of the new target meets the rule again, until the chain's chase
    // limit (8) ends it.
    let dir = support::temp_dir("rewrite-cname-loop");
    let corefile = ".:0 {\n bind 127.0.0.1\n rewrite cname exact b.loop.example. a.loop.example.\n template IN A loop.example {\n  match ^a\\.loop\\.example\\.$\n  answer \"a.loop.example. 60 IN CNAME b.loop.example.\"\n }\n}\n";
    let running = support::start(corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    for transport in ["+notcp", "+tcp"] {
        let started = std::time::Instant::now();
        let out = dig(addr, &["+nocookie", transport, "A", "a.loop.example"]).await;
        assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
        let records = answer_of(&out);
        assert!(
            !records.is_empty() && records.len() <= 10,
            "a bounded CNAME chain: {out}"
        );
        assert!(
            records.iter().all(|r| r.contains("IN CNAME a.loop.example.")),
            "{out}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{out}");
    }
    running.stop().await.unwrap();
}

/// The examples of CoreDNS 1.14.7's rewrite README for the rule types beyond `name` pass
/// `--check` as written.
#[test]
fn the_readme_examples_pass_check() {
    let dir = support::temp_dir("rewrite-readme");
    for example in [
        ". {\n    rewrite edns0 local set 0xffee 0x61626364\n    whoami\n}\n",
        ". {\n    rewrite edns0 local set 0xffee abcd\n}\n",
        ". {\n    rewrite edns0 local set 0xffee {client_ip}\n}\n",
        ". {\n    rewrite edns0 local unset 0xffee\n}\n",
        ". {\n    rewrite edns0 subnet set 24 56\n}\n",
        ". {\n    rewrite edns0 subnet unset\n}\n",
        ". {\n    rewrite edns0 local set 0xffee abcd revert\n}\n",
        ". {\n    rewrite continue {\n        edns0 local set 0xffee abcd\n    }\n\n    rewrite edns0 local replace 0xffee bcde revert\n}\n",
        ". {\n    rewrite continue {\n        rcode regex (.*)\\.coredns\\.rocks SERVFAIL NOERROR\n    }\n}\n",
        ". {\n    rewrite continue {\n        rcode regex (.*)\\.coredns\\.rocks 2 0\n    }\n}\n",
        ". {\n    rewrite cname regex (.*).cdn.example.net. {1}.other.cdn.com.\n}\n",
        ". {\n    rewrite type ANY HINFO\n    rewrite class CH IN\n}\n",
    ] {
        support::check_corefile(&dir, example).unwrap_or_else(|e| panic!("{example}: {e}"));
    }
}
