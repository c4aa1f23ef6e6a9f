#!/usr/bin/env bash
# Noisy-client benchmark (issue 34): what one client flooding names does to everyone else's
# lookups, each case without `fairness` and with it (written bare) on a fresh server, clients
# as dnsperf processes at their own loopback addresses. Prints the quiet clients' answered
# share and mean latency, the most upstream exchanges in flight for one name, and peak RSS and
# liveness through a 5-minute flood. Builds the release binaries first; about 15 minutes.
#
#   bench/flood.sh                                  # the issue's figures
#   bench/flood.sh --seconds 10 --soak-seconds 30   # a quick one
#   bench/flood.sh --only crowd                     # one case: quiet, crowd, coalesce, soak
set -euo pipefail
cd "$(dirname "$0")/.."
command -v dnsperf >/dev/null || { echo "flood.sh needs dnsperf (apt-get install dnsperf)" >&2; exit 1; }
cargo build --release --bin cluster-dns
cargo build --release -p fake-apiserver --bin flood-bench
echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
exec target/release/flood-bench target/release/cluster-dns "$@"
