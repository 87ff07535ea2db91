#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# hutch-proxy against no proxy and tinyproxy (Debian), on loopback only:
#   - latency: ROUNDS sequential small GETs over one keep-alive connection
#     per path (direct, hutch-proxy, tinyproxy), interleaved request by
#     request, reported as p50/p99 and as the latency added over direct;
#   - throughput: a SIZE CONNECT download per proxy (and a direct one),
#     interleaved, best of TRIES.
# Prints one table. Usage: bench/bench-proxy.sh [BUILD_DIR]
# Environment: ROUNDS (1000), SIZE_MIB (1024), TRIES (2).
# Needs: python3, tinyproxy (skipped with a note when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-${HUTCH_BUILD_DIR:-build}}
PROXY_BIN=$BUILD/src/proxy/hutch-proxy
if [[ ! -x $PROXY_BIN ]]; then
        echo "bench-proxy: $PROXY_BIN is not built (ninja -C $BUILD)" >&2
        exit 1
fi
export PROXY_BIN ROUNDS=${ROUNDS:-1000} SIZE_MIB=${SIZE_MIB:-1024} TRIES=${TRIES:-2}
TINYPROXY=$(command -v tinyproxy || true)
export TINYPROXY

exec timeout 300 /usr/bin/python3 - <<'EOF'
import atexit, os, signal, socket, subprocess, sys, tempfile, threading, time

PROXY_BIN = os.environ["PROXY_BIN"]
ROUNDS = int(os.environ["ROUNDS"])
SIZE = int(os.environ["SIZE_MIB"]) << 20
TRIES = int(os.environ["TRIES"])
TINYPROXY = os.environ.get("TINYPROXY")
tmp = tempfile.TemporaryDirectory(prefix="bench-proxy-")
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
RESPONSE_CLOSE = RESPONSE.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")


def listener():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    return s


def serve(sock, handler):
    def loop():
        while True:
            try:
                c, _ = sock.accept()
            except OSError:
                return
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=handler, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def http_handler(c):
    """Keep-alive server: one fixed 2-byte response per request head."""
    buf = b""
    with c:
        while True:
            while b"\r\n\r\n" not in buf:
                data = c.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            if b"connection: close" in head.lower():
                c.sendall(RESPONSE_CLOSE)
                return
            c.sendall(RESPONSE)


# The bulk source: a tmpfs file sent with sendfile(2), so the sender costs
# (almost) nothing and the path under test is the bottleneck.
chunk_path = os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else tmp.name, f"bench-{os.getpid()}")
CHUNK = 64 << 20


def remove_chunk():
    try:
        os.unlink(chunk_path)
    except FileNotFoundError:
        pass


# 64 MiB of tmpfs: gone on every way out (a failed check raises
# SystemExit; SIGTERM is made one), not only at the end.
atexit.register(remove_chunk)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
with open(chunk_path, "wb") as f:
    f.write(b"\0" * CHUNK)


def bulk_handler(c):
    with c, open(chunk_path, "rb") as f:
        left = SIZE
        while left > 0:
            off = 0
            while off < min(CHUNK, left):
                n = os.sendfile(c.fileno(), f.fileno(), off, min(CHUNK, left) - off)
                if n == 0:
                    return
                off += n
            left -= off


http_srv, bulk_srv = listener(), listener()
serve(http_srv, http_handler)
serve(bulk_srv, bulk_handler)
HTTP_PORT, BULK_PORT = http_srv.getsockname()[1], bulk_srv.getsockname()[1]

# hutch-proxy, the way the supervisor runs it (audit log on).
hl = listener()
rfd, wfd = os.pipe()
hutch = subprocess.Popen(
    [PROXY_BIN, "--listen-fd", str(hl.fileno()), "--ready-fd", str(wfd),
     "--allow", f"bench.test:{HTTP_PORT}", "--allow", f"bench.test:{BULK_PORT}",
     "--resolve", "bench.test:127.0.0.1", "--allow-private", "127.0.0.0/8",
     "--audit-log", os.path.join(tmp.name, "audit.jsonl"), "--sandbox-id", "bench"],
    pass_fds=[hl.fileno(), wfd])
os.close(wfd)
assert os.read(rfd, 16) == b"ready\n", "hutch-proxy did not start"
paths = {"direct": None, "hutch-proxy": hl.getsockname()[1]}
# hutch-proxy maps a name with --resolve; tinyproxy resolves names itself.
target_host = {"direct": "bench.test", "hutch-proxy": "bench.test", "tinyproxy": "127.0.0.1"}

