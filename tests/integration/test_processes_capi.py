# SPDX-License-Identifier: LGPL-2.1-or-later
"""The C API's hutch_exec_detached(), _list(), _signal(), _wait() and
_output() (docs/api-c.md, docs/processes.md), driven through capi-probe
(built against the installed hutch.h) as root and as the user."""

import json
import signal

import pytest

from cgroupctl import poll_until
from test_capi import Api, installed  # noqa: F401 (a fixture)


@pytest.fixture
def api(sbx, installed):  # noqa: F811
    a = Api(sbx, installed)
    yield a
    a.cleanup()


def test_capi_lists_signals_follows_and_waits_for_an_exec(api):
    api.create("box")
    script = "echo out; echo err >&2; touch /tmp/up; while :; do sleep 1; done"
    xid = api.ok("exec-detached", "box", "--", "sh", "-c", script)["id"]
    assert xid > 0

    def up():
        r = api.probe("exec", "box", "--", "test", "-e", "/tmp/up")
        return r.returncode == 0 and '"exit_code":0' in r.stderr

    assert poll_until(up, 30)
    rows = {x["id"]: x for x in api.ok("exec-list", "box")}
    assert rows[xid]["argv"] == ["sh", "-c", script] and rows[xid]["detached"], rows
    assert rows[xid]["pid"] > 1, rows
    r = api.probe("exec-output", "box", xid)
    assert (r.returncode, r.stdout, r.stderr) == (0, "out\n", "err\n"), r

    assert api.ok("exec-signal", "box", xid, int(signal.SIGTERM), 10000) == {}
    o = api.ok("exec-wait", "box", xid)
    assert (o["reason"], o["signal"], o["exit_code"]) == ("killed", 15, 143), o
    assert xid not in {x["id"] for x in api.ok("exec-list", "box")}

    # Errors: ended, unknown, not detached.
    e = api.err("exec-signal", "box", xid, int(signal.SIGTERM), 0)
    assert e["error"] == 3 and f"exec {xid} has already ended (exit 143)" in e["message"], e
    e = api.err("exec-wait", "box", 999)
    assert e["error"] == 2 and "there is no exec 999" in e["message"], e
    api.exec("box", "true")
    attached = max(x for x in range(xid + 1, xid + 10)
                   if api.probe("exec-wait", "box", x).returncode == 0)
    e = api.err("exec-output", "box", attached)
    assert e["error"] == 2 and "no output log" in e["message"], e
    # A stopped sandbox: nothing runs, the history still answers.
    assert api.ok("stop", "box") == {}
    assert api.ok("exec-list", "box") == []
    assert api.ok("exec-wait", "box", xid)["exit_code"] == 143
    r = api.probe("exec-output", "box", xid)
    assert (r.returncode, r.stdout, r.stderr) == (0, "out\n", "err\n"), r
    assert json.loads(api.probe("exec-wait", "box", attached).stdout)["exit_code"] == 0
