# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch serve`'s routes of the execs as processes (docs/api.md,
docs/processes.md): GET .../execs, GET .../execs/{exec}[?wait=1], POST
.../execs/{exec}/signal and GET .../execs/{exec}/output[?follow=1], as
root and as the user, through test_serve's server and client."""

import json
import secrets

import pytest

from test_serve import create, output_bytes, server  # noqa: F401 (a fixture)


def detach(api, name, script):
    r = api.ok("POST", f"/v1/sandboxes/{name}/exec",
               {"argv": ["sh", "-c", script], "detach": True}, status=202)
    return r.json["id"]


def open_output(api, name, xid, follow):
    """GET .../output as a stream: (connection, response)."""
    c = api.connection()
    url = f"/v1/sandboxes/{name}/execs/{xid}/output" + ("?follow=1" if follow else "")
    c.request("GET", url)
    api.hits.add(("GET", url.split("?")[0]))
    return c, c.getresponse()


def exercise_process_routes(api, name):
    """Every route of the processes, once, on running sandbox @name (also
    test_serve.py's test_every_route)."""
    script = ("echo up; echo warm >&2; while [ ! -e /tmp/go ]; do sleep 0.1; done; "
              "echo more; trap 'exit 0' TERM; while :; do sleep 0.1; done")
    xid = detach(api, name, script)
    execs = api.ok("GET", f"/v1/sandboxes/{name}/execs").json["execs"]
    assert [x["id"] for x in execs] == [xid], execs
    x = execs[0]
    assert x["argv"] == ["sh", "-c", script] and x["detached"] and x["running"], x
    got = api.ok("GET", f"/v1/sandboxes/{name}/execs/{xid}").json
    # The pid comes when the sandbox's init says it started (0 until then).
    assert {**got, "pid": 0} == {**x, "pid": 0} and got["pid"] >= x["pid"], (got, x)

    c, resp = open_output(api, name, xid, follow=True)
    try:
        assert resp.status == 200 and resp.getheader("Content-Type") == "application/x-ndjson"
        # Lines come while it runs: "up" before it is told to go on.
        first = json.loads(resp.readline())
        assert first == {"stream": "stdout", "data": "up\n", "encoding": "utf-8"}, first
        api.exec(name, ["touch", "/tmp/go"])
        lines = []
        while not any(ln.get("stream") == "stdout" and "more" in ln["data"] for ln in lines):
            lines.append(json.loads(resp.readline()))
        api.ok("POST", f"/v1/sandboxes/{name}/execs/{xid}/signal", {"signal": "TERM"},
               status=204)
        rest = [json.loads(ln) for ln in resp.read().decode().splitlines()]
    finally:
        c.close()
    lines = [first, *lines, *rest]
    assert output_bytes(lines, "stdout") == b"up\nmore\n", lines
    assert output_bytes(lines, "stderr") == b"warm\n", lines
    assert lines[-1]["outcome"]["exit_code"] == 0, lines[-1]
    got = api.ok("GET", f"/v1/sandboxes/{name}/execs/{xid}?wait=1").json
    assert got["running"] is False and got["outcome"]["exit_code"] == 0, got
    return xid


def test_process_routes(server):  # noqa: F811
    api = server.api
    name = f"p-{secrets.token_hex(3)}"
    create(api, name)
    api.exec(name, ["true"])
    xid = exercise_process_routes(api, name)
    # Without follow: what there is, then the end (no outcome line).
    c, resp = open_output(api, name, xid, follow=False)
    lines = [json.loads(ln) for ln in resp.read().decode().splitlines()]
    c.close()
    assert output_bytes(lines, "stdout") == b"up\nmore\n" and "outcome" not in lines[-1]

    # Bad input: 404 for an exec that never was or ended, 400 for a bad id
    # or signal; nothing is left running.
    r = api.call("POST", f"/v1/sandboxes/{name}/execs/{xid}/signal", {})
    assert r.status == 404 and f"exec {xid} has already ended (exit 0)" in r.error["message"], r
    r = api.call("GET", f"/v1/sandboxes/{name}/execs/999")
    assert r.status == 404 and "there is no exec 999" in r.error["message"], r
    r = api.call("GET", f"/v1/sandboxes/{name}/execs/999/output")
    assert r.status == 404, r
    r = api.call("GET", f"/v1/sandboxes/{name}/execs/0")
    assert r.status == 400, r
    long_running = detach(api, name, "sleep 600")
    r = api.call("POST", f"/v1/sandboxes/{name}/execs/{long_running}/signal", {"signal": "NOPE"})
    assert r.status == 400 and r.error["field"] == "/signal", r
    api.ok("POST", f"/v1/sandboxes/{name}/execs/{long_running}/signal", {"signal": "KILL"},
           status=204)
    got = api.ok("GET", f"/v1/sandboxes/{name}/execs/{long_running}?wait=1").json
    assert (got["outcome"]["reason"], got["outcome"]["signal"]) == ("killed", 9), got
    assert api.ok("GET", f"/v1/sandboxes/{name}/execs").json == {"execs": []}
    api.ok("DELETE", f"/v1/sandboxes/{name}", status=204)


