# SPDX-License-Identifier: LGPL-2.1-or-later
"""The keeper's side of the execs as processes (issue 18 leftovers,
docs/processes.md), as root and as the user:

- a detached exec is answered "started" only once the sandbox's init said
  it started it: `ps` right after `exec -d` never shows pid 0;
- followers (`logs --follow`) have places of their own in the keeper:
  70 of them at once do not lock out control (exec, ps, stop)."""

import json
import os
import select
import sys
import time


from conftest import REPO, kill_quietly
from test_serve import as_euid, create, server  # noqa: F401 (a fixture)

sys.path.insert(0, str(REPO / "clients" / "python"))
import hutch  # noqa: E402

FOLLOWERS = 70


def test_ps_right_after_a_detached_start_has_the_pid(server):  # noqa: F811
    """Start and list back to back on one kept connection, many times: the
    pid is always there (it was 0 for a moment: the keeper answered the
    start before init said which pid it forked)."""
    api = server.api
    name = "pid-" + os.urandom(3).hex()
    create(api, name)
    api.exec(name, ["true"])
    with as_euid(server.uid):
        c = hutch.Client(socket=api.sock_path)
        seen = []
        try:
            for _ in range(40):
                xid = c.exec_detached(name, ["sleep", "600"])
                rows = {p["id"]: p for p in c.processes(name)}
                seen.append(rows[xid]["pid"])
                c.kill(name, xid, signal="KILL")
                c.wait(name, xid)
        finally:
            c.close()
    assert all(p > 0 for p in seen), seen


def test_70_followers_do_not_lock_out_control(store):
    name = "fol-" + os.urandom(3).hex()
    store.create(name)
    r = store.exec(name, "sh", "-c", "echo hello; exec sleep 600", flags=["-d"])
    assert r.returncode == 0, r.stderr
    xid = r.stdout.strip()
    followers = []
    try:
        for _ in range(FOLLOWERS):
            followers.append(store.popen("logs", name, "--exec", xid, "--follow",
                                         stdout=-1, stderr=-1))
        # Each printed what the log holds: each holds its keeper connection.
        deadline = time.monotonic() + 120
        for p in followers:
            ready, _, _ = select.select([p.stdout], [], [], max(0, deadline - time.monotonic()))
            assert ready, "a follower never got its connection"
            assert p.stdout.readline() == "hello\n"
        # Control still gets through: an exec, ps, and the stop.
        r = store.exec(name, "echo", "still here", timeout=60)
        assert r.returncode == 0 and r.stdout == "still here\n", r
        r = store.hutch("ps", name, "--json", timeout=60)
        assert r.returncode == 0 and [e["id"] for e in json.loads(r.stdout)] == [int(xid)], r
        r = store.hutch("stop", name, timeout=120)
        assert r.returncode == 0, r.stderr
        # The stop ended the exec: every follower returns.
        for p in followers:
            p.wait(timeout=60)
            assert p.returncode == 0, p.stderr.read()
    finally:
        for p in followers:
            if p.poll() is None:
                kill_quietly(p.pid)
                p.wait()
            p.stdout.close()
            p.stderr.close()
