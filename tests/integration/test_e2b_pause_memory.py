# SPDX-License-Identifier: LGPL-2.1-or-later
"""E2B's pause keeps the sandbox's memory and processes where the host
can freeze it (issue 20; docs/e2b.md "Pause"), with the real `e2b` SDK
(e2b-pause-memory.mjs) against `hutch serve --e2b` on the host base.

Claims: a background counter keeps its count across pause and connect
(the same command, still listed, continuing from where it was, not
started again); while paused `/health` is 502 (the SDK's isRunning()
false), the list says `paused`, the command's stream ended, and the
counter uses no CPU (its host process's utime+stime do not move, while
it did before: the twin). The fallback, for a caller whose sandboxes
have no cgroup of their own (no freezer): pause stops the sandbox, its
files kept, its processes gone, never a claim that memory was kept.
Run as root (must freeze) and as the unprivileged test user (frozen
when its sandboxes have a cgroup of their own, else the fallback); the
test tells them apart by the host: the counter's process is there while
paused or not."""

import json
import os
import subprocess
import time
import uuid

from conftest import live_with_marker
from test_e2b_envd import e2b_modules, sdk_env, sdk_script, server  # noqa: F401 (fixtures)

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "e2b-pause-memory.mjs")


def cpu_ticks(pid):
    """utime + stime of host process @pid (clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def ticks_move(pid, seconds=1.0):
    """Whether @pid used CPU over @seconds (a busy loop that runs does)."""
    a = cpu_ticks(pid)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)
        if cpu_ticks(pid) != a:
            return True
    return False


def test_pause_keeps_the_running_counter(server, e2b_modules, tmp_path):  # noqa: F811
    node, script = sdk_script(e2b_modules, tmp_path, DRIVER)
    marker = f"hutchcount{uuid.uuid4().hex[:10]}"
    p = subprocess.Popen([node, str(script), marker], env=sdk_env(server, tmp_path),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=str(script.parent))
    try:
        line = p.stdout.readline()
        assert line, p.stderr.read()
        mid = json.loads(line)
        assert "error" not in mid, mid
        assert mid["started"] and mid["paused"] is True, mid
        # /health 502 (isRunning false), listed as paused, the stream ended.
        assert mid["runningWhilePaused"] is False, mid
        assert [True, "paused"] in mid["listedState"], mid
        assert mid["streamWhilePaused"] != "ended", mid
        live = {pid: i for pid, i in live_with_marker(marker).items()
                if pid != p.pid and "/root/count" in i[3]}
        frozen = bool(live)
        # As root every sandbox has a cgroup of its own: frozen, never the
        # fallback (must-work).
        assert frozen or server.runner.uid != 0, live
        if frozen:
            # Kept, and using no CPU while frozen.
            assert not any(ticks_move(pid) for pid in live), live
        p.stdin.write("go\n")
        p.stdin.flush()
        try:
            out, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError(f"the driver hung: {out} {err}")
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    final = json.loads(out.strip().splitlines()[-1])
    assert "error" not in final, json.dumps(final)
    assert final["runningAfter"] is True and final["kept"] == "kept\n", final
    if frozen:
        # The same command, from where it was: counting on.
        assert final["after"] >= final["before"], final
        assert final["stillListed"] and final["counting"], final
        # The twin of the CPU claim: it ran before the pause (counted).
        assert final["before"] > 100
    else:
        # The fallback: stopped, its files kept, its processes gone (never
        # a claim that they were kept).
        assert not final["stillListed"] and not final["counting"], final
    assert server.sandboxes() == []
    assert {pid for pid in live_with_marker(marker) if pid != p.pid} == set()

