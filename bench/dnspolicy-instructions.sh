#!/usr/bin/env bash
# What tenant DNS policy (`dnspolicy`, issue 42) costs the server, counted, not timed: the
# release cluster-dns under `valgrind --tool=cachegrind` serving a cluster from manifests with
# 10,000 DNSPolicy objects (2,000 namespaces, 5 policies each; dnsperf's 127.0.0.1 is a pod
# of namespace n0, which 5 policies cover), the same block with and without the `dnspolicy`
# line. Each case runs the server twice: a warm pass over its query file, then the warm pass
# and N more; the difference of the two runs' user-space instructions, divided by the extra
# questions, is what one question costs. Then the resident memory of the server with the
# 10,000 policies and without them (the same namespaces, pods and Services).
#
#   bench/dnspolicy-instructions.sh            # N = 5 passes (PASSES=N for another)
#   BIN=path/to/cluster-dns bench/dnspolicy-instructions.sh
#
# Cases: a visible Service (UDP: from the answer memo, by request bytes, or with dnspolicy by
# request bytes and the view's class; TCP: the full path), and an outside name answered by
# `template` (UDP: the memo; TCP: the full path, where dnspolicy checks the allowlist).
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

# cluster.yaml: 2,000 namespaces, a Service and a pod in each, and with POLICIES=1 five
# policies in each (10,000).
make_cluster() {
python3 - "$1" "$2" <<'PY'
import json, sys
out, policies = sys.argv[1], sys.argv[2] == "1"
docs = []
for i in range(2000):
    ns = f"n{i}"
    docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"group": f"g{i % 10}"}}})
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
                 "spec": {"clusterIP": f"10.96.{i // 250}.{i % 250 + 1}", "ports": [{"name": "http", "port": 80}]}})
    ip = "127.0.0.1" if i == 0 else f"10.244.{i // 250}.{i % 250 + 1}"
    docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns, "labels": {"app": "web"}},
                 "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Running", "podIP": ip}})
    if policies:
        for k in range(5):
            spec = {"podSelector": {"matchLabels": {"app": "web"}} if k % 2 else {},
                    "visibleNamespaces": {"names": [f"n{(i + j) % 2000}" for j in range(1, 4)],
                                          "selector": {"matchLabels": {"group": f"g{k}"}}},
                    "external": {"allow": ["*.example.org", f"*.team{k}.example.com"]}}
            docs.append({"apiVersion": "dns.cluster-dns.io/v1alpha1", "kind": "DNSPolicy",
                         "metadata": {"name": f"p{k}", "namespace": ns}, "spec": spec})
with open(out, "w") as f:
    for d in docs:
        f.write("---\n" + json.dumps(d) + "\n")
PY
}
make_cluster "$DIR/cluster.yaml" 1
make_cluster "$DIR/plain.yaml" 0
for _ in $(seq 1 1000); do echo "web.n1.svc.cluster.local A"; done >"$DIR/cluster.txt"
for _ in $(seq 1 1000); do echo "www.example.org A"; done >"$DIR/outside.txt"
PORT=$(free_port)
# corefile POLICY MANIFESTS
corefile() {
    cat <<EOF
.:$PORT {
    bind 127.0.0.1
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        manifests $2
        pods verified
    }
    $1
    cache 30
    template IN A example.org {
        answer "{{ .Name }} 60 IN A 192.0.2.1"
    }
}
EOF
}

# instructions COREFILE FILE MODE PASSES: user-space instructions of a server that answered a
# warm pass of FILE over MODE (udp, tcp) and then PASSES more.
instructions() {
    local conf=$1 file=$2 mode=$3 n=$4 out="$DIR/cg.$RANDOM"
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        "$BIN" -conf "$conf" >"$out" 2>&1 &
    VPID=$!
    for _ in $(seq 1 240); do
        dig @127.0.0.1 -p "$PORT" +tries=1 +time=1 web.n0.svc.cluster.local >/dev/null 2>&1 && break
        sleep 0.5
    done
    dnsperf -m "$mode" -s 127.0.0.1 -p "$PORT" -d "$file" -n 1 -c 1 -q 20 -Q 3000 >/dev/null 2>&1
    if [ "$n" -gt 0 ]; then
        dnsperf -m "$mode" -s 127.0.0.1 -p "$PORT" -d "$file" -n "$n" -c 1 -q 20 -Q 3000 | grep -q "lost: *0 " \
            || echo "dnspolicy-instructions: queries were lost" >&2
    fi
    kill -TERM "$VPID"; wait "$VPID" || true
    VPID=""
    grep -E "I +refs" "$out" | tr -d ',' | awk '{print $NF}'
}

