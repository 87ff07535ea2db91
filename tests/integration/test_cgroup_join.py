# SPDX-License-Identifier: LGPL-2.1-or-later
"""A one-shot run's init starts in its cgroups (issue 16): the supervisor
makes them before the clone, clone3(CLONE_INTO_CGROUP) puts init in the
v2 leaf at birth and init's first action moves it into each v1 leaf
through a "tasks" file the supervisor opened. Checked from the host,
since inside its cgroup namespace every path reads "/": while the command
runs, init and the command sit in the run's leaf of every hierarchy the
run made a cgroup in: "<run>" itself on v1, which allows processes next
to child cgroups, and on v2 without a memory limit there (one cgroup less
per hierarchy and run, issue 16), else "<run>/exec", and the limits hold
(memory OOM, pids), each with its twin. Modes: as test_limits.py's `lim`
(root, and the user in delegated v1, hybrid or v2 cgroups). A failing
join (strace injecting EACCES into init's first write, its "tasks" one;
root on a host with a v1 hierarchy) is exit 125 naming the move, the
command never runs and no cgroup of the run is left; its twin runs under
the same strace without the injection."""

import re
import shutil
import subprocess
import time
from pathlib import Path
from subprocess import PIPE

import pytest

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
        if parts[-1].startswith("run-"):
            return parts[-1]
    return None


def in_leaf(ctrls, path, name):
    """@path (a /proc/PID/cgroup one) is the run's leaf: "/<name>" on v1;
    on v2 "/<name>/exec" with a memory limit there, else "/<name>" (which
    one is the unit test real_run_has_no_leaf_where_it_needs_none's)."""
    if ctrls != "":
        return path.endswith(f"/{name}")
    return path.endswith(f"/{name}") or path.endswith(f"/{name}/exec")


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
                assert f"/{name}" not in path, (ctrls, path)
                continue
            used.append(ctrls)
            for pid in [init, *cmds]:
                got = cgroup_lines(pid)[ctrls]
                assert in_leaf(ctrls, got, name), (pid, ctrls, got)
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


# ---- a failing join ----


def traced_run(runner, inject, cmd=("true",)):
    """`hutch run -- CMD` as root under strace -f, failing the first
    write(2) of each process with EACCES when @inject: init's first write
    is its move into a v1 leaf's "tasks" (the supervisor's first one, a
    limit, only degrades the default limits). Returns (CompletedProcess,
    hutch's pid: the first one of the trace)."""
    if not shutil.which("strace"):
        pytest.skip("needs strace (tools/deps.sh test installs it)")
    trace = runner.make_dir(name="trace") / "strace.out"
    when = "1" if inject else "65535"
    r = subprocess.run(
        ["strace", "-f", "-qq", "-o", str(trace), "-e", "trace=write", "-e",
         f"inject=write:error=EACCES:when={when}", *runner.argv(["--", *cmd])],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        cwd=str(runner.base_dir),
    )
    assert trace.exists(), r.stderr
    first = trace.read_text().split(None, 1)
    return r, joined(trace.read_text()), int(first[0]) if first else None


def joined(trace):
    """strace -f's lines with each call that another process interrupted
    (`PID  write(9, "0", 1 <unfinished ...>`, later `PID  <... write
    resumed>) = -1 EACCES`) put back on one line."""
    pending, out = {}, []
    for line in trace.splitlines():
        m = re.match(r"(\d+)\s+(.*) <unfinished \.\.\.>$", line)
        if m:
            pending[m[1]] = m[2]
            continue
        m = re.match(r"(\d+)\s+<\.\.\. \w+ resumed>(.*)$", line)
        if m and m[1] in pending:
            line = f"{m[1]}  {pending.pop(m[1])}{m[2]}"
        out.append(line)
    return "\n".join(out) + "\n"


def leftovers(hutch_pid):
    found = []
    for mnt in set(cgroup_mounts().values()):
        found += [str(p) for p in Path(mnt).rglob(f"run-{hutch_pid}-*")]
    return found


def test_failed_join_is_an_error_with_nothing_left(root_runner):
    if not HIERARCHIES & set(cgroup_mounts()):
        pytest.skip("needs a v1 hierarchy (a hybrid host): on pure v2 init joins at clone")
    r, trace, pid = traced_run(root_runner, inject=True, cmd=("sh", "-c", "echo RAN"))
    assert r.returncode == 125, (r.returncode, r.stderr)
    assert "move the sandbox into its cgroup" in r.stderr, r.stderr
    assert "RAN" not in r.stdout
    assert re.search(r'write\(\d+, "0", 1\)\s+= -1 EACCES', trace), trace[-2000:]
    assert not leftovers(pid)


def test_join_under_strace_without_injection_twin(root_runner):
    r, _, pid = traced_run(root_runner, inject=False, cmd=("sh", "-c", "echo RAN"))
    assert r.returncode == 0 and r.stdout == "RAN\n", r.stderr
    assert not leftovers(pid)
