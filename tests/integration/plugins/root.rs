//! `root`: relative file paths of a block are read from its folder, wherever `root` is written
//! in the block. A hosts file named relatively is found in the root folder (absolute, or
//! relative to the Corefile's folder) and answers `dig`; without `root` the same line reads
//! the Corefile's folder and does not. The README's `tls` example starts with the certificate
//! and key in the root folder, and `--check` fails on them at the `tls` line without it. A
//! `root` without PATH fails `--check` at its line.

use std::path::Path;

use fake_apiserver::tls::TestPki;

use crate::support;

/// A folder `zones` under `dir` with `example.hosts` in it.
fn hosts_file(dir: &Path) {
    std::fs::create_dir_all(dir.join("zones")).unwrap();
    std::fs::write(dir.join("zones/example.hosts"), "192.0.2.7 www.example.org\n").unwrap();
}

/// The A records dig gets for www.example.org from a block with `root_line` (maybe empty)
/// written after its `hosts example.hosts`.
async fn answer_with(root_line: &str) -> Vec<String> {
    let dir = support::temp_dir("root");
    hosts_file(&dir);
    let root_line = root_line.replace("DIR", &dir.display().to_string());
    let corefile = format!(".:0 {{\n bind 127.0.0.1\n hosts example.hosts\n{root_line}}}\n");
    let running = support::start(&corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let out = tokio::task::spawn_blocking(move || {
        support::dig(addr, &["+noall", "+answer", "A", "www.example.org"])
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    support::dig_records(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_files_are_read_from_the_root_folder() {
    let want = ["www.example.org. 3600 IN A 192.0.2.7"];
    assert_eq!(answer_with(" root DIR/zones\n").await, want, "absolute root");
    assert_eq!(
        answer_with(" root zones\n").await,
        want,
        "root relative to the Corefile"
    );
    assert!(
        answer_with("").await.is_empty(),
        "no root: the Corefile's folder has no such file"
    );
}

#[test]
fn the_readme_tls_example_reads_its_certificate_from_root() {
    let dir = support::temp_dir("root-tls");
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    let pki = TestPki::new("root test CA").unwrap();
    let server = pki.server(&["example.com"]).unwrap();
    std::fs::write(config.join("cert.pem"), &server.cert_pem).unwrap();
    std::fs::write(config.join("key.pem"), &server.key_pem).unwrap();
    let with_root = format!(
        "tls://example.com:853 {{\n root {}\n tls cert.pem key.pem\n whoami\n}}\n",
        config.display()
    );
    support::check_corefile(&dir, &with_root).unwrap();
    let e = support::check_corefile(
        &dir,
        "tls://example.com:853 {\n tls cert.pem key.pem\n whoami\n}\n",
    )
    .unwrap_err();
    assert!(e.contains("Corefile:2") && e.contains("cert.pem"), "{e}");
}

#[test]
fn root_without_a_path_fails_at_its_line() {
    let dir = support::temp_dir("root-setup");
    let e = support::check_corefile(&dir, ".:53 {\n whoami\n root\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3") && e.contains("root: expected PATH"),
        "{e}"
    );
    let e = support::check_corefile(&dir, ".:53 {\n root /a\n root /b\n}\n").unwrap_err();
    assert!(
        e.contains("Corefile:3") && e.contains("only once per server block"),
        "{e}"
    );
}
