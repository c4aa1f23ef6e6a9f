#!/usr/bin/env bash
# Watch-path benchmarks (issue 3): initial sync of a synthetic cluster of 10,000 Services and
# 150,000 endpoints (EndpointSlices of 100, one Service in four headless) served by the fake API
# server, the relist after a 410 Gone, and programming latency. Builds the release binaries,
# then runs fake-apiserver's `watch-bench`, which prints the figures.
#
#   bench/watch.sh                       # the full-size run
#   bench/watch.sh --services 1000 --endpoints 15000 --changes 100   # a quick one
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin cluster-dns
cargo build --release -p fake-apiserver --bin watch-bench
echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ)"
exec target/release/watch-bench target/release/cluster-dns "$@"
