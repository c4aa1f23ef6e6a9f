//! `nsid` (RFC 5001): `dig +nsid` gets the configured identifier, or the host's name, in the
//! reply's OPT over real UDP and TCP, also when the answer memo replays the reply; a request
//! without the option gets none.

use crate::support;

fn corefile(nsid: &str) -> String {
    format!(
        ".:0 {{\n bind 127.0.0.1\n {nsid}\n kubernetes cluster.local {{\n  manifests {}\n }}\n}}\n",
        support::data_dir().join("conformance-fixture.yaml").display()
    )
}

const NAME: &str = "svc1.testns.svc.cluster.local";

/// dig's output for `NAME` with `flags`, three times with `+nsid` (the later ones may be
/// replayed from the memo), then over TCP, then without `+nsid`.
async fn ask(nsid: &str) -> Vec<String> {
    let dir = support::temp_dir("nsid");
    let running = support::start(&corefile(nsid), &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        let dig = |extra: &[&str]| {
            let mut args = vec!["+noall", "+comments", "+answer", "A", NAME];
            args.extend_from_slice(extra);
            support::dig(addr, &args)
        };
        vec![
            dig(&["+nsid"]),
            dig(&["+nsid"]),
            dig(&["+nsid"]),
            dig(&["+nsid", "+tcp"]),
            dig(&[]),
        ]
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    out
}

fn nsid_line(out: &str) -> Option<&str> {
    out.lines().find(|l| l.starts_with("; NSID:"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dig_nsid_gets_the_configured_identifier() {
    let out = ask("nsid Use The Force").await;
    for reply in &out[..4] {
        assert_eq!(support::dig_status(reply), "NOERROR", "{reply}");
        let line = nsid_line(reply).unwrap_or_else(|| panic!("no NSID: {reply}"));
        assert!(line.contains("(\"Use The Force\")"), "{reply}");
        assert!(
            reply.contains(&format!("{NAME}.")),
            "the answer is untouched: {reply}"
        );
    }
    assert_eq!(nsid_line(&out[4]), None, "not asked, not sent: {}", out[4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_data_it_is_the_host_name() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let out = ask("nsid").await;
    let line = nsid_line(&out[0]).unwrap_or_else(|| panic!("no NSID: {}", out[0]));
    assert!(line.contains(&format!("(\"{}\")", host.trim())), "{line}");
}

#[test]
fn nsid_takes_no_block_once_per_block() {
    let dir = support::temp_dir("nsid-setup");
    let e = support::check_corefile(&dir, ".:53 {\n any\n nsid x {\n }\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3") && e.contains("nsid: takes no block"),
        "{e}"
    );
    let e = support::check_corefile(&dir, ".:53 {\n nsid a\n nsid b\n}\n").unwrap_err();
    assert!(e.contains("Corefile:3") && e.contains("only once"), "{e}");
}
