#!/usr/bin/env bash
# Memory of node-cache mode under load (issue 33 goal: under 20 MiB): Kubernetes' nodelocaldns
# Corefile (cache on: `success 9984 30`, `denial 9984 5`; cluster.local forwarded over TCP to
# an upstream on 127.0.0.2, other names over UDP), dnsperf at QPS (2,000) for DURATION seconds
# (600) over a mixed query file (50% cluster A, 10% cluster AAAA, 25% outside A, 15% NXDOMAIN,
# over NAMES=2000 Services and outside names), in a private network and mount namespace (root).
# Prints the server's VmRSS every minute and VmRSS/VmHWM at the end.
#
#   bench/nodecache-rss.sh                     # release build, 10 minutes
#   DURATION=60 bench/nodecache-rss.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export BIN=${BIN:-$PWD/target/release/cluster-dns} QPS=${QPS:-2000} DURATION=${DURATION:-600}
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release" >&2; exit 1; }
if [ -z "${NODECACHE_BENCH_INSIDE:-}" ]; then
    exec env NODECACHE_BENCH_INSIDE=1 unshare -n -m bash "$0" "$@"
fi
. bench/nodecache-lib.sh

start_nc nc.log
wait_log nc.log "interface and rules in place"
rss() { awk -v k="$1:" '$1 == k {printf "%.1f", $2 / 1024}' "/proc/$NC/status"; }
echo "# $(date -u +%F) $("$BIN" --version) QPS=$QPS for ${DURATION}s, NAMES=$NAMES; at start VmRSS $(rss VmRSS) MiB"
dnsperf -s 169.254.20.10 -d "$W/queries" -l "$DURATION" -Q "$QPS" -c 8 -t 2 >"$W/perf.txt" 2>&1 &
PERF=$!
t=0
while kill -0 $PERF 2>/dev/null; do
    sleep 10; t=$((t + 10))
    [ $((t % 60)) -eq 0 ] && echo "t=${t}s VmRSS $(rss VmRSS) MiB"
done
grep -E "Queries (sent|completed|lost)|Response codes|Average Latency" "$W/perf.txt"
echo "end: VmRSS $(rss VmRSS) MiB, VmHWM $(rss VmHWM) MiB"
