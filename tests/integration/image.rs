//! The container image (`Dockerfile`) ships the binary the tests and benchmarks run: the glibc
//! `cargo build --release` on `gcr.io/distroless/cc-debian12`, and that binary needs no shared
//! library, and no glibc symbol version, the base lacks. (Docker cannot run here; the
//! binary's dynamic section is read with binutils' `readelf`.)

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