tiny = None
if TINYPROXY:
    tl = listener()
    tport = tl.getsockname()[1]
    tl.close()
    conf = os.path.join(tmp.name, "tinyproxy.conf")
    with open(conf, "w") as f:
        f.write(f"Port {tport}\nListen 127.0.0.1\nTimeout 600\nMaxClients 64\n"
                f"Allow 127.0.0.1\nDisableViaHeader Yes\nLogLevel Critical\n"
                f"LogFile \"{tmp.name}/tinyproxy.log\"\nPidFile \"{tmp.name}/tinyproxy.pid\"\n")
    tiny = subprocess.Popen([TINYPROXY, "-d", "-c", conf], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", tport), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    paths["tinyproxy"] = tport


def open_http(proxy_port):
    s = socket.create_connection(("127.0.0.1", proxy_port or HTTP_PORT))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def request_bytes(proxy_port, host):
    if proxy_port:
        return f"GET http://{host}:{HTTP_PORT}/x HTTP/1.1\r\nHost: {host}:{HTTP_PORT}\r\n\r\n".encode()
    return f"GET /x HTTP/1.1\r\nHost: {host}:{HTTP_PORT}\r\n\r\n".encode()


class Path:
    """One client path; reconnects (inside the timed request) when the
    proxy closes after a response, as tinyproxy does."""

    def __init__(self, name, port):
        self.name, self.port = name, port
        self.req = request_bytes(port, target_host[name])
        self.sock = None
        self.reconnects = 0

    def request(self):
        if self.sock is None:
            self.sock = open_http(self.port)
            self.reconnects += 1
        self.sock.sendall(self.req)
        got = b""
        while True:
            data = self.sock.recv(65536)
            if not data and not got:
                # closed after the previous response without saying so
                self.sock.close()
                self.sock = None
                return self.request()
            if not data:
                raise SystemExit(f"bench-proxy: {self.name} closed the connection: {got!r}")
            got += data
            head, sep, body = got.partition(b"\r\n\r\n")
            if not sep:
                continue
            lower = head.lower()
            if b"content-length:" not in lower:
                raise SystemExit(f"bench-proxy: {self.name}: no content-length in {head!r}")
            n = int(lower.split(b"content-length:")[1].split(b"\r\n")[0])
            if len(body) < n:
                continue
            if b"connection: close" in lower:
                self.sock.close()
                self.sock = None
            return head.split(b" ", 2)[1]


clients = {name: Path(name, port) for name, port in paths.items()}
lat = {name: [] for name in paths}
for c in clients.values():  # warm up
    for _ in range(20):
        c.request()
    c.reconnects = 0
for _ in range(ROUNDS):
    for name, c in clients.items():
        t0 = time.perf_counter_ns()
        status = c.request()
        lat[name].append(time.perf_counter_ns() - t0)
        assert status == b"200", (name, status)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))] / 1000.0


def download(proxy_port, host):
    s = socket.create_connection(("127.0.0.1", proxy_port or BULK_PORT))
    if proxy_port:
        s.sendall(f"CONNECT {host}:{BULK_PORT} HTTP/1.1\r\nHost: {host}:{BULK_PORT}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        assert b" 200 " in head.split(b"\r\n")[0], head
    # splice into /dev/null: the receiver copies nothing either
    r, w = os.pipe()
    null = os.open("/dev/null", os.O_WRONLY)
    total = 0
    t0 = time.perf_counter()
    while True:
        n = os.splice(s.fileno(), w, 1 << 20)
        if n == 0:
            break
        total += n
        while n > 0:
            n -= os.splice(r, null, n)
    dt = time.perf_counter() - t0
    for fd in (r, w, null):
        os.close(fd)
    s.close()
    assert total == SIZE, (total, SIZE)
    return SIZE / dt / 1e9


thr = {name: [] for name in paths}
for _ in range(TRIES):
    for name, port in paths.items():
        thr[name].append(download(port, target_host[name]))

print(f"hutch-proxy benchmark: {ROUNDS} keep-alive GETs per path (interleaved), "
      f"{SIZE >> 20} MiB CONNECT download x{TRIES} (best), loopback, {os.cpu_count()} CPUs")
print()
print(f"{'path':<12} {'p50 us':>9} {'p99 us':>9} {'added p50':>10} {'added p99':>10} {'GB/s':>7} {'vs tinyproxy':>13} {'reconnects':>11}")
base50, base99 = pct(lat["direct"], 50), pct(lat["direct"], 99)
for name in paths:
    p50, p99 = pct(lat[name], 50), pct(lat[name], 99)
    g = max(thr[name])
    rel = ""
    if "tinyproxy" in thr and name != "direct":
        rel = f"{g / max(thr['tinyproxy']):.2f}x"
    add50 = "-" if name == "direct" else f"{p50 - base50:.1f}"
    add99 = "-" if name == "direct" else f"{p99 - base99:.1f}"
    print(f"{name:<12} {p50:>9.1f} {p99:>9.1f} {add50:>10} {add99:>10} {g:>7.2f} {rel:>13} "
          f"{clients[name].reconnects:>11}")
if not TINYPROXY:
    print("\n(tinyproxy not installed: apt-get install tinyproxy to compare)")
print("\ntargets: added p50 < 100 us; CONNECT >= 2 GB/s and >= 1.5x tinyproxy")

for c in clients.values():
    if c.sock:
        c.sock.close()
hutch.terminate()
hutch.wait()
if tiny:
    tiny.terminate()
    tiny.wait()
remove_chunk()
EOF
