#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Credential brokering's cost (issue 5), measured with the real hutch-proxy
on loopback: 1,000 sequential small HTTPS requests over one keep-alive
connection each way (direct to the upstream, through an opaque CONNECT
tunnel, through the intercepting path that swaps a secret in), rounds
interleaved; then TLS handshakes per second on the intercepting path.

The client and the upstream are Python (test-only helpers from
tests/integration), so absolute numbers include Python's own cost; the
differences between the paths are what the proxy adds.

    bench/bench-intercept.py [BUILD_DIR]      (default: build)
"""

import http.client
import os
import pathlib
import statistics
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

    base = statistics.median(samples["direct"])
    print(f"{REQUESTS} keep-alive HTTPS requests per path ({ROUNDS} interleaved rounds)")
    print(f"{'path':<15} {'p50 us':>8} {'p99 us':>8} {'added p50 us':>13}")
    for name, t in samples.items():
        t = sorted(t)
        p50, p99 = statistics.median(t), t[int(len(t) * 0.99) - 1]
        print(f"{name:<15} {p50 * 1e6:>8.0f} {p99 * 1e6:>8.0f} {(p50 - base) * 1e6:>13.0f}")
    opaque = statistics.median(samples["opaque tunnel"])
    icpt = statistics.median(samples["intercepted"])
    print(f"interception adds {(icpt - opaque) * 1e6:.0f} us p50 over the opaque tunnel")
    for name, rate in rates.items():
        print(f"new connections with one request, {name}: {rate:.0f}/s")
    proxy.close()
    upstream.close()


if __name__ == "__main__":
    main()
