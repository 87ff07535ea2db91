# SPDX-License-Identifier: LGPL-2.1-or-later
"""The request head phase of hutch-proxy's one exchange machine
(src/proxy/exchange.c, issue 14): the plain forward path and an
intercepted tunnel read request heads with the same parser, the same idle
timer and the same head deadline. Before they were one, a head trickled
slowly into an intercepted tunnel was never cut short (only the idle
timeout between two reads applied there), while the plain path answered
408 (test_proxy.py's slowloris test). Driven directly on loopback with the
helpers of test_proxy_secrets.py."""

import select
import ssl
import time

import pytest

import proxyutil
import tlsutil
from test_proxy_secrets import PH, VAL, ca, upstreams  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(proxyutil.proxy_binary() is None, reason="hutch-proxy not built")

HEADER_TIMEOUT_MS = 2000


@pytest.fixture
def proxy(ca, upstreams, tmp_path):  # noqa: F811
    upca = tmp_path / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(upca))
    api = upstreams["api"].port
    config = {"secrets": [{"name": "API_KEY", "placeholder": PH, "value": VAL,
                           "hosts": [f"api.secret.test:{api}"]}]}
    p = tlsutil.SecretProxy(
        ["--resolve", "api.secret.test:127.0.0.1", "--allow-private", "127.0.0.0/8",
         "--upstream-ca", str(upca), "--header-timeout", f"{HEADER_TIMEOUT_MS}ms"],
        config, tmp_path)
    p.api = api
    yield p
    p.stop()
    assert VAL not in p.audit_path.read_text()
    p.close()


def tls_tunnel(proxy):
    ctx = tlsutil.client_context(proxy.ca_path)
    s = tlsutil.tls_through(proxy, "api.secret.test", proxy.api, ctx)
    s.settimeout(proxyutil.TIMEOUT)
    return s


def closed(sock, timeout=proxyutil.TIMEOUT):
    """True if the proxy ends the TLS connection within @timeout (EOF,
    with or without close_notify, or a reset)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not sock.pending():
            r, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                return False
        try:
            if not sock.recv(65536):
                return True
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return True
    return False


def test_intercepted_head_trickled_in_gets_408(proxy):
    head = (f"GET /v1/slow HTTP/1.1\r\nHost: api.secret.test:{proxy.api}\r\n"
            f"Authorization: Bearer {PH}\r\n\r\n").encode()
    s = tls_tunnel(proxy)
    t0 = time.monotonic()
    # One byte every 0.2 s, far less than the idle timeout apart, for
    # longer than the head deadline in all: the head must not complete.
    for ch in head[:-1]:
        try:
            s.sendall(bytes([ch]))
        except (ssl.SSLError, OSError):
            break
        if time.monotonic() - t0 > 3 * HEADER_TIMEOUT_MS / 1000:
            break
        r, _, _ = select.select([s], [], [], 0.2)
        if r:
            break  # the proxy answered
    status, _, body = proxyutil.read_response(s, timeout=10)
    assert status == 408, (status, body)
    assert f"did not arrive within {HEADER_TIMEOUT_MS} ms".encode() in body
    assert closed(s)
    s.close()
    d = proxy.wait_decisions(2)
    assert any(x.get("intercepted") and x["status"] == 408 and x["decision"] == "error"
               for x in d), d


def test_intercepted_idle_before_a_request_is_no_408(proxy):
    """The twin: silence before the first byte of a request is idleness,
    not a slow head: a request sent in one piece after more than the head
    deadline is served."""
    s = tls_tunnel(proxy)
    # Nothing to wait on: the point is the silence itself. (The socket may
    # turn readable meanwhile with TLS 1.3 session tickets.)
    time.sleep(HEADER_TIMEOUT_MS / 1000 + 1)
    s.sendall((f"GET /v1/ok HTTP/1.1\r\nHost: api.secret.test:{proxy.api}\r\n"
               f"Authorization: Bearer {PH}\r\nConnection: close\r\n\r\n").encode())
    status, _, body = proxyutil.read_response(s, timeout=10)
    assert status == 200, (status, body)
    assert VAL.encode() not in body
    s.close()
