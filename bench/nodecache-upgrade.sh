#!/usr/bin/env bash
# Queries lost while node-cache mode is upgraded on a node (issue 33): dnsperf at QPS (5,000)
# against 169.254.20.10 for 20 s, through Kubernetes' nodelocaldns Corefile (cache on,
# cluster.local forwarded over TCP to an upstream on 127.0.0.2), in a private network and mount
# namespace (root). Cases, RUNS (3) times each:
#   steady    no upgrade (the baseline);
#   upgrade   at 5 s a second instance starts beside the first; at 10 s the first gets SIGTERM
#             (a maxSurge rolling update: the new pod is ready before the old one stops);
#   replace   at 5 s the first gets SIGTERM, and a second starts once it has exited (what a
#             maxUnavailable update, or node-cache's teardown, does): the outage to compare.
#
#   bench/nodecache-upgrade.sh                 # release build (cargo build --release)
#   QPS=2000 RUNS=1 BIN=target/debug/cluster-dns bench/nodecache-upgrade.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export BIN=${BIN:-$PWD/target/release/cluster-dns} QPS=${QPS:-5000} RUNS=${RUNS:-3}
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release" >&2; exit 1; }
if [ -z "${NODECACHE_BENCH_INSIDE:-}" ]; then
    exec env NODECACHE_BENCH_INSIDE=1 unshare -n -m bash "$0" "$@"
fi
. bench/nodecache-lib.sh

run_case() {
    local case=$1
    start_nc a.log; local old=$NC
    wait_log a.log "interface and rules in place"
    dnsperf -s 169.254.20.10 -d "$W/queries" -l 20 -Q "$QPS" -c 8 -t 2 >"$W/perf.txt" 2>&1 &
    local perf=$!
    sleep 5
    case $case in
        upgrade)
            start_nc b.log; local new=$NC
            wait_log b.log "interface and rules in place"
            sleep 5
            kill "$old"; wait "$old" || true ;;
        replace)
            kill "$old"; wait "$old" || true
            start_nc b.log; local new=$NC ;;
        steady) local new=$old ;;
    esac
    wait "$perf" || true
    local sent lost
    sent=$(awk '/Queries sent:/ {print $3}' "$W/perf.txt")
    lost=$(awk '/Queries lost:/ {print $3}' "$W/perf.txt")
    printf '%-8s sent %7s lost %6s\n' "$case" "$sent" "$lost"
    kill "$new" 2>/dev/null; wait "$new" 2>/dev/null || true
    rm -f "$W"/a.log "$W"/b.log
}
echo "# $(date -u +%F) $("$BIN" --version) QPS=$QPS, 20 s, 8 clients"
for _ in $(seq "$RUNS"); do
    for case in ${CASES:-steady upgrade replace}; do run_case "$case"; done
done
