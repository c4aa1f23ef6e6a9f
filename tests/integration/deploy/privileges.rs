//! Port 53 as the image's user: the binary, run as uid 65532 in a private network namespace
//! (`unshare -n`, so nothing on the host is touched), binds :53 when it carries the file
//! capability `cap_net_bind_service=+ep` (as the image is built), and without it stops with an
//! error that names the fix. Run as root (CI is), which `unshare` and `setcap` need.

use std::path::Path;
use std::process::Command;

/// The image's user and group.
const UID: &str = "65532";

/// A copy of the binary in a fresh folder that uid 65532 can read, with a Corefile serving
/// `.:53` on 127.0.0.1 from a hosts entry.
fn setup(tag: &str) -> std::path::PathBuf {
    let dir = crate::support::temp_dir(tag);
    let bin = dir.join("cluster-dns");
    std::fs::copy(env!("CARGO_BIN_EXE_cluster-dns"), &bin).unwrap();
    std::fs::write(
        dir.join("Corefile"),
        ".:53 {\n bind 127.0.0.1\n hosts {\n  192.0.2.53 port53.example.org\n }\n}\n",
    )
    .unwrap();
    let chmod = |mode: u32, p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    // The folder itself (temp_dir() is world-readable already; its mode is left alone).
    let tmp = std::env::temp_dir();
    for d in dir.ancestors().take_while(|d| *d != tmp && d.starts_with(&tmp)) {
        chmod(0o755, d);
    }
    chmod(0o755, &bin);
    chmod(0o644, &dir.join("Corefile"));
    dir
}

/// Runs `script` as root in a new network namespace (loopback up), with `$BIN` and `$DIR` set;
/// its exit status and its standard output and error.
fn in_private_netns(dir: &Path, script: &str) -> (bool, String) {
    assert!(
        nix_is_root(),
        "this test runs the server in a private network namespace and needs root, as CI has"
    );
    let out = Command::new("unshare")
        .args(["-n", "sh", "-c"])
        .arg(format!("ip link set lo up || exit 97\n{script}"))
        .env("BIN", dir.join("cluster-dns"))
        .env("DIR", dir)
        .env(
            "AS",
            format!("setpriv --reuid {UID} --regid {UID} --clear-groups"),
        )
        .output()
        .expect("unshare (util-linux) runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

pub(crate) fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn uid_65532_binds_port_53_only_with_the_file_capability() {
    // Without the capability: refused, and the error says what to do.
    let plain = setup("port53-plain");
    let (ok, text) = in_private_netns(&plain, "exec $AS \"$BIN\" -conf \"$DIR/Corefile\"");
    assert!(!ok, "the server started without the capability: {text}");
    assert!(
        text.contains("Permission denied") && text.contains("setcap cap_net_bind_service=+ep"),
        "the error does not name the fix: {text}"
    );
    assert!(text.contains("ip_unprivileged_port_start=53"), "{text}");

    // With it: it binds :53 and dig gets the answer (bounded: 50 tries 100 ms apart).
    let capable = setup("port53-cap");
    let setcap = Command::new("setcap")
        .args(["cap_net_bind_service=+ep"])
        .arg(capable.join("cluster-dns"))
        .output()
        .expect("setcap (libcap2-bin; test.sh installs it) runs");
    assert!(
        setcap.status.success(),
        "{}",
        String::from_utf8_lossy(&setcap.stderr)
    );
    let script = r#"
$AS "$BIN" -conf "$DIR/Corefile" 2>"$DIR/log" &
pid=$!
i=0
while [ $i -lt 50 ]; do
    out=$(dig @127.0.0.1 -p 53 +short +time=1 +tries=1 port53.example.org A 2>/dev/null)
    # (dig +short prints "connection refused" there too until the server listens.)
    [ "$out" = 192.0.2.53 ] && break
    sleep 0.1
    i=$((i + 1))
done
echo "answer: $out"
echo "user: $(ps -o uid= -p $pid | tr -d ' ')"
kill $pid
wait $pid
echo "exit: $?"
"#;
    let (_, text) = in_private_netns(&capable, script);
    assert!(text.contains("answer: 192.0.2.53"), "{text}\n{}", log(&capable));
    assert!(text.contains(&format!("user: {UID}")), "{text}");
    assert!(
        text.contains("exit: 0"),
        "it did not stop cleanly on SIGTERM: {text}"
    );
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("log")).unwrap_or_default()
}
