# SPDX-License-Identifier: LGPL-2.1-or-later
"""Attacks on the work merged for issue 20 (wave 12 review): each test is
a defect found by trying to break it, and fails on the code before its fix.

Disk-image templates (docs/persistent.md "Disk limit"): a template is used
only when it is what its name says, a regular file of the store's owner of
exactly the size asked for; anything else in its place (a file of another
size, a symlink) is removed and made again. Trusted by name, a template of
the wrong size gave a sandbox a disk of that size, not of its --disk (the
limit silently not the one asked for), and a symlink there made every
create of that size fail.

E2B's pause keeps the sandbox's processes, frozen (docs/e2b.md "Pause"). A
snapshot of a paused sandbox asked the keeper for a freeze, which it
refused (the sandbox was frozen already), and the snapshot route then
stopped the sandbox: its processes ended, though the client had paused it
to keep them. Now the freeze of a paused sandbox is granted as it is, its
end leaves the sandbox paused, and an unpause waits for it."""

import json
import os
from pathlib import Path

from cgroupctl import poll_until
from conftest import live_with_marker
from test_e2b_envd import server  # noqa: F401 (fixture)

from test_persistent import root_store  # noqa: F401 (fixture)
from test_persistent_disk import ENOSPC_TEXT, MIB, fill, image_of

FORTY = ("dd", "if=/dev/zero", "of=/root/forty", "bs=1M", "count=40")


def template_of(store, size):
    (t,) = [p for p in (store.home / "disk-templates").iterdir()
            if p.name.startswith(f"ext4-v1-{size}-")]
    return t


def test_a_template_of_another_size_is_not_trusted_by_its_name(root_store):
    s = root_store
    s.create("a", "--disk", "32m")
    s.create("b", "--disk", "64m")
    t32, t64 = template_of(s, 32 * MIB), template_of(s, 64 * MIB)
    # A whole, valid ext4 image of 64 MiB under the 32 MiB name.
    os.replace(t64, t32)
    s.create("c", "--disk", "32m")
    assert image_of(s, "c").stat().st_size == 32 * MIB
    r = s.exec("c", *FORTY)
    assert r.returncode != 0 and ENOSPC_TEXT in r.stderr, (r.returncode, r.stderr)
    assert template_of(s, 32 * MIB).stat().st_size == 32 * MIB
    # The twin: b's own 64 MiB image (not the template's) holds the 40 MiB.
    assert s.sh("b", " ".join(FORTY) + " status=none && echo ok") == "ok\n"


def test_a_symlink_in_a_templates_place_is_not_followed(root_store):
    s = root_store
    s.create("a", "--disk", "32m")
    t = template_of(s, 32 * MIB)
    aside = s.home / "aside.img"
    os.replace(t, aside)
    t.symlink_to(aside)
    s.create("b", "--disk", "32m")
    t = template_of(s, 32 * MIB)
    assert not t.is_symlink() and t.stat().st_size == 32 * MIB
    assert aside.stat().st_size == 32 * MIB  # what the link named is left alone
    s.sh("b", "echo fine > /root/f")
    assert s.sh("b", "cat /root/f") == "fine\n"
    fill(s, "b", "/root/big")


def frozen(pid):
    """Whether process @pid's cgroup (v2) is frozen (found by its
    cgroup.procs: the sandbox has a cgroup namespace of its own)."""
    for d, _, files in os.walk("/sys/fs/cgroup"):
        if "cgroup.procs" not in files:
            continue
        try:
            if str(pid) not in Path(d, "cgroup.procs").read_text().split():
                continue
            return "frozen 1" in Path(d, "cgroup.events").read_text().splitlines()
        except OSError:
            continue
    raise AssertionError(f"no cgroup holds {pid}")


def test_a_snapshot_of_a_paused_sandbox_keeps_its_processes(server):
    marker = "987123654"
    sid, _ = server.create()
    (sb,) = server.sandboxes()
    r = server.runner.run_raw(["exec", "-d", sb["name"], "--", "sh", "-c",
                               f"exec sleep {marker}"], env=server.env)
    assert r.returncode == 0, r.stderr
    assert poll_until(lambda: live_with_marker(marker), 30)
    (pid,) = live_with_marker(marker)
    assert server.control("POST", f"/sandboxes/{sid}/pause")[0] == 204
    rec = json.loads((server.home / "e2b" / f"{sid}.json").read_text())
    status, body = server.control("POST", f"/sandboxes/{sid}/snapshots", {"name": "while-paused"})
    assert status == 201, body
    if not rec["pausedMemory"]:
        # Where it cannot be frozen, the pause stopped it (docs/e2b.md).
        assert not live_with_marker(marker)
        return
    # The claim: still there, still frozen, still paused.
    assert list(live_with_marker(marker)) == [pid]
    assert frozen(pid)
    assert server.control("GET", f"/sandboxes/{sid}")[0] == 200
    rec = json.loads((server.home / "e2b" / f"{sid}.json").read_text())
    assert rec["state"] == "paused", rec
    # The twin: the resume thaws it, and a snapshot of a running sandbox
    # leaves it running.
    assert server.control("POST", f"/sandboxes/{sid}/resume", {"timeout": 60})[0] == 201
    assert list(live_with_marker(marker)) == [pid] and not frozen(pid)
    status, body = server.control("POST", f"/sandboxes/{sid}/snapshots", {"name": "running"})
    assert status == 201, body
    assert list(live_with_marker(marker)) == [pid] and not frozen(pid)
    # The snapshot taken while paused holds the sandbox's files.
    r = server.runner.run_raw(["snapshot", "ls"], env=server.env)
    assert "while-paused" in r.stdout, (r.stdout, r.stderr)
    assert server.control("DELETE", f"/sandboxes/{sid}")[0] == 204
