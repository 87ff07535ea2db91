# SPDX-License-Identifier: LGPL-2.1-or-later
"""serve's preview route keeps the client's connection (issue 18,
docs/api.md "Preview"): one HTTP/1.1 connection carries several requests
through the preview to a keep-alive server in the sandbox, each head
checked and rewritten (its Authorization dropped), as root and as the
user. The twins: an API request, or a preview of another port, on that
connection is refused (400) and the connection closed."""

import json
import os

from cgroupctl import poll_until
from test_serve import UnixConnection, create, server  # noqa: F401 (a fixture)

# HTTP/1.1, keep-alive: answers with the path, the headers and the peer's
# port (one connection: one port).
KEEPALIVE_SERVER = r"""
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"path": self.path, "peer": self.client_address[1],
                           "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_POST = do_GET
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def ask(c, method, url, body=None, headers=None):
    c.request(method, url, body=body, headers=headers or {})
    r = c.getresponse()
    return r.status, r.read(), r


def test_three_requests_on_one_preview_connection(server):  # noqa: F811
    api = server.api
    name = "pk-" + os.urandom(3).hex()
    create(api, name)
    r = server.hutch("exec", "-d", name, "--", "python3", "-c", KEEPALIVE_SERVER, "8000")
    assert r.returncode == 0, r.stderr
    base = f"/v1/sandboxes/{name}/ports/8000"
    assert poll_until(lambda: api.call("GET", base + "/up").status == 200, 20)

    c = UnixConnection(api.sock_path, api.uid)
    try:
        seen = []
        for i, (method, path, body) in enumerate(
                [("GET", "/a?x=1", None), ("POST", "/b", b'{"k":1}'), ("GET", "", None)]):
            st, data, resp = ask(c, method, base + path, body,
                                 {"Authorization": "Bearer not-for-the-sandbox", "X-N": str(i)})
            assert st == 200 and not resp.will_close, (st, data)
            seen.append(json.loads(data))
        assert [s["path"] for s in seen] == ["/a?x=1", "/b", "/"], seen
        assert all("authorization" not in s["headers"] for s in seen), seen
        assert [s["headers"]["x-n"] for s in seen] == ["0", "1", "2"], seen
        # One connection to the server inside carried them all.
        assert len({s["peer"] for s in seen}) == 1, seen

        # The twin: an API request on it is refused and closes it.
        st, data, resp = ask(c, "GET", "/v1/version")
        assert st == 400 and b"connection of its own" in data, data
        assert resp.will_close
    finally:
        c.close()

    # The twin: another port on the same connection is refused.
    c = UnixConnection(api.sock_path, api.uid)
    try:
        assert ask(c, "GET", base + "/one")[0] == 200
        st, data, resp = ask(c, "GET", f"/v1/sandboxes/{name}/ports/8001/")
        assert st == 400 and b"one sandbox port only" in data, data
        assert resp.will_close
    finally:
        c.close()