# per_question COREFILE FILE MODE
per_question() {
    local lines; lines=$(wc -l <"$2")
    local a b
    a=$(instructions "$1" "$2" "$3" 0)
    b=$(instructions "$1" "$2" "$3" "$PASSES")
    python3 -c "print(round(($b - $a) / ($lines * $PASSES)))"
}

corefile "dnspolicy {
        unmapped allow
    }" "$DIR/cluster.yaml" >"$DIR/Corefile.policy"
corefile "" "$DIR/cluster.yaml" >"$DIR/Corefile.none"
corefile "" "$DIR/plain.yaml" >"$DIR/Corefile.nopolicies"

# The answers, checked once: n1 is visible to n0's pod (listed), n507 is not (group g7); example.org is allowed.
"$BIN" -conf "$DIR/Corefile.policy" >"$DIR/check.out" 2>&1 &
VPID=$!
for _ in $(seq 1 100); do dig @127.0.0.1 -p "$PORT" +tries=1 +time=1 web.n0.svc.cluster.local >/dev/null 2>&1 && break; sleep 0.2; done
echo "web.n1 (visible):   $(dig @127.0.0.1 -p "$PORT" +short web.n1.svc.cluster.local | tr '\n' ' ')"
echo "web.n507 (hidden):  $(dig @127.0.0.1 -p "$PORT" web.n507.svc.cluster.local | grep -o 'status: [A-Z]*')"
echo "www.example.org:    $(dig @127.0.0.1 -p "$PORT" +short www.example.org | tr '\n' ' ')"
echo "x.example.net:      $(dig @127.0.0.1 -p "$PORT" x.example.net | grep -o 'status: [A-Z]*')"
kill -TERM "$VPID"; wait "$VPID" || true; VPID=""

# rss COREFILE: the server's resident memory (kB) once it answers.
rss() {
    "$BIN" -conf "$1" >/dev/null 2>&1 &
    VPID=$!
    for _ in $(seq 1 100); do dig @127.0.0.1 -p "$PORT" +tries=1 +time=1 web.n0.svc.cluster.local >/dev/null 2>&1 && break; sleep 0.2; done
    # One view computed, as a client would.
    dig @127.0.0.1 -p "$PORT" +tries=1 +time=1 web.n1.svc.cluster.local >/dev/null 2>&1 || true
    sleep 1
    awk '/VmRSS/ {print $2}' "/proc/$VPID/status"
    kill -TERM "$VPID"; wait "$VPID" || true; VPID=""
}

echo "machine: $(nproc) cores, $(uname -sr); $(date -u +%Y-%m-%dT%H:%MZ); $("$BIN" -version 2>/dev/null | head -1)"
echo "user-space instructions a question (a warm pass over the case's file, then $PASSES more):"
for mode in udp tcp; do
    for f in cluster outside; do
        with=$(per_question "$DIR/Corefile.policy" "$DIR/$f.txt" "$mode")
        without=$(per_question "$DIR/Corefile.none" "$DIR/$f.txt" "$mode")
        printf '  %s %-8s with dnspolicy %8s   without %8s   ratio %s\n' "$mode" "$f" "$with" "$without" \
            "$(python3 -c "print(f'{$with / $without:.3f}x')")"
    done
done
with=$(rss "$DIR/Corefile.policy"); without=$(rss "$DIR/Corefile.nopolicies")
echo "resident memory: with 10,000 policies ${with} kB, without them ${without} kB: $(python3 -c "print(round(($with - $without) * 1024 / 10000))") bytes a policy"
