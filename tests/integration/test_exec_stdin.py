# SPDX-License-Identifier: LGPL-2.1-or-later
"""stdin for an exec that already runs (issue 18, docs/processes.md): a
detached exec started with "stdin_open" takes input later, through POST
/v1/sandboxes/{name}/execs/{exec}/stdin[?close=1], the C API's
hutch_exec_stdin() and the clients' write_stdin/writeStdin; as root and
as the user. The twins: an exec started without it is refused (409
naming why), so is one whose stdin was closed; an ended or unknown exec
is 404."""

import json
import os
import sys

import pytest

from cgroupctl import poll_until
from conftest import REPO
from test_client_keepalive import run_mjs
from test_mcp import McpEnv, RawServer
from test_serve import as_euid, create, output_bytes, server  # noqa: F401 (a fixture)

sys.path.insert(0, str(REPO / "clients" / "python"))
import hutch  # noqa: E402


def start(api, name, argv, **extra):
    r = api.ok("POST", f"/v1/sandboxes/{name}/exec",
               {"argv": argv, "detach": True, **extra}, status=202)
    return r.json["id"]


def stdin(api, name, xid, data=b"", close=False):
    q = "?close=1" if close else ""
    return api.call("POST", f"/v1/sandboxes/{name}/execs/{xid}/stdin{q}", data)


def output(api, name, xid):
    c = api.connection()
    c.request("GET", f"/v1/sandboxes/{name}/execs/{xid}/output")
    lines = [json.loads(ln) for ln in c.getresponse().read().decode().splitlines()]
    c.close()
    return output_bytes(lines, "stdout")


def test_cat_takes_its_input_later(server):  # noqa: F811
    api = server.api
    name = "in-" + os.urandom(3).hex()
    create(api, name)
    xid = start(api, name, ["cat"], stdin_open=True)
    assert stdin(api, name, xid, b"hello ").status == 204
    # Still running: it waits for more.
    got = api.ok("GET", f"/v1/sandboxes/{name}/execs/{xid}").json
    assert got["running"] is True, got
    blob = os.urandom(200_000)  # more than a pipe holds: the write waits for cat
    assert stdin(api, name, xid, b"world\n" + blob).status == 204
    assert stdin(api, name, xid, close=True).status == 204
    out = api.ok("GET", f"/v1/sandboxes/{name}/execs/{xid}?wait=1").json["outcome"]
    assert out["exit_code"] == 0, out
    assert output(api, name, xid) == b"hello world\n" + blob
    # The twin: it ended: 404.
    r = stdin(api, name, xid, b"late")
    assert r.status == 404 and "already ended" in r.error["message"], r

    # Data and the close in one request.
    xid = start(api, name, ["sh", "-c", "wc -c"], stdin_open=True)
    assert stdin(api, name, xid, b"12345", close=True).status == 204
    api.ok("GET", f"/v1/sandboxes/{name}/execs/{xid}?wait=1")
    assert output(api, name, xid).strip() == b"5"


