#!/usr/bin/env bash
# Node-local mode (issue 33): the load that cluster-dns on every node puts on the API server,
# and each agent's memory. Builds the release binaries, then runs fake-apiserver's
# `nodelocal-bench`: for 1, 10 and 50 simulated nodes, N real cluster-dns processes against one
# fake API server holding the cluster, either each watching it with kubeadm's Corefile (watch
# mode) or each forwarding to one central cluster-dns (forward mode); it prints the watches and
# the bytes served (sync, churn, idle; per resource) and every agent's RSS.
#
#   bench/nodelocal-api.sh                                   # 1,000 Services / 10,000 endpoints, 1, 10, 50 nodes
#   bench/nodelocal-api.sh --nodes 1 --services 10000 --endpoints 150000 --churn 0 --mode watch
#                                                            # one agent's RSS at the watch-path size
#   bench/nodelocal-api.sh --nodes 1,10,50 --mode fabric     # issue 46: agents as secondaries of
#                                                            # the cluster zone (IXFR on NOTIFY)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin cluster-dns
cargo build --release -p fake-apiserver --bin nodelocal-bench
# 50 agents keep a file descriptor or two each on the fake's side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
exec target/release/nodelocal-bench target/release/cluster-dns "$@"
