//! The container image: `Dockerfile` is one static binary per architecture on `scratch`, built
//! offline by `buildah bud` from what deploy/image/binaries.sh leaves in dist/ (test.sh runs it
//! with the `image-check` profile before the tests). The amd64 image runs with runc under the
//! pod's securityContext, binds :53 as uid 65532 and answers dig; the arm64 image's binary,
//! cross-compiled, answers dig under qemu-user. Both carry the SBOM, the license, the CA
//! bundle and the OCI labels.

use std::path::{Path, PathBuf};
use std::process::Command;

fn readelf(args: &[&str], bin: &Path) -> String {
    run("readelf", &[args, &[bin.to_str().unwrap()]].concat(), "binutils")
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// dist/linux-ARCH/cluster-dns, which deploy/image/binaries.sh builds (test.sh runs it).
fn dist_binary(arch: &str) -> PathBuf {
    let bin = root().join(format!("dist/linux-{arch}/cluster-dns"));
    assert!(
        bin.exists(),
        "{} is missing: run `deploy/image/binaries.sh image-check` (./test.sh does)",
        bin.display()
    );
    bin
}

/// The Dockerfile's instructions, comments and blank lines left out.
fn dockerfile_lines(file: &str) -> Vec<String> {
    std::fs::read_to_string(root().join(file))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// One stage on `scratch`: nothing to pull, no base digest to pin, no RUN (so no emulation
/// for arm64); the binary of the platform being built, the CA bundle, the SBOM and the
/// license; uid 65532; the OCI labels with the Cargo.toml version and the git revision.
#[test]
fn dockerfile_is_the_static_binary_of_each_platform_on_scratch() {
    let lines = dockerfile_lines("Dockerfile");
    let text = lines.join("\n");
    let froms: Vec<_> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms, ["FROM scratch"], "{text}");
    assert!(!lines.iter().any(|l| l.starts_with("RUN ")), "{text}");
    for step in [
        "ARG TARGETARCH",
        "COPY dist/linux-${TARGETARCH}/cluster-dns /cluster-dns",
        "COPY dist/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt",
        "COPY dist/sbom.cdx.json /usr/share/doc/cluster-dns/sbom.cdx.json",
        "COPY LICENSE /usr/share/doc/cluster-dns/LICENSE",
        "USER 65532:65532",
        "ENTRYPOINT [\"/cluster-dns\"]",
    ] {
        assert!(lines.iter().any(|l| l == step), "no '{step}' in:\n{text}");
    }
    // The license Cargo.toml names ships as LICENSE, in the tree and in the image.
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("license = \"Apache-2.0\""));
    let license = std::fs::read_to_string(root().join("LICENSE")).unwrap();
    assert!(license.contains("Apache License") && license.contains("Version 2.0, January 2004"));
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
    // The node-local image copies the same binaries.
    let node_local = dockerfile_lines("Dockerfile.node-local");
    assert!(
        node_local
            .iter()
            .any(|l| l == "COPY dist/linux-${TARGETARCH}/cluster-dns /cluster-dns")
    );
    // The context is dist/'s files and LICENSE, nothing else (not target/, not .git).
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).unwrap();
    let rules: Vec<_> = ignore.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rules.first(), Some(&"*"), "{ignore}");
}

