#!/usr/bin/env bash
# What `Dockerfile` copies into the image, in dist/ (its build context):
#   deploy/image/binaries.sh [PROFILE]
# PROFILE is `release` (the default; the release workflow ships it) or `image-check` (what
# test.sh builds for the image test: the same static binaries unoptimised, see Cargo.toml).
#
# - dist/linux-amd64/cluster-dns and dist/linux-arm64/cluster-dns: static glibc binaries
#   (`crt-static`: the image is FROM scratch and has no libc; the allocator stays glibc's, the
#   one BENCHMARKS.md measures; host names resolve from /etc/hosts and /etc/resolv.conf without
#   NSS modules). arm64 is cross-compiled with Debian's gcc-aarch64-linux-gnu (.cargo/config.toml),
#   the same `cargo build`, no emulation. Debug sections go to cluster-dns.debug beside each
#   (the binary keeps a debuglink to it); the binary gets the file capability
#   cap_net_bind_service=+ep (port 53 as uid 65532; buildah's COPY keeps it).
# - dist/sbom.cdx.json: the SBOM, CycloneDX 1.5 JSON of the crates in the binary, with versions,
#   licenses and checksums from Cargo.lock, build dependencies left out (cargo-cyclonedx, the
#   CycloneDX project's cargo tool).
# - dist/ca-certificates.crt: the build host's CA bundle (Debian's ca-certificates), which the
#   system roots of `forward`, `tls` and `dnstap` read as distroless images carry it.
#
# Needs: rustup targets x86_64-unknown-linux-gnu and aarch64-unknown-linux-gnu, apt
# gcc-aarch64-linux-gnu binutils libcap2-bin ca-certificates, and cargo-cyclonedx (test.sh
# installs them all).
set -euo pipefail
cd "$(dirname "$0")/../.."
profile=${1:-release}
case $profile in
release | image-check) ;;
*)
    echo "binaries.sh: unknown profile '$profile' (release or image-check)" >&2
    exit 2
    ;;
esac
# setcap needs CAP_SETFCAP: root, or sudo (the release workflow's runner).
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
mkdir -p dist
for arch in amd64 arm64; do
    case $arch in
    amd64) triple=x86_64-unknown-linux-gnu objcopy=objcopy ;;
    arm64) triple=aarch64-unknown-linux-gnu objcopy=aarch64-linux-gnu-objcopy ;;
    esac
    echo "binaries.sh: cargo build --profile $profile --target $triple (static)" >&2
    RUSTFLAGS="-C target-feature=+crt-static" \
        cargo build --locked --quiet --profile "$profile" --target "$triple" --bin cluster-dns
    out=dist/linux-$arch
    mkdir -p "$out"
    rm -f "$out/cluster-dns" "$out/cluster-dns.debug"
    cp "target/$triple/$profile/cluster-dns" "$out/cluster-dns"
    "$objcopy" --only-keep-debug "$out/cluster-dns" "$out/cluster-dns.debug"
    (cd "$out" && "$objcopy" --strip-debug --add-gnu-debuglink=cluster-dns.debug cluster-dns)
    $SUDO setcap cap_net_bind_service=+ep "$out/cluster-dns"
done
cp /etc/ssl/certs/ca-certificates.crt dist/ca-certificates.crt
# One SBOM per binary of the workspace, next to each package's Cargo.toml: the image's is kept.
cargo cyclonedx -q --format json --spec-version 1.5 --describe binaries --no-build-deps --target all
mv cluster-dns_bin.cdx.json dist/sbom.cdx.json
rm -f fake-apiserver/*_bin.cdx.json
echo "binaries.sh: dist/ holds $(cd dist && echo linux-*/cluster-dns sbom.cdx.json ca-certificates.crt)" >&2
