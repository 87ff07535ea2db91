# SPDX-License-Identifier: LGPL-2.1-or-later
"""E2B's kill (DELETE /sandboxes/{id}, docs/e2b.md) with the real `e2b` SDK:
when kill() returns, every process of the sandbox has ended (a background
command, one that ignores SIGTERM and SIGHUP, a child in a session of its own),
as root and as the unprivileged test user. The answer does not wait for the
rest (issue 20): the keeper's own exit, the release of the sandbox's disk
image and the removal of its files come after it, and are all done soon
after: no hutch sandbox, no keeper, no loop device or mount of the store
left, and the sandbox is gone from the API at once."""

import json
import subprocess
import uuid

from cgroupctl import poll_until
from conftest import live_with_marker
from test_e2b_envd import e2b_modules, sdk_env, sdk_script, server  # noqa: F401 (fixtures)
from test_persistent_disk import nothing_attached


def keepers_of(server):
    """Pids of keepers whose environment names @server's store."""
    out = []
    for pid, info in live_with_marker("__keeper").items():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"HUTCH_HOME={server.home}".encode() in env:
            out.append(pid)
    return out


def next_json(proc):
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return json.loads(line)


def test_kill_returns_once_every_process_has_ended(server, e2b_modules, tmp_path):
    marker = f"e2bkill{uuid.uuid4().hex[:8]}"
    node, script = sdk_script(e2b_modules, tmp_path, __file__.replace("test_e2b_kill.py",
                                                                      "e2b-kill.mjs"))
    p = subprocess.Popen([node, str(script), marker], env=sdk_env(server, tmp_path),
                         cwd=str(script.parent), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert next_json(p) == {"phase": "started"}
        # The twin: before the kill, all three run (the session one may
        # take a moment to exec).
        names = {f"{marker}-plain", f"{marker}-stubborn", f"{marker}-session"}
        seen = poll_until(lambda: {n for n in names if live_with_marker(n)} == names, 30)
        assert seen, {n: live_with_marker(n) for n in names}
        assert len(server.sandboxes()) == 1
        p.stdin.write("go\n")
        p.stdin.flush()
        assert next_json(p) == {"phase": "killed", "kill": True}
        # The claim: the moment kill() has returned, none is left (no
        # waiting here).
        assert {n: live_with_marker(n) for n in names} == {n: {} for n in names}
        p.stdin.write("go\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, out + err
    res = json.loads(out.strip().splitlines()[-1])
    assert "error" not in res, res
    assert res["running"] is False and res["listed"] == [] and res["killAgain"] is False, res
    # What the answer did not wait for is done right after it.
    assert poll_until(lambda: server.sandboxes() == [] and not keepers_of(server)
                      and nothing_attached(server.home), 30), (
        server.sandboxes(), keepers_of(server))
    assert not list((server.home / "sandboxes").iterdir())
