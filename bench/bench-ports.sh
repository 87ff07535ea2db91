#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench/bench-ports.sh: a TCP server reached directly on the host's
# loopback, through a published port of a persistent hutch sandbox
# (`hutch create -p`), and through slirp4netns's port forwarding (when
# installed): latency per request on one connection and per new
# connection (p50/p90), and throughput. See bench/README.md.
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

# The server, the same everywhere: "e" echoes one 64-byte request per
# line-less message (a request/response pair); "s" swallows everything
# and answers the byte count at EOF.
server='
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(128)
def serve(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    kind = c.recv(1)
    if kind == b"e":
        while True:
            d = c.recv(64)
            if not d:
                break
            c.sendall(d)
    elif kind == b"s":
        buf = bytearray(1 << 20)
        n = 0
        while True:
            k = c.recv_into(buf)
            if not k:
                break
            n += k
        c.sendall(str(n).encode())
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'

client='
import socket, statistics, sys, time
port, requests, mib = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def conn():
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c
for _ in range(200):
    try:
        conn().close()
        break
    except OSError:
        time.sleep(0.05)
c = conn(); c.sendall(b"e")
msg = b"x" * 64
lat = []
for i in range(requests):
    t = time.perf_counter_ns()
    c.sendall(msg)
    got = 0
    while got < 64:
        got += len(c.recv(64 - got))
    lat.append(time.perf_counter_ns() - t)
c.close()
new = []
for i in range(max(requests // 10, 100)):
    t = time.perf_counter_ns()
    c = conn(); c.sendall(b"e" + msg)
    got = 0
    while got < 64:
        got += len(c.recv(64 - got))
    c.close()
    new.append(time.perf_counter_ns() - t)
c = conn(); c.sendall(b"s")
chunk = b"\0" * (1 << 20)
t = time.perf_counter()
for _ in range(mib):
    c.sendall(chunk)
c.shutdown(socket.SHUT_WR)
n = int(c.recv(64))
dt = time.perf_counter() - t
c.close()
assert n == mib << 20, n
q = lambda l, p: sorted(l)[int(len(l) * p)] / 1000
print(f"{q(lat, .5):9.1f} {q(lat, .9):9.1f} {q(new, .5):9.1f} {q(new, .9):9.1f} {n / dt / 1e9:8.2f}")
'

free_port() {
        "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

row() { # LABEL PORT
        printf '%-22s %s\n' "$1" "$("$py" -c "$client" "$2" "$requests" "$mib")"
}

echo "$(uname -r), $(nproc) cpus, $requests requests, $mib MiB"
printf '%-22s %9s %9s %9s %9s %8s\n' path "p50 us" "p90 us" "new p50" "new p90" "GB/s"

# direct: the server on the host's loopback.
port=$(free_port)
"$py" -c "$server" 127.0.0.1 "$port" &
pids+=($!)
row direct "$port"

# hutch: the server on the sandbox's loopback, through a published port.
port=$(free_port)
"$hutch" create "$name" -p "127.0.0.1:$port:8000" >/dev/null 2>&1
"$hutch" exec -d "$name" -- "$py" -c "$server" 127.0.0.1 8000 >/dev/null
row "hutch -p" "$port"
"$hutch" stop "$name" >/dev/null

# slirp4netns: a network namespace of our own with its port forwarding.
if command -v slirp4netns >/dev/null && [ "$(id -u)" = 0 ]; then
        port=$(free_port)
        unshare -n "$py" -c "$server" 0.0.0.0 8000 &
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
