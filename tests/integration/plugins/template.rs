//! `template` over real UDP with `dig`: the two uses operators write most (NODATA for AAAA on
//! IPv4-only clusters; wildcard names with regex groups), NXDOMAIN when no expression matches,
//! fallthrough to the next plugin, `.Remote`, and SERVFAIL for a line that renders to no record.

use crate::support;

const COREFILE: &str = r#".:0 {
 bind 127.0.0.1
 template ANY AAAA {
  rcode NOERROR
 }
 template IN A apps.example.org {
  match "^(?P<app>[a-z0-9-]+)\.apps\.example\.org\.$"
  answer "{{ .Name }} 60 IN A 192.0.2.80"
  additional "info.{{ .Group.app }}.apps.example.org. 60 IN TXT \"app {{ .Group.app }}\""
 }
 template IN TXT whoami.example.org {
  answer "{{ .Name }} 5 IN TXT {{ .Remote }} {{ .Zone }} {{ .Type }}"
 }
 template IN A ip.example.org {
  match "^ip-(\d+)-(\d+)-(\d+)-(\d+)\.ip\.example\.org\.$" "^bad-(\w+)\.ip\.example\.org\.$"
  answer "{{ .Name }} 60 IN A {{ index .Match 1 }}.{{ index .Match 2 }}.{{ index .Match 3 }}.{{ index .Match 4 }}"
  fallthrough
 }
 hosts {
  192.0.2.7 host.ip.example.org
  192.0.2.8 other.example.org
 }
}
"#;

use support::{dig_records as lines, dig_status as status};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_answer_match_fall_through_and_fail_loudly() {
    let dir = support::temp_dir("template");
    let running = support::start(COREFILE, &dir).await;
    let addr = running.dns_addrs()[0];
    let q = move |args: &[&str]| {
        let mut all = vec!["+noall", "+comments", "+answer", "+additional"];
        all.extend_from_slice(args);
        support::dig(addr, &all)
    };
    let got = tokio::task::spawn_blocking(move || {
        [
            q(&["AAAA", "other.example.org"]),
            q(&["A", "shop.apps.example.org"]),
            q(&["A", "a.b.apps.example.org"]),
            q(&["TXT", "whoami.example.org"]),
            q(&["A", "ip-10-1-2-3.ip.example.org"]),
            q(&["A", "host.ip.example.org"]),
            q(&["A", "bad-x.ip.example.org"]),
            q(&["A", "other.example.org"]),
        ]
    })
    .await
    .unwrap();
    // AAAA everywhere: NODATA (NOERROR, no records), before hosts.
    assert_eq!(status(&got[0]), "NOERROR", "{}", got[0]);
    assert!(lines(&got[0]).is_empty(), "{}", got[0]);
    // A wildcard name, with its group in the additional section.
    assert_eq!(
        lines(&got[1]),
        [
            "shop.apps.example.org. 60 IN A 192.0.2.80",
            "info.shop.apps.example.org. 60 IN TXT \"app shop\""
        ],
        "{}",
        got[1]
    );
    assert!(got[1].contains(" aa"), "authoritative: {}", got[1]);
    // In the template's zone, no expression matches, no fallthrough: NXDOMAIN.
    assert_eq!(status(&got[2]), "NXDOMAIN", "{}", got[2]);
    // .Remote, .Zone and .Type.
    assert_eq!(
        lines(&got[3]),
        ["whoami.example.org. 5 IN TXT \"127.0.0.1\" \"whoami.example.org.\" \"TXT\""],
        "{}",
        got[3]
    );
    assert_eq!(
        lines(&got[4]),
        ["ip-10-1-2-3.ip.example.org. 60 IN A 10.1.2.3"],
        "{}",
        got[4]
    );
    // No match, fallthrough: the hosts plugin answers.
    assert_eq!(lines(&got[5]), ["host.ip.example.org. 3600 IN A 192.0.2.7"]);
    // Matched by the second expression, but index .Match 2 does not exist: SERVFAIL.
    assert_eq!(status(&got[6]), "SERVFAIL", "{}", got[6]);
    // Outside every template's zones: the next plugin.
    assert_eq!(lines(&got[7]), ["other.example.org. 3600 IN A 192.0.2.8"]);
    running.stop().await.unwrap();
}

