#!/usr/bin/env bash
# Instructions an autopath walk costs the server (issue 14), counted, not timed: the release
# cluster-dns under `valgrind --tool=cachegrind`, serving the demo cluster (config/) with
# `autopath RESOLV-CONF` (every client's search path: `default.svc.cluster.local
# svc.cluster.local cluster.local`), `forward` to a local Unbound (authoritative for
# example.net) and a cache. Each case runs the server twice: a warm pass over its query file,
# then the warm pass and N more; the difference of the two runs' user-space instructions,
# divided by the extra questions, is what one question costs (start-up and warm-up cancel out).
#
#   bench/autopath-instructions.sh            # N = 5 passes (PASSES=N for another)
#   BIN=path/to/cluster-dns bench/autopath-instructions.sh   # another build
#
# Cases: a walked outside-name question (`outsideN.example.net.default.svc.cluster.local`,
# A and AAAA: the asked name, two search names and the bare name) under a bare `cache 30` and
# under kubeadm's `cache 30 { disable success/denial cluster.local }`; and, without autopath,
# the questions of the same names' whole client-side walk (8 per lookup).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PASSES=${PASSES:-5}
missing=()
command -v valgrind >/dev/null || missing+=(valgrind)
command -v unbound >/dev/null || missing+=(unbound)
command -v dnsperf >/dev/null || missing+=(dnsperf)
command -v dig >/dev/null || missing+=(bind9-dnsutils)
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
if [ -z "${BIN:-}" ]; then
    cargo build --release --bin cluster-dns
    BIN=$ROOT/target/release/cluster-dns
fi
DIR=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
UB=$(free_port)
. bench/unbound.sh
unbound_example_net "$DIR" "$UB"
unbound -d -c "$DIR/unbound.conf" >"$DIR/unbound.out" 2>&1 &
UBPID=$!
VPID=""
trap 'kill $UBPID $VPID 2>/dev/null || true; rm -rf "$DIR"' EXIT
cp config/demo-cluster.yaml "$DIR/"
printf 'nameserver 127.0.0.1\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n' >"$DIR/resolv.conf"
for i in $(seq 0 499); do
    for t in A AAAA; do echo "outside$i.example.net.default.svc.cluster.local $t"; done
done >"$DIR/walked.txt"
for i in $(seq 0 499); do
    for s in .default.svc.cluster.local .svc.cluster.local .cluster.local ""; do
        for t in A AAAA; do echo "outside$i.example.net$s $t"; done
    done
done >"$DIR/plain.txt"

# corefile NAME AUTOPATH CACHE: writes $DIR/NAME.conf on a free port, prints the port.
corefile() {
    local port; port=$(free_port)
    cat >"$DIR/$1.conf" <<EOF
.:$port {
    bind 127.0.0.1
    errors
$2
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        manifests $DIR/demo-cluster.yaml
        pods insecure
    }
    forward . 127.0.0.1:$UB
$3
}
EOF
    echo "$port"
}

# instructions CONF PORT FILE PASSES: user-space instructions of a server that answered a warm
# pass of FILE and then PASSES more.
instructions() {
    local conf=$1 port=$2 file=$3 n=$4 out="$DIR/cg.$RANDOM"
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        "$BIN" -conf "$conf" >"$out" 2>&1 &
    VPID=$!
    for _ in $(seq 1 120); do
        dig @127.0.0.1 -p "$port" +tries=1 +time=1 example.net >/dev/null 2>&1 && break
        sleep 0.5
    done
    dnsperf -s 127.0.0.1 -p "$port" -d "$file" -n 1 -c 1 -q 20 -Q 3000 >/dev/null 2>&1
    if [ "$n" -gt 0 ]; then
        dnsperf -s 127.0.0.1 -p "$port" -d "$file" -n "$n" -c 1 -q 20 -Q 3000 | grep -q "lost: *0 " \
            || echo "autopath-instructions: queries were lost" >&2
    fi
    kill -TERM "$VPID"; wait "$VPID" || true
    VPID=""
    grep -E "I +refs" "$out" | tr -d ',' | awk '{print $NF}'
}

# per_question NAME AUTOPATH CACHE FILE
per_question() {
    local port; port=$(corefile "$1" "$2" "$3")
    local lines; lines=$(wc -l <"$4")
    local a b
    a=$(instructions "$DIR/$1.conf" "$port" "$4" 0)
    b=$(instructions "$DIR/$1.conf" "$port" "$4" "$PASSES")
    python3 -c "print(f'{($b - $a) / ($lines * $PASSES):,.0f}')"
}

KUBEADM_CACHE='    cache 30 {
        disable success cluster.local
        disable denial cluster.local
    }'
echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); $("$BIN" -version 2>/dev/null | head -1)"
echo "user-space instructions a question (a warm pass over the case's file, then $PASSES more):"
echo "  walked outside name, cache 30:             $(per_question walk "    autopath $DIR/resolv.conf" "    cache 30" "$DIR/walked.txt")"
echo "  walked outside name, kubeadm's cache:      $(per_question walk-kubeadm "    autopath $DIR/resolv.conf" "$KUBEADM_CACHE" "$DIR/walked.txt")"
echo "  the plain walk's questions, no autopath:   $(per_question plain "" "    cache 30" "$DIR/plain.txt")"