def test_stdin_refusals(server):  # noqa: F811
    api = server.api
    name = "inr-" + os.urandom(3).hex()
    create(api, name)
    # Started without it: 409 naming why; nothing reaches the command.
    # (its stdin is /dev/null: cat ends at once, then it sleeps)
    xid = start(api, name, ["sh", "-c", "cat; echo eof; exec sleep 600"])
    assert poll_until(lambda: output(api, name, xid) == b"eof\n", 30)
    r = stdin(api, name, xid, b"x")
    assert r.status == 409 and r.error["code"] == "conflict", r
    assert "takes no input" in r.error["message"], r
    r = stdin(api, name, xid, close=True)
    assert r.status == 409, r
    api.ok("POST", f"/v1/sandboxes/{name}/execs/{xid}/signal", {"signal": "KILL"}, status=204)
    api.ok("GET", f"/v1/sandboxes/{name}/execs/{xid}?wait=1")
    # Closed already: 409.
    xid = start(api, name, ["sleep", "600"], stdin_open=True)
    assert stdin(api, name, xid, close=True).status == 204
    r = stdin(api, name, xid, b"more")
    assert r.status == 409 and "takes no input" in r.error["message"], r
    api.ok("POST", f"/v1/sandboxes/{name}/execs/{xid}/signal", {"signal": "KILL"}, status=204)
    # Unknown exec: 404; bad input: 400.
    r = stdin(api, name, 99999, b"x")
    assert r.status == 404 and r.error["code"] == "not_found", r
    r = api.call("POST", f"/v1/sandboxes/{name}/execs/{xid}/stdin?close=maybe", b"")
    assert r.status == 400, r
    r = api.call("POST", f"/v1/sandboxes/{name}/exec", {"argv": ["cat"], "stdin_open": True})
    assert r.status == 400 and r.error["field"] == "/stdin_open", r
    r = api.call("POST", f"/v1/sandboxes/{name}/exec/stream",
                 {"argv": ["cat"], "detach": True, "stdin_open": True})
    assert r.status == 400, r


def test_clients_write_stdin(server):  # noqa: F811
    api = server.api
    name = "inc-" + os.urandom(3).hex()
    create(api, name)
    with as_euid(server.uid):
        c = hutch.Client(socket=api.sock_path)
        try:
            xid = c.exec_detached(name, ["cat"], stdin_open=True)
            c.write_stdin(name, xid, "from ")
            c.write_stdin(name, xid, b"python\n", close=True)
            assert c.wait(name, xid).exit_code == 0
            got = b"".join(ev.data for ev in c.output(name, xid)
                           if isinstance(ev, hutch.OutputChunk) and ev.stream == "stdout")
            assert got == b"from python\n"
            try:
                c.write_stdin(name, xid, "late")
                raise AssertionError("write_stdin to an ended exec did not fail")
            except hutch.ApiError as e:
                assert e.status == 404, e
        finally:
            c.close()
    out = run_mjs([api.sock_path, "stdin", name], runner=server.runner)
    assert out["exit"] == 0 and out["stdout"] == "from node\n", out
    assert out["late"] == "NotFound 404", out


@pytest.fixture
def menv(caller):
    e = McpEnv(caller)
    yield e
    e.cleanup()


def test_mcp_write_stdin(menv):
    s = RawServer(menv)
    try:
        s.initialize()
        r = s.tool("exec", {"command": "cat", "detach": True, "stdin_open": True})
        xid = r["structuredContent"]["id"]
        r = s.tool("write_stdin", {"id": xid, "input": "from "})
        assert r["isError"] is False and r["structuredContent"] == {
            "id": xid, "written": 5, "closed": False}, r
        r = s.tool("write_stdin", {"id": xid, "input": "mcp\n", "close": True})
        assert r["isError"] is False and r["structuredContent"]["closed"] is True, r
        got = poll_until(lambda: (lambda o: o if o["exit_code"] is not None else None)(
            s.tool("read_output", {"id": xid})["structuredContent"]), 30)
        assert (got["stdout"], got["exit_code"]) == ("from mcp\n", 0), got
        # The twins: ended; started without stdin_open; stdin_open alone.
        r = s.tool("write_stdin", {"id": xid, "input": "late"})
        assert r["isError"] is True and "already ended" in r["content"][0]["text"], r
        r = s.tool("exec", {"command": "sleep 600", "detach": True})
        other = r["structuredContent"]["id"]
        r = s.tool("write_stdin", {"id": other, "input": "x"})
        assert r["isError"] is True and "takes no input" in r["content"][0]["text"], r
        s.tool("kill_process", {"id": other, "grace": 0})
        r = s.tool("exec", {"command": "cat", "stdin_open": True})
        assert r["isError"] is True and "'stdin_open' needs 'detach'" in r["content"][0]["text"], r
    finally:
        rc, err = s.close()
    assert rc == 0, err
