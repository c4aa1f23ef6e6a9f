//! `loadbalance round_robin { prefer CIDR... }` (CoreDNS 1.14): with real `dig`, the address
//! records in the preferred networks come first, in the order the networks are written, each
//! group still shuffled on every answer (the answer memo does not freeze an order).
//!
//! `loadbalance weighted WEIGHTFILE { reload DURATION }`: the README's weights 3 : 1 : 2 show in
//! which address comes first over 600 answers; an edited file is picked up without a restart,
//! a wrong edit keeps the weights in force, and a wrong file fails `--check` at its own line.

use crate::support;

const HOSTS: &str = " hosts {\n  10.0.0.1 multi.example.\n  10.9.20.1 multi.example.\n  192.168.1.1 multi.example.\n  10.0.0.2 multi.example.\n  10.9.20.2 multi.example.\n }\n";

/// The addresses of `multi.example.` in the order of each of `n` answers.
async fn orders(loadbalance: &str, n: usize) -> Vec<Vec<String>> {
    let dir = support::temp_dir("loadbalance");
    let corefile = format!(".:0 {{\n bind 127.0.0.1\n{loadbalance}{HOSTS}}}\n");
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        (0..n)
            .map(|_| {
                support::dig(addr, &["+short", "A", "multi.example."])
                    .lines()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefer_puts_the_networks_first_in_order_and_still_shuffles() {
    let answers = orders(
        " loadbalance round_robin {\n  prefer 10.9.20.0/24 192.168.1.0/24\n }\n",
        30,
    )
    .await;
    let mut firsts = std::collections::BTreeSet::new();
    for a in &answers {
        assert_eq!(a.len(), 5, "{a:?}");
        let mut head = a[..2].to_vec();
        head.sort();
        assert_eq!(head, ["10.9.20.1", "10.9.20.2"], "{a:?}");
        assert_eq!(a[2], "192.168.1.1", "{a:?}");
        firsts.insert(a[0].clone());
    }
    // One chance in 2^29 that a fair shuffle puts the same one first 30 times.
    assert_eq!(
        firsts.len(),
        2,
        "the preferred group is shuffled too: {answers:?}"
    );

    // Without prefer, any of the five comes first.
    let answers = orders(" loadbalance\n", 40).await;
    let firsts: std::collections::BTreeSet<_> = answers.iter().map(|a| a[0].clone()).collect();
    assert!(firsts.len() >= 3, "{answers:?}");
    assert!(firsts.iter().any(|f| f.starts_with("10.0.0.")), "{answers:?}");
}

#[test]
fn bad_networks_and_weight_files_are_refused_at_their_line() {
    let dir = support::temp_dir("loadbalance-check");
    std::fs::write(
        dir.join("bad.weights"),
        "www.example.com\n100.64.1.1 3\n100.64.1.2 0\n",
    )
    .unwrap();
    for (text, want) in [
        (
            ".:53 {\n loadbalance weighted bad.weights\n}\n",
            "bad.weights:3: wrong weight value \"0\"",
        ),
        (
            ".:53 {\n loadbalance weighted missing.weights {\n  reload 0s\n }\n}\n",
            "Corefile:2: loadbalance: cannot read the weight file",
        ),
        (
            ".:53 {\n loadbalance {\n  prefer 10.9.20.0/24 nonsense\n }\n}\n",
            "Corefile:3: prefer: 'nonsense' is not a network",
        ),
    ] {
        let e = support::check_corefile(&dir, text).unwrap_err();
        assert!(e.contains(want), "{text}: {e}");
    }
}

/// How many times each address came first in `n` answers for `www.example.com` (asked in
/// batches of 100 names per dig run).
fn firsts(addr: std::net::SocketAddr, n: usize) -> std::collections::BTreeMap<String, usize> {
    let mut count = std::collections::BTreeMap::new();
    for _ in 0..n / 100 {
        let mut args = vec!["+noall", "+answer"];
        args.extend(std::iter::repeat_n("www.example.com", 100));
        let out = support::dig(addr, &args);
        let records = support::dig_records(&out);
        // Each answer's 3 records follow each other; the first of each group of 3.
        assert_eq!(records.len(), 300, "{out}");
        for group in records.chunks(3) {
            let ip = group[0].rsplit(' ').next().unwrap().to_owned();
            *count.entry(ip).or_insert(0) += 1;
        }
    }
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_puts_addresses_first_by_their_weights_and_reloads_the_file() {
    let dir = support::temp_dir("loadbalance-weighted");
    let weights = dir.join("db.example.com.weights");
    std::fs::write(
        &weights,
        "# the README's example\nwww.example.com\n100.64.1.1 3\n100.64.1.2 1\n100.64.1.3 2\n",
    )
    .unwrap();
    let corefile = ".:0 {\n bind 127.0.0.1\n loadbalance weighted db.example.com.weights {\n  reload 200ms\n }\n hosts {\n  100.64.1.1 www.example.com\n  100.64.1.2 www.example.com\n  100.64.1.3 www.example.com\n }\n}\n";
    let running = support::start(corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let count = tokio::task::spawn_blocking(move || firsts(addr, 600))
        .await
        .unwrap();
    let got = |c: &std::collections::BTreeMap<String, usize>, ip: &str| c.get(ip).copied().unwrap_or(0);
    // Expected 300 : 100 : 200; each bound is more than 4 standard deviations away.
    assert!((240..=360).contains(&got(&count, "100.64.1.1")), "{count:?}");
    assert!((55..=145).contains(&got(&count, "100.64.1.2")), "{count:?}");
    assert!((145..=255).contains(&got(&count, "100.64.1.3")), "{count:?}");

    // An edited file is read again: 100.64.1.2 now nearly always first. The reload comes
    // within a few of its 200 ms ticks (later on a loaded machine): waited for, boundedly.
    std::fs::write(&weights, "www.example.com\n100.64.1.2 255\n").unwrap();
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let sample = tokio::task::spawn_blocking(move || firsts(addr, 100))
            .await
            .unwrap();
        if got(&sample, "100.64.1.2") >= 95 {
            break;
        }
    }
    let count = tokio::task::spawn_blocking(move || firsts(addr, 100))
        .await
        .unwrap();
    assert!(got(&count, "100.64.1.2") >= 95, "{count:?}");

    // A wrong edit is not taken: the weights in force stay.
    std::fs::write(&weights, "www.example.com\n100.64.1.3 300\n").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let count = tokio::task::spawn_blocking(move || firsts(addr, 100))
        .await
        .unwrap();
    assert!(got(&count, "100.64.1.2") >= 95, "{count:?}");
    running.stop().await.unwrap();
}
