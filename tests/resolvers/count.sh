#!/usr/bin/env bash
# Counts the queries real stub resolvers send for one lookup, with and without autopath.
# Run by tests/integration/plugins/autopath.rs inside a private network and mount namespace
# (`unshare --net --mount`): its own loopback, a resolv.conf as kubelet writes it bind-mounted
# over /etc/resolv.conf, and cluster-dns on 127.0.0.1:53 (stub resolvers only speak port 53).
# The client pod is 127.0.0.1 in namespace `default`.
#
#   count.sh BIN DIR      DIR holds Corefile.with, Corefile.without, cluster.yaml, resolv.conf
#                         and the clients gai-glibc and gai-musl.
# Prints one line per lookup: MODE CLIENT NAME QUERIES STATUS
set -euo pipefail
bin=$1
dir=$2
ip link set lo up
mount --bind "$dir/resolv.conf" /etc/resolv.conf
for mode in with without; do
    log="$dir/$mode.log"
    timeout 60 "$bin" -conf "$dir/Corefile.$mode" >"$log" 2>"$dir/$mode.err" &
    pid=$!
    # Up when a query is answered (the probe's own log lines are left out of the counts below).
    for _ in $(seq 1 100); do
        if "$dir/gai-glibc" ready.default.svc.cluster.local >/dev/null 2>&1; then break; fi
        sleep 0.1
    done
    for client in glibc musl; do
        for name in api.example.com web db.other nothing.example.com; do
            # Each (client, name) asks a name of its own, so the log lines of one lookup are
            # told apart from every other's.
            unique="${name/./-$client.}"
            [ "$name" = web ] && unique="web-$client"
            if out=$(timeout 10 "$dir/gai-$client" "$unique" 2>&1); then status=ok; else status="failed:${out//[[:space:]]/_}"; fi
            sleep 0.3
            n=$(grep -c " IN ${unique}\." "$log" || true)
            echo "$mode $client $name $n $status"
        done
    done
    kill "$pid"
    wait "$pid" || true
done
