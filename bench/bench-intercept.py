#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Credential brokering's cost (issues 5 and 14), measured with the real
hutch-proxy on loopback: 1,000 sequential small HTTPS requests over one
keep-alive connection each way (direct to the upstream, through an opaque
CONNECT tunnel, through the intercepting path that swaps a secret in and
checks Host, lanes and masking), rounds interleaved; then TLS handshakes
per second on both proxy paths; then a 64 MiB response through each path
(the intercepted one is masked on the way), and the masking filter alone
on 64 MiB (BUILD_DIR/bench/bench-mask, C).

The client and the upstream are Python (test-only helpers from
tests/integration), so absolute numbers include Python's own cost; the
differences between the paths are what the proxy adds.

    bench/bench-intercept.py [BUILD_DIR]      (default: build)
"""

import http.client
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "build").resolve()
os.environ["HUTCH_BUILD_DIR"] = str(BUILD)
sys.path.insert(0, str(REPO / "tests" / "integration"))

import tlsutil  # noqa: E402

REQUESTS = 1000
ROUNDS = 5
HANDSHAKES = 200
SECRET_HOST, OPAQUE_HOST = "api.bench.test", "other.bench.test"
REAL = "sk-proj-benchREALvalue0123456789abcdef"
PLACEHOLDER = "sk-proj-benchPLACEHOLDER0123456789abcd"
BIG = 64 << 20
assert len(REAL) == len(PLACEHOLDER)


class BigHandler(tlsutil.SecretEchoHandler):
    """/big/N: N bytes of JSON-like text (256 KiB writes); else the echo."""

    def do_GET(self):
        if not self.path.startswith("/big/"):
            return self._respond()
        n = int(self.path.split("/")[2])
        chunk = (b'{"role": "assistant", "content": "the quick brown fox \\/ 100% "}\n' * 4096)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
        while n > 0:
            part = chunk[: min(n, len(chunk))]
            self.wfile.write(part)
            n -= len(part)


def download(conn, headers):
    t0 = time.perf_counter()
    conn.request("GET", f"/big/{BIG}", headers=headers)
    r = conn.getresponse()
    got = 0
    while True:
        data = r.read(1 << 20)
        if not data:
            break
        got += len(data)
    assert got == BIG, got
    return BIG / (time.perf_counter() - t0) / 1e6


def timed_requests(conn, n, headers):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("GET", "/x", headers=headers)
        r = conn.getresponse()
        r.read()
        times.append(time.perf_counter() - t0)
    return times


def main():
    ca = tlsutil.make_ca()
    upstream = tlsutil.TlsUpstream(ca, [SECRET_HOST, OPAQUE_HOST, "127.0.0.1"])
    upstream.server.RequestHandlerClass = BigHandler
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-intercept-"))
    ca_file = tmp / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    config = {
        "secrets": [
            {"name": "TOKEN", "placeholder": PLACEHOLDER, "value": REAL, "hosts": [f"{SECRET_HOST}:{upstream.port}"]}
        ]
    }
    args = [
        "--allow", f"{OPAQUE_HOST}:{upstream.port}",
        "--resolve", f"{SECRET_HOST}:127.0.0.1",
        "--resolve", f"{OPAQUE_HOST}:127.0.0.1",
        "--allow-private", "127.0.0.0/8",
        "--upstream-ca", str(ca_file),
    ]
    proxy = tlsutil.SecretProxy(args, config, tmp)
    both = tmp / "both.pem"
    both.write_bytes(proxy.ca_pem + ca_file.read_bytes())
    ctx = tlsutil.client_context(both)
    headers = {"Authorization": f"Bearer {PLACEHOLDER}"}

    def direct():
        return http.client.HTTPSConnection("127.0.0.1", upstream.port, context=ctx, timeout=30)

    paths = {
        "direct": direct,
        "opaque tunnel": lambda: tlsutil.tunnel(proxy, OPAQUE_HOST, upstream.port, ctx),
        "intercepted": lambda: tlsutil.tunnel(proxy, SECRET_HOST, upstream.port, ctx),
    }
    samples = {name: [] for name in paths}
    for rnd in range(ROUNDS):
        for name in list(paths)[rnd % 3 :] + list(paths)[: rnd % 3]:
            conn = paths[name]()
            timed_requests(conn, 20, headers)  # warm: handshake, leaf cert, keep-alive
            samples[name] += timed_requests(conn, REQUESTS // ROUNDS, headers)
            conn.close()

    rates = {}
    for name in ("opaque tunnel", "intercepted"):
        t0 = time.perf_counter()
        for _ in range(HANDSHAKES):
            conn = paths[name]()
            conn.request("GET", "/h", headers=headers)
            conn.getresponse().read()
            conn.close()
        rates[name] = HANDSHAKES / (time.perf_counter() - t0)

    downloads = {name: [] for name in paths}
    for rnd in range(3):
        for name in list(paths)[rnd % 3 :] + list(paths)[: rnd % 3]:
            conn = paths[name]()
            downloads[name].append(download(conn, headers))
            conn.close()

    mask = subprocess.run([str(BUILD / "bench" / "bench-mask")], capture_output=True, text=True,
                          check=True).stdout.splitlines()

    base = statistics.median(samples["direct"])
    opaque = statistics.median(samples["opaque tunnel"])
    icpt = statistics.median(samples["intercepted"])
    print(f"{REQUESTS} keep-alive HTTPS requests per path ({ROUNDS} interleaved rounds), "
          f"a {BIG >> 20} MiB response per path (best of 3), Python client and upstream")
    print(f"{'path':<15} {'p50 us':>8} {'p99 us':>8} {'added p50 us':>13} {'64 MiB MB/s':>12} "
          f"{'new conn/s':>11}")
    for name, t in samples.items():
        t = sorted(t)
        p50, p99 = statistics.median(t), t[int(len(t) * 0.99) - 1]
        rate = f"{rates[name]:.0f}" if name in rates else "-"
        print(f"{name:<15} {p50 * 1e6:>8.0f} {p99 * 1e6:>8.0f} {(p50 - base) * 1e6:>13.0f} "
              f"{max(downloads[name]):>12.0f} {rate:>11}")
    print(f"interception adds {(icpt - opaque) * 1e6:.0f} us p50 over the opaque tunnel "
          f"(target: under 300)")
    print()
    print("the masking filter alone, 64 MiB in 16 KiB reads (target: >= 500 MB/s)")
    print(f"{'body':<26} {'MB/s wall':>10} {'MB/s CPU':>9} {'replaced':>9}")
    for line in mask:
        name, wall, cpu, count = line.split("\t")
        print(f"{name:<26} {wall:>10} {cpu:>9} {count:>9}")
    proxy.close()
    upstream.close()


if __name__ == "__main__":
    main()
