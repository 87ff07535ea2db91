# SPDX-License-Identifier: LGPL-2.1-or-later
"""A persistent sandbox's prepared processes (issue 20): from the first
exec's end on, the keeper keeps two processes waiting in the cgroups of the
next two execs, so that an exec that follows the last one at once does not
wait for a cgroup move. What
must stay true: each exec still has a cgroup of its own (and a kill of one
reaches only it), execs taken from the prepared ones and those forked
afresh (more at once than are prepared) keep their ids in the order they
were asked, and a sandbox's processes are its init, the prepared ones and
its execs, nothing else. Every wait is on an event."""

from test_processes import SERVER, detach, made, ps, wait_json


def own_cgroup(store, name):
    """The v2 line of /proc/self/cgroup of a new exec, and the same of a
    child it forks (the twin: one exec, one cgroup)."""
    out = store.sh(name, "grep '^0::' /proc/self/cgroup; sh -c \"grep '^0::' /proc/self/cgroup\"")
    lines = out.splitlines()
    assert len(lines) == 2, out
    return lines


def test_back_to_back_execs_each_have_a_cgroup_of_their_own(store):
    store.create("box")
    seen = []
    for _ in range(5):
        mine, childs = own_cgroup(store, "box")
        # Twin: what an exec forks stays in its cgroup.
        assert mine == childs, (mine, childs)
        seen.append(mine)
    if seen[0] == "0::/":
        # No cgroups for this caller (the unprivileged user without a
        # delegated subtree): nothing is prepared, each exec runs under
        # a shim in the sandbox's own cgroup.
        assert set(seen) == {"0::/"}, seen
    else:
        assert len(set(seen)) == len(seen), seen
    # The ids follow the order of the requests, one each.
    ids = [h["id"] for h in store.history("box")]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) == 5, ids


def test_more_execs_at_once_than_are_prepared_and_a_kill_reaches_only_its_own(store):
    store.create("box")
    # Three servers at once: two take the prepared processes, the third
    # is forked afresh (or takes one made meanwhile).
    xids = []
    for i in range(3):
        xids.append(detach(store, "box", SERVER.replace("/tmp/up", f"/tmp/up{i}"), "x"))
        assert made(store, "box", f"/tmp/up{i}")
    assert xids == sorted(xids) and len(set(xids)) == 3, xids
    cgroups = set()
    for i in range(3):
        pid = ps(store, "box")[xids[i]]["pid"]
        cgroups.add(store.sh("box", f"grep '^0::' /proc/{pid}/cgroup"))
    assert len(cgroups) == 3 or cgroups == {"0::/\n"}, cgroups

    # Kill the middle one: it ends, the other two run on (the twin).
    r = store.hutch("kill", "box", xids[1])
    assert r.returncode == 0, r.stderr
    assert wait_json(store, "box", xids[1])["reason"] == "killed"
    rows = ps(store, "box")
    assert set(rows) == {xids[0], xids[2]}, rows
    for x in (xids[0], xids[2]):
        r = store.hutch("kill", "box", x)
        assert r.returncode == 0, r.stderr
        assert wait_json(store, "box", x)["reason"] == "killed"
    assert ps(store, "box") == {}


def test_an_idle_sandbox_holds_init_and_its_prepared_processes_only(store):
    store.create("box")
    store.sh("box", "true")
    # Inside: init, at most two prepared processes (both copies of init),
    # and the exec that looks (its sh); nothing an ended exec left.
    procs = store.sh("box", "for p in /proc/[0-9]*; do echo ${p#/proc/} $(cut -d' ' -f4 $p/stat)"
                     " $(tr '\\0' ' ' < $p/cmdline); done 2>/dev/null")
    rows = [(ln.split(maxsplit=2) + [""])[:3] for ln in procs.splitlines() if ln.strip()]
    init_cmd = next(r[2] for r in rows if r[0] == "1")
    mine = ("sh -c for p in", "tr ", "cut ")
    ours = [r for r in rows if r[2].startswith(mine)]
    others = [r for r in rows if r[0] != "1" and r not in ours]
    assert ours, rows
    # Each other process is a child of init running init's own image.
    assert len(others) <= 2, rows
    for r in others:
        assert r[1] == "1" and r[2] == init_cmd, rows
