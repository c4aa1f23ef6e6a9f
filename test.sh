#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests drive for real when it is missing:
# `dig` (Debian's bind9-dnsutils).
set -euo pipefail
cd "$(dirname "$0")"

need_apt=()
command -v dig >/dev/null 2>&1 || need_apt+=(bind9-dnsutils)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "test.sh: installing ${need_apt[*]}" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

cargo test "$@"
