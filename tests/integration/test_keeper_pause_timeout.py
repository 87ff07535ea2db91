# SPDX-License-Identifier: LGPL-2.1-or-later
"""The namespace keeper's `pause` does not count against a command's
--timeout (issue 20; docs/e2b.md "Pause"): the keeper checks no deadline
while paused and moves each running exec's on by the paused time at the
unpause (deadline.h's command_deadline_shift()). test_vm_pause.py makes
the same claim for a microVM.

Claims: `sleep 60` with --timeout 3s, paused (the keeper's `pause`
request, what `hutch serve --e2b` sends) for longer than that, still runs
right after the unpause, then ends by its timeout (its outcome's reason);
the twin: without a pause the same command ends by its timeout. As root
(its sandboxes have a cgroup of their own: they can be frozen)."""

import json
import time
from subprocess import PIPE

from cgroupctl import poll_until
from test_persistent import root_store  # noqa: F401 (fixture)
from test_vm_persist import keeper_request

SLOW = "echo $$ > /tmp/slow; exec sleep 60"


def start_slow(store, name):
    out = store.dir / f"{name}-slow.json"
    p = store.popen("exec", name, "--timeout", "3s", "--json", str(out), "--", "sh", "-c", SLOW,
                    stdout=PIPE, stderr=PIPE)
    assert poll_until(lambda: store.exec(name, "test", "-s", "/tmp/slow").returncode == 0, 60)
    pid = store.exec(name, "cat", "/tmp/slow").stdout.strip()
    return p, out, pid


def outcome(p, out):
    p.communicate(timeout=60)
    return p.returncode, json.loads(out.read_text())["reason"]


def test_timeout_does_not_count_the_pause(root_store):  # noqa: F811
    store = root_store
    store.create("box")
    p, out, pid = start_slow(store, "box")
    sock = store.state / "box" / "keeper.sock"
    try:
        assert keeper_request(sock, {"op": "pause"}) == {"op": "ok"}
        try:
            r = store.exec("box", "true")
            assert r.returncode != 0 and "paused" in r.stderr, (r.returncode, r.stderr)
            time.sleep(5)  # the pause has to outlast the 3 s --timeout
        finally:
            assert keeper_request(sock, {"op": "unpause"}) == {"op": "ok"}
        r = store.exec("box", "kill", "-0", pid)
        assert r.returncode == 0 and p.poll() is None, (r.returncode, r.stderr)
        assert outcome(p, out) == (137, "timeout")
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def test_timeout_without_pause(root_store):  # noqa: F811
    store = root_store
    store.create("box")
    p, out, _ = start_slow(store, "box")
    assert outcome(p, out) == (137, "timeout")
