//! `cancel`: the README's `cancel 1s` in front of `forward` to a scripted upstream on loopback
//! that answers after 1.5 s: `dig` gets SERVFAIL (the unfinished exchange is dropped, as
//! CoreDNS's forward gives up on a cancelled context), while the same upstream's answer comes
//! through with `cancel` at its default bound (5001 ms) and without `cancel`. Cluster answers,
//! which await nothing, pass `cancel` untouched. A wrong timeout fails `--check` at its line.

use std::time::Duration;

use crate::support;
use crate::support::upstream::{Mode, Scripted};

/// `dig` for www.example.com through a server with `cancel_line` (maybe empty) before a
/// `forward` to an upstream that answers after 1.5 s, and for a cluster name; their outputs.
async fn ask_through(cancel_line: &str) -> (String, String) {
    let slow = Scripted::start().await;
    slow.set_mode(Mode::Slow(Duration::from_millis(1500)));
    let dir = support::temp_dir("cancel");
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n{cancel_line} kubernetes cluster.local {{\n  manifests {}\n }}\n forward . {}\n}}\n",
        support::data_dir().join("conformance-fixture.yaml").display(),
        slow.addr
    );
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        // dig waits longer than the upstream takes, so what it gets is the server's answer.
        let ask = |name: &str| support::dig(addr, &["+time=6", "+noall", "+comments", "+answer", "A", name]);
        (ask("www.example.com."), ask("svc1.testns.svc.cluster.local."))
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upstream_past_the_bound_gives_servfail() {
    let (forwarded, cluster) = ask_through(" cancel 1s\n").await;
    assert_eq!(support::dig_status(&forwarded), "SERVFAIL", "{forwarded}");
    assert!(support::dig_records(&forwarded).is_empty(), "{forwarded}");
    assert_eq!(support::dig_status(&cluster), "NOERROR", "{cluster}");
    assert_eq!(
        support::dig_records(&cluster),
        ["svc1.testns.svc.cluster.local. 5 IN A 10.96.10.1"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn within_the_bound_or_without_cancel_the_answer_comes_through() {
    for line in [" cancel\n", ""] {
        let (forwarded, _) = ask_through(line).await;
        assert_eq!(
            support::dig_status(&forwarded),
            "NOERROR",
            "{line:?}: {forwarded}"
        );
        assert_eq!(support::dig_records(&forwarded).len(), 1, "{line:?}: {forwarded}");
    }
}

#[test]
fn a_timeout_that_is_not_a_duration_fails_at_its_line() {
    let dir = support::temp_dir("cancel-setup");
    let e = support::check_corefile(&dir, ".:53 {\n whoami\n cancel 5\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3") && e.contains("cancel: invalid duration '5'"),
        "{e}"
    );
}
