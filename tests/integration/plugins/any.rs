//! `any` (RFC 8482): an ANY question gets one HINFO record, over real UDP and TCP with `dig`;
//! other types and the block's other plugins are untouched.

use crate::support;

const COREFILE: &str = ".:0 {\n bind 127.0.0.1\n any\n hosts {\n  192.0.2.10 web.example.org\n  2001:db8::10 web.example.org\n }\n}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_questions_get_the_rfc8482_hinfo_and_other_types_go_on() {
    let dir = support::temp_dir("any");
    let running = support::start(COREFILE, &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        let any = |extra: &[&str]| {
            let mut args = vec!["+noall", "+answer", "+comments", "ANY", "Web.Example.Org"];
            args.extend_from_slice(extra);
            support::dig(addr, &args)
        };
        (
            any(&[]),
            any(&["+tcp"]),
            // Asked twice: the second may come from the answer memo, and must be the same.
            any(&[]),
            support::dig(addr, &["+short", "A", "web.example.org"]),
            support::dig(addr, &["+short", "AAAA", "web.example.org"]),
            support::dig(addr, &["+noall", "+answer", "ANY", "nothere.example.org"]),
        )
    })
    .await
    .unwrap();
    let (udp, tcp, again, a, aaaa, unknown) = out;
    for reply in [&udp, &tcp, &again] {
        assert!(reply.contains("status: NOERROR"), "{reply}");
        let answers: Vec<&str> = reply
            .lines()
            .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
            .collect();
        assert_eq!(answers.len(), 1, "one record: {reply}");
        let fields: Vec<&str> = answers[0].split_whitespace().collect();
        // The owner echoes the question's case; TTL 8482; HINFO "ANY obsoleted" "See RFC 8482".
        assert_eq!(
            fields[..4],
            ["Web.Example.Org.", "8482", "IN", "HINFO"],
            "{reply}"
        );
        assert_eq!(
            fields[4..].join(" "),
            "\"ANY obsoleted\" \"See RFC 8482\"",
            "{reply}"
        );
    }
    assert_eq!(a.trim(), "192.0.2.10");
    assert_eq!(aaaa.trim(), "2001:db8::10");
    // ANY is answered for any name: the plugin stands before the data plugins.
    assert!(unknown.contains("HINFO"), "{unknown}");
    running.stop().await.unwrap();
}
