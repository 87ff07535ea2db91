# SPDX-License-Identifier: LGPL-2.1-or-later
"""stdin for an exec that already runs, on the microVM backend (issue 18,
docs/processes.md, docs/vm.md): test_exec_stdin's cases on a VM sandbox
(`--backend vm`), through hutch serve's POST
/v1/sandboxes/{name}/execs/{exec}/stdin[?close=1] and the Python client's
write_stdin; as root and as the user. The keeper holds the write end of a
pipe that is the exec's session's stdin; the bytes reach the guest's
command through the agent's STDIN frames. The twins: an exec started
without "stdin_open" is refused (409) and its stdin is /dev/null, so is
one whose stdin was closed; an ended or unknown exec is 404. One VM per
runner (TCG is slow)."""

import os
import sys

from cgroupctl import poll_until
from conftest import REPO
from test_exec_stdin import output, start, stdin
from test_serve import Api as ServeApi
from test_serve import Server, as_euid
from test_vm_persist import any_store, assert_vm_gone, started_vm, vm_store_dir  # noqa: F401

sys.path.insert(0, str(REPO / "clients" / "python"))
import hutch  # noqa: E402

WAIT = 240


def wait_outcome(api, name, xid):
    return api.ok("GET", f"/v1/sandboxes/{name}/execs/{xid}?wait=1").json["outcome"]


def check_input_later(api, name):
    xid = start(api, name, ["cat"], stdin_open=True)
    assert stdin(api, name, xid, b"hello ").status == 204
    # Still running: it waits for more.
    got = api.ok("GET", f"/v1/sandboxes/{name}/execs/{xid}").json
    assert got["running"] is True, got
    blob = os.urandom(600_000)  # more than the pipe and the channel's window hold
    assert stdin(api, name, xid, b"world\n" + blob).status == 204
    assert stdin(api, name, xid, close=True).status == 204
    out = wait_outcome(api, name, xid)
    assert out["exit_code"] == 0, out
    assert output(api, name, xid) == b"hello world\n" + blob
    # The twin: it ended: 404.
    r = stdin(api, name, xid, b"late")
    assert r.status == 404 and "already ended" in r.error["message"], r

    # Data and the close in one request.
    xid = start(api, name, ["sh", "-c", "wc -c"], stdin_open=True)
    assert stdin(api, name, xid, b"12345", close=True).status == 204
    wait_outcome(api, name, xid)
    assert output(api, name, xid).strip() == b"5"


def check_refusals(api, name):
    # Started without it: 409 naming why; its stdin is /dev/null (cat
    # ends at once, then it sleeps).
    xid = start(api, name, ["sh", "-c", "cat; echo eof; exec sleep 600"])
    assert poll_until(lambda: output(api, name, xid) == b"eof\n", WAIT)
    r = stdin(api, name, xid, b"x")
    assert r.status == 409 and "takes no input" in r.error["message"], r
    assert stdin(api, name, xid, close=True).status == 409
    api.ok("POST", f"/v1/sandboxes/{name}/execs/{xid}/signal", {"signal": "KILL"}, status=204)
    wait_outcome(api, name, xid)
    # Closed already: 409; the command saw EOF.
    xid = start(api, name, ["sh", "-c", "cat; echo closed; exec sleep 600"], stdin_open=True)
    assert stdin(api, name, xid, close=True).status == 204
    assert poll_until(lambda: output(api, name, xid) == b"closed\n", WAIT)
    r = stdin(api, name, xid, b"more")
    assert r.status == 409 and "takes no input" in r.error["message"], r
    api.ok("POST", f"/v1/sandboxes/{name}/execs/{xid}/signal", {"signal": "KILL"}, status=204)
    wait_outcome(api, name, xid)
    # Unknown exec: 404.
    r = stdin(api, name, 99999, b"x")
    assert r.status == 404 and r.error["code"] == "not_found", r


def check_python_client(server, api, name):
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
        finally:
            c.close()


def test_vm_exec_takes_stdin_later(any_store):
    store = any_store
    keeper, qemu = started_vm(store, "box", "true")
    srv = Server(store.runner)
    srv.env = store.env()
    proc, path, _ = srv.start()
    try:
        srv.api = ServeApi(path, srv.uid)
        check_input_later(srv.api, "box")
        check_refusals(srv.api, "box")
        check_python_client(srv, srv.api, "box")
    finally:
        srv.stop(proc)
    assert store.hutch("rm", "--force", "box").returncode == 0
    assert_vm_gone(store, "box", keeper, qemu)
