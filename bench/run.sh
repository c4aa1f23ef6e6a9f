#!/usr/bin/env bash
# Authoritative-serving benchmark: cluster-dns against Knot DNS, NSD, Unbound and dnsmasq, all
# serving the same synthetic cluster zone on loopback, loaded by dnsperf (issue 6).
#
#   bench/run.sh            full run: 1,000 and 10,000 services, writes the
#                           "## Authoritative serving" section of BENCHMARKS.md
#   bench/run.sh --smoke    100 services, cluster-dns and Knot, 2-second runs, one pass; writes
#                           to a temp file; exits non-zero if a server fails to answer (CI)
#
# On a fresh Debian machine it installs what is missing (knot nsd unbound dnsmasq-base dnsperf
# bind9-dnsutils) with apt-get, without letting the packages start system services, and builds
# cluster-dns with `cargo build --release`. Every server runs as the current user, from a temp
# dir, on 127.0.0.1 and a free high port, pinned to CPU 0 with one worker; dnsperf is pinned to
# CPU 1. Everything started here is stopped on exit.
#
# Knobs (environment): BENCH_SIZES ("1000 10000"), BENCH_SERVERS ("cluster-dns knot nsd unbound
# dnsmasq"), BENCH_MIXES, BENCH_DURATION (s per dnsperf run, 5), BENCH_REPEATS (3),
# BENCH_LAT_DURATION (s, 3), BENCH_CLIENTS (dnsperf -c, 4), BENCH_OUTSTANDING (dnsperf -q, 200),
# BENCH_BIN (the cluster-dns binary; default target/release/cluster-dns, built here) and
# BENCH_REV (what source it was built from, for the report),
# BENCH_OUT (the file the section goes to), BENCH_KEEP=1 (keep the temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SMOKE=0
for arg in "$@"; do
    case $arg in
        --smoke) SMOKE=1 ;;
        -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/run.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
    esac
done

if [[ $SMOKE == 1 ]]; then
    SIZES=${BENCH_SIZES:-100}
    SERVERS=${BENCH_SERVERS:-cluster-dns knot}
    DURATION=${BENCH_DURATION:-2}
    REPEATS=${BENCH_REPEATS:-1}
    LAT_DURATION=${BENCH_LAT_DURATION:-1}
else
    SIZES=${BENCH_SIZES:-1000 10000}
    SERVERS=${BENCH_SERVERS:-cluster-dns knot nsd unbound dnsmasq}
    DURATION=${BENCH_DURATION:-5}
    REPEATS=${BENCH_REPEATS:-3}
    LAT_DURATION=${BENCH_LAT_DURATION:-3}
fi
MIXES=${BENCH_MIXES:-a-clusterip a-headless srv ptr nxdomain}
CLIENTS=${BENCH_CLIENTS:-4}
OUTSTANDING=${BENCH_OUTSTANDING:-200}
SCALE_MIX=a-clusterip
# The command as run, with the BENCH_* knobs that were set.
COMMAND="$( (env | grep -E '^BENCH_[A-Z_]+=' || true) | sort | tr '\n' ' ')bench/run.sh${*:+ $*}"

