# SPDX-License-Identifier: LGPL-2.1-or-later
"""The heads of hutch-proxy's one exchange machine (src/proxy/exchange.c,
issue 14) on the intercepted path, where the two copies had drifted from
the plain one:
- request heads are read with the same idle timer and head deadline: a
  head trickled slowly into an intercepted tunnel was never cut short
  (only the idle timeout between two reads applied there), while the
  plain path answered 408 (test_proxy.py's slowloris test);
- response heads are built by the same function: the intercepted path
  passed the upstream's hop-by-hop fields (Connection and the fields it
  names, Keep-Alive, Upgrade) on to the client, and never said
  "Connection: close" when it was about to close.
Driven directly on loopback with the helpers of test_proxy_secrets.py and
an HTTPS upstream of its own."""

import json
import select
import ssl
import threading
import time

import pytest

import proxyutil
import tlsutil
from test_proxy_secrets import PH, VAL, ca  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(proxyutil.proxy_binary() is None, reason="hutch-proxy not built")

HEADER_TIMEOUT_MS = 2000
HOP_RESPONSE = (b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
                b"Keep-Alive: timeout=5\r\nUpgrade: h2c\r\nX-Keep: y\r\n"
                b"Content-Length: 2\r\n\r\nok")


class HopHandler(tlsutil.SecretEchoHandler):
    """/hop answers with hop-by-hop fields; everything else as the echo."""

    def _respond(self):
        if self.path.startswith("/hop"):
            proxyutil.read_request_body(self)
            self.wfile.write(HOP_RESPONSE)
            return
        super()._respond()

    do_GET = do_POST = _respond


@pytest.fixture(scope="module")
def upstream(ca):  # noqa: F811
    server = tlsutil._TlsServer(("127.0.0.1", 0), HopHandler)
    server.lock = threading.Lock()
    server.requests = []
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("api.secret.test").configure_cert(ctx)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(ca, upstream, tmp_path):  # noqa: F811
    upca = tmp_path / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(upca))
    api = upstream.server_address[1]
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


def https(proxy):
    return tlsutil.tunnel(proxy, "api.secret.test", proxy.api,
                          tlsutil.client_context(proxy.ca_path))


def test_intercepted_response_drops_hop_by_hop_fields(proxy):
    conn = https(proxy)
    conn.request("GET", "/hop", headers={"Authorization": f"Bearer {PH}"})
    r = conn.getresponse()
    first = conn.sock
    assert (r.status, r.read()) == (200, b"ok")
    names = {k.lower() for k, _ in r.getheaders()}
    assert "x-keep" in names
    assert not names & {"x-hop", "keep-alive", "upgrade", "connection"}, r.getheaders()
    # The twin: the end-to-end fields pass, and the connection goes on.
    conn.request("GET", "/v1/again", headers={"Authorization": f"Bearer {PH}"})
    r = conn.getresponse()
    assert r.status == 200 and VAL.encode() not in r.read()
    assert conn.sock is first
    conn.close()


def test_intercepted_close_is_announced(proxy):
    s = tls_tunnel(proxy)
    s.sendall((f"GET /v1/last HTTP/1.1\r\nHost: api.secret.test:{proxy.api}\r\n"
               f"Authorization: Bearer {PH}\r\nConnection: close\r\n\r\n").encode())
    status, headers, body = proxyutil.read_response(s, timeout=10)
    assert status == 200 and VAL.encode() not in body
    assert headers.get("connection") == "close", headers
    assert closed(s)
    s.close()


def test_intercepted_keep_alive_is_not_closed(proxy):
    """The twin: a kept-alive request's response says nothing of a close,
    and a second request goes over the same connection."""
    conn = https(proxy)
    socks = []
    for path in ("/v1/one", "/v1/two"):
        conn.request("GET", path, headers={"Authorization": f"Bearer {PH}"})
        socks.append(conn.sock)
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("Connection") is None
        assert VAL.encode() not in r.read()
    assert socks[0] is socks[1]
    conn.close()


def test_intercepted_request_drops_hop_by_hop_fields(proxy):
    """Request heads, the same way: the upstream gets the end-to-end
    fields (the twin: X-Keep, and the value in Authorization) but none of
    the client's hop-by-hop ones."""
    conn = https(proxy)
    conn.request("GET", "/v1/echo", headers={
        "Authorization": f"Bearer {PH}", "Connection": "keep-alive, X-Hop", "X-Hop": "1",
        "Keep-Alive": "300", "Trailer": "X-T", "X-Keep": "y"})
    r = conn.getresponse()
    assert r.status == 200
    body = r.read()
    assert VAL.encode() not in body
    conn.close()
    got = {k.lower(): v for k, v in json.loads(body)["headers"]}
    assert got.get("x-keep") == "y" and got.get("authorization") == f"Bearer {PH}"
    assert not set(got) & {"connection", "x-hop", "keep-alive", "trailer"}, got
