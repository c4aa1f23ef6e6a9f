//! `dns64` (RFC 6147) over real sockets with `dig`: an IPv6 client asking AAAA of an IPv4-only
//! name gets the A records under the NAT64 prefix; names with AAAA records, NXDOMAIN names and
//! IPv4 clients (without `allow_ipv4`) get the plain answer.

use std::net::SocketAddr;

use crate::support;

fn corefile(options: &str) -> String {
    format!(
        ".:0 {{\n bind 127.0.0.1 ::1\n dns64 {{\n{options} }}\n hosts {{\n  192.0.2.33 v4only.example.org\n  192.0.2.34 dual.example.org\n  2001:db8::34 dual.example.org\n  ttl 60\n }}\n}}\n"
    )
}

/// `dig +short AAAA name` and the status line, from `addr`'s family.
fn aaaa(addr: SocketAddr, name: &str) -> (String, Vec<String>) {
    let out = support::dig(addr, &["+noall", "+comments", "+answer", "AAAA", name]);
    (support::dig_status(&out), support::dig_records(&out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aaaa_is_synthesized_for_ipv6_clients_of_ipv4_only_names() {
    for (options, v4_translated, prefix) in [
        ("", false, "64:ff9b::"),
        ("  allow_ipv4\n  prefix 2001:db8:64::/96\n", true, "2001:db8:64::"),
    ] {
        let dir = support::temp_dir("dns64");
        let running = support::start(&corefile(options), &dir).await;
        let addrs = running.dns_addrs();
        let v6 = *addrs.iter().find(|a| a.is_ipv6()).expect("a ::1 listener");
        let v4 = *addrs.iter().find(|a| a.is_ipv4()).expect("a 127.0.0.1 listener");
        let (six, dual, nx, four) = tokio::task::spawn_blocking(move || {
            (
                aaaa(v6, "v4only.example.org"),
                aaaa(v6, "dual.example.org"),
                aaaa(v6, "nothere.example.org"),
                aaaa(v4, "v4only.example.org"),
            )
        })
        .await
        .unwrap();
        let synthesized = format!("v4only.example.org. 60 IN AAAA {prefix}c000:221");
        assert_eq!(six.0, "NOERROR", "{options:?}");
        assert_eq!(six.1, std::slice::from_ref(&synthesized), "{options:?}");
        // A name with AAAA records keeps them; NXDOMAIN is not translated (RFC 6147 5.1.2).
        assert_eq!(
            dual.1,
            ["dual.example.org. 60 IN AAAA 2001:db8::34"],
            "{options:?}"
        );
        assert_eq!(nx.0, "NXDOMAIN", "{options:?}");
        assert!(nx.1.is_empty());
        if v4_translated {
            assert_eq!(four.1, [synthesized], "{options:?}");
        } else {
            assert_eq!(four.0, "NOERROR");
            assert!(four.1.is_empty(), "IPv4 client, no allow_ipv4: {:?}", four.1);
        }
        running.stop().await.unwrap();
    }
}