log() { printf '[bench %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ------------------------------------------------------------------ tools
install_missing() {
    local missing=()
    command -v knotd >/dev/null || missing+=(knot)
    command -v nsd >/dev/null || missing+=(nsd)
    command -v unbound >/dev/null || missing+=(unbound)
    command -v dnsmasq >/dev/null || missing+=(dnsmasq-base)
    command -v dnsperf >/dev/null || missing+=(dnsperf)
    command -v dig >/dev/null || missing+=(bind9-dnsutils)
    command -v taskset >/dev/null || missing+=(util-linux)
    command -v python3 >/dev/null || missing+=(python3)
    if [[ $SMOKE == 1 ]]; then
        # The smoke run needs only the servers it runs.
        local need=() p
        for p in "${missing[@]}"; do
            case $p in
                knot) [[ " $SERVERS " == *" knot "* ]] && need+=("$p") ;;
                nsd) [[ " $SERVERS " == *" nsd "* ]] && need+=("$p") ;;
                unbound) [[ " $SERVERS " == *" unbound "* ]] && need+=("$p") ;;
                dnsmasq-base) [[ " $SERVERS " == *" dnsmasq "* ]] && need+=("$p") ;;
                *) need+=("$p") ;;
            esac
        done
        missing=("${need[@]}")
    fi
    [[ ${#missing[@]} == 0 ]] && return 0
    log "installing ${missing[*]}"
    local sudo=()
    [[ $(id -u) == 0 ]] || sudo=(sudo)
    # Keep the packages' postinst from starting knot/nsd/unbound on port 53: invoke-rc.d and
    # deb-systemd-invoke ask policy-rc.d, and 101 means "not allowed".
    local policy=/usr/sbin/policy-rc.d placed=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        placed=1
    fi
    local rc=0
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq || rc=$?
    [[ $rc == 0 ]] && { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?; }
    [[ $placed == 1 ]] && "${sudo[@]}" rm -f "$policy"
    [[ $rc == 0 ]] || die "apt-get install ${missing[*]} failed"
    local on53
    on53=$(ss -lunpH 2>/dev/null | awk '$4 ~ /:53$/' || true)
    if [[ -n $on53 ]]; then
        log "note: something listens on UDP port 53 (not ours; the benchmark uses high ports):"
        printf '%s\n' "$on53" >&2
    fi
}

# ------------------------------------------------------------------ processes
TMP=$(mktemp -d "${TMPDIR:-/tmp}/cluster-dns-bench.XXXXXX")
declare -A PID=()

stop_pid() {
    local pid=$1 i
    kill "$pid" 2>/dev/null || return 0
    for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$? name
    for name in "${!PID[@]}"; do stop_pid "${PID[$name]}"; done
    PID=()
    if [[ ${BENCH_KEEP:-0} == 1 ]]; then log "kept $TMP"; else rm -rf "$TMP"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! ss -lunH 2>/dev/null | awk '{print $4}' | grep -qE "[:.]$1\$"; }

pick_base() {
    local base p ok
    for base in $(seq 15300 100 19900); do
        ok=1
        for p in $(seq "$base" $((base + 6))); do port_free "$p" || { ok=0; break; }; done
        [[ $ok == 1 ]] && { echo "$base"; return 0; }
    done
    die "no free port range in 15300-19999"
}

NCPU=$(nproc)
SERVER_CPU=0
CLIENT_CPU=1
BOTH_CPUS=0,1
if [[ $NCPU -lt 2 ]]; then
    log "warning: one CPU: server and dnsperf share it"
    CLIENT_CPU=0
    BOTH_CPUS=0
fi

# port_of NAME -> the port gen.py gave it
port_of() {
    case $1 in
        cluster-dns) echo "$BASE" ;;
        knot) echo $((BASE + 1)) ;;
        nsd) echo $((BASE + 2)) ;;
        unbound) echo $((BASE + 3)) ;;
        dnsmasq) echo $((BASE + 4)) ;;
        cluster-dns-2w) echo $((BASE + 5)) ;;
        knot-2w) echo $((BASE + 6)) ;;
        *) die "unknown server $1" ;;
    esac
}

# start NAME DIR: runs the server in the foreground of a background job, pinned, as this user.
start() {
    local name=$1 dir=$2 out="$2/$1.log"
    case $name in
        cluster-dns)
            (cd "$dir" && RUST_LOG=warn CLUSTER_DNS_UDP_WORKERS=1 TOKIO_WORKER_THREADS=1 exec taskset -c "$SERVER_CPU" \
                "$BIN" -conf Corefile) >"$out" 2>&1 &
            ;;
        cluster-dns-2w)
            (cd "$dir" && RUST_LOG=warn CLUSTER_DNS_UDP_WORKERS=2 TOKIO_WORKER_THREADS=2 exec taskset -c "$BOTH_CPUS" \
                "$BIN" -conf Corefile.2w) >"$out" 2>&1 &
            ;;
        knot)
            mkdir -p "$dir/knot-run" "$dir/knot-db"
            taskset -c "$SERVER_CPU" knotd -c "$dir/knot.conf" >"$out" 2>&1 &
            ;;
        knot-2w)
            mkdir -p "$dir/knot-run-2w" "$dir/knot-db-2w"
            taskset -c "$BOTH_CPUS" knotd -c "$dir/knot-2w.conf" >"$out" 2>&1 &
            ;;
        nsd)
            taskset -c "$SERVER_CPU" nsd -d -c "$dir/nsd.conf" >"$out" 2>&1 &
            ;;
        unbound)
            taskset -c "$SERVER_CPU" unbound -d -c "$dir/unbound.conf" >"$out" 2>&1 &
            ;;
        dnsmasq)
            taskset -c "$SERVER_CPU" dnsmasq -k -C "$dir/dnsmasq.conf" --user="$(id -un)" \
                --group="$(id -gn)" >"$out" 2>&1 &
            ;;
    esac
    PID[$name]=$!
}

