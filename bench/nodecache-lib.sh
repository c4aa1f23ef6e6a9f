# Shared by bench/nodecache-upgrade.sh and bench/nodecache-rss.sh (sourced inside a private
# network and mount namespace): a cluster DNS upstream on 127.0.0.2:53 (cluster-dns with a hosts
# file: NAMES Services under svc.cluster.local and NAMES outside names), Kubernetes'
# nodelocaldns.yaml Corefile as the base, and functions to start node-cache mode and wait.
NAMES=${NAMES:-2000}
W=$(mktemp -d /tmp/nodecache-bench.XXXXXX)
ip link set lo up
ip addr add 127.0.0.2/8 dev lo
python3 - "$W" "$NAMES" <<'PY'
import sys, random
w, n = sys.argv[1], int(sys.argv[2])
with open(f"{w}/hosts", "w") as f:
    for i in range(n):
        f.write(f"10.{i // 250}.{i % 250}.1 svc{i}.ns{i % 50}.svc.cluster.local\n")
        f.write(f"192.0.{i // 250}.{i % 250 + 1} www{i}.example.org\n")
random.seed(33)
with open(f"{w}/queries", "w") as f:
    for _ in range(50000):
        r, i = random.random(), random.randrange(n)
        if r < 0.5:
            f.write(f"svc{i}.ns{i % 50}.svc.cluster.local A\n")
        elif r < 0.6:
            f.write(f"svc{i}.ns{i % 50}.svc.cluster.local AAAA\n")
        elif r < 0.85:
            f.write(f"www{i}.example.org A\n")
        else:
            f.write(f"missing{i}.ns{i % 50}.svc.cluster.local A\n")
PY
cat >"$W/Upstream" <<UP
.:53 {
    bind 127.0.0.2
    hosts $W/hosts
}
UP
cat >"$W/Corefile.base" <<'BASE'
cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    health __PILLAR__LOCAL__DNS__:8080
    }
.:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__UPSTREAM__SERVERS__
    prometheus :9253
    }
BASE
mkdir -p "$W/cm"
echo '["127.0.0.2"]' >"$W/cm/upstreamNameservers"
"$BIN" -conf "$W/Upstream" >"$W/upstream.log" 2>&1 &
UPSTREAM=$!
trap 'kill $UPSTREAM $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
until dig @127.0.0.2 +short +time=1 +tries=1 www1.example.org | grep -q 192; do sleep 0.1; done

# start_nc LOG: node-cache mode in the background, its PID in $NC.
start_nc() {
    KUBE_DNS_UPSTREAM_SERVICE_HOST=127.0.0.2 "$BIN" -localip 169.254.20.10 -conf "$W/Corefile" \
        -basecorefile "$W/Corefile.base" -upstreamsvc kube-dns-upstream -kubednscm "$W/cm" \
        -instance-dir "$W/instances" -syncinterval 5 >"$W/$1" 2>&1 &
    NC=$!
}
# wait_log LOG PATTERN
wait_log() { until grep -q "$2" "$W/$1" 2>/dev/null; do sleep 0.1; done; }
