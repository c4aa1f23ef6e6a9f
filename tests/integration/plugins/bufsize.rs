//! `bufsize`: the block's UDP payload size is what it advertises in its OPT and what it fills
//! before it truncates, checked with `dig` over real UDP against a name with many addresses.

use crate::support;

/// A block with `extra` directives, answering `many.example.org` with `n` A records.
fn corefile(extra: &str, n: u32) -> String {
    let mut hosts = String::new();
    for i in 0..n {
        hosts.push_str(&format!("  10.1.{}.{} many.example.org\n", i / 250, i % 250 + 1));
    }
    format!(".:0 {{\n bind 127.0.0.1\n{extra} hosts {{\n{hosts} }}\n}}\n")
}

/// (advertised payload, truncated, answer count, reply size) of `dig +bufsize=ASK +ignore`.
fn ask(addr: std::net::SocketAddr, ask: u16) -> (u16, bool, usize, usize) {
    let out = support::dig(
        addr,
        &[
            &format!("+bufsize={ask}"),
            "+ignore",
            "+noall",
            "+comments",
            "+answer",
            "+stats",
            "A",
            "many.example.org",
        ],
    );
    let udp = out
        .split("udp: ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no OPT in {out}"));
    let flags = out
        .lines()
        .find(|l| l.contains("flags:") && l.contains("QUERY"))
        .unwrap_or("");
    let tc = flags.contains(" tc");
    let answers = out
        .lines()
        .filter(|l| !l.starts_with(';') && l.contains("\tA\t"))
        .count();
    let size = out
        .split("MSG SIZE  rcvd: ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no size in {out}"));
    (udp, tc, answers, size)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blocks_bufsize_is_advertised_and_filled() {
    // 150 addresses: about 2,450 bytes, more than 1232 and less than 4096.
    let cases: [(&str, u16, u16, bool); 4] = [
        // (directive, dig's +bufsize, advertised, truncated)
        ("", 4096, 1232, true),
        (" bufsize 4096\n", 4096, 4096, false),
        (" bufsize 4096\n", 1232, 1232, true),
        (" bufsize 512\n", 4096, 512, true),
    ];
    for (extra, asked, advertised, truncated) in cases {
        let dir = support::temp_dir("bufsize");
        let running = support::start(&corefile(extra, 150), &dir).await;
        let addr = running.dns_addrs()[0];
        let (udp, tc, answers, size) = tokio::task::spawn_blocking(move || ask(addr, asked))
            .await
            .unwrap();
        let case = format!("{extra:?} +bufsize={asked}");
        assert_eq!(udp, advertised, "{case}: advertised");
        assert_eq!(tc, truncated, "{case}: TC");
        assert!(usize::from(advertised) >= size, "{case}: {size} bytes");
        if truncated {
            assert!(answers < 150, "{case}: {answers} answers");
        } else {
            assert_eq!(answers, 150, "{case}");
            assert!(size > 1232, "{case}: {size} bytes");
        }
        running.stop().await.unwrap();
    }
}
