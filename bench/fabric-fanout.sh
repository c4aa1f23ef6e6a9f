#!/usr/bin/env bash
# The fabric mode's central side at scale (issue 46): one central cluster-dns (kubeadm's
# Corefile against the fake API server, plus `transfer cluster.local { to * / notify
# transferred PORT }`) and fake-apiserver's `fabric-fanout-bench`, a generator that behaves as N
# secondaries, each at its own loopback address: it registers by an IXFR, answers each
# NOTIFY, then asks the SOA and an IXFR over one connection. For each change (one new Service,
# a second apart) it prints the time until every secondary holds the new serial, the central
# server's CPU time and the bytes of its answers, and the API watches (the central server's).
#
#   bench/fabric-fanout.sh                          # 5,000 secondaries, 10 changes, 1,000 Services
#   bench/fabric-fanout.sh --agents 1000 --changes 20
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin cluster-dns
cargo build --release -p fake-apiserver --bin fabric-fanout-bench
# Each secondary holds a UDP socket and, while it transfers, a TCP connection.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
exec target/release/fabric-fanout-bench target/release/cluster-dns "$@"
