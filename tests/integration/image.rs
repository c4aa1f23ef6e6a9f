//! The container image (`Dockerfile`) ships the binary the tests and benchmarks run: the glibc
//! `cargo build --release` on `gcr.io/distroless/cc-debian12`, and that binary needs no shared
//! library, and no glibc symbol version, the base lacks. (Docker cannot run here; the
//! binary's dynamic section is read with binutils' `readelf`.) And the image, built offline
//! from the tested binary with buildah and run with runc under the pod's securityContext,
//! binds :53 as uid 65532 and answers.

use std::path::Path;
use std::process::Command;

/// What `gcr.io/distroless/cc-debian12` ships in /lib/x86_64-linux-gnu (glibc 2.36 and
/// libgcc_s from Debian 12; libstdc++ too, which Rust does not use).
const BASE_LIBS: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
];

/// glibc of Debian 12 (bookworm), the base's.
const BASE_GLIBC: (u32, u32) = (2, 36);

fn readelf(args: &[&str], bin: &Path) -> String {
    let out = Command::new("readelf")
        .args(args)
        .arg(bin)
        .output()
        .expect("readelf runs (binutils; test.sh installs it)");
    assert!(
        out.status.success(),
        "readelf {args:?} {}: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn check_runs_on_the_base(bin: &Path) {
    let dynamic = readelf(&["-d", "--wide"], bin);
    let needed: Vec<&str> = dynamic
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(needed.contains(&"libc.so.6"), "a glibc binary: {needed:?}");
    let missing: Vec<_> = needed.iter().filter(|l| !BASE_LIBS.contains(l)).collect();
    assert!(
        missing.is_empty(),
        "{} needs {missing:?}, which distroless/cc-debian12 lacks",
        bin.display()
    );

    let versions = readelf(&["-V", "--wide"], bin);
    let mut newest = (0, 0);
    for word in versions.split_whitespace() {
        let Some(v) = word.strip_prefix("GLIBC_") else {
            continue;
        };
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let ver = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        newest = newest.max(ver);
    }
    assert!(
        newest <= BASE_GLIBC,
        "{} needs GLIBC_{}.{}, the base has {}.{}",
        bin.display(),
        newest.0,
        newest.1,
        BASE_GLIBC.0,
        BASE_GLIBC.1
    );
}

#[test]
fn dockerfile_ships_the_benchmarked_glibc_release_build_on_distroless_cc() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile")).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let froms: Vec<&str> = lines.iter().filter(|l| l.starts_with("FROM ")).copied().collect();
    assert_eq!(
        froms,
        [
            "FROM rust:1-bookworm AS build",
            "FROM gcr.io/distroless/cc-debian12:nonroot"
        ],
        "build on Debian 12, run on distroless/cc of Debian 12 (same glibc)"
    );
    // The benchmarks' build (bench/run.sh: `cargo build --release --bin cluster-dns`): the host
    // target (glibc, no --target musl) with the default allocator.
    assert!(
        lines.contains(&"RUN cargo build --release --locked --bin cluster-dns \\"),
        "{text}"
    );
    assert!(!text.contains("musl"), "{text}");
    // The shipped binary: its debug sections split off, the file capability for port 53 as
    // uid 65532 (tests/integration/privileges.rs), copied with it into the base.
    for step in [
        "&& cp target/release/cluster-dns /cluster-dns \\",
        "&& objcopy --strip-debug --add-gnu-debuglink=/cluster-dns.debug /cluster-dns \\",
        "&& setcap cap_net_bind_service=+ep /cluster-dns",
        "COPY --from=build /cluster-dns /cluster-dns",
    ] {
        assert!(lines.contains(&step), "no '{step}' in:\n{text}");
    }
    assert!(lines.contains(&"USER 65532:65532"));
    // The revision for coredns_build_info, which build.rs reads (the context has no .git).
    let build = lines.iter().position(|l| l.starts_with("RUN cargo build"));
    let arg = lines.iter().position(|l| *l == "ARG CLUSTER_DNS_REVISION");
    assert!(arg.is_some() && arg < build, "{text}");
    let script = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/build.rs")).unwrap();
    assert!(script.contains("std::env::var(\"CLUSTER_DNS_REVISION\")"));
    // The license Cargo.toml names ships as LICENSE, in the tree and in the image, and the
    // image says so in the OCI annotation keys, with its version and revision (issue 45).
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    assert!(manifest.contains("license = \"Apache-2.0\""));
    let license = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/LICENSE")).unwrap();
    assert!(license.contains("Apache License") && license.contains("Version 2.0, January 2004"));
    assert!(lines.contains(&"COPY LICENSE /LICENSE"), "{text}");
    let version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap();
    for label in [
        "org.opencontainers.image.title=\"cluster-dns\"".to_owned(),
        format!("org.opencontainers.image.version=\"{version}\""),
        "org.opencontainers.image.revision=\"${CLUSTER_DNS_REVISION}\"".to_owned(),
        "org.opencontainers.image.licenses=\"Apache-2.0\"".to_owned(),
    ] {
        assert!(text.contains(&label), "no {label} in:\n{text}");
    }
}

