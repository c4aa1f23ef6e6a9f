#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests drive for real when it is missing:
# `dig` (Debian's bind9-dnsutils), `unbound` (the real upstream of the forwarding tests),
# `promtool`/`prometheus` (Debian's prometheus, for deploy/monitoring) and musl-tools (a musl
# stub resolver client for autopath).
set -euo pipefail
cd "$(dirname "$0")"

need_apt=()
command -v dig >/dev/null 2>&1 || need_apt+=(bind9-dnsutils)
# The forwarding tests use Debian's unbound as a real upstream (started by the tests themselves).
[ -x /usr/sbin/unbound ] || need_apt+=(unbound)
# The TCP limit tests run the server under `prlimit --nofile=1024` (util-linux).
command -v prlimit >/dev/null 2>&1 || need_apt+=(util-linux)
# deploy/monitoring's checks run Debian's promtool and prometheus (tests/integration/deploy/monitoring.rs).
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
# The image test reads the binary's dynamic section with readelf (binutils).
command -v readelf >/dev/null 2>&1 || need_apt+=(binutils)
# The autopath resolver test builds a getaddrinfo client against glibc (gcc) and musl
# (musl-tools), and runs it in a private network namespace (unshare, iproute2's ip).
command -v musl-gcc >/dev/null 2>&1 || need_apt+=(musl-tools)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v unshare >/dev/null 2>&1 || need_apt+=(util-linux)
# The port-53 test gives a copy of the binary the file capability (setcap) and runs it as
# uid 65532 (setpriv, util-linux) in a private network namespace.
command -v setcap >/dev/null 2>&1 || need_apt+=(libcap2-bin)
command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux)
# The image test builds Dockerfile offline (buildah, no registry) for amd64 and arm64, unpacks
# the images (umoci), runs amd64's as the pod does (runc) and arm64's binary under qemu-user.
# Its binaries are static builds (deploy/image/binaries.sh, below), arm64's cross-compiled with
# Debian's gcc-aarch64-linux-gnu; the image carries the host's CA bundle (ca-certificates).
command -v buildah >/dev/null 2>&1 || need_apt+=(buildah)
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need_apt+=(gcc-aarch64-linux-gnu)
command -v qemu-aarch64-static >/dev/null 2>&1 || need_apt+=(qemu-user-static)
[ -f /etc/ssl/certs/ca-certificates.crt ] || need_apt+=(ca-certificates)
command -v umoci >/dev/null 2>&1 || need_apt+=(umoci)
command -v runc >/dev/null 2>&1 || need_apt+=(runc)
# The dnstap test reads the server's output with golang-dnstap's reader, the `dnstap` command.
command -v dnstap >/dev/null 2>&1 || need_apt+=(golang-github-dnstap-golang-dnstap-cli)
# The pprof test reads the CPU profile with `go tool pprof` (Debian's golang-go).
command -v go >/dev/null 2>&1 || need_apt+=(golang-go)
# node-cache mode's tests (tests/integration/deploy/nodecache.rs) install rules with iptables and nft,
# read metrics with curl and load the server with dnsperf, in private namespaces.
command -v iptables >/dev/null 2>&1 || need_apt+=(iptables)
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v dnsperf >/dev/null 2>&1 || need_apt+=(dnsperf)
# Real peers no one here wrote: `file` is compared with Knot DNS and NSD serving the same zone
# (tests/integration/conformance/differential.rs, file.rs), and dnsdist health-checks the PROXY protocol
# listener (proxyproto.rs).
[ -x /usr/sbin/knotd ] || need_apt+=(knot)
[ -x /usr/sbin/nsd ] || need_apt+=(nsd)
[ -x /usr/bin/dnsdist ] || need_apt+=(dnsdist)
# The chart's `helm test` pod runs busybox's sh and nslookup; tests/integration/deploy/chart.rs runs
# its command with Debian's busybox.
command -v busybox >/dev/null 2>&1 || need_apt+=(busybox)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "test.sh: installing ${need_apt[*]}" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

# The install guide's selector patch is run offline with `kubectl patch --local`
# (tests/integration/deploy/install.rs): the `kubectl` package of Kubernetes' (pkgs.k8s.io) or Google
# Cloud's apt repository where one is configured, otherwise Debian's kubernetes-client.
if ! command -v kubectl >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubectl ||
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client
fi

# deploy/chart is rendered and linted by Helm's own engine through PyPI's helm-python-sdk (Helm
# v4's Go SDK as a C library; no Go toolchain or helm binary): deploy/render.py,
# tests/integration/deploy/chart.rs.
if ! python3 -c 'import helm_python' >/dev/null 2>&1; then
    python3 -m pip --version >/dev/null 2>&1 || {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip
    }
    # A Debian python (PEP 668) takes packages only with --break-system-packages.
    python3 -m pip install -q helm-python-sdk==0.2.2 ||
        python3 -m pip install -q --break-system-packages helm-python-sdk==0.2.2
fi

# DNS over HTTP/3 (https3:// blocks) is asked by an HTTP/3 client no one here wrote: PyPI's
# aioquic, through tests/data/doh3_client.py (tests/integration/transport/doh3.rs).
if ! python3 -c 'import aioquic' >/dev/null 2>&1; then
    python3 -m pip --version >/dev/null 2>&1 || {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip
    }
    python3 -m pip install -q aioquic==1.7.2 ||
        python3 -m pip install -q --break-system-packages aioquic==1.7.2
fi

# The release workflow (.github/workflows/release.yml) is linted by PyPI's check-jsonschema (the
# GitHub workflow schema) and zizmor (tests/integration/deploy/release.rs).
if ! command -v zizmor >/dev/null 2>&1 || ! command -v check-jsonschema >/dev/null 2>&1; then
    python3 -m pip install -q check-jsonschema==0.39.0 zizmor==1.33.1 ||
        python3 -m pip install -q --break-system-packages check-jsonschema==0.39.0 zizmor==1.33.1
fi

# The image's binaries and SBOM (tests/integration/deploy/image.rs): static builds for both
# architectures with the unoptimised `image-check` profile (Cargo.toml), and the CycloneDX SBOM
# by the CycloneDX project's cargo-cyclonedx.
rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu ||
    rustup target add aarch64-unknown-linux-gnu
command -v cargo-cyclonedx >/dev/null 2>&1 || cargo install --locked cargo-cyclonedx --version 0.5.9
deploy/image/binaries.sh image-check

# --workspace: also the fake API server crate (fake-apiserver/) the watch tests use.
cargo test --workspace "$@"
