# SPDX-License-Identifier: LGPL-2.1-or-later
"""The keeper holds its sandbox's mount namespace from the start until
"stop" is answered (issue 20: init's exit no longer tears the mounts down
before the sandbox's other processes are killed and init is reaped; the
keeper lets go of them after the answer). Claims: while the sandbox runs,
the namespace is init's and the keeper's; once `hutch stop` has returned,
no process on the host holds it, by its namespace or by a descriptor, and
no process of the sandbox is left."""

import os
from pathlib import Path

from cgroupctl import poll_until
from conftest import live_with_marker
from test_persistent import root_store  # noqa: F401 (fixture)
from test_persistent_disk import keeper_pid


def holders(ns):
    """Pids whose mount namespace is @ns or that hold a descriptor of it."""
    out = set()
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if os.readlink(p / "ns" / "mnt") == ns:
                out.add(int(p.name))
            for fd in (p / "fd").iterdir():
                if os.readlink(fd) == ns:
                    out.add(int(p.name))
        except OSError:
            continue
    return out


def test_the_sandboxs_mount_namespace_goes_with_stop(root_store):
    s = root_store
    s.create("m")
    r = s.exec("m", "bash", "-c", "exec -a mntnsmarker sleep 1000", flags=["-d"])
    assert r.returncode == 0, r.stderr
    keeper = keeper_pid(s, "m")
    (init,) = [int(x) for x in
               Path(f"/proc/{keeper}/task/{keeper}/children").read_text().split()]
    ns = os.readlink(f"/proc/{init}/ns/mnt")
    assert ns != os.readlink("/proc/self/ns/mnt")
    # The twin: while it runs, init has it, and the keeper holds it too.
    held = holders(ns)
    assert init in held and keeper in held, (held, init, keeper)
    # A detached exec returns before its bash has exec'd the marked sleep.
    assert poll_until(lambda: live_with_marker("mntnsmarker"), 30)
    r = s.hutch("stop", "m")
    assert r.returncode == 0, r.stderr
    assert holders(ns) == set()
    assert live_with_marker("mntnsmarker") == {}
