# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch diff` shows permission changes and `hutch apply` does not make
the user's files group/other-writable or sticky on a sandbox's say (issue
26 item 3, docs/persistent.md "diff and apply").

A sandbox with an overlay workspace runs `chmod 1777 dir; chmod 777 file;
mkdir -m777 d2` and gives a script its owner's execute bit. `hutch diff`
shows the mode changes as git does (`old mode` / `new mode`); `hutch
apply` writes the content and the owner's bits, keeps the host's safe
mode for the rest and says so on stderr; `apply --modes` applies them
(the twin that shows the checks see a wide mode when it is there). As
root and as the unprivileged user, each with its own store."""

import os
import stat

from test_snapshots import hx, new_sandbox  # noqa: F401 (hx: the fixture)

CHANGES = (
    "cd /workspace && chmod 1777 shared && chmod 777 notes.txt && mkdir -m777 d2 && "
    "echo new > d2/f && chmod 666 d2/f && chmod u+x run.sh"
)


def mode(p):
    return stat.S_IMODE(os.lstat(p).st_mode)


def workspace(h):
    ws = h.workspace()
    (ws / "shared").mkdir()
    os.chmod(ws / "shared", 0o755)
    (ws / "notes.txt").write_text("notes\n")
    os.chmod(ws / "notes.txt", 0o644)
    (ws / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(ws / "run.sh", 0o644)
    h.chown(ws)
    return ws


def test_diff_shows_mode_changes(hx):
    h = hx
    ws = workspace(h)
    new_sandbox(h, "m", "--workspace", ws)
    h.sh("m", CHANGES)
    patch = h.ok("diff", "m")
    assert "diff --git a/shared b/shared\nold mode 040755\nnew mode 041777\n" in patch, patch
    assert "diff --git a/notes.txt b/notes.txt\nold mode 100644\nnew mode 100777\n" in patch, patch
    assert "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100744\n" in patch, patch
    assert "diff --git a/d2/f b/d2/f\nnew file mode 100666\n" in patch, patch
    assert patch.count("old mode") == 3, patch


def test_apply_keeps_the_hosts_safe_modes(hx):
    h = hx
    ws = workspace(h)
    new_sandbox(h, "m", "--workspace", ws)
    h.sh("m", CHANGES)
    r = h.run("apply", "m")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("applied "), r.stdout
    # Written: the content, and the owner's execute bit (negative twin).
    assert (ws / "d2" / "f").read_text() == "new\n"
    assert mode(ws / "run.sh") == 0o744
    # Kept safe: no group/other write, no sticky bit (read and execute
    # bits are applied as they are).
    assert mode(ws / "shared") == 0o755
    assert mode(ws / "notes.txt") == 0o755
    assert mode(ws / "d2") == 0o755
    assert mode(ws / "d2" / "f") == 0o644
    # And said, path by path; nothing about run.sh.
    for line in (
        "'notes.txt': mode 0777 kept as 0755",
        "'d2': mode 0777 kept as 0755",
        "'d2/f': mode 0666 kept as 0644",
        "'shared': mode 1777 kept as 0755",
    ):
        assert line in r.stderr, r.stderr
    assert "--modes" in r.stderr and "run.sh" not in r.stderr, r.stderr
    # What was not applied is still a difference.
    patch = h.ok("diff", "m")
    assert "old mode 100755\nnew mode 100777\n" in patch, patch
    assert "run.sh" not in patch, patch

    # --modes applies them as they are.
    r = h.run("apply", "m", "--modes")
    assert r.returncode == 0, r.stderr
    assert "kept as" not in r.stderr, r.stderr
    assert mode(ws / "shared") == 0o1777
    assert mode(ws / "notes.txt") == 0o777
    assert mode(ws / "d2") == 0o777
    assert mode(ws / "d2" / "f") == 0o666
    assert h.ok("diff", "m", "--stat").strip() == "no changes"


def test_apply_modes_from_the_start(hx):
    """--modes on the first apply: everything as the sandbox had it."""
    h = hx
    ws = workspace(h)
    new_sandbox(h, "m", "--workspace", ws)
    h.sh("m", CHANGES)
    r = h.run("apply", "m", "--modes")
    assert r.returncode == 0, r.stderr
    assert "kept as" not in r.stderr, r.stderr
    assert (mode(ws / "shared"), mode(ws / "notes.txt"), mode(ws / "d2")) == (0o1777, 0o777, 0o777)
    assert mode(ws / "run.sh") == 0o744
