# SPDX-License-Identifier: LGPL-2.1-or-later
"""Attacks on wave 10's code (r1's review): each test states a claim that
an attack tried to break, with its negative twin.

The keeper's prepared exec processes (issue 20, two since h20p) sit in the
sandbox's cgroup and count towards --pids. Under a small limit a second
one took a process from every exec after the first (the first exec of
`--pids 3` could fork once, the next ones not at all), and at `--pids 2`
init could not fork it while the keeper counted it prepared, so the third
exec ended with 125 "the prepared process is gone". Under a small limit
the keeper prepares one again (src/lib/sandbox/keeper.c stem_prepare()).

The prepared processes are visible inside the sandbox (copies of init),
so its root can kill them (`kill -9 -1` does). The keeper still counted
them prepared, and the next execs (two since h20p) ended with 125 "the
prepared process is gone". Init now keeps each one's cgroup and forks
the exec afresh into it (src/lib/sandbox/init.c serve_exec())."""

import pytest

from test_persistent import root_store  # noqa: F401  (the fixture)

# One child of the command's shell: a subshell.
ONE_CHILD = "(true); echo ok"
# Two children at once: one more than `--pids 3` leaves an exec.
TWO_CHILDREN = "sleep 1 & sleep 1 & wait; echo ok"


@pytest.mark.parametrize("pids,cmd", [(2, ["true"]), (3, ["sh", "-c", ONE_CHILD])])
def test_a_small_pids_limit_gives_every_exec_the_room_of_the_first(root_store, pids, cmd):
    store = root_store
    store.create("box", "--pids", str(pids))
    seen = []
    for _ in range(4):
        r = store.exec("box", *cmd)
        seen.append((r.returncode, r.stdout, r.stderr))
    want = "ok\n" if cmd[0] == "sh" else ""
    assert seen == [(0, want, "")] * 4, seen


def test_a_small_pids_limit_still_holds(root_store):
    # The twin: the limit is enforced, for the first exec and the later
    # ones alike (one process more than it leaves fails to fork).
    store = root_store
    store.create("box", "--pids", "3")
    for _ in range(3):
        r = store.exec("box", "sh", "-c", TWO_CHILDREN)
        assert r.returncode != 0 or "ok" not in r.stdout, (r.returncode, r.stdout, r.stderr)


# Kills every copy of init but init itself: the prepared processes.
KILL_PREPARED = (
    "me=$$; init=$(tr '\\0' ' ' < /proc/1/cmdline); n=0; for p in /proc/[0-9]*; do "
    "q=${p#/proc/}; [ $q = 1 ] || [ $q = $me ] && continue; "
    "[ \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" = \"$init\" ] || continue; "
    "kill -9 $q && n=$((n+1)); done; echo $n"
)


def test_execs_run_after_the_sandbox_killed_its_prepared_processes(root_store):
    store = root_store
    store.create("box")
    store.sh("box", "true")  # from its end on, two are prepared
    assert int(store.sh("box", KILL_PREPARED)) >= 1
    seen = []
    cgroups = []
    for _ in range(3):
        r = store.exec("box", "sh", "-c", "grep '^0::' /proc/self/cgroup")
        seen.append((r.returncode, r.stderr))
        cgroups.append(r.stdout)
    assert seen == [(0, "")] * 3, seen
    # The twin: an exec forked afresh still gets a cgroup of its own, not
    # the sandbox's (where a kill of the exec would miss it).
    assert len(set(cgroups)) == 3 and all("/x-" in c for c in cgroups), cgroups
