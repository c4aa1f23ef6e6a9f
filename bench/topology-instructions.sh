#!/usr/bin/env bash
# Instructions a topology-aware headless answer costs the server (issue 35), counted, not
# timed: the release cluster-dns under `valgrind --tool=cachegrind`, serving a cluster from
# manifests (3 zones of 2 nodes, 1,000 pods; dnsperf's 127.0.0.1 is a pod on a zone-a node)
# with `kubernetes ... { topology }`. Each case runs the server twice: a warm pass over its
# query file, then the warm pass and N more; the difference of the two runs' user-space
# instructions, divided by the extra questions, is what one question costs.
#
#   bench/topology-instructions.sh            # N = 5 passes (PASSES=N for another)
#   BIN=path/to/cluster-dns bench/topology-instructions.sh
#
# Cases, in one run: `db` (headless, 9 endpoints, PreferSameZone: the client-aware path,
# answered with zone a's 4 of 9) beside `plain` (headless, 9 endpoints, no trafficDistribution:
# the plain headless answer), over UDP (where both come from the answer memo: the plain one by
# its request bytes, the client-aware one by its request bytes and the client's place class)
# and over TCP (no memo: the two answer paths alone); and `db` over UDP from 127.0.0.5, not a
# pod: every endpoint in the answer, from the memo under the "not a pod" class.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PASSES=${PASSES:-5}
missing=()
command -v valgrind >/dev/null || missing+=(valgrind)
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
VPID=""
trap 'kill $VPID 2>/dev/null || true; rm -rf "$DIR"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

python3 - "$DIR/cluster.yaml" <<'PY'
import json, sys
docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}]
nodes = [(f"n-{z}{i}", z) for z in "abc" for i in (1, 2)]
for n, z in nodes:
    docs.append({"apiVersion": "v1", "kind": "Node",
                 "metadata": {"name": n, "labels": {"topology.kubernetes.io/zone": z}}})
docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": "shop"},
             "spec": {"nodeName": "n-a1"}, "status": {"phase": "Running", "podIP": "127.0.0.1"}})
for i in range(1000):
    n, _ = nodes[i % 6]
    docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"app-{i}", "namespace": "shop"},
                 "spec": {"nodeName": n}, "status": {"phase": "Running", "podIP": f"10.244.{i // 250}.{i % 250 + 1}"}})
for svc, traffic in (("db", "PreferSameZone"), ("plain", None)):
    spec = {"clusterIP": "None", "ports": [{"name": "sql", "port": 5432}]}
    if traffic:
        spec["trafficDistribution"] = traffic
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc, "namespace": "shop"}, "spec": spec})
    eps = [{"addresses": [f"10.{1 if svc == 'db' else 2}.{k // 3}.{k % 3 + 1}"], "nodeName": nodes[k % 6][0],
            "zone": nodes[k % 6][1], "conditions": {"ready": True}} for k in range(9)]
    docs.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                 "metadata": {"name": f"{svc}-1", "namespace": "shop", "labels": {"kubernetes.io/service-name": svc}},
                 "addressType": "IPv4", "endpoints": eps, "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}]})
with open(sys.argv[1], "w") as f:
    for d in docs:
        f.write("---\n" + json.dumps(d) + "\n")
PY
for s in db plain; do
    for _ in $(seq 1 1000); do echo "$s.shop.svc.cluster.local A"; done >"$DIR/$s.txt"
done
PORT=$(free_port)
cat >"$DIR/Corefile" <<EOF
.:$PORT {
    bind 127.0.0.1
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        manifests $DIR/cluster.yaml
        topology
    }
}
EOF

# instructions FILE MODE PASSES FROM: user-space instructions of a server that answered a warm
# pass of FILE over MODE (udp, tcp) from address FROM and then PASSES more.
instructions() {
    local file=$1 mode=$2 n=$3 from=$4 out="$DIR/cg.$RANDOM"
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        "$BIN" -conf "$DIR/Corefile" >"$out" 2>&1 &
    VPID=$!
    for _ in $(seq 1 120); do
        dig @127.0.0.1 -p "$PORT" +tries=1 +time=1 plain.shop.svc.cluster.local >/dev/null 2>&1 && break
        sleep 0.5
    done
    dnsperf -m "$mode" -a "$from" -s 127.0.0.1 -p "$PORT" -d "$file" -n 1 -c 1 -q 20 -Q 3000 >/dev/null 2>&1
    if [ "$n" -gt 0 ]; then
        dnsperf -m "$mode" -a "$from" -s 127.0.0.1 -p "$PORT" -d "$file" -n "$n" -c 1 -q 20 -Q 3000 | grep -q "lost: *0 " \
            || echo "topology-instructions: queries were lost" >&2
    fi
    kill -TERM "$VPID"; wait "$VPID" || true
    VPID=""
    grep -E "I +refs" "$out" | tr -d ',' | awk '{print $NF}'
}

# per_question FILE MODE [FROM]
per_question() {
    local lines; lines=$(wc -l <"$1")
    local a b from=${3:-127.0.0.1}
    a=$(instructions "$1" "$2" 0 "$from")
    b=$(instructions "$1" "$2" "$PASSES" "$from")
    python3 -c "print(round(($b - $a) / ($lines * $PASSES)))"
}

# The answers, checked once (the client-aware one holds zone a's four addresses only).
"$BIN" -conf "$DIR/Corefile" >"$DIR/check.out" 2>&1 &
VPID=$!
for _ in $(seq 1 100); do dig @127.0.0.1 -p "$PORT" +tries=1 +time=1 plain.shop.svc.cluster.local >/dev/null 2>&1 && break; sleep 0.2; done
echo "db answer:    $(dig @127.0.0.1 -p "$PORT" +short db.shop.svc.cluster.local | sort | tr '\n' ' ')"
echo "plain answer: $(dig @127.0.0.1 -p "$PORT" +short plain.shop.svc.cluster.local | sort | tr '\n' ' ')"
kill -TERM "$VPID"; wait "$VPID" || true; VPID=""

echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); $("$BIN" -version 2>/dev/null | head -1)"
echo "user-space instructions a question (a warm pass over the case's file, then $PASSES more):"
udp_db=$(per_question "$DIR/db.txt" udp); udp_plain=$(per_question "$DIR/plain.txt" udp)
udp_far=$(per_question "$DIR/db.txt" udp 127.0.0.5)
tcp_db=$(per_question "$DIR/db.txt" tcp); tcp_plain=$(per_question "$DIR/plain.txt" tcp)
printf '  UDP  client-aware (db, zone a):   %10s\n' "$udp_db"
printf '  UDP  plain headless (memo):       %10s   ratio %s\n' "$udp_plain" "$(python3 -c "print(f'{$udp_db / $udp_plain:.2f}x')")"
printf '  UDP  db from a non-pod (all 9):   %10s   ratio %s\n' "$udp_far" "$(python3 -c "print(f'{$udp_db / $udp_far:.2f}x')")"
printf '  TCP  client-aware (db, zone a):   %10s\n' "$tcp_db"
printf '  TCP  plain headless (no memo):    %10s   ratio %s\n' "$tcp_plain" "$(python3 -c "print(f'{$tcp_db / $tcp_plain:.2f}x')")"