# dig_check NAME DIR: every sample question of expect.tsv gets the expected answer.
dig_check() {
    local name=$1 dir=$2 port mix qname qtype want got
    port=$(port_of "$name")
    while IFS=$'\t' read -r mix qname qtype want; do
        case $mix in
            nxdomain)
                got=$(dig +norec +time=1 +tries=1 @127.0.0.1 -p "$port" "$qname" "$qtype" 2>/dev/null |
                    sed -n 's/.*status: \([A-Z]*\).*/\1/p')
                [[ $got == NXDOMAIN ]] || { echo "$mix $qname: status '$got'"; return 1; }
                ;;
            a-headless)
                got=$(dig +short +norec +time=1 +tries=1 @127.0.0.1 -p "$port" "$qname" "$qtype" \
                    2>/dev/null | grep -c . || true)
                [[ "$got records" == "$want" ]] || { echo "$mix $qname: $got records"; return 1; }
                ;;
            *)
                got=$(dig +short +norec +time=1 +tries=1 @127.0.0.1 -p "$port" "$qname" "$qtype" \
                    2>/dev/null | head -1)
                [[ $got == "$want" ]] || { echo "$mix $qname: '$got', want '$want'"; return 1; }
                ;;
        esac
    done <"$dir/expect.tsv"
}

# wait_ready NAME DIR: up to ~300 s for the server to load its zone and answer correctly.
wait_ready() {
    local name=$1 dir=$2 i why=""
    for i in $(seq 1 600); do
        kill -0 "${PID[$name]}" 2>/dev/null || { log "$name exited:"; tail -5 "$dir/$name.log" >&2; return 1; }
        why=$(dig_check "$name" "$dir" 2>&1) && return 0
        sleep 0.5
    done
    log "$name does not answer correctly after 300 s: $why"
    tail -5 "$dir/$name.log" >&2
    return 1
}