/// The debug binary of this test run has the same NEEDED set and glibc symbol versions as the
/// release build (same target, same crates; profiles differ only in optimisation and debug
/// info). The release binary is checked too when an earlier step built it (`.ci/run`'s bench
/// smoke, `bench/run.sh`); the test does not build it itself (minutes on two cores).
#[test]
fn the_binary_needs_only_what_distroless_cc_ships() {
    check_runs_on_the_base(Path::new(env!("CARGO_BIN_EXE_cluster-dns")));
    let release = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/cluster-dns");
    if release.exists() {
        check_runs_on_the_base(&release);
    }
}

/// Runs `program args`, panicking with its output when it fails (or cannot start: `hint` says
/// which package test.sh installs for it); its standard output.
fn run(program: &str, args: &[&str], hint: &str) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} does not run ({hint}; test.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The shared libraries `bin` loads and its program interpreter, as `ldd` resolves them on
/// this host (the distroless/cc set on Debian 12: libc, libm, libgcc_s, ld.so).
fn shared_libraries(bin: &Path) -> Vec<std::path::PathBuf> {
    let out = run("ldd", &[bin.to_str().unwrap()], "libc-bin");
    let libs: Vec<_> = out
        .lines()
        .filter_map(|l| {
            let path = l.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| std::path::PathBuf::from(path))
        })
        .collect();
    assert!(libs.iter().any(|l| l.ends_with("libc.so.6")), "{out}");
    libs
}

