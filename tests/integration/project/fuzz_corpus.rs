//! The committed fuzz corpora (`fuzz/corpus/<target>/`, minimized with `cargo fuzz cmin`)
//! replayed through the same bodies the fuzz targets run (`cluster_dns::fuzzing`), so every
//! input a fuzzing run found interesting, and every crash input added as a regression, is
//! checked by `cargo test` on every CI run. See `fuzz/README.md`.

use std::path::PathBuf;

/// Every file of the corpus of `target`, with its name.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no corpus in {}", dir.display());
    out
}

/// Runs `body` on every input of `target`'s corpus; a panic names the input.
fn replay(target: &str, body: fn(&[u8])) {
    for (name, data) in corpus(target) {
        if std::panic::catch_unwind(|| body(&data)).is_err() {
            panic!("fuzz/corpus/{target}/{name} fails");
        }
    }
}

#[test]
fn query_handler_corpus() {
    replay("query_handler", cluster_dns::fuzzing::query_handler);
}

#[test]
fn corefile_corpus() {
    replay("corefile", cluster_dns::fuzzing::corefile);
}

#[test]
fn k8s_objects_corpus() {
    replay("k8s_objects", cluster_dns::fuzzing::k8s_objects);
}

#[test]
fn zone_file_corpus() {
    replay("zone_file", cluster_dns::plugin::file::fuzz::zone_file);
}

#[test]
fn proxy_header_corpus() {
    replay("proxy_header", cluster_dns::fuzzing::proxy_header);
}

#[test]
fn forward_reply_corpus() {
    replay("forward_reply", cluster_dns::plugin::forward::fuzz::forward_reply);
}

/// The forward_reply seed is a reply the matcher accepts (so the target reaches the
/// conversion), and the same reply with another ID is refused.
#[test]
fn forward_reply_seed_is_accepted_and_another_id_is_not() {
    let seed = cluster_dns::plugin::forward::fuzz::forward_reply_seed();
    let q = cluster_dns::proto::Question::new(
        hickory_proto::rr::Name::from_ascii("www.example.com.").unwrap(),
        hickory_proto::rr::RecordType::A,
    );
    assert!(cluster_dns::plugin::forward::exchange::accept_reply(&seed, 0x2b1d, &q).is_some());
    assert!(cluster_dns::plugin::forward::exchange::accept_reply(&seed, 0x2b1e, &q).is_none());
    cluster_dns::plugin::forward::fuzz::forward_reply(&seed);
}

#[test]
fn doq_framing_corpus() {
    replay("doq_framing", cluster_dns::server::quic::fuzz::doq_framing);
}

#[test]
fn tsig_verify_corpus() {
    replay("tsig_verify", cluster_dns::plugin::tsig::fuzz::tsig_verify);
}

#[test]
fn rewrite_edns0_corpus() {
    replay("rewrite_edns0", cluster_dns::plugin::rewrite::fuzz::rewrite_edns0);
}

#[test]
fn zone_file_dname_corpus() {
    replay(
        "zone_file_dname",
        cluster_dns::plugin::file::fuzz::zone_file_dname,
    );
}

/// The tsig_verify seeds reach the MAC: the signed ones verify, the near misses are refused
/// for the right reason (so the fuzzer starts on both sides of the check).
#[test]
fn tsig_verify_seeds_reach_the_mac() {
    use cluster_dns::plugin::tsig::fuzz::tsig_outcome;
    let mut verified = 0;
    for (name, data) in corpus("tsig_verify") {
        let want = match name.as_str() {
            n if n.starts_with("signed-mac-cut-too-short") => "reject",
            n if n.starts_with("signed-") => "verified",
            "badtime" | "badkey" | "badalg" | "badsig" => "reject",
            "unsigned" | "tsig-class-in" | "tsig-not-last" => "rcode",
            // hickory-proto's reading of the request refuses it before the check.
            "tsig-cut-short" => "unread",
            "unsigned-outside-zone" => "pass",
            "tsig-trailing-bytes" => "verified",
            _ => continue,
        };
        assert_eq!(tsig_outcome(&data), want, "fuzz/corpus/tsig_verify/{name}");
        verified += usize::from(want == "verified");
    }
    assert!(verified >= 5, "the named seeds are in the corpus");
}

/// The zone_file_dname seeds are zones (after the target's prefix), so the fuzzer starts from
/// lookups under DNAMEs rather than from parse errors; all but the one that puts a CNAME beside
/// a DNAME, which is refused.
#[test]
fn zone_file_dname_seeds_are_zones() {
    use cluster_dns::plugin::file::fuzz::DNAME_PREFIX;
    use cluster_dns::plugin::kit::ZoneData;
    let origin = hickory_proto::rr::Name::from_ascii("example.org.").unwrap();
    let mut named = 0;
    for (name, data) in corpus("zone_file_dname") {
        if !name.starts_with("dname-") && !name.starts_with("more-") && name != "prefix-only" {
            continue;
        }
        let text = format!("{DNAME_PREFIX}{}", std::str::from_utf8(&data).unwrap());
        let zone = ZoneData::parse(&text, std::path::Path::new("db"), &origin);
        if name == "dname-with-cname-same-owner" {
            // The one seed NSD refuses too: a CNAME must be alone at its name.
            let e = zone.unwrap_err().to_string();
            assert!(e.contains("has a CNAME and DNAME data"), "{e}");
            named += 1;
            continue;
        }
        assert!(zone.is_ok(), "fuzz/corpus/zone_file_dname/{name}: {zone:?}");
        named += 1;
    }
    assert!(named >= 5, "the named seeds are in the corpus");
}

#[test]
fn secondary_transfer_corpus() {
    replay(
        "secondary_transfer",
        cluster_dns::plugin::secondary::fuzz::secondary_transfer,
    );
}

#[test]
fn zone_snapshot_corpus() {
    replay(
        "zone_snapshot",
        cluster_dns::plugin::secondary::fuzz::zone_snapshot,
    );
}

#[test]
fn dns_policy_corpus() {
    replay("dns_policy", cluster_dns::fuzzing::dns_policy);
}
