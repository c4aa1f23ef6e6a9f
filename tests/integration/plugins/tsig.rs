//! `tsig` with the real `dig -y`: signed queries with each HMAC algorithm are answered and
//! their responses' signatures verify in dig; a wrong secret gets NOTAUTH/BADSIG, an unknown key
//! NOTAUTH/BADKEY; `require all` refuses unsigned queries while a block without it answers
//! them; a signed AXFR of several messages verifies message by message; and the Corefile
//! errors name their line.

use std::net::SocketAddr;

use crate::support;

/// 32 random bytes, base64.
const SECRET: &str = "NoTCJU+DMqFWywaPyxSijrDEA/eC3nK0xi3AMEZuPVk=";
const OTHER: &str = "X28hl0BOfAL5G0jsmJWSacrwn7YRm2f6U5brnzwWEus=";

/// `dig` with `args`, whatever its exit status: stdout and stderr.
fn dig(addr: SocketAddr, args: &[&str]) -> String {
    let (at, port) = (format!("@{}", addr.ip()), addr.port().to_string());
    let mut all = vec![at.as_str(), "-p", &port, "+time=2", "+tries=1", "+nocookie"];
    all.extend_from_slice(args);
    let out = support::run_dig(&all);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The TSIG line of dig's TSIG pseudo-section (single-spaced), if any.
fn tsig_line(out: &str) -> Option<String> {
    out.lines()
        .skip_while(|l| !l.contains("TSIG PSEUDOSECTION"))
        .nth(1)
        .map(support::single_spaced)
}

fn zone_file(records: usize) -> String {
    let mut z = String::from(
        "$ORIGIN example.org.\n@ 3600 IN SOA ns.example.org. admin.example.org. 42 7200 3600 1209600 300\n@ 3600 IN NS ns\nns 3600 IN A 192.0.2.53\n",
    );
    for i in 0..records {
        z.push_str(&format!(
            "host-{i} 3600 IN A 10.{}.{}.{}\n",
            i / 65536,
            (i / 256) % 256,
            i % 256
        ));
    }
    z
}

const COREFILE: &str = "example.org:0 {
 bind 127.0.0.1
 prometheus 127.0.0.1:0
 tsig {
  secret mykey. NoTCJU+DMqFWywaPyxSijrDEA/eC3nK0xi3AMEZuPVk=
  secrets keys.conf
  require all
 }
 transfer {
  to *
 }
 file db.example.org
}
open.example:0 {
 bind 127.0.0.1
 tsig {
  secret mykey. NoTCJU+DMqFWywaPyxSijrDEA/eC3nK0xi3AMEZuPVk=
 }
 template IN A open.example {
  answer \"{{ .Name }} 60 IN A 192.0.2.7\"
 }
}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_queries_verify_and_bad_ones_are_refused() {
    let dir = support::temp_dir("tsig");
    std::fs::write(dir.join("db.example.org"), zone_file(6000)).unwrap();
    std::fs::write(
        dir.join("keys.conf"),
        format!("key \"filekey.\" {{\n  algorithm hmac-sha512;\n  secret \"{OTHER}\";\n}};\n"),
    )
    .unwrap();
    let running = support::start(COREFILE, &dir).await;
    let addr = running.dns_addrs()[0];
    tokio::task::spawn_blocking(move || {
        // Signed with each algorithm: answered, and dig verifies the response's signature
        // (it prints "tsig verify failure" or "Couldn't verify" otherwise).
        for alg in [
            "hmac-sha1",
            "hmac-sha224",
            "hmac-sha256",
            "hmac-sha384",
            "hmac-sha512",
        ] {
            for (transport, key) in [
                ("+notcp", format!("{alg}:mykey.:{SECRET}")),
                ("+tcp", format!("{alg}:filekey.:{OTHER}")),
            ] {
                let out = dig(addr, &["-y", &key, transport, "ns.example.org", "A"]);
                assert_eq!(support::dig_status(&out), "NOERROR", "{alg} {transport}: {out}");
                assert!(
                    support::dig_records(&out).contains(&"ns.example.org. 3600 IN A 192.0.2.53".to_owned()),
                    "{alg}: {out}"
                );
                assert!(
                    !out.contains("verify failure") && !out.contains("Couldn't verify"),
                    "{alg}: {out}"
                );
                let tsig = tsig_line(&out).unwrap_or_default();
                assert!(
                    tsig.contains(&format!(" ANY TSIG {alg}. ")) && tsig.ends_with(" NOERROR 0"),
                    "{alg}: {out}"
                );
            }
        }

        // The right key name with a wrong secret: NOTAUTH, BADSIG, and no MAC to verify.
        let out = dig(
            addr,
            &[
                "-y",
                &format!("hmac-sha256:mykey.:{OTHER}"),
                "ns.example.org",
                "A",
            ],
        );
        assert_eq!(support::dig_status(&out), "NOTAUTH", "{out}");
        assert!(tsig_line(&out).unwrap_or_default().contains("BADSIG"), "{out}");
        assert!(
            support::dig_records(&out).iter().all(|r| r.contains(" TSIG ")),
            "no answer: {out}"
        );
        // A key the server does not have: NOTAUTH, BADKEY.
        let out = dig(
            addr,
            &[
                "-y",
                &format!("hmac-sha256:nosuch.:{SECRET}"),
                "ns.example.org",
                "A",
            ],
        );
        assert_eq!(support::dig_status(&out), "NOTAUTH", "{out}");
        assert!(tsig_line(&out).unwrap_or_default().contains("BADKEY"), "{out}");

        // `require all`: unsigned is refused; the other block requires nothing.
        let out = dig(addr, &["ns.example.org", "A"]);
        assert_eq!(support::dig_status(&out), "REFUSED", "{out}");
        assert!(tsig_line(&out).is_none(), "{out}");
        let out = dig(addr, &["+short", "open.example", "A"]);
        assert_eq!(out.trim(), "192.0.2.7");
        // ... and it signs what is signed.
        let out = dig(
            addr,
            &["-y", &format!("hmac-sha256:mykey.:{SECRET}"), "open.example", "A"],
        );
        assert_eq!(support::dig_status(&out), "NOERROR", "{out}");
        assert!(
            !out.contains("verify failure") && !out.contains("Couldn't verify"),
            "{out}"
        );
        assert!(tsig_line(&out).is_some(), "{out}");

        // A signed AXFR of several messages, each verified by dig.
        let out = dig(
            addr,
            &[
                "-y",
                &format!("hmac-sha256:mykey.:{SECRET}"),
                "AXFR",
                "example.org",
            ],
        );
        assert!(
            !out.contains("verify failure") && !out.contains("Couldn't verify") && !out.contains("failed"),
            "{}",
            &out[out.len().saturating_sub(2000)..]
        );
        let records: Vec<String> = support::dig_records(&out)
            .into_iter()
            .filter(|r| !r.contains(" TSIG "))
            .collect();
        assert_eq!(
            records.len(),
            6000 + 4,
            "{}",
            &out[out.len().saturating_sub(2000)..]
        );
        let messages = out
            .lines()
            .find_map(|l| l.strip_prefix(";; XFR size: "))
            .unwrap_or_default()
            .to_owned();
        assert!(messages.contains(" records (messages "), "{messages}");
        assert!(!messages.contains("(messages 1,"), "several messages: {messages}");
        // Unsigned AXFR is refused.
        let out = dig(addr, &["AXFR", "example.org"]);
        assert!(out.contains("Transfer failed"), "{out}");
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
}

#[test]
fn corefile_errors_name_the_line() {
    let dir = support::temp_dir("tsig-check");
    let check = |text: &str| support::check_corefile(&dir, text);
    assert!(check(".:53 {\n tsig {\n  secret k. bm9wZQ==\n  require AXFR IXFR\n }\n}\n").is_ok());
    for (text, line) in [
        (".:53 {\n tsig {\n  secret k. nope!\n }\n}\n", "Corefile:3"),
        (".:53 {\n tsig {\n  require BOGUS\n }\n}\n", "Corefile:3"),
        (".:53 {\n tsig {\n  secrets missing.conf\n }\n}\n", "Corefile:3"),
        (".:53 {\n tsig\n tsig\n}\n", "Corefile:3"),
    ] {
        let e = check(text).unwrap_err();
        assert!(e.contains(line), "{text}: {e}");
    }
}
