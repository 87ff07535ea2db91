# SPDX-License-Identifier: LGPL-2.1-or-later
"""E2B's pause of a sandbox that `hutch snapshot` holds frozen at that
moment (docs/e2b.md "Pause"): the keeper refuses the pause as busy
(keeper_send_refusal(): EBUSY), and the server answers 409 without
stopping the sandbox. It used to take any refusal for "cannot be frozen"
and stop it: its processes, which the pause is there to keep, ended and
the answer was 204. Claims, as root (its sandboxes have a cgroup of their
own): 409 naming the snapshot, the marked process still there (E2B's
own snapshot meanwhile: 409 too); the twin:
once the snapshot's freeze is let go, the same pause is a 204 and keeps
the process frozen, and resume runs it again."""

import json
import socket
import uuid

import pytest

from cgroupctl import poll_until
from conftest import live_with_marker
from test_e2b_envd import E2bServer
from test_e2b_pause_memory import ticks_move


@pytest.fixture
def server(root_runner):
    s = E2bServer(root_runner)
    yield s
    s.stop()


def test_a_pause_during_a_snapshot_is_409_and_stops_nothing(server):
    sid, _ = server.create()
    name = f"e2b-{sid}"
    marker = f"busy{uuid.uuid4().hex[:10]}"
    r = server.runner.run_raw(["exec", "-d", name, "--", "bash", "-c",
                               f"exec -a {marker} sh -c 'while :; do :; done'"], env=server.env)
    assert r.returncode == 0, r.stderr
    live = poll_until(lambda: live_with_marker(marker), 30)
    assert len(live) == 1, live
    (pid,) = live
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as holder:
        holder.settimeout(30)
        holder.connect(str(server.state / name / "keeper.sock"))
        holder.send(json.dumps({"op": "freeze"}).encode())
        assert json.loads(holder.recv(65536)) == {"op": "ok"}
        status, body = server.control("POST", f"/sandboxes/{sid}/pause")
        assert status == 409 and b"snapshot" in body, (status, body)
        assert set(live_with_marker(marker)) == {pid}
        # E2B's own snapshot meanwhile: busy too, not a stop either.
        status, body = server.control("POST", f"/sandboxes/{sid}/snapshots", {"name": "busy"})
        assert status == 409, (status, body)
        assert set(live_with_marker(marker)) == {pid}
        assert not ticks_move(pid)
    # The twin: the freeze let go, the process runs; the pause keeps it.
    assert poll_until(lambda: ticks_move(pid), 30)
    status, body = server.control("POST", f"/sandboxes/{sid}/pause")
    assert status == 204, (status, body)
    assert set(live_with_marker(marker)) == {pid} and not ticks_move(pid)
    status, body = server.control("POST", f"/sandboxes/{sid}/resume", {})
    assert status == 201, (status, body)
    assert poll_until(lambda: ticks_move(pid), 30)