/// `upstream`: a CNAME answer's target is resolved again through the server (here by `hosts`
/// and by another template), its records following the CNAME with its rcode; without
/// `upstream` the CNAME comes alone; a CNAME that leads back to itself ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_resolves_cname_targets_through_the_server() {
    let corefile = r#".:0 {
 bind 127.0.0.1
 template IN A alias.example.org {
  match "^(?P<app>[a-z]+)\.alias\.example\.org\.$"
  answer "{{ .Name }} 30 IN CNAME {{ .Group.app }}.backend.example.org."
  upstream
 }
 template IN A plain.example.org {
  answer "{{ .Name }} 30 IN CNAME web.backend.example.org."
 }
 template IN A loop.example.org {
  answer "{{ .Name }} 30 IN CNAME loop.example.org."
  upstream
 }
 template IN A gen.example.org {
  answer "{{ .Name }} 30 IN A 192.0.2.99"
 }
 template IN A backend.example.org {
  match "^gen\.backend\.example\.org\.$"
  answer "{{ .Name }} 30 IN CNAME x.gen.example.org."
  fallthrough
  upstream
 }
 hosts {
  192.0.2.1 web.backend.example.org
 }
}
"#;
    let dir = support::temp_dir("template-upstream");
    let running = support::start(corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let q = move |name: &str| {
        let out = support::dig(addr, &["+noall", "+comments", "+answer", "A", name]);
        (status(&out), lines(&out))
    };
    let got = tokio::task::spawn_blocking(move || {
        [
            q("web.alias.example.org"),
            q("none.alias.example.org"),
            q("x.plain.example.org"),
            q("loop.example.org"),
            q("gen.alias.example.org"),
        ]
    })
    .await
    .unwrap();
    assert_eq!(
        got[0].1,
        [
            "web.alias.example.org. 30 IN CNAME web.backend.example.org.",
            "web.backend.example.org. 3600 IN A 192.0.2.1"
        ]
    );
    // The target does not exist: its NXDOMAIN, after the CNAME (RFC 6604).
    assert_eq!(got[1].0, "NXDOMAIN");
    assert_eq!(
        got[1].1,
        ["none.alias.example.org. 30 IN CNAME none.backend.example.org."]
    );
    // No upstream: the CNAME alone.
    assert_eq!(
        got[2].1,
        ["x.plain.example.org. 30 IN CNAME web.backend.example.org."]
    );
    // A CNAME to itself is chased a bounded number of times, then answered.
    assert_eq!(got[3].0, "NOERROR");
    assert!(!got[3].1.is_empty() && got[3].1.len() <= 9, "{:?}", got[3].1);
    // Two templates with upstream in a row: the chase follows the second one's CNAME too.
    assert_eq!(
        got[4].1,
        [
            "gen.alias.example.org. 30 IN CNAME gen.backend.example.org.",
            "gen.backend.example.org. 30 IN CNAME x.gen.example.org.",
            "x.gen.example.org. 30 IN A 192.0.2.99"
        ]
    );
    running.stop().await.unwrap();
}

/// A template that matches is counted on every question (`coredns_template_matches_total`),
/// also in a block whose other answers the memo replays (with `kubernetes`): a matched
/// template's answer is not replayed, since a replay would not count it. (Before, the second
/// and later questions were replayed and the counter stayed at 1.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_match_is_counted_beside_the_memo() {
    let dir = support::temp_dir("template-metrics");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n prometheus 127.0.0.1:0\n template IN A example.org {{\n  answer \"{{{{ .Name }}}} 60 IN A 192.0.2.80\"\n }}\n kubernetes cluster.local {{\n  manifests {}\n }}\n}}\n",
        support::data_dir().join("conformance-fixture.yaml").display()
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let got = tokio::task::spawn_blocking(move || {
        (0..4)
            .map(|_| support::dig(addr, &["+nocookie", "+noall", "+answer", "A", "www.example.org"]))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for g in &got {
        assert_eq!(lines(g), ["www.example.org. 60 IN A 192.0.2.80"], "{g}");
    }
    let (matches, text) = crate::support::counter(&running, "coredns_template_matches_total").await;
    assert_eq!(matches, 4.0, "{text}");
    running.stop().await.unwrap();
}
