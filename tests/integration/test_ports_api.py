# SPDX-License-Identifier: LGPL-2.1-or-later
"""Publishing a port of a running or stopped sandbox over the API (issue
19, docs/api.md): POST /v1/sandboxes/{name}/ports and DELETE
.../ports/{port}, the same as `hutch port NAME add|rm`, as root and as
the user (test_serve's server)."""

import secrets
import socket
import urllib.request

from cgroupctl import poll_until
from test_serve import create, server  # noqa: F401 (a fixture)

# Answers GET / with "hello from PORT".
WEB = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from inside"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def fetch(host_port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{host_port}/", timeout=5) as r:
            return r.read()
    except OSError:
        return None


def refused(host_port):
    with socket.socket() as s:
        s.settimeout(5)
        return s.connect_ex(("127.0.0.1", host_port)) != 0


def test_publish_and_unpublish_on_a_running_sandbox(server):
    api = server.api
    name = f"pa-{secrets.token_hex(3)}"
    create(api, name)
    r = server.hutch("exec", "-d", name, "--", "python3", "-c", WEB, "8000")
    assert r.returncode == 0, r.stderr
    assert api.ok("GET", f"/v1/sandboxes/{name}/ports").json == {"running": True, "ports": []}

    pub = api.ok("POST", f"/v1/sandboxes/{name}/ports", {"port": 8000}, status=201).json
    assert pub["port"] == 8000 and pub["protocol"] == "tcp" and pub["host_ip"] == "127.0.0.1", pub
    hp = pub["host_port"]
    assert hp > 0, pub
    # Reached from the host through the new listener.
    assert poll_until(lambda: fetch(hp), 20) == b"hello from inside"
    listed = api.ok("GET", f"/v1/sandboxes/{name}/ports").json
    assert listed == {"running": True, "ports": [pub]}, listed
    # The CLI sees the same (it is saved in the policy).
    r = server.hutch("port", name)
    assert r.returncode == 0 and f"8000/tcp -> 127.0.0.1:{hp}" in r.stdout, r

    # A second one with a chosen host port.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        want = s.getsockname()[1]
    pub2 = api.ok("POST", f"/v1/sandboxes/{name}/ports",
                  {"port": 8001, "host_port": want, "host_ip": "127.0.0.1"}, status=201).json
    assert pub2 == {"port": 8001, "protocol": "tcp", "host_ip": "127.0.0.1",
                    "host_port": want}, pub2
    assert not refused(want)
    # One port is published once.
    r = api.call("POST", f"/v1/sandboxes/{name}/ports", {"port": 8000})
    assert r.status == 409 and "already published" in r.error["message"], r

    # A DELETE with a path after the port is the preview, not an unpublish.
    r = api.call("DELETE", f"/v1/sandboxes/{name}/ports/8000/x")
    assert r.status == 501 or r.status < 500, r
    assert len(api.ok("GET", f"/v1/sandboxes/{name}/ports").json["ports"]) == 2

    api.ok("DELETE", f"/v1/sandboxes/{name}/ports/8000", status=204)
    api.ok("DELETE", f"/v1/sandboxes/{name}/ports/8001", status=204)
    assert api.ok("GET", f"/v1/sandboxes/{name}/ports").json == {"running": True, "ports": []}
    assert refused(hp) and refused(want)
    # The twin: it is not published any more.
    r = api.call("DELETE", f"/v1/sandboxes/{name}/ports/8000")
    assert r.status == 404 and r.error["code"] == "not_found", r


def test_publish_on_a_stopped_sandbox(server):
    api = server.api
    name = f"ps-{secrets.token_hex(3)}"
    create(api, name)
    pub = api.ok("POST", f"/v1/sandboxes/{name}/ports", {"port": 9000}, status=201).json
    assert pub == {"port": 9000, "protocol": "tcp", "host_ip": "127.0.0.1", "host_port": 0}, pub
    assert api.ok("GET", f"/v1/sandboxes/{name}/ports").json == {"running": False, "ports": [pub]}
    # Its start binds it.
    api.exec(name, ["true"])
    got = api.ok("GET", f"/v1/sandboxes/{name}/ports").json
    assert got["running"] and got["ports"][0]["host_port"] > 0, got
    api.ok("POST", f"/v1/sandboxes/{name}/stop", status=204)
    api.ok("DELETE", f"/v1/sandboxes/{name}/ports/9000", status=204)
    assert api.ok("GET", f"/v1/sandboxes/{name}/ports").json == {"running": False, "ports": []}


def test_publish_bad_input(server):
    api = server.api
    name = f"pb-{secrets.token_hex(3)}"
    create(api, name)
    api.exec(name, ["true"])
    for body, field in (({"port": 0}, "/port"), ({"port": 70000}, "/port"),
                        ({}, "/port"), ({"port": 80, "host_port": 70000}, "/host_port"),
                        ({"port": 80, "host_ip": "not an ip"}, "/host_ip"),
                        ({"port": 80, "color": "red"}, "/color")):
        r = api.call("POST", f"/v1/sandboxes/{name}/ports", body)
        assert r.status == 400 and r.error["field"] == field, (body, r)
    r = api.call("POST", f"/v1/sandboxes/{name}/ports", {"port": 80, "host_ip": "300.1.1.1"})
    assert r.status == 400, r
    # A host port in use: 409 naming it, nothing saved.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        r = api.call("POST", f"/v1/sandboxes/{name}/ports", {"port": 80, "host_port": busy})
    assert r.status == 409 and str(busy) in r.error["message"], r
    assert api.ok("GET", f"/v1/sandboxes/{name}/ports").json["ports"] == []
    r = api.call("DELETE", f"/v1/sandboxes/{name}/ports/0")
    assert r.status in (400, 404), r
    r = api.call("DELETE", f"/v1/sandboxes/{name}/ports/81")
    assert r.status == 404, r
    r = api.call("POST", f"/v1/sandboxes/nope-{secrets.token_hex(3)}/ports", {"port": 80})
    assert r.status == 404, r
