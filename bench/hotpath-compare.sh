#!/usr/bin/env bash
# Instructions per answer of benches/hot_path.rs's main cases, at an older revision beside the
# working tree, counted, not timed: each case under `valgrind --tool=cachegrind` at --iters 2000
# and 4000; the difference over 2000 is one answer. Used for issue 43's "within 2%" goal.
#
#   bench/hotpath-compare.sh OLD_REV      # e.g. c98b706
#
# The old revision is checked out in a git worktree under target/ and built there with its own
# target directory (release profile: minutes each, on two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
old_rev=${1:?usage: bench/hotpath-compare.sh OLD_REV}
command -v valgrind >/dev/null || {
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind
}
tree=target/hotpath-compare/$old_rev
[ -d "$tree" ] || git worktree add --detach "$tree" "$old_rev" >/dev/null
bench_bin() { sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1; }
old_target=$PWD/target/hotpath-compare/target-$old_rev
# (With an absolute CARGO_TARGET_DIR cargo prints the executable's absolute path.)
old=$(cd "$tree" && CARGO_TARGET_DIR="$old_target" cargo bench --bench hot_path --no-run 2>&1 | bench_bin)
new=$(cargo bench --bench hot_path --no-run 2>&1 | bench_bin)
new=$(realpath "$new")
echo "old ($old_rev): $old"
echo "new ($(git rev-parse --short HEAD)): $new"
count() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$1" --iters "$3" "$2\$" 2>&1 |
        grep -E "I +refs" | tr -d ',' | awk '{print $NF}'
}
echo "| answer | $old_rev | $(git rev-parse --short HEAD) | ratio |"
for c in "answer A clusterip" "answer A headless" "answer SRV" "answer PTR" "answer NXDOMAIN search miss" \
    "memo hit A clusterip" "policy answer cluster A with dnspolicy" "policy memo hit cluster A with dnspolicy"; do
    o=$(( ($(count "$old" "$c" 4000) - $(count "$old" "$c" 2000)) / 2000 ))
    n=$(( ($(count "$new" "$c" 4000) - $(count "$new" "$c" 2000)) / 2000 ))
    echo "| $c | $o | $n | $(awk -v o="$o" -v n="$n" 'BEGIN { printf "%.3f", n / o }') |"
done
