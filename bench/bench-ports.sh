#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-ports.sh: a TCP server reached directly on the host's
# loopback, through a published port of a persistent hutch sandbox
# (`hutch create -p`), and through slirp4netns's port forwarding (when
# installed): latency per request on one connection and per new
# connection (p50/p90), and throughput, with bench/port-echo.c as the
# server and the client. See bench/README.md.
# Usage: bench/bench-ports.sh [REQUESTS] [MIB]    # default 5000 requests, 2048 MiB
set -euo pipefail

cd "$(dirname "$0")/.."

requests=${1:-5000}
mib=${2:-2048}
py=/usr/bin/python3

if [ ! -f build/build.ninja ]; then
        meson setup build
fi
ninja -C build >/dev/null
hutch=$PWD/build/src/cli/hutch

work=$(mktemp -d)
export HUTCH_HOME=$work/home HUTCH_STATE_DIR=$work/state
mkdir -m 0700 "$HUTCH_HOME" "$HUTCH_STATE_DIR"
name=bench-ports
pids=()

cleanup() {
        for p in "${pids[@]}"; do
                kill "$p" 2>/dev/null || true
                wait "$p" 2>/dev/null || true
        done
        "$hutch" rm --force "$name" >/dev/null 2>&1 || true
        rm -rf "$work"
}
trap cleanup EXIT

# The server and the client (bench/port-echo.c), the same everywhere.
echo_bin=$PWD/build/bench/port-echo

free_port() {
        "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

row() { # LABEL PORT
        printf '%-22s %s\n' "$1" "$("$echo_bin" client "$2" "$requests" "$mib")"
}

echo "$(uname -r), $(nproc) cpus, $requests requests, $mib MiB"
printf '%-22s %9s %9s %9s %9s %8s\n' path "p50 us" "p90 us" "new p50" "new p90" "GB/s"

# direct: the server on the host's loopback.
port=$(free_port)
"$echo_bin" serve 127.0.0.1 "$port" &
pids+=($!)
row direct "$port"

# hutch: the server on the sandbox's loopback, through a published port.
port=$(free_port)
"$hutch" create "$name" -p "127.0.0.1:$port:8000" -v "$PWD/build/bench:/bench:ro" \
        --pids 4096 >/dev/null 2>&1
"$hutch" exec -d "$name" -- /bench/port-echo serve 127.0.0.1 8000 >/dev/null
row "hutch -p" "$port"
"$hutch" stop "$name" >/dev/null

# slirp4netns: a network namespace of our own with its port forwarding.
if command -v slirp4netns >/dev/null && [ "$(id -u)" = 0 ]; then
        port=$(free_port)
        unshare -n "$echo_bin" serve 0.0.0.0 8000 &
        ns_pid=$!
        pids+=("$ns_pid")
        slirp4netns --configure --mtu=65520 --disable-host-loopback \
                --api-socket "$work/slirp.sock" "$ns_pid" tap0 >"$work/slirp.log" 2>&1 &
        pids+=($!)
        for _ in $(seq 100); do
                [ -S "$work/slirp.sock" ] && break
                sleep 0.05
        done
        "$py" - "$work/slirp.sock" "$port" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(json.dumps({"execute": "add_hostfwd", "arguments": {
    "proto": "tcp", "host_addr": "127.0.0.1", "host_port": int(sys.argv[2]),
    "guest_port": 8000}}).encode())
ans = json.loads(s.recv(4096))
assert "error" not in ans, ans
PY
        row slirp4netns "$port"
else
        echo "slirp4netns: not installed (or not root), skipped"
fi
