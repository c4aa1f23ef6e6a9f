#!/usr/bin/env bash
# Rolling-restart benchmark (issue 32): three cluster-dns replicas behind a client that sends
# only to the endpoints the fake API server lists as ready (kube-proxy, 500 ms programming
# delay); 30 restarts under 2,000 QPS with a 2 s client timeout, then 50 Corefile reloads under
# load with every replica's /ready polled. Each case runs replicas that follow their own
# endpoint (POD_IP set, lameduck 30 s as the bound, margin 1 s) and replicas on kubeadm's fixed
# lameduck of 5 s (no POD_IP, as CoreDNS), with the EndpointSlice controller marking the
# terminating endpoint not ready at once, then 6 s late (a controller lagging under load).
# Prints lookups, timeouts, SERVFAIL, readiness failures and SIGTERM-to-exit times. Builds the
# release binaries first; about 15 minutes.
#
#   bench/rollout.sh                                   # the issue's figures
#   bench/rollout.sh --restarts 5                      # a quick one
#
# Other knobs, passed through: --qps N, --delay-ms N, --margin-ms N.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin cluster-dns
cargo build --release -p fake-apiserver --bin rollout-bench
echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
# The reloads once per mode (with the prompt controller); the late-controller case only restarts.
for case in "0 50" "6000 0"; do
    removal=${case% *} reloads=${case#* }
    target/release/rollout-bench target/release/cluster-dns --mode follow --lameduck-s 30 --removal-delay-ms "$removal" --reloads "$reloads" "$@"
    echo
    target/release/rollout-bench target/release/cluster-dns --mode lameduck --lameduck-s 5 --removal-delay-ms "$removal" --reloads "$reloads" "$@"
    echo
done