def test_python_client_processes(root_runner):
    """clients/python's processes(), output(), kill() and wait() against
    the real server (as root: the client connects as the test's own uid)."""
    import sys

    from conftest import REPO
    from test_serve import Server

    sys.path.insert(0, str(REPO / "clients" / "python"))
    try:
        import hutch
        from hutch.client import OutputChunk
    finally:
        sys.path.pop(0)
    srv = Server(root_runner)
    try:
        _, path, _ = srv.start()
        with hutch.Client(socket=path) as c:
            name = f"py-{secrets.token_hex(3)}"
            c.create(name)
            sb = c.sandbox(name)
            xid = sb.exec_detached(["sh", "-c", "echo hi; echo oops >&2; touch /tmp/up; "
                                                "while :; do sleep 0.1; done"])
            assert sb.exec(["sh", "-c", "while [ ! -e /tmp/up ]; do sleep 0.05; done"]).ok
            assert [p["id"] for p in sb.processes()] == [xid]
            assert sb.process(xid)["running"] is True
            chunks = list(sb.output(xid))
            assert b"".join(x.data for x in chunks if isinstance(x, OutputChunk)
                            and x.stream == "stdout") == b"hi\n", chunks
            sb.kill(xid)
            o = sb.wait(xid)
            assert (o.reason, o.signal, o.exit_code) == ("killed", 15, 143), o
            assert sb.processes() == []
            with pytest.raises(hutch.ApiError) as e:
                sb.kill(xid)
            assert "has already ended" in str(e.value)
            c.delete(name)
    finally:
        srv.cleanup()


TS_CHECK = """
import { HutchClient } from %(index)s;
const c = new HutchClient({ socket: process.argv[2] });
const sb = await c.create(process.argv[3]);
const id = await sb.execDetached(["sh", "-c",
  "echo hi; echo oops >&2; touch /tmp/up; while :; do sleep 0.1; done"]);
await sb.exec(["sh", "-c", "while [ ! -e /tmp/up ]; do sleep 0.05; done"]);
const procs = await sb.processes();
const out = [];
for await (const ev of sb.output(id)) if (ev.stream) out.push([ev.stream, ev.data.toString()]);
await sb.kill(id, { signal: "KILL" });
const o = await sb.wait(id);
let refused = null;
try { await sb.kill(id); } catch (e) { refused = e.message; }
await sb.delete();
console.log(JSON.stringify({ ids: procs.map((p) => p.id), id, out, exitCode: o.exitCode, refused }));
"""


def test_typescript_client_processes(root_runner, tmp_path):
    """clients/typescript's processes(), output(), kill() and wait()."""
    import shutil
    import subprocess

    from conftest import REPO
    from test_serve import Server

    node = shutil.which("node")
    if not node:
        pytest.fail("needs node (tools/deps.sh installs nodejs)")
    script = tmp_path / "check.mjs"
    index = json.dumps((REPO / "clients" / "typescript" / "index.js").as_uri())
    script.write_text(TS_CHECK % {"index": index})
    srv = Server(root_runner)
    try:
        _, path, _ = srv.start()
        r = subprocess.run([node, str(script), path, f"ts-{secrets.token_hex(3)}"],
                           capture_output=True, text=True, timeout=120)
    finally:
        srv.cleanup()
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["ids"] == [got["id"]], got
    assert ["stdout", "hi\n"] in got["out"] and ["stderr", "oops\n"] in got["out"], got
    assert got["exitCode"] == 137 and "has already ended" in got["refused"], got
