# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-proxy's one HTTP exchange machine (src/proxy/exchange.c, issue
14): both paths, plain forwarding and an intercepted tunnel, carry a body
far larger than the proxy's buffers (256 KiB per side) to a client that
reads slowly and from a client that writes more than the upstream reads
at once: flow control stops and resumes each side, and every byte
arrives, masked on the intercepted path. Driven directly on loopback
with the helpers of test_proxy_secrets.py."""

import hashlib
import http.client
import time

import proxyutil
import tlsutil
from proxyutil import Upstream
from test_proxy_secrets import PH, VAL, ca, env, upstreams  # noqa: F401 (fixtures)

MIB = 1 << 20


def read_slowly(resp, total):
    """The body, read 64 KiB at a time with a pause now and then, so the
    proxy's output buffer towards us fills and drains many times."""
    out = []
    got = 0
    while got < total:
        b = resp.read(min(65536, total - got))
        assert b, f"the body ended after {got} of {total} bytes"
        out.append(b)
        got += len(b)
        if len(out) % 32 == 0:
            time.sleep(0.05)
    return b"".join(out)


def test_intercepted_large_echo_arrives_whole_and_masked(env):  # noqa: F811
    port = env["ports"]["api"]
    ctx = tlsutil.client_context(env["proxy"].ca_path)
    conn = tlsutil.tunnel(env["proxy"], "api.secret.test", port, ctx)
    for _ in range(2):  # and the connection is reusable after it
        conn.request("GET", "/leak-big", headers={"Authorization": f"Bearer {PH}"})
        r = conn.getresponse()
        assert r.status == 200
        body = read_slowly(r, 16 * MIB)
        assert r.read() == b""
        want = b"".join(
            (bytes([97 + i]) * (MIB - len(PH)))[: 4093 * (i + 1)] + PH.encode()
            + (bytes([97 + i]) * (MIB - len(PH)))[4093 * (i + 1):]
            for i in range(16)
        )
        assert len(body) == len(want) and body == want
        assert VAL.encode() not in body
    conn.close()


def test_plain_large_bodies_both_ways():
    up = Upstream("127.0.0.1")
    proxy = proxyutil.Proxy(["--allow", f"big.test:{up.port}", "--resolve",
                             "big.test:127.0.0.1", "--allow-private", "127.0.0.0/8"])
    try:
        data = bytes(range(256)) * (24 * MIB // 256)
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=proxyutil.TIMEOUT)
        # Request body: 24 MiB upstream, more than both buffers hold.
        conn.request("POST", f"http://big.test:{up.port}/big/1", body=data,
                     headers={"Content-Type": "application/octet-stream"})
        r = conn.getresponse()
        assert (r.status, r.read()) == (200, b"x")
        rec = up.requests[-1]
        assert rec["path"] == "/big/1"
        assert hashlib.sha256(rec["body"].encode("latin-1")).digest() == \
            hashlib.sha256(data).digest()
        # Response body: 24 MiB to a slow reader, on the same connection.
        conn.request("GET", f"http://big.test:{up.port}/big/{24 * MIB}")
        r = conn.getresponse()
        assert r.status == 200
        assert read_slowly(r, 24 * MIB) == b"x" * (24 * MIB)
        conn.close()
    finally:
        proxy.close()
        up.close()
