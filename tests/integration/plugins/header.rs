//! `header`: the README's examples against the cluster zone over real UDP and TCP with `dig`:
//! `response set ra aa` / `response clear rd` change the flags of every answer, including the
//! ones sent again from the answer memo (UDP) and the cache (TCP); `query set rd` makes a
//! reply to a question without RD say RD. Without `header` the same questions get the
//! server's own flags (so the test can tell the two apart). A wrong rule fails `--check` at its
//! line.

use crate::support;

fn corefile(header: &str) -> String {
    format!(
        ".:0 {{\n bind 127.0.0.1\n cache 30\n{header} kubernetes cluster.local {{\n  manifests {}\n }}\n}}\n",
        support::data_dir().join("conformance-fixture.yaml").display()
    )
}

const NAME: &str = "svc1.testns.svc.cluster.local";

/// The flags of dig's header line (`qr aa rd`), sorted.
fn flags(out: &str) -> Vec<String> {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(";; flags:"))
        .unwrap_or_else(|| panic!("no flags line: {out}"));
    let mut flags: Vec<String> = line
        .split(';')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    flags.sort();
    flags
}

/// The flags of the answer to each `dig` in `asks`, against a server with `header` (its
/// lines, possibly empty).
async fn flags_of(header: &str, asks: &'static [&'static [&'static str]]) -> Vec<Vec<String>> {
    let dir = support::temp_dir("header");
    let running = support::start(&corefile(header), &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        asks.iter()
            .map(|args| {
                // No cookie: dig's is new each run, and the memo keeps answers by the
                // request's bytes.
                let mut all = vec!["+nocookie", "+noall", "+comments"];
                all.extend_from_slice(args);
                let out = support::dig(addr, &all);
                assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
                flags(&out)
            })
            .collect()
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    out
}

/// The same question four times: twice over UDP (the second from the answer memo), twice over
/// TCP (the second from the cache).
const TWICE_EACH: &[&[&str]] = &[
    &["A", NAME],
    &["A", NAME],
    &["+tcp", "A", NAME],
    &["+tcp", "A", NAME],
];

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_rules_change_every_answer_including_replayed_ones() {
    for got in flags_of("", TWICE_EACH).await {
        assert_eq!(got, words(&["aa", "qr", "rd"]), "without header");
    }
    let set_ra = " header {\n  response set ra\n }\n";
    for got in flags_of(set_ra, TWICE_EACH).await {
        assert_eq!(got, words(&["aa", "qr", "ra", "rd"]), "response set ra");
    }
    let set_ra_aa_clear_rd = " header {\n  response set ra aa\n  response clear rd\n }\n";
    for got in flags_of(set_ra_aa_clear_rd, TWICE_EACH).await {
        assert_eq!(got, words(&["aa", "qr", "ra"]), "response set ra aa, clear rd");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_set_rd_is_what_the_rest_of_the_chain_and_the_reply_see() {
    const NORECURSE: &[&[&str]] = &[&["+norecurse", "A", NAME], &["+norecurse", "A", NAME]];
    for got in flags_of("", NORECURSE).await {
        assert_eq!(got, words(&["aa", "qr"]), "without header");
    }
    for got in flags_of(" header {\n  query set rd\n }\n", NORECURSE).await {
        assert_eq!(got, words(&["aa", "qr", "rd"]), "query set rd");
    }
}

#[test]
fn a_rule_without_a_selector_fails_at_its_line() {
    let dir = support::temp_dir("header-setup");
    let e = support::check_corefile(&dir, ".:53 {\n whoami\n header {\n  set ra\n }\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:4") && e.contains("invalid selector 'set': should be query or response"),
        "{e}"
    );
    let e =
        support::check_corefile(&dir, ".:53 {\n whoami\n header {\n  response set cd\n }\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:4") && e.contains("unsupported flag 'cd'"),
        "{e}"
    );
}
