#!/usr/bin/env bash
# autopath benchmarks (issue 14): the pod index's memory at 150,000 pods, and lookups per second
# of a pod's search-path mix with and without `autopath @kubernetes`. Builds the release
# binaries, starts Debian's Unbound as the upstream (authoritative for the outside names,
# NXDOMAIN for everything else), then runs fake-apiserver's `autopath-bench`.
#
#   bench/autopath.sh                                   # the full run
#   bench/autopath.sh --pods 20000 --duration 3 --repeats 1   # a quick one
#   bench/autopath.sh --kubeadm-cache   # with kubeadm's `cache 30 { disable ... cluster.local }`
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v unbound >/dev/null || missing+=(unbound)
command -v dnsperf >/dev/null || missing+=(dnsperf)
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
cargo build --release --bin cluster-dns
cargo build --release -p fake-apiserver --bin autopath-bench
DIR=$(mktemp -d)
UB=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
. bench/unbound.sh
unbound_example_net "$DIR" "$UB"
taskset -c 1 unbound -d -c "$DIR/unbound.conf" >"$DIR/unbound.out" 2>&1 &
UBPID=$!
trap 'kill $UBPID 2>/dev/null || true; rm -rf "$DIR"' EXIT
sleep 0.5
echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); unbound $(unbound -V | awk 'NR==1 {print $2}')"
target/release/autopath-bench target/release/cluster-dns "$UB" "$@"
