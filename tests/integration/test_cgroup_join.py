# SPDX-License-Identifier: LGPL-2.1-or-later
"""A one-shot run's init starts in its cgroups (issue 16): the supervisor
makes them before the clone, clone3(CLONE_INTO_CGROUP) puts init in the
v2 leaf at birth and init's first action moves it into each v1 leaf
through a "tasks" file the supervisor opened. Checked from the host,
since inside its cgroup namespace every path reads "/": while the command
runs, init and the command sit in the run's "exec" leaf of every
hierarchy the run made a cgroup in (v1 and unified), and the limits hold
(memory OOM, pids), each with its twin. Modes: as test_limits.py's `lim`
(root, and the user in delegated v1, hybrid or v2 cgroups)."""

import time
from pathlib import Path
from subprocess import PIPE

from conftest import kill_quietly
from test_limits import (  # noqa: F401 (fixtures)
    BOMB,
    NET,
    cgroup_mounts,
    delegated,
    finish,
    lim,
    run_json,
)

HIERARCHIES = {"memory", "pids", "cpu", "cpuacct", "freezer"}


def children(pid):
    try:
        return [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cgroup_lines(pid):
    """{controllers ("" for v2): path} of @pid as the host sees it."""
    out = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        out[ctrls] = path
    return out


def sandbox_init(hutch_pid, timeout=20):
    """hutch's child that has a child of its own (init and the command)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for k in children(hutch_pid):
            if children(k):
                return k, children(k)
        time.sleep(0.02)
    raise AssertionError("no sandbox init with a command appeared")


def run_name(lines):
    for path in lines.values():
        parts = path.split("/")
        if len(parts) >= 2 and parts[-1] == "exec" and parts[-2].startswith("run-"):
            return parts[-2]
    return None


def hierarchy_has(mount, name):
    return any(p.is_dir() for p in Path(mount).rglob(name))


def mount_of(mounts, ctrls):
    if ctrls == "":
        return mounts.get("unified")
    for c in ctrls.split(","):
        if c in mounts:
            return mounts[c]
    return None


def test_init_and_command_in_every_leaf(lim):
    p = lim.popen(
        ["--memory", "256m", "--pids", "64", "--cpus", "1", *NET, "--", "sh", "-c",
         "echo ready; exec sleep 30"],
        stdout=PIPE,
        stderr=PIPE,
    )
    try:
        assert p.stdout.readline() == "ready\n"
        init, cmds = sandbox_init(p.pid)
        mounts = cgroup_mounts()
        init_lines = cgroup_lines(init)
        name = run_name(init_lines)
        assert name, init_lines
        used = []
        for ctrls, path in init_lines.items():
            if ctrls and not set(ctrls.split(",")) & HIERARCHIES:
                continue
            mnt = mount_of(mounts, ctrls)
            if not mnt or not hierarchy_has(mnt, name):
                # Negative twin: a hierarchy the run made nothing in holds
                # init where hutch is.
                assert not path.endswith(f"/{name}/exec"), (ctrls, path)
                continue
            used.append(ctrls)
            for pid in [init, *cmds]:
                got = cgroup_lines(pid)[ctrls]
                assert got.endswith(f"/{name}/exec"), (pid, ctrls, got)
        # The limits' hierarchies, wherever they are served.
        served = set(",".join(used).split(",")) | ({"memory", "pids", "cpu"} if "" in used else set())
        assert {"memory", "pids", "cpu"} <= served, (used, init_lines)
        # The caller stays outside.
        assert run_name(cgroup_lines(p.pid)) is None
    finally:
        kill_quietly(p.pid)
        finish(p)


def test_memory_limit_holds(lim):
    r, o = run_json(lim, ["--memory", "32m", *NET], BOMB)
    assert r.returncode == 137 and o["reason"] == "oom", (r.returncode, o, r.stderr)


def test_memory_limit_fits_twin(lim):
    r, o = run_json(lim, ["--memory", "512m", *NET], BOMB)
    assert r.returncode == 0 and o["reason"] == "exited", (o, r.stderr)


def test_pids_limit_holds(lim):
    script = "n=0; for i in $(seq 64); do sleep 5 & n=$((n+1)); done; echo $n"
    r, o = run_json(lim, ["--pids", "16", *NET], ["sh", "-c", script])
    assert o["reason"] == "pids", (o, r.stderr[-500:])


def test_pids_limit_fits_twin(lim):
    script = "for i in $(seq 8); do sleep 0.1 & done; wait; echo done"
    r, o = run_json(lim, ["--pids", "16", *NET], ["sh", "-c", script])
    assert r.returncode == 0 and r.stdout == "done\n", (o, r.stderr)
