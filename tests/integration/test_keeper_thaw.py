# SPDX-License-Identifier: LGPL-2.1-or-later
"""Only the keeper connection that froze a sandbox thaws it
(sandbox/keeper.h, docs/persistent.md "Snapshots"): a {"op":"thaw"} on a
fresh connection used to thaw a sandbox paused by E2B's pause (its
`paused` still true) or frozen by another connection's snapshot freeze,
behind their backs. Claims, as root (its sandboxes have a cgroup of
their own): such a thaw is refused and the sandbox's busy loop still uses
no CPU; the twins: "unpause" and the freezing connection's own "thaw"
(or its close) let it run again."""

import json
import socket

from cgroupctl import poll_until
from conftest import live_with_marker
from test_e2b_pause_memory import ticks_move
from test_persistent import root_store  # noqa: F401 (fixture)
from test_vm_persist import keeper_request

SPIN = "exec -a thawspinner sh -c 'while :; do :; done'"


def spinner(store):
    store.create("box")
    r = store.exec("box", "bash", "-c", SPIN, flags=["-d"])
    assert r.returncode == 0, r.stderr
    live = poll_until(lambda: live_with_marker("thawspinner"), 30)
    assert len(live) == 1, live
    (pid,) = live
    assert ticks_move(pid)
    return pid


def ask(s, msg):
    s.send(json.dumps(msg).encode())
    return json.loads(s.recv(65536))


def test_a_fresh_thaw_does_not_undo_a_pause(root_store):  # noqa: F811
    store = root_store
    pid = spinner(store)
    sock = store.state / "box" / "keeper.sock"
    assert keeper_request(sock, {"op": "pause"}) == {"op": "ok"}
    assert not ticks_move(pid)
    a = keeper_request(sock, {"op": "thaw"})
    assert a["op"] == "error" and "nothing to thaw" in a["message"], a
    assert not ticks_move(pid)
    r = store.exec("box", "true")
    assert r.returncode != 0 and "paused" in r.stderr, (r.returncode, r.stderr)
    # The twin: unpause lets it run.
    assert keeper_request(sock, {"op": "unpause"}) == {"op": "ok"}
    assert ticks_move(pid)
    assert store.exec("box", "true").returncode == 0


def test_only_the_freezing_connection_thaws(root_store):  # noqa: F811
    store = root_store
    pid = spinner(store)
    path = str(store.state / "box" / "keeper.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as holder:
        holder.settimeout(30)
        holder.connect(path)
        assert ask(holder, {"op": "freeze"}) == {"op": "ok"}
        assert not ticks_move(pid)
        a = keeper_request(path, {"op": "thaw"})
        assert a["op"] == "error" and "nothing to thaw" in a["message"], a
        assert not ticks_move(pid)
        # The twin: the holder's own thaw.
        assert ask(holder, {"op": "thaw"}) == {"op": "ok"}
        assert ticks_move(pid)
        # Frozen again, and thawed by the holder's close.
        assert ask(holder, {"op": "freeze"}) == {"op": "ok"}
        assert not ticks_move(pid)
    assert poll_until(lambda: ticks_move(pid), 30)
