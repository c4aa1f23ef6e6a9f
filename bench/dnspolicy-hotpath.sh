#!/usr/bin/env bash
# Instructions per answer of benches/hot_path.rs's policy cases (issue 42: 10,000 DNSPolicies,
# with and without `dnspolicy`, full path and memo hit), counted, not timed: each case under
# `valgrind --tool=cachegrind` at --iters 2000 and 4000; the difference over 2000 is one answer.
#
#   bench/dnspolicy-hotpath.sh        # builds the bench binary first (release profile)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || {
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind
}
BIN=$(cargo bench --bench hot_path --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1)
echo "bench binary: $BIN"
count() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$BIN" --iters "$2" "$1\$" 2>&1 |
        grep -E "I +refs" | tr -d ',' | awk '{print $NF}'
}
for path in "answer" "memo hit"; do
    for what in "cluster A" "outside A"; do
        for label in "with dnspolicy" "without dnspolicy"; do
            c="policy $path $what $label"
            a=$(count "$c" 2000)
            b=$(count "$c" 4000)
            echo "$c: $(((b - a) / 2000))"
        done
    done
done
