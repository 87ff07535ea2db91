# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch serve's preview route (issue 18, docs/api.md "Preview"):
/v1/sandboxes/{name}/ports/{port}/PATH reaches 127.0.0.1:{port} inside a
running sandbox with no host port, behind the API's authentication; HTTP
and a WebSocket echo (Debian's python3-websockets as the client, and as
the server inside: the host's python3 is what the sandbox sees). As root
and as the unprivileged user, each with its own server and store
(test_serve's fixtures)."""

import asyncio
import json
import os
import pwd
import secrets
import socket

import pytest

from cgroupctl import poll_until
from conftest import IS_ROOT, TEST_USER
from test_serve import Api, as_euid, create, server  # noqa: F401 (fixture)

# Echoes the request line and headers it got as JSON.
HEADERS_SERVER = r"""
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        # The body is read: a server that closes on unread bytes resets.
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"path": self.path,
                           "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_POST = do_GET
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

# A WebSocket echo server (python3-websockets 10's asyncio API).
WS_SERVER = r"""
import asyncio, sys, websockets
async def echo(ws, path=None):
    async for m in ws:
        await ws.send(m if isinstance(m, bytes) else "echo:" + m)
async def main():
    async with websockets.serve(echo, "127.0.0.1", int(sys.argv[1])):
        await asyncio.Future()
asyncio.run(main())
"""


def preview(api, name, port, path="/", headers=None, method="GET", body=None):
    return api.call(method, f"/v1/sandboxes/{name}/ports/{port}{path}", body=body,
                    headers=headers)


def started(server, name, *cmd):
    r = server.hutch("exec", "-d", name, "--", *cmd)
    assert r.returncode == 0, r.stderr


def hutch_port_processes():
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "hutch-port":
                    out.append(int(pid))
        except OSError:
            pass
    return out


def test_preview_reaches_a_server_with_no_host_port(server):
    api = server.api
    name = f"pv-{secrets.token_hex(3)}"
    before = set(hutch_port_processes())
    create(api, name)
    started(server, name, "python3", "-c", HEADERS_SERVER, "8000")

    def ready():
        r = preview(api, name, 8000, "/x")
        return r.status == 200 and r

    r = poll_until(ready, 20)
    assert r, preview(api, name, 8000, "/x")
    # The target is rewritten; the API's Authorization never reaches the
    # sandbox; the other headers pass (keep-alive: test_preview_keepalive.py).
    r = preview(api, name, 8000, "/a/b?q=1&r=2",
                headers={"Authorization": "Bearer not-for-the-sandbox", "X-Mine": "kept"})
    assert r.status == 200, r
    seen = r.json
    assert seen["path"] == "/a/b?q=1&r=2", seen
    assert "authorization" not in seen["headers"], seen
    assert seen["headers"]["x-mine"] == "kept"
    assert preview(api, name, 8000, "").json["path"] == "/"
    assert preview(api, name, 8000, "?z=1").json["path"] == "/?z=1"
    body = json.dumps({"k": "v"}).encode()
    assert preview(api, name, 8000, "/post", method="POST", body=body).json["path"] == "/post"
    # No host port was opened for it: no forwarder was started.
    assert set(hutch_port_processes()) - before == set()
    # The twins: nothing on another port (502), a stopped sandbox (409),
    # an unknown one (404).
    r = preview(api, name, 8001)
    assert r.status == 502 and r.error["code"] == "bad_gateway", r
    assert "nothing listens there" in r.error["message"]
    api.ok("POST", f"/v1/sandboxes/{name}/stop", status=204)
    r = preview(api, name, 8000)
    assert r.status == 409 and r.error["code"] == "conflict", r
    r = preview(api, f"nope-{secrets.token_hex(3)}", 8000)
    assert r.status == 404, r


def test_ports_route_lists_published_ports(server):
    api = server.api
    name = f"pl-{secrets.token_hex(3)}"
    create(api, name, policy={"ports": ["127.0.0.1::8000"]})
    r = api.ok("GET", f"/v1/sandboxes/{name}/ports").json
    assert r == {"running": False, "ports": [
        {"port": 8000, "protocol": "tcp", "host_ip": "127.0.0.1", "host_port": 0}]}, r
    api.exec(name, ["true"])
    r = api.ok("GET", f"/v1/sandboxes/{name}/ports").json
    assert r["running"] is True and len(r["ports"]) == 1, r
    assert r["ports"][0]["host_port"] > 0
    r = api.call("POST", "/v1/sandboxes", {"name": "bad-ports", "policy": {"ports": ["70000"]}})
    assert r.status == 400 and r.error["field"] == "/policy/ports/0", r


@pytest.mark.skipif(not IS_ROOT, reason="needs root: connects as another user")
def test_preview_refuses_another_user(server):
    """The unix socket's owner check holds for the preview too: root
    connecting to the user's server is refused (403), the user cannot
    even reach root's socket (its directory is 0700)."""
    api = server.api
    name = f"po-{secrets.token_hex(3)}"
    create(api, name)
    started(server, name, "python3", "-c", HEADERS_SERVER, "8000")
    assert poll_until(lambda: preview(api, name, 8000).status == 200, 20)
    if server.uid != 0:
        r = preview(Api(api.sock_path, 0), name, 8000)
        assert r.status == 403 and r.error["code"] == "permission_denied", r
    else:
        with pytest.raises(PermissionError):
            preview(Api(api.sock_path, pwd.getpwnam(TEST_USER).pw_uid), name, 8000)


def test_websocket_echo_through_the_preview(server):
    websockets = pytest.importorskip("websockets")
    api = server.api
    name = f"ws-{secrets.token_hex(3)}"
    create(api, name)
    started(server, name, "python3", "-c", WS_SERVER, "8765")

    async def talk():
        with as_euid(api.uid):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(api.sock_path)
        s.setblocking(False)
        uri = f"ws://localhost/v1/sandboxes/{name}/ports/8765/echo"
        async with websockets.connect(uri, sock=s, open_timeout=10) as ws:
            out = []
            for msg in ("hello", "second"):
                await ws.send(msg)
                out.append(await asyncio.wait_for(ws.recv(), 10))
            blob = os.urandom(300_000)
            await ws.send(blob)
            out.append(await asyncio.wait_for(ws.recv(), 10) == blob)
            return out

    def attempt():
        try:
            return asyncio.run(talk())
        except (OSError, websockets.exceptions.InvalidStatusCode,
                websockets.exceptions.InvalidMessage, asyncio.TimeoutError):
            return None

    out = poll_until(attempt, 30)
    assert out == ["echo:hello", "echo:second", True], out
    # The twin: with nothing listening, the upgrade is refused with 502.
    r = preview(api, name, 8766, "/echo", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
    assert r.status == 502, r
