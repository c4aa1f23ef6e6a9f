#!/usr/bin/env bash
# Forwarding benchmark (issue 4): cluster-dns (`forward` + `cache`) against Unbound and dnsmasq as
# forwarders to the same local upstream (NSD, authoritative for bench.test), loaded by dnsperf.
#
#   bench/forward.sh          writes the "## Forwarding and cache" section to $BENCH_OUT
#                             (default: a temp file, printed at the end)
#
# Runs (each forwarder in turn, same dnsperf settings, all on 127.0.0.1):
#   warm   400,000 queries, 95% from 1,000 names already in the cache, 5% unique names
#          (dnsperf -n 1 over the file, so the 5% stay misses): QPS and p99 latency
#   rated  the warm mix again (fresh unique names) at 80% of Unbound's warm QPS (dnsperf -Q)
#          against cluster-dns and Unbound: p99 at the same, sustainable rate
#   cold   20,000 unique names never asked before: forwarding throughput to the upstream
#   memory a fresh cluster-dns, 10,000 unique names cached: VmRSS / VmHWM from /proc
# Each warm and cold run also reports the server's CPU time per query (/proc/PID/stat), which
# does not depend on whether dnsperf or the upstream (both on CPU 1) bound the run.
# Servers are pinned to CPU 0 (one worker/thread where the server has the knob); dnsperf and
# the upstream to CPU 1. Installs nsd, unbound, dnsmasq-base, dnsperf with apt-get when missing
# (without starting their services). Builds cluster-dns with `cargo build --release`.
# Knobs: BENCH_CLIENTS (dnsperf -c, 4), BENCH_OUTSTANDING (dnsperf -q, 200), BENCH_OUT,
# BENCH_BIN (a cluster-dns binary to measure instead of building one), BENCH_MEMORY_ONLY=1 (the
# memory part alone, printed; no section written).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CLIENTS=${BENCH_CLIENTS:-4}
OUTSTANDING=${BENCH_OUTSTANDING:-200}
log() { printf '[forward-bench %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

missing=()
command -v nsd >/dev/null || missing+=(nsd)
command -v unbound >/dev/null || missing+=(unbound)
command -v dnsmasq >/dev/null || missing+=(dnsmasq-base)
command -v dnsperf >/dev/null || missing+=(dnsperf)
command -v taskset >/dev/null || missing+=(util-linux)
if [[ ${#missing[@]} -gt 0 ]]; then
    log "installing ${missing[*]}"
    sudo=()
    [[ $(id -u) == 0 ]] || sudo=(sudo)
    policy=/usr/sbin/policy-rc.d placed=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        placed=1
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [[ $placed == 1 ]] && "${sudo[@]}" rm -f "$policy"
fi

DIR=$(mktemp -d /tmp/cluster-dns-fwd-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT
if [[ -n ${BENCH_BIN:-} ]]; then
    BIN=$BENCH_BIN
else
    log "cargo build --release"
    cargo build --release --quiet
    # A private copy: the shared target dir may be rebuilt by someone else during the run.
    cp "$ROOT/target/release/cluster-dns" "$DIR/cluster-dns"
    BIN=$DIR/cluster-dns
fi
"$BIN" --version >/dev/null

# N distinct ports free for both UDP and TCP on 127.0.0.1 (the servers bind both), all held
# until all are chosen: separate picks could return one port twice, and a UDP-only check could
# pick a port a TCP connection holds.
free_ports() {
    python3 - "$1" <<'PY'
import socket, sys
held, ports = [], []
while len(ports) < int(sys.argv[1]):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    port = u.getsockname()[1]
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        t.bind(("127.0.0.1", port))
    except OSError:
        u.close(); t.close()
        continue
    held += [u, t]
    ports.append(port)
print(" ".join(map(str, ports)))
PY
}
read -r UP CD UB DM MEM <<<"$(free_ports 5)"

# ------------------------------------------------------------------ data
python3 - "$DIR" <<'PY'
import random, sys
d = sys.argv[1]
random.seed(4)
hot = [f"hot{i}.bench.test." for i in range(1000)]
warm_unique = [f"u{i}.bench.test." for i in range(20000)]
rated_unique = [f"v{i}.bench.test." for i in range(20000)]
cold = [f"c{i}.bench.test." for i in range(20000)]
mem = [f"m{i}.bench.test." for i in range(10000)]
with open(f"{d}/bench.test.zone", "w") as z:
    z.write("$ORIGIN bench.test.\n$TTL 300\n@ IN SOA ns hostmaster 1 3600 600 86400 300\n@ IN NS ns\nns IN A 127.0.0.1\n")
    for i, n in enumerate(hot + warm_unique + rated_unique + cold + mem):
        z.write(f"{n} IN A 10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}\n")
def write(name, names):
    with open(f"{d}/{name}", "w") as f:
        for n in names:
            f.write(f"{n} A\n")
write("hot.txt", hot)
warm = []
u = iter(warm_unique)
for i in range(400000):
    warm.append(next(u) if i % 20 == 0 else random.choice(hot))
write("warm.txt", warm)
# The same mix with unique names of its own, for the rate-limited pass.
v = iter(rated_unique)
write("rated.txt", [next(v) if i % 20 == 0 else random.choice(hot) for i in range(400000)])
write("cold.txt", cold)
write("mem.txt", mem)
PY

cat >"$DIR/nsd.conf" <<EOF2
server:
    ip-address: 127.0.0.1@$UP
    server-count: 1
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "$DIR"
    database: ""
    pidfile: "$DIR/nsd.pid"
    xfrdfile: "$DIR/nsd-xfrd.state"
    xfrdir: "$DIR"
    zonelistfile: "$DIR/nsd-zone.list"
    logfile: "$DIR/nsd.log"
    verbosity: 0
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: bench.test.
    zonefile: bench.test.zone
EOF2
. "$ROOT/bench/unbound.sh"
{ unbound_server_head "$DIR" "$UB"; cat <<EOF2; } >"$DIR/unbound.conf"
    module-config: "iterator"
    do-not-query-localhost: no
    msg-cache-size: 64m
    rrset-cache-size: 64m
    ratelimit: 0
    # Unbound answers the special-use .test zone itself by default (RFC 6761): forward it.
    local-zone: "test." nodefault
forward-zone:
    name: "."
    forward-addr: 127.0.0.1@$UP
remote-control:
    control-enable: no
EOF2
corefile() { printf '.:%s {\n    bind 127.0.0.1\n    forward . 127.0.0.1:%s {\n        max_concurrent 1000\n    }\n    cache 30\n}\n' "$1" "$UP" >"$DIR/Corefile-$1"; }
corefile "$CD"; corefile "$MEM"

wait_up() { # port name
    for _ in $(seq 1 100); do
        dig +time=1 +tries=1 @127.0.0.1 -p "$1" hot0.bench.test A +short 2>/dev/null | grep -q . && return 0
        sleep 0.1
    done
    die "$2 does not answer on port $1"
}

# ------------------------------------------------------------------ servers
declare -A SPID
# CPU time (user + system, clock ticks) PID has used so far.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Server CPU microseconds per query over a run: TICKS_BEFORE TICKS_AFTER QUERIES.
cpu_us() { python3 -c "import os; print(f'{($2 - $1) * 1e6 / os.sysconf(\"SC_CLK_TCK\") / $3:.1f}')"; }
taskset -c 1 nsd -d -c "$DIR/nsd.conf" >"$DIR/nsd.out" 2>&1 & PIDS+=($!)
sleep 0.5; wait_up "$UP" nsd
if [[ -z ${BENCH_MEMORY_ONLY:-} ]]; then
    RUST_LOG=warn taskset -c 0 "$BIN" -conf "$DIR/Corefile-$CD" >"$DIR/cd.out" 2>&1 & PIDS+=($!); SPID[cluster-dns]=$!
    taskset -c 0 unbound -d -c "$DIR/unbound.conf" >"$DIR/ub.out" 2>&1 & PIDS+=($!); SPID[unbound]=$!
    taskset -c 0 dnsmasq -k --no-resolv --no-hosts --server="127.0.0.1#$UP" --listen-address=127.0.0.1 \
        --bind-interfaces --port="$DM" --cache-size=10000 --dns-forward-max=1000 --pid-file= \
        --user="$(id -un)" >"$DIR/dm.out" 2>&1 & PIDS+=($!); SPID[dnsmasq]=$!
    wait_up "$CD" cluster-dns; wait_up "$UB" unbound; wait_up "$DM" dnsmasq
fi

# dnsperf over FILE once against PORT (at most RATE queries a second when given); prints
# "qps p99_ms lost"
perf() { # port file [rate]
    local rate=()
    [[ -z ${3:-} ]] || rate=(-Q "$3")
    taskset -c 1 dnsperf -s 127.0.0.1 -p "$1" -d "$2" -n 1 -c "$CLIENTS" -q "$OUTSTANDING" -t 5 -v "${rate[@]}" >"$DIR/perf.out" 2>&1 || true
    python3 - "$DIR/perf.out" <<'PY'
import re, sys
lat, qps, lost = [], "0", "?"
for line in open(sys.argv[1]):
    m = re.match(r"> \S+ .* ([0-9.]+)$", line)
    if m:
        lat.append(float(m.group(1)))
    if "Queries per second:" in line:
        qps = line.split(":")[1].strip()
    if "Queries lost:" in line:
        lost = line.split(":")[1].strip().split()[0]
lat.sort()
p99 = lat[int(len(lat) * 0.99) - 1] * 1000 if lat else float("nan")
print(f"{float(qps):.0f} {p99:.2f} {lost}")
PY
}

declare -A PORT=([cluster-dns]=$CD [unbound]=$UB [dnsmasq]=$DM)
declare -A WARM COLD RATED WARMCPU COLDCPU
[[ -n ${BENCH_MEMORY_ONLY:-} ]] || for s in cluster-dns unbound dnsmasq; do
    log "$s: warming 1,000 names"
    perf "${PORT[$s]}" "$DIR/hot.txt" >/dev/null
done
[[ -n ${BENCH_MEMORY_ONLY:-} ]] || for s in cluster-dns unbound dnsmasq; do
    log "$s: warm run (95% hits)"
    t0=$(ticks "${SPID[$s]}")
    WARM[$s]=$(perf "${PORT[$s]}" "$DIR/warm.txt")
    WARMCPU[$s]=$(cpu_us "$t0" "$(ticks "${SPID[$s]}")" 400000)
done
RATE=0
if [[ -z ${BENCH_MEMORY_ONLY:-} ]]; then
    read -r ubq _ <<<"${WARM[unbound]}"
    RATE=$(( ubq * 8 / 10 ))
    for s in cluster-dns unbound; do
        log "$s: warm mix at $RATE queries a second (80% of Unbound's warm QPS)"
        RATED[$s]=$(perf "${PORT[$s]}" "$DIR/rated.txt" "$RATE")
    done
fi
[[ -n ${BENCH_MEMORY_ONLY:-} ]] || for s in cluster-dns unbound dnsmasq; do
    log "$s: cold run"
    t0=$(ticks "${SPID[$s]}")
    COLD[$s]=$(perf "${PORT[$s]}" "$DIR/cold.txt")
    COLDCPU[$s]=$(cpu_us "$t0" "$(ticks "${SPID[$s]}")" 20000)
done

# Where the resident memory of PID is (main heap, other anonymous maps: thread arenas and
# stacks, and the binary's pages), with a LABEL, on stderr.
resident() { # pid label
    python3 - "/proc/$1/smaps" "$2" <<'PY'
import sys
kinds = {}
kind = None
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) >= 5 and "-" in parts[0] and ":" not in parts[0]:
        path = parts[5] if len(parts) > 5 else ""
        kind = "heap" if path == "[heap]" else ("anon" if path == "" else ("stack" if path.startswith("[stack") else "file"))
    elif parts and parts[0] == "Rss:":
        kinds[kind] = kinds.get(kind, 0) + int(parts[1])
print(f"resident {sys.argv[2]}, KiB:", kinds, file=sys.stderr)
PY
}

log "memory: fresh cluster-dns, 10,000 names"
RUST_LOG=warn taskset -c 0 "$BIN" -conf "$DIR/Corefile-$MEM" >"$DIR/mem.out" 2>&1 & MEMPID=$!; PIDS+=($MEMPID)
wait_up "$MEM" cluster-dns
RSS0=$(awk '/VmRSS/ {print $2}' "/proc/$MEMPID/status")
[[ -z ${BENCH_MEMORY_ONLY:-} ]] || resident "$MEMPID" "at start"
perf "$MEM" "$DIR/mem.txt" >/dev/null
RSS1=$(awk '/VmRSS/ {print $2}' "/proc/$MEMPID/status")
[[ -z ${BENCH_MEMORY_ONLY:-} ]] || resident "$MEMPID" "after 10,000 names"
HWM1=$(awk '/VmHWM/ {print $2}' "/proc/$MEMPID/status")
# Every one of the 10,000 names answered from the cache now (no upstream query); from the
# second hit on each is replayed from the answer memo, which keeps its own copy.
perf "$MEM" "$DIR/mem.txt" >/dev/null
perf "$MEM" "$DIR/mem.txt" >/dev/null
RSS2=$(awk '/VmRSS/ {print $2}' "/proc/$MEMPID/status")
if [[ -n ${BENCH_MEMORY_ONLY:-} ]]; then
    echo "VmRSS $RSS0 KiB at start, $RSS1 KiB after 10,000 names ($(( RSS1 - RSS0 )) KiB over the start; VmHWM $HWM1 KiB), $RSS2 KiB after two more passes ($(( RSS2 - RSS0 )) KiB)"
    exit 0
fi

OUT=${BENCH_OUT:-$DIR/section.md}
{
    echo "## Forwarding and cache"
    echo
    echo "Command: \`bench/forward.sh\` ($(date -u +%Y-%m-%d), \`nproc\` = $(nproc), $(uname -m)). Upstream: NSD $(nsd -v 2>&1 | head -1 | awk '{print $3}') authoritative for \`bench.test\` on"
    echo "127.0.0.1 (CPU 1, with dnsperf $(dnsperf -h 2>&1 | awk '/^Version/ {print $2}')); each forwarder on CPU 0: cluster-dns (release, \`forward . UPSTREAM { max_concurrent 1000 }\` +"
    echo "\`cache 30\`), Unbound $(unbound -V | awk 'NR==1 {print $2}') (1 thread, forward-zone), dnsmasq $(dnsmasq -v | awk 'NR==1 {print $3}') (cache-size 10000)."
    echo "dnsperf -c $CLIENTS -q $OUTSTANDING, one pass over each query file, in the same run; p99 is nearest-rank over every"
    echo "query's latency from \`dnsperf -v\` at full load (so it includes queueing behind $OUTSTANDING outstanding queries)."
    echo
    echo "| forwarder | warm QPS (95% hits) | warm p99 (ms) | lost | warm CPU µs/query | cold QPS (all misses) | cold p99 (ms) | cold CPU µs/query |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for s in cluster-dns unbound dnsmasq; do
        read -r wq wp wl <<<"${WARM[$s]}"; read -r cq cp _ <<<"${COLD[$s]}"
        echo "| $s | $wq | $wp | $wl | ${WARMCPU[$s]} | $cq | $cp | ${COLDCPU[$s]} |"
    done
    echo
    echo "CPU µs/query: the server's user + system CPU time over the run (\`/proc/PID/stat\`) divided by the"
    echo "queries sent; what a query costs the server, whether or not the run was bound by the client."

    read -r cdq _ <<<"${WARM[cluster-dns]}"; read -r ubq _ <<<"${WARM[unbound]}"
    echo
    echo "Warm QPS, cluster-dns / Unbound: $(python3 -c "print(f'{$cdq/$ubq:.2f}')" 2>/dev/null || echo n/a) (goal: at least 1.3; cold: at least 1.0)."
    echo
    echo "The warm mix (its own 5% unique names) at $RATE queries a second, 80% of Unbound's warm QPS (\`dnsperf -Q\`):"
    echo
    echo "| forwarder | QPS | p99 (ms) | lost |"
    echo "| --- | ---: | ---: | ---: |"
    for s in cluster-dns unbound; do
        read -r rq rp rl <<<"${RATED[$s]}"
        echo "| $s | $rq | $rp | $rl |"
    done
    echo
    echo "Memory (fresh cluster-dns, \`cache 30\`, after 10,000 distinct names were forwarded and cached):"
    echo "VmRSS $RSS0 KiB at start, $RSS1 KiB with the full cache (VmHWM $HWM1 KiB): the cache and its traffic cost"
    echo "$(( (RSS1 - RSS0) / 1024 )) MiB ($((RSS1 - RSS0)) KiB); goal under 5 MB (CoreDNS budgets 30 MB). After two more passes"
    echo "answered from the cache (the answer memo then holds a copy of each hit): VmRSS $RSS2 KiB, $((RSS2 - RSS0)) KiB over the start."
} >"$OUT"
cat "$OUT"