# Peak RSS (VmHWM, kB) of the largest process in NAME's tree (NSD forks xfrd and its server).
peak_rss() {
    local pids=("$1") all=() p c max=0 v
    while [[ ${#pids[@]} -gt 0 ]]; do
        p=${pids[0]}
        pids=("${pids[@]:1}")
        all+=("$p")
        for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do pids+=("$c"); done
        [[ ${#all[@]} -gt 64 ]] && break
    done
    for p in "${all[@]}"; do
        v=$(awk '/^VmHWM:/ {print $2}' /proc/"$p"/status 2>/dev/null || echo 0)
        [[ ${v:-0} -gt $max ]] && max=$v
    done
    echo "$max"
}

# cpu_ticks PID -> the user + system CPU time (clock ticks) of PID's process tree so far (NSD's
# queries are answered by a forked child). Taken around each run: the server's CPU time per
# query does not depend on whether the client or the server bound the run.
cpu_ticks() {
    local pids=("$1") p c total=0 t
    while [[ ${#pids[@]} -gt 0 ]]; do
        p=${pids[0]}
        pids=("${pids[@]:1}")
        for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do pids+=("$c"); done
        # Fields 14 and 15 (utime, stime), counted after the ")" that ends the command name.
        t=$(sed 's/.*) //' /proc/"$p"/stat 2>/dev/null | awk '{print $12 + $13}')
        total=$((total + ${t:-0}))
    done
    echo "$total"
}
TICK=$(getconf CLK_TCK)

# perf NAME DIR MIX [QPS_LIMIT] -> "qps completed_pct rcodes" from dnsperf's summary
perf() {
    local name=$1 dir=$2 mix=$3 limit=${4:-} out cpu=$CLIENT_CPU
    local args=(-s 127.0.0.1 -p "$(port_of "$name")" -d "$dir/queries/$mix.txt" -l "$DURATION"
        -c "$CLIENTS" -q "$OUTSTANDING" -T 1 -t 0.5)
    out=$(taskset -c "$cpu" dnsperf "${args[@]}" 2>&1) || true
    python3 "$ROOT/bench/report.py" summary <<<"$out"
}

# latency NAME DIR MIX QPS -> "achieved_qps p50_us p99_us n" from a -v run at QPS
latency() {
    local name=$1 dir=$2 mix=$3 qps=$4 f="$TMP/lat.out"
    taskset -c "$CLIENT_CPU" dnsperf -s 127.0.0.1 -p "$(port_of "$name")" -d "$dir/queries/$mix.txt" \
        -l "$LAT_DURATION" -c "$CLIENTS" -q "$OUTSTANDING" -T 1 -t 0.5 -Q "$qps" -v >"$f" 2>&1 || true
    python3 "$ROOT/bench/report.py" latency <"$f"
    rm -f "$f"
}

# ------------------------------------------------------------------ main
install_missing
for s in $SERVERS; do
    case $s in cluster-dns | knot | nsd | unbound | dnsmasq) ;; *) die "unknown server '$s'" ;; esac
done
[[ " $SERVERS " == *" cluster-dns "* ]] || die "BENCH_SERVERS must include cluster-dns"

if [[ -n ${BENCH_BIN:-} ]]; then
    BIN=$(realpath "$BENCH_BIN")
else
    log "cargo build --release (reuses target/; waits for the cargo lock if another build holds it)"
    cargo build --release --quiet --bin cluster-dns
    BIN=$ROOT/target/release/cluster-dns
fi
[[ -x $BIN ]] || die "no binary at $BIN"
# Which source the binary is: this tree's commit, or what BENCH_REV says for a BENCH_BIN.
if [[ -n ${BENCH_BIN:-} ]]; then
    REV="${BENCH_REV:-revision not given (set BENCH_REV)}, binary $BIN"
else
    REV="$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || echo ' with uncommitted changes')"
fi

BASE=$(pick_base)
RES=$TMP/results
mkdir -p "$RES"
: >"$RES/qps.tsv"
: >"$RES/lat.tsv"
: >"$RES/rss.tsv"
: >"$RES/scale.tsv"
: >"$RES/cpu.tsv"
: >"$RES/fail.tsv"
LAST_SIZE=${SIZES##* }
T0=$(date +%s)

for size in $SIZES; do
    dir=$TMP/zone-$size
    python3 bench/gen.py --services "$size" --out "$dir" --port "$BASE" >&2
    records=$(($(grep -vc '^\$' "$dir/cluster.local.zone") + $(grep -vc '^\$' "$dir/10.in-addr.arpa.zone")))
    echo -e "$size\t$records" >>"$RES/sizes.tsv"
    run=()
    # Start them all, then wait: the zone loads overlap (dnsmasq takes minutes at 10,000).
    for s in $SERVERS; do start "$s" "$dir"; done
    for s in $SERVERS; do
        if wait_ready "$s" "$dir"; then
            run+=("$s")
            log "$s ready on 127.0.0.1:$(port_of "$s") ($size services)"
        else
            echo -e "$size\t$s\tdoes not answer" >>"$RES/fail.tsv"
            stop_pid "${PID[$s]}"
            unset "PID[$s]"
        fi
    done
    scale=()
    if [[ $size == "$LAST_SIZE" ]]; then
        for s in cluster-dns-2w knot-2w; do
            [[ $s == knot-2w && " ${run[*]} " != *" knot "* ]] && continue
            [[ $s == cluster-dns-2w && " ${run[*]} " != *" cluster-dns "* ]] && continue
            start "$s" "$dir"
            if wait_ready "$s" "$dir"; then scale+=("$s"); else
                echo -e "$size\t$s\tdoes not answer" >>"$RES/fail.tsv"
                stop_pid "${PID[$s]}"
                unset "PID[$s]"
            fi
        done
    fi
    # Peak throughput. All servers stay up (idle ones cost nothing) and the repeats go round
    # the servers, so noise from other load on the machine is spread over all of them.
    for rep in $(seq 1 "$REPEATS"); do
        for mix in $MIXES; do
            for s in "${run[@]}"; do
                t0=$(cpu_ticks "${PID[$s]}")
                r=$(perf "$s" "$dir" "$mix")
                t1=$(cpu_ticks "${PID[$s]}")
                echo -e "$size\t$s\t$mix\t$rep\t$r" >>"$RES/qps.tsv"
                # CPU µs per query: ticks / TICK s over (QPS x DURATION) queries.
                echo -e "$size\t$s\t$mix\t$rep\t$(python3 -c 'import sys; t, hz, q, d = map(float, sys.argv[1:]); print(f"{t / hz * 1e6 / (q * d):.2f}" if q else 0)' \
                    "$((t1 - t0))" "$TICK" "${r%% *}" "$DURATION")" >>"$RES/cpu.tsv"
                log "$size $s $mix #$rep: $r"
            done
        done
        if [[ ${#scale[@]} -gt 0 ]]; then
            for s in "${scale[@]}"; do
                r=$(perf "$s" "$dir" "$SCALE_MIX")
                echo -e "$size\t$s\t$SCALE_MIX\t$rep\t$r" >>"$RES/scale.tsv"
                log "$size $s $SCALE_MIX #$rep: $r"
            done
        fi
    done
    # Latency at 80% of each server's median peak for that mix.
    for mix in $MIXES; do
        for s in "${run[@]}"; do
            peak=$(python3 bench/report.py median "$RES/qps.tsv" "$size" "$s" "$mix")
            target=$(python3 -c "import sys; print(max(100, int(float(sys.argv[1]) * 0.8)))" "$peak")
            r=$(latency "$s" "$dir" "$mix" "$target")
            echo -e "$size\t$s\t$mix\t$target\t$r" >>"$RES/lat.tsv"
            log "$size $s $mix latency at $target qps: $r"
        done
    done
    for s in "${run[@]}" "${scale[@]}"; do
        echo -e "$size\t$s\t$(peak_rss "${PID[$s]}")" >>"$RES/rss.tsv"
        stop_pid "${PID[$s]}"
        unset "PID[$s]"
    done
done
ELAPSED=$(($(date +%s) - T0))

# ------------------------------------------------------------------ report
{
    echo "command	$COMMAND"
    echo "date	$(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "nproc	$NCPU"
    echo "cpu	$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
    echo "kernel	$(uname -r)"
    echo "elapsed	$ELAPSED"
    echo "params	duration=$DURATION repeats=$REPEATS lat_duration=$LAT_DURATION clients=$CLIENTS outstanding=$OUTSTANDING server_cpu=$SERVER_CPU client_cpu=$CLIENT_CPU"
    echo "v:cluster-dns	$("$BIN" --version 2>&1 | head -1) ($REV)"
    command -v knotd >/dev/null && echo "v:knot	$(knotd --version 2>&1 | head -1)"
    command -v nsd >/dev/null && echo "v:nsd	$(nsd -v 2>&1 | head -1)"
    command -v unbound >/dev/null && echo "v:unbound	$(unbound -V 2>&1 | head -1)"
    command -v dnsmasq >/dev/null && echo "v:dnsmasq	$(dnsmasq --version 2>&1 | head -1 | sed 's/  Copyright.*//')"
    echo "v:dnsperf	$(dnsperf -h 2>&1 | sed -n 's/^Version //p' | head -1)"
} >"$RES/meta.tsv"

if [[ $SMOKE == 1 ]]; then
    OUT=${BENCH_OUT:-$TMP/BENCHMARKS.md}
else
    OUT=${BENCH_OUT:-$ROOT/BENCHMARKS.md}
fi
python3 bench/report.py write "$RES" "$OUT"
if [[ $SMOKE == 1 ]]; then
    cat "$OUT"
    python3 bench/report.py check "$RES" || die "smoke: a server failed to answer (see above)"
    log "smoke OK in ${ELAPSED}s"
else
    python3 bench/report.py check "$RES" || log "warning: some runs failed (see the table)"
    log "wrote the '## Authoritative serving' section of $OUT (${ELAPSED}s of load)"
fi
