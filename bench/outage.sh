#!/usr/bin/env bash
# API outage benchmark (issue 11): the retry intervals of cluster-dns's watches while the fake
# API server answers 500 to every first list, the time to sync once it stops, and the catch-up
# time after outages of 10, 30 and 60 s. Builds the release binaries, then runs
# fake-apiserver's `outage-bench`, which prints the figures (about 3 to 4 minutes).
#
#   bench/outage.sh                                # 75 s of failures, outages of 10, 30, 60 s
#   bench/outage.sh --fail-secs 20 --outages 5     # a quick one
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin cluster-dns
cargo build --release -p fake-apiserver --bin outage-bench
echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
exec target/release/outage-bench target/release/cluster-dns "$@"