/// Both binaries are static (no program interpreter, no shared library: `scratch` has none),
/// of their architecture, with debug info split off behind a debuglink and the file
/// capability for port 53; the SBOM lists the crates of Cargo.lock the binary is built from.
#[test]
fn the_image_binaries_are_static_for_amd64_and_arm64_with_an_sbom() {
    for (arch, machine) in [("amd64", "Advanced Micro Devices X86-64"), ("arm64", "AArch64")] {
        let bin = dist_binary(arch);
        let header = readelf(&["-h", "-l", "-d", "--wide"], &bin);
        assert!(header.contains(machine), "{arch}: {header}");
        assert!(
            !header.contains("(NEEDED)"),
            "{arch} needs a shared library:\n{header}"
        );
        assert!(
            !header.contains("INTERP"),
            "{arch} has a program interpreter:\n{header}"
        );
        let sections = readelf(&["-S", "--wide"], &bin);
        assert!(!sections.contains(".debug_info"), "{arch}: debug info shipped");
        assert!(sections.contains(".gnu_debuglink"), "{arch}: {sections}");
        let debug = bin.with_file_name("cluster-dns.debug");
        assert!(readelf(&["-S", "--wide"], &debug).contains(".debug_"), "{arch}");
        let caps = run("getcap", &[bin.to_str().unwrap()], "libcap2-bin");
        assert!(caps.contains("cap_net_bind_service=ep"), "{arch}: {caps:?}");
    }

    let sbom: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("dist/sbom.cdx.json")).unwrap()).unwrap();
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    assert_eq!(sbom["specVersion"], "1.5");
    assert_eq!(sbom["metadata"]["component"]["name"], "cluster-dns");
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    let locked = |name: &str| -> Vec<String> {
        let at = format!("name = \"{name}\"\nversion = \"");
        lock.match_indices(&at)
            .map(|(i, _)| lock[i + at.len()..].split('"').next().unwrap().to_owned())
            .collect()
    };
    let components = sbom["components"].as_array().unwrap();
    for name in [
        "hickory-server",
        "hickory-proto",
        "kube",
        "tokio",
        "rustls",
        "ring",
    ] {
        let c = components
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not in the SBOM"));
        let v = c["version"].as_str().unwrap();
        assert!(
            locked(name).iter().any(|l| l == v),
            "{name} {v}: Cargo.lock has {:?}",
            locked(name)
        );
        assert!(
            c["hashes"][0]["content"].as_str().is_some_and(|h| h.len() == 64),
            "{c}"
        );
    }
}

/// `buildah bud --platform linux/ARCH` of the Dockerfile with the repository as context, in
/// buildah's own storage under `dir`, committed to an OCI layout and unpacked by umoci into a
/// runtime bundle; the bundle's path and the image's config.
fn build_image(dir: &Path, arch: &str) -> (PathBuf, serde_json::Value) {
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
    let tag = format!("cluster-dns-test:{arch}");
    let platform = format!("linux/{arch}");
    buildah(&[
        "bud",
        "--quiet",
        "--platform",
        &platform,
        "--build-arg",
        "CLUSTER_DNS_REVISION=test",
        "-t",
        &tag,
        "-f",
        root().join("Dockerfile").to_str().unwrap(),
        root().to_str().unwrap(),
    ]);
    let layout = format!("{}:cluster-dns", dir.join(format!("oci-{arch}")).display());
    buildah(&["push", "--quiet", &tag, &format!("oci:{layout}")]);
    let inspect: serde_json::Value =
        serde_json::from_str(&buildah(&["inspect", "--type", "image", &tag])).unwrap();
    let config = inspect["OCIv1"].clone();
    let bundle = dir.join(format!("bundle-{arch}"));
    run(
        "umoci",
        &["unpack", "--image", &layout, bundle.to_str().unwrap()],
        "umoci",
    );
    (bundle, config)
}

/// What both images hold besides the binary, and what their config says.
fn check_image_contents(arch: &str, bundle: &Path, config: &serde_json::Value) {
    assert_eq!(config["architecture"], arch, "{config}");
    assert_eq!(config["os"], "linux");
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["org.opencontainers.image.revision"], "test", "{config}");
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    let rootfs = bundle.join("rootfs");
    let mut files: Vec<String> = Vec::new();
    let mut stack = vec![rootfs.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p.strip_prefix(&rootfs).unwrap().display().to_string());
            }
        }
    }
    files.sort();
    assert_eq!(
        files,
        [
            "cluster-dns",
            "etc/ssl/certs/ca-certificates.crt",
            "usr/share/doc/cluster-dns/LICENSE",
            "usr/share/doc/cluster-dns/sbom.cdx.json",
        ],
        "{arch}: the image holds exactly these files"
    );
    let shipped = std::fs::read(rootfs.join("cluster-dns")).unwrap();
    assert!(
        shipped == std::fs::read(dist_binary(arch)).unwrap(),
        "{arch}: not dist's binary"
    );
    let caps = run(
        "getcap",
        &[rootfs.join("cluster-dns").to_str().unwrap()],
        "libcap2-bin",
    );
    assert!(
        caps.contains("cap_net_bind_service=ep"),
        "{arch}: the image lost the file capability: {caps:?}"
    );
}

