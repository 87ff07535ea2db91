# SPDX-License-Identifier: LGPL-2.1-or-later
"""A command's own timeoutMs does not run while its sandbox is paused
(issue 20; docs/e2b.md "Pause"): E2B's whole VM stops, and so does the
command's clock here. With the real `e2b` SDK (e2b-pause-timeout.mjs)
against `hutch serve --e2b` on the host base.

Claims: `sleep 40` with timeoutMs 3000, paused at once and for more than
5 s, still runs right after the resume (the same pid, listed), and then
ends by its timeout (the SDK's error for it, as the twin's); the twin:
without a pause the same command ends by its timeout. Run as root (must
freeze) and as the unprivileged test user (frozen when its sandboxes have
a cgroup of their own; else pause stops the sandbox and the command is
gone, which is checked instead)."""

import json
import os
import subprocess
import uuid

from conftest import live_with_marker
from test_e2b_envd import e2b_modules, sdk_env, sdk_script, server  # noqa: F401 (fixtures)

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "e2b-pause-timeout.mjs")


def start(server, modules, tmp_path, marker, mode):
    node, script = sdk_script(modules, tmp_path, DRIVER)
    return subprocess.Popen([node, str(script), marker, mode], env=sdk_env(server, tmp_path),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(script.parent))


def finish(p, go=True):
    try:
        if go:
            p.stdin.write("go\n")
            p.stdin.flush()
        out, err = p.communicate(timeout=240)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    final = json.loads(out.strip().splitlines()[-1])
    assert "error" not in final, (final, err)
    return final


def test_timeout_does_not_run_while_paused(server, e2b_modules, tmp_path):  # noqa: F811
    marker = f"hutchpt{uuid.uuid4().hex[:10]}"
    p = start(server, e2b_modules, tmp_path, marker, "pause")
    try:
        line = p.stdout.readline()
        assert line, p.stderr.read()
        mid = json.loads(line)
        assert "error" not in mid and mid["paused"] is True, mid
        live = [pid for pid, i in live_with_marker(marker).items()
                if pid != p.pid]
        frozen = bool(live)
        assert frozen or server.runner.uid != 0, live
    except BaseException:
        p.kill()
        p.communicate()
        raise
    final = finish(p)
    if frozen:
        # Paused well past its 3 s, yet still running after the resume...
        assert final["runningAfterResume"] is True, final
        # ...and then ended by its timeout, not by itself (sleep 40).
        assert "timeout" in final["end"].lower() or "deadline" in final["end"].lower(), final
        assert final["ranMs"] < 30000 and final["goneMs"] < 30000, final
    else:
        # The fallback stopped the sandbox: the command is gone.
        assert final["runningAfterResume"] is False, final
    assert final["listedAtEnd"] is False, final
    assert {pid for pid in live_with_marker(marker) if pid != p.pid} == set()


def test_timeout_without_pause_ends_the_command(server, e2b_modules, tmp_path):  # noqa: F811
    marker = f"hutchpt{uuid.uuid4().hex[:10]}"
    final = finish(start(server, e2b_modules, tmp_path, marker, "nopause"), go=False)
    assert "timeout" in final["end"].lower() or "deadline" in final["end"].lower(), final
    assert final["ranMs"] < 30000 and final["goneMs"] < 30000, final
    assert final["listedAtEnd"] is False, final
    assert {pid for pid in live_with_marker(marker)} == set()
