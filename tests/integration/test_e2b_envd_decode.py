# SPDX-License-Identifier: LGPL-2.1-or-later
"""envd's filesystem requests, decoded by one table per method
(e2b-envd.c): each method's members, their types and their messages, over
raw Connect JSON (docs/e2b-envd.md "The Connect protocol"). Each refusal
has its twin: the same method with a good message is answered. As root
and as the unprivileged test user."""

import json

from test_e2b_envd import E2bServer, envd_request, envelope, frames


def test_filesystem_messages(sbx):
    server = E2bServer(sbx)
    try:
        sid, token = server.create()
        auth = {"E2b-Sandbox-Id": sid, "X-Access-Token": token}
        unary = dict(auth, **{"Content-Type": "application/json"})
        stream = dict(auth, **{"Content-Type": "application/connect+json"})

        def call(method, msg):
            st, _, body = envd_request(server, "POST", f"/filesystem.Filesystem/{method}",
                                       json.dumps(msg).encode(), unary)
            return st, json.loads(body)

        def refused(method, msg, message):
            st, body = call(method, msg)
            assert (st, body) == (400, {"code": "invalid_argument", "message": message}), \
                (method, msg, body)

        # The twins that work.
        st, body = call("MakeDir", {"path": "/tmp/d"})
        assert st == 200 and body["entry"]["type"] == "FILE_TYPE_DIRECTORY", body
        st, body = call("Stat", {"path": "/tmp/d"})
        assert st == 200 and body["entry"]["name"] == "d", body
        st, body = call("ListDir", {"path": "/tmp", "depth": 1})
        assert st == 200 and any(e["name"] == "d" for e in body["entries"]), body
        st, body = call("Move", {"source": "/tmp/d", "destination": "/tmp/e"})
        assert st == 200 and body["entry"]["path"] == "/tmp/e", body
        st, body = call("Remove", {"path": "/tmp/e"})
        assert (st, body) == (200, {}), body
        # Each method's refusals, with the messages envd always gave.
        for method in ("Stat", "MakeDir", "Remove", "ListDir"):
            refused(method, {"path": "/tmp", "evil": 1}, "unknown field 'evil'")
            refused(method, {}, "'path' is required")
            refused(method, {"path": ""}, "'path' must be a non-empty string")
            refused(method, {"path": 7}, "'path' must be a non-empty string")
        refused("Stat", {"source": "/tmp"}, "unknown field 'source'")
        refused("ListDir", {"path": "/tmp", "depth": 65}, "'depth' must be 0 to 64")
        refused("ListDir", {"path": "/tmp", "depth": "1"}, "'depth' must be 0 to 64")
        refused("Move", {"source": "/tmp/x"}, "'destination' is required")
        refused("Move", {"destination": "/tmp/x"}, "'source' is required")
        refused("Move", {"source": "/a", "destination": "/b", "path": "/c"},
                "unknown field 'path'")
        # WatchDir, a stream: its refusals in the end-of-stream frame.
        for msg, message in (({"path": "/tmp", "recursive": 1}, "'recursive' must be a boolean"),
                             ({"path": "/tmp", "includeEntry": "yes"},
                              "'includeEntry' must be a boolean"),
                             ({"path": "/tmp", "allowNetworkMounts": 0},
                              "'allowNetworkMounts' must be a boolean"),
                             ({"recursive": True}, "'path' is required"),
                             ({"path": "/tmp", "depth": 1}, "unknown field 'depth'")):
            st, _, body = envd_request(server, "POST", "/filesystem.Filesystem/WatchDir",
                                       envelope(json.dumps(msg).encode()), stream)
            assert st == 200, body
            assert frames(body) == [(2, {"error": {"code": "invalid_argument",
                                                   "message": message}})], (msg, body)
        # Its twin: a good watch starts (and ends at its deadline).
        st, _, body = envd_request(server, "POST", "/filesystem.Filesystem/WatchDir",
                                   envelope(b'{"path": "/tmp", "recursive": true}'),
                                   dict(stream, **{"Connect-Timeout-Ms": "300"}))
        fr = frames(body)
        assert st == 200 and fr[0] == (0, {"start": {}}), body
        assert fr[-1][1]["error"]["code"] == "deadline_exceeded", body
        assert server.kill(sid) == 204
    finally:
        server.stop()


def test_process_messages(sbx):
    server = E2bServer(sbx)
    try:
        sid, token = server.create()
        auth = {"E2b-Sandbox-Id": sid, "X-Access-Token": token}
        unary = dict(auth, **{"Content-Type": "application/json"})
        stream = dict(auth, **{"Content-Type": "application/connect+json"})

        def call(method, msg):
            st, _, body = envd_request(server, "POST", f"/process.Process/{method}",
                                       json.dumps(msg).encode(), unary)
            return st, json.loads(body)

        def refused(method, msg, message):
            st, body = call(method, msg)
            assert (st, body) == (400, {"code": "invalid_argument", "message": message}), \
                (method, msg, body)

        def start(msg):
            st, _, body = envd_request(server, "POST", "/process.Process/Start",
                                       envelope(json.dumps(msg).encode()), stream)
            assert st == 200, body
            return frames(body)

        # The twins that work.
        assert call("List", {})[0] == 200
        fr = start({"process": {"cmd": "/bin/true", "args": [], "envs": {}, "cwd": "/"},
                    "stdin": False})
        assert fr[-1] == (2, {}), fr
        # Unknown members of each method, with the messages envd gave.
        refused("List", {"evil": 1}, "'evil' is an unknown field")
        for method in ("SendSignal", "SendInput", "CloseStdin", "Update"):
            refused(method, {"process": {"pid": 1}, "evil": 1}, "'evil' is an unknown field")
        refused("CloseStdin", {"process": {"pid": 1}, "input": {}}, "'input' is an unknown field")
        refused("SendInput", {"process": {"pid": 1}, "pty": {}}, "'pty' is an unknown field")
        refused("Update", {"process": {"pid": 1}, "input": {}}, "'input' is an unknown field")
        refused("SendSignal", {"process": {"pid": 1}, "pty": {}}, "'pty' is an unknown field")
        for msg, message in (({"process": {"cmd": "/bin/true"}, "evil": 1},
                              "'evil' is an unknown field"),
                             ({"process": {"cmd": "/bin/true", "evil": 1}},
                              "'evil' is an unknown field of process")):
            assert start(msg) == [(2, {"error": {"code": "invalid_argument",
                                                 "message": message}})], msg
        st, _, body = envd_request(server, "POST", "/process.Process/Connect",
                                   envelope(b'{"process": {"pid": 1}, "evil": 1}'), stream)
        assert frames(body) == [(2, {"error": {"code": "invalid_argument",
                                               "message": "'evil' is an unknown field"}})], body
        assert server.kill(sid) == 204
    finally:
        server.stop()