/// The arm64 image, built from the same Dockerfile: its binary, cross-compiled, runs under
/// qemu-user (qemu-user-static) and answers dig from the image's own root.
#[test]
fn the_arm64_image_answers_dig_under_qemu_user() {
    let dir = crate::support::temp_dir("image-arm64");
    let _cleanup = Cleanup {
        dir: dir.clone(),
        containers: Vec::new(),
    };
    let (bundle, config) = build_image(&dir, "arm64");
    check_image_contents("arm64", &bundle, &config);
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let corefile = dir.join("Corefile");
    std::fs::write(
        &corefile,
        format!(".:{port} {{\n bind 127.0.0.1\n hosts {{\n  192.0.2.64 arm64.example.org\n }}\n}}\n"),
    )
    .unwrap();
    let child = Command::new("timeout")
        .args(["120", "qemu-aarch64-static"])
        .arg(bundle.join("rootfs/cluster-dns"))
        .arg("-conf")
        .arg(&corefile)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("qemu-aarch64-static runs (qemu-user-static; test.sh installs it)");
    let mut answer = String::new();
    for _ in 0..100 {
        // (dig fails with "connection refused" until the server listens.)
        let out = crate::support::run_dig(&[
            "@127.0.0.1",
            "-p",
            &port.to_string(),
            "+short",
            "+time=1",
            "+tries=1",
            "arm64.example.org",
            "A",
        ]);
        answer = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if answer == "192.0.2.64" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    let status = out.status;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(answer, "192.0.2.64", "{log}");
    assert!(
        status.success(),
        "it did not stop cleanly on SIGTERM ({status}): {log}"
    );
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

/// The amd64 image built from `Dockerfile` by `buildah bud` and run as the Deployment runs it.
/// `umoci unpack` gives the runtime bundle; its config.json gets the pod's securityContext as
/// containerd's CRI turns it into an OCI spec for a non-root container: uid/gid 65532,
/// read-only root, NET_BIND_SERVICE alone in the bounding, permitted and effective sets and
/// nothing inheritable or ambient (`drop: [ALL]`, `add: [NET_BIND_SERVICE]`; without ambient
/// capabilities the kernel clears the permitted set when a non-root process execs, so the file
/// capability is what gives it back), and no_new_privs (`allowPrivilegeEscalation: false`: the
/// file capability then grants no more than the permitted set runc left, which holds
/// NET_BIND_SERVICE). The Corefile is mounted read-only at /etc/cluster-dns as the ConfigMap
/// is. `runc run` starts it in a private network namespace (`unshare -n`, loopback only,
/// ip_unprivileged_port_start left at 1024), where it binds :53 and dig gets answers. Then the
/// same bundle with the capability removed from the binary stops with the error that names
/// the fix.
#[test]
fn the_amd64_image_runs_as_the_pod_and_answers_on_port_53() {
    assert!(
        crate::deploy::privileges::nix_is_root(),
        "building and running the image (umoci unpack, runc, unshare) needs root, as CI has"
    );
    let dir = crate::support::temp_dir("image");
    let mut cleanup = Cleanup {
        dir: dir.clone(),
        containers: Vec::new(),
    };
    let (bundle, config) = build_image(&dir, "amd64");
    check_image_contents("amd64", &bundle, &config);
    let config_dir = dir.join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("Corefile"),
        ".:53 {\n bind 127.0.0.1\n hosts {\n  192.0.2.53 image.example.org\n }\n}\n",
    )
    .unwrap();
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
        "source": config_dir, "options": ["rbind", "ro"]
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
