#!/usr/bin/env bash
# Churn benchmark (issue 15): saturation QPS of a stable query mix while the API server writes
# EndpointSlices (idle, label-only writes, and writes that move an endpoint), with the answer
# memo on and off. Builds the release binaries, installs dnsperf, runs `churn-bench`.
#
#   bench/churn.sh                                # 100 writes/s, 10 s runs, 3 rounds
#   bench/churn.sh --rate 60 --duration 3 --repeats 1
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v dnsperf >/dev/null; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsperf
fi
cargo build --release --bin cluster-dns
cargo build --release -p fake-apiserver --bin churn-bench
echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
taskset -c 1 target/release/churn-bench target/release/cluster-dns "$@"
