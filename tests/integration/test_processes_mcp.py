# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch mcp`'s processes (docs/mcp.md, docs/processes.md): exec with
detach, list_processes, read_output and kill_process, through the real MCP
SDK client (as test_mcp.py drives it; its output schemas are checked by the
SDK) and over raw JSON-RPC, as root and as the user."""

import pytest

from test_mcp import (McpEnv, RawServer, call, error_text, ok_result, run_client,  # noqa: F401
                      sdk)

SERVER = ("trap 'echo bye; exit 0' TERM; echo up; echo warm >&2; touch /tmp/up; "
          "while :; do sleep 0.1; done")
# Waits (on the file it makes) until the server above is ready for TERM.
READY = "while [ ! -e /tmp/up ]; do sleep 0.05; done"


@pytest.fixture
def smenv(sbx):
    e = McpEnv(sbx)
    yield e
    e.cleanup()


def test_processes_through_the_sdk(sdk, smenv):  # noqa: F811
    """The first exec of a new sandbox is its exec 1."""
    steps = [
        {"op": "listTools"},
        call("exec", command=SERVER, detach=True),
        call("exec", command=READY),
        call("list_processes"),
        call("kill_process", id=1),
        call("read_output", id=1),
        call("list_processes"),
        call("kill_process", id=1),
        call("read_output", id=99),
        call("exec", command="true", detach="yes"),
    ]
    out = run_client(sdk, smenv, steps)
    s = out["steps"]
    names = {t["name"] for t in s[0]["result"]["tools"]}
    assert {"list_processes", "read_output", "kill_process"} <= names, names
    assert ok_result(s[1])["structuredContent"] == {"id": 1, "detached": True}
    assert ok_result(s[2])["structuredContent"]["exit_code"] == 0
    procs = ok_result(s[3])["structuredContent"]["processes"]
    assert [(p["id"], p["argv"][-1], p["detached"]) for p in procs] == [(1, SERVER, True)], procs
    killed = ok_result(s[4])["structuredContent"]
    assert (killed["id"], killed["exit_code"], killed["reason"]) == (1, 0, "exited"), killed
    got = ok_result(s[5])["structuredContent"]
    assert (got["stdout"], got["stderr"], got["running"], got["exit_code"]) == \
        ("up\nbye\n", "warm\n", False, 0), got
    assert ok_result(s[6])["structuredContent"] == {"processes": []}
    # The twins: an ended process, an unknown one, a bad argument.
    assert "exec 1 has already ended (exit 0)" in error_text(s[7])
    assert "there is no exec 99" in error_text(s[8])
    assert "'detach' must be a boolean" in error_text(s[9])


def test_processes_over_raw_json_rpc(menv):
    s = RawServer(menv)
    try:
        s.initialize()
        r = s.tool("exec", {"command": "trap '' TERM; touch /tmp/up; sleep 600", "detach": True})
        xid = r["structuredContent"]["id"]
        assert s.tool("exec", {"command": READY})["structuredContent"]["exit_code"] == 0
        # TERM is ignored: the grace's SIGKILL ends it.
        r = s.tool("kill_process", {"id": xid, "grace": 0.5})
        assert r["isError"] is False, r
        assert (r["structuredContent"]["signal"], r["structuredContent"]["reason"]) == \
            (9, "killed"), r
        r = s.tool("kill_process", {"id": xid, "signal": "NOPE"})
        assert r["isError"] is True and "invalid signal 'NOPE'" in r["content"][0]["text"], r
        r = s.tool("read_output", {"id": 0})
        assert r["isError"] is True and "'id'" in r["content"][0]["text"], r
    finally:
        rc, err = s.close()
    assert rc == 0, err


@pytest.fixture
def menv(caller):
    e = McpEnv(caller)
    yield e
    e.cleanup()
