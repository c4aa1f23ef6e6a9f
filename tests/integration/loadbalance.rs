//! `loadbalance round_robin { prefer CIDR... }` (CoreDNS 1.14): with real `dig`, the address
//! records in the preferred networks come first, in the order the networks are written, each
//! group still shuffled on every answer (the answer memo does not freeze an order); `weighted`
//! is refused at its line.

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
fn weighted_and_bad_networks_are_refused_at_their_line() {
    let dir = support::temp_dir("loadbalance-check");
    for (text, want) in [
        (
            ".:53 {\n loadbalance weighted db.weights\n}\n",
            "Corefile:2: loadbalance: policy 'weighted' is not implemented",
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
