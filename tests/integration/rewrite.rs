//! `rewrite`: rules other than `name` against the real server with `dig`, over UDP and TCP,
//! each question asked twice (the second time may be answered again from memory). `hosts`
//! holds the data (TTL 3600) behind the rules.
//!
//! * `ttl`: the README's `rewrite continue { ttl regex (.*)\.coredns\.rocks 15 }`, a range
//!   (`30-300`) and a cap (`-30`) hold the answer's TTL; an unmatched name keeps hosts' TTL.

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
