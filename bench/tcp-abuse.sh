#!/usr/bin/env bash
# TCP under abusive clients (issue 11, part 2): the server's RSS while 20,000 TCP connections
# each send a length prefix of 65,535 ("\xff\xff") and 65,000 bytes, and while 20,000 idle ones
# are opened, and whether UDP and TCP queries keep being answered meanwhile.
#
#   bench/tcp-abuse.sh        prints the figures and a markdown table for BENCHMARKS.md
#
# Each variant starts a fresh cluster-dns (the demo cluster, config/Corefile.demo, on 127.0.0.1
# with free ports) and runs fake-apiserver's `tcp-abuse` client against it: at most
# BENCH_CONCURRENCY client connections open at once, each kept until the server closes it or
# BENCH_HOLD seconds pass, UDP and TCP probes every 50 ms, the server's VmRSS sampled every
# 100 ms, and again BENCH_SETTLE seconds after the last connection is gone.
# Goal: RSS rises by less than 20 MB; every probe answered.
# Knobs: BENCH_CONNS (20000), BENCH_CONCURRENCY (8000), BENCH_RATE (connections opened a second,
# 4000: faster, the accept queue overflows and handshakes the client counts never reach the
# server), BENCH_HOLD (15), BENCH_SETTLE (5),
# CLUSTER_DNS_BIN (a cluster-dns binary to measure instead of this tree's release build),
# CLUSTER_DNS_TCP_MAX_CONNECTIONS (passed to the server when set).
# Loopback only; every step is bounded, and the servers are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CONNS=${BENCH_CONNS:-20000}
CONCURRENCY=${BENCH_CONCURRENCY:-8000}
RATE=${BENCH_RATE:-4000}
HOLD=${BENCH_HOLD:-15}
SETTLE=${BENCH_SETTLE:-5}
log() { printf '[tcp-abuse %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The client holds up to BENCH_CONCURRENCY sockets, the server up to its limit: raise this
# shell's descriptor limit (children inherit it) as far as the hard limit allows.
hard=$(ulimit -Hn)
want=65536
[[ $hard != unlimited && $hard -lt $want ]] && want=$hard
ulimit -n "$want" || die "cannot raise ulimit -n to $want"
(( CONCURRENCY + 200 <= want )) || die "BENCH_CONCURRENCY=$CONCURRENCY needs more than ulimit -n $want"

DIR=$(mktemp -d /tmp/cluster-dns-tcp-abuse.XXXXXX)
SERVER_PID=""
cleanup() {
    [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT

log "cargo build --release"
[[ -n ${CLUSTER_DNS_BIN:-} ]] || cargo build --release --quiet --bin cluster-dns
cargo build --release --quiet -p fake-apiserver --bin tcp-abuse
# Private copies: the shared target dir may be rebuilt by someone else during the run.
BIN=${CLUSTER_DNS_BIN:-$ROOT/target/release/cluster-dns}
cp "$BIN" "$DIR/cluster-dns"
cp "$ROOT/target/release/tcp-abuse" "$DIR/tcp-abuse"
VERSION=$("$DIR/cluster-dns" --version)

sed -e 's/^\.:1053 {/.:0 {/' \
    -e 's/127\.0\.0\.1:18080$/127.0.0.1:0/' -e 's/127\.0\.0\.1:18181$/127.0.0.1:0/' \
    -e 's/127\.0\.0\.1:19153$/127.0.0.1:0/' \
    "$ROOT/config/Corefile.demo" >"$DIR/Corefile"
cp "$ROOT/config/demo-cluster.yaml" "$DIR/"

# Starts the server; sets SERVER_PID, DNS_ADDR, METRICS_ADDR.
start_server() {
    : >"$DIR/server.log"
    "$DIR/cluster-dns" -conf "$DIR/Corefile" >>"$DIR/server.log" 2>&1 &
    SERVER_PID=$!
    DNS_ADDR="" METRICS_ADDR=""
    for _ in $(seq 1 200); do
        DNS_ADDR=$(sed -n 's/.*serving DNS.*addr=\([^ ]*\).*/\1/p' "$DIR/server.log" | head -1)
        METRICS_ADDR=$(sed -n 's/.*serving HTTP.*addr=\([^ ]*\) .*\/metrics.*/\1/p' "$DIR/server.log" | head -1)
        [[ -n $DNS_ADDR && -n $METRICS_ADDR ]] && break
        sleep 0.05
    done
    [[ -n $DNS_ADDR ]] || die "the server did not start: $(cat "$DIR/server.log")"
    # Let start-up allocations settle before the baseline.
    sleep 1
}

stop_server() {
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}

ROWS=()
run() { # name body
    local name=$1 body=$2
    start_server
    log "$name: $CONNS connections, body $body bytes, against $DNS_ADDR (pid $SERVER_PID)"
    local out
    out=$(timeout 600 "$DIR/tcp-abuse" --addr "$DNS_ADDR" --pid "$SERVER_PID" --conns "$CONNS" \
        --body "$body" --concurrency "$CONCURRENCY" --rate "$RATE" --hold "$HOLD" --settle "$SETTLE")
    printf '%s\n' "$out" >&2
    local closed="n/a"
    if [[ -n $METRICS_ADDR ]]; then
        closed=$(curl -s --max-time 5 "http://$METRICS_ADDR/metrics" \
            | sed -n 's/^cluster_dns_tcp_connections_closed_total{reason="\([a-z]*\)".*} \([0-9]*\)$/\1=\2/p' \
            | tr '\n' ' ')
        [[ -n $closed ]] || closed="n/a"
    fi
    log "$name: closed by the server: $closed"
    stop_server
    val() { printf '%s\n' "$out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
    local before peak end after
    before=$(val rss_before_kib) peak=$(val rss_peak_kib) end=$(val rss_end_kib) after=$(val rss_after_kib)
    mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
    ROWS+=("| $name | $(val opened) | $(mib "$before") | $(mib "$peak") | +$(mib $((peak - before))) | $(mib "$end") | $(mib "$after") | $(val udp_answered)/$(val udp_sent) | $(val tcp_answered)/$(val tcp_sent) | $closed |")
}

run "\\xff\\xff + 65,000 bytes" 65000
run "idle (nothing sent)" 0

echo
echo "- Command: \`bench/tcp-abuse.sh\` (BENCH_CONNS=$CONNS BENCH_CONCURRENCY=$CONCURRENCY BENCH_RATE=$RATE BENCH_HOLD=$HOLD BENCH_SETTLE=$SETTLE${CLUSTER_DNS_TCP_MAX_CONNECTIONS:+ CLUSTER_DNS_TCP_MAX_CONNECTIONS=$CLUSTER_DNS_TCP_MAX_CONNECTIONS})"
echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); $VERSION (${CLUSTER_DNS_BIN:-tree at $(git -C "$ROOT" rev-parse --short HEAD)}); $(nproc) CPUs, shared"
echo
echo "| variant | connections opened | RSS before MiB | peak MiB | rise MiB | when the last closed MiB | after ${SETTLE} s MiB | UDP answered | TCP answered | closed by the server (metric) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
printf '%s\n' "${ROWS[@]}"