/// Removes the image test's runc container and files, also when an assertion failed.
struct Cleanup {
    dir: std::path::PathBuf,
    containers: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let state = self.dir.join("runc");
        for id in &self.containers {
            let _ = Command::new("runc")
                .arg("--root")
                .arg(&state)
                .args(["delete", "-f", id])
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The image built and run as the Deployment runs it. From the binary this test run built
/// (`CARGO_BIN_EXE_cluster-dns`), as the Dockerfile does: debug sections split off with
/// objcopy, `setcap cap_net_bind_service=+ep`, the shared libraries the base ships; a tar made
/// with `--xattrs` (which keeps the file capability) added to `buildah from scratch`, with the
/// Dockerfile's USER, ENTRYPOINT and CMD, committed to an OCI layout (no registry, no
/// network). `umoci unpack` gives the runtime bundle; its config.json gets the pod's
/// securityContext as containerd's CRI turns it into an OCI spec for a non-root container:
/// uid/gid 65532, read-only root, NET_BIND_SERVICE alone in the bounding, permitted and
/// effective sets and nothing inheritable or ambient (`drop: [ALL]`, `add: [NET_BIND_SERVICE]`;
/// without ambient capabilities the kernel clears the permitted set when a non-root process
/// execs, so the file capability is what gives it back), and no_new_privs
/// (`allowPrivilegeEscalation: false`: the file capability then grants no more than the
/// permitted set runc left, which holds NET_BIND_SERVICE). The Corefile is mounted read-only
/// at /etc/cluster-dns as the ConfigMap is. `runc run` starts it in a private network
/// namespace (`unshare -n`, loopback only, ip_unprivileged_port_start left at 1024), where it
/// binds :53 and dig gets answers. Then the same bundle with the capability removed from the
/// binary stops with the error that names the fix.
#[test]
fn the_image_built_from_the_tested_binary_runs_as_the_pod_and_answers_on_port_53() {
    assert!(
        crate::privileges::nix_is_root(),
        "building and running the image (umoci unpack, runc, unshare) needs root, as CI has"
    );
    let dir = crate::support::temp_dir("image");
    let mut cleanup = Cleanup {
        dir: dir.clone(),
        containers: Vec::new(),
    };
    let rootfs = dir.join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    let tested = Path::new(env!("CARGO_BIN_EXE_cluster-dns"));
    let bin = rootfs.join("cluster-dns");
    let debug = dir.join("cluster-dns.debug");
    let (b, d) = (bin.to_str().unwrap(), debug.to_str().unwrap());
    std::fs::copy(tested, &bin).unwrap();

    // Debug info split out of the shipped binary, which keeps a debuglink to it.
    run("objcopy", &["--only-keep-debug", b, d], "binutils");
    let link = format!("--add-gnu-debuglink={d}");
    run("objcopy", &["--strip-debug", &link, b], "binutils");
    let sections = readelf(&["-S", "--wide"], &bin);
    for debug_info in [".debug_info", ".debug_line"] {
        assert!(
            !sections.contains(debug_info),
            "{debug_info} shipped:\n{sections}"
        );
    }
    assert!(sections.contains(".gnu_debuglink"), "{sections}");
    assert!(readelf(&["-S", "--wide"], &debug).contains(".debug_line"));
    let (before, after) = (
        std::fs::metadata(tested).unwrap().len(),
        std::fs::metadata(&bin).unwrap().len(),
    );
    assert!(after < before, "{after} bytes shipped of {before}");

    run("setcap", &["cap_net_bind_service=+ep", b], "libcap2-bin");
    for lib in shared_libraries(tested) {
        let to = rootfs.join(lib.strip_prefix("/").unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&lib, &to).unwrap();
    }
    // The ConfigMap's mount point (distroless has /etc; the root is read-only at run time).
    std::fs::create_dir_all(rootfs.join("etc/cluster-dns")).unwrap();
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("Corefile"),
        ".:53 {\n bind 127.0.0.1\n hosts {\n  192.0.2.53 image.example.org\n }\n}\n",
    )
    .unwrap();

    // The layer: a tar that keeps the security.capability xattr and root ownership.
    let tar = dir.join("rootfs.tar");
    run(
        "tar",
        &[
            "--xattrs",
            "--xattrs-include=security.capability",
            "--numeric-owner",
            "--owner=0",
            "--group=0",
            "-C",
            rootfs.to_str().unwrap(),
            "-cf",
            tar.to_str().unwrap(),
            ".",
        ],
        "tar",
    );
    // buildah with its own storage (vfs) under the test's folder: nothing shared is touched.
    let (store, runroot) = (dir.join("store"), dir.join("buildah-run"));
    let buildah = |args: &[&str]| {
        let mut all = vec![
            "--root",
            store.to_str().unwrap(),
            "--runroot",
            runroot.to_str().unwrap(),
            "--storage-driver",
            "vfs",
        ];
        all.extend_from_slice(args);
        run("buildah", &all, "buildah")
    };
    let container = buildah(&["from", "scratch"]).trim().to_owned();
    buildah(&["add", &container, tar.to_str().unwrap(), "/"]);
    buildah(&[
        "config",
        "--user",
        "65532:65532",
        "--entrypoint",
        r#"["/cluster-dns"]"#,
        "--cmd",
        "-conf /etc/cluster-dns/Corefile",
        "--port",
        "53/udp",
        "--port",
        "53/tcp",
        &container,
    ]);
    let layout = format!("{}:cluster-dns", dir.join("oci").display());
    buildah(&["commit", "-q", &container, &format!("oci:{layout}")]);
    buildah(&["rm", &container]);

    let bundle = dir.join("bundle");
    run(
        "umoci",
        &["unpack", "--image", &layout, bundle.to_str().unwrap()],
        "umoci",
    );
    let caps = run(
        "getcap",
        &[bundle.join("rootfs/cluster-dns").to_str().unwrap()],
        "libcap2-bin",
    );
    assert!(
        caps.contains("cap_net_bind_service=ep"),
        "the image lost the file capability: {caps:?}"
    );
    let spec_path = bundle.join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&spec_path).unwrap()).unwrap();
    // What the image says (the Dockerfile's USER, ENTRYPOINT and CMD).
    assert_eq!(
        spec["process"]["user"],
        serde_json::json!({"uid": 65532, "gid": 65532}),
        "{spec}"
    );
    assert_eq!(
        spec["process"]["args"],
        serde_json::json!(["/cluster-dns", "-conf", "/etc/cluster-dns/Corefile"])
    );
    // What the pod's securityContext adds (deploy/cluster-dns.yaml).
    let only = serde_json::json!(["CAP_NET_BIND_SERVICE"]);
    spec["process"]["terminal"] = false.into();
    spec["process"]["capabilities"] = serde_json::json!({
        "bounding": only, "permitted": only, "effective": only,
        "inheritable": [], "ambient": []
    });
    spec["process"]["noNewPrivileges"] = true.into();
    spec["root"]["readonly"] = true.into();
    spec["mounts"].as_array_mut().unwrap().push(serde_json::json!({
        "destination": "/etc/cluster-dns", "type": "bind",
        "source": config, "options": ["rbind", "ro"]
    }));
    // The pod's network namespace: the one runc starts in (unshare -n, below).
    spec["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .retain(|ns| ns["type"] != "network");
    std::fs::write(&spec_path, spec.to_string()).unwrap();

    let runc = |id: &str, script: &str| -> String {
        let out = Command::new("timeout")
            .args(["60", "unshare", "-n", "sh", "-c"])
            .arg(format!(
                "ip link set lo up || exit 97\n\
                 echo \"port start: $(cat /proc/sys/net/ipv4/ip_unprivileged_port_start)\"\n\
                 RUNC=\"runc --root {}\"\nID={id}\nBUNDLE={}\n{script}",
                dir.join("runc").display(),
                bundle.display()
            ))
            .output()
            .expect("timeout, unshare (util-linux) run");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    // With the capability: it binds :53 and dig gets the answer (bounded: 50 tries 100 ms
    // apart), as uid 65532 with NET_BIND_SERVICE alone, on a read-only root; SIGTERM stops it.
    let id = format!("cluster-dns-image-{}", std::process::id());
    cleanup.containers.push(id.clone());
    let text = runc(
        &id,
        r#"
$RUNC run --bundle "$BUNDLE" --pid-file "$BUNDLE/pid" "$ID" </dev/null >"$BUNDLE/log" 2>&1 &
runc_pid=$!
i=0
while [ $i -lt 50 ]; do
    out=$(dig @127.0.0.1 -p 53 +short +time=1 +tries=1 image.example.org A 2>&1)
    # (dig +short prints "connection refused" there too until the server listens.)
    [ "$out" = 192.0.2.53 ] && break
    sleep 0.1
    i=$((i + 1))
done
echo "answer: $out"
pid=$(cat "$BUNDLE/pid")
grep -E '^(Uid|Gid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/$pid/status
echo "root: $(awk '$5 == "/" { print $6 }' /proc/$pid/mountinfo)"
# (runc forwards the signal when the container is not there yet to be killed.)
$RUNC kill "$ID" TERM || kill $runc_pid
wait $runc_pid
echo "exit: $?"
echo "log:"; cat "$BUNDLE/log"
"#,
    );
    assert!(text.contains("port start: 1024"), "{text}");
    assert!(text.contains("answer: 192.0.2.53"), "{text}");
    for line in [
        "Uid:\t65532\t65532\t65532\t65532",
        "Gid:\t65532\t65532\t65532\t65532",
        // NET_BIND_SERVICE is capability 10: bit 0x400, and nothing else.
        "CapPrm:\t0000000000000400",
        "CapEff:\t0000000000000400",
        "CapBnd:\t0000000000000400",
        "CapInh:\t0000000000000000",
        "CapAmb:\t0000000000000000",
        "NoNewPrivs:\t1",
    ] {
        assert!(text.contains(line), "no '{line}' in:\n{text}");
    }
    let root = text.lines().find_map(|l| l.strip_prefix("root: ")).unwrap();
    assert!(root.split(',').any(|o| o == "ro"), "{text}");
    assert!(
        text.contains("exit: 0"),
        "it did not stop cleanly on SIGTERM: {text}"
    );

    // The same image, its binary without the capability: refused, and the error names the fix.
    run(
        "setcap",
        &["-r", bundle.join("rootfs/cluster-dns").to_str().unwrap()],
        "libcap2-bin",
    );
    let id = format!("{id}-nocap");
    cleanup.containers.push(id.clone());
    let text = runc(
        &id,
        r#"$RUNC run --bundle "$BUNDLE" "$ID" </dev/null 2>&1
echo "exit: $?""#,
    );
    assert!(
        !text.contains("exit: 0"),
        "it started without the capability: {text}"
    );
    assert!(
        text.contains("cannot listen on 127.0.0.1:53: Permission denied")
            && text.contains("setcap cap_net_bind_service=+ep /cluster-dns"),
        "the error does not name the fix: {text}"
    );
    drop(cleanup);
}
