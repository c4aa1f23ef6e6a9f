#!/usr/bin/env bash
# Soak (issue 11): cluster-dns (release) watching the fake API server while the API server
# churns Services and EndpointSlices (20 changes a second: endpoints replaced, Services deleted
# and created again) and 32 clients send a mix of queries (ClusterIP A, headless A, SRV, PTR,
# NXDOMAIN, churned Services) at half of the peak measured first, with every answer checked
# against what the API server published and the server's RSS sampled every second. Prints the
# figures as a markdown table; exits 1 if an answer was wrong or missing or RSS grew 5% or more
# from the first minute to the last. Loopback only; stops by itself.
#
#   bench/soak.sh                 # 10 minutes
#   bench/soak.sh --minutes 2     # shorter
#   bench/soak.sh --smoke         # 20 seconds
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin cluster-dns
cargo build --release -p fake-apiserver --bin soak
echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
exec target/release/soak --bin target/release/cluster-dns "$@"
