# SPDX-License-Identifier: LGPL-2.1-or-later
"""A persistent sandbox's execs as processes (docs/processes.md): `hutch ps`,
`kill`, `wait` and `logs --exec ID [--follow]`, as root and as the
unprivileged user, against the namespace backend (the VM backend's are in
test_processes_vm.py). Every wait is on an event: a line read from a pipe,
a file the sandbox makes, a process's end."""

import json
import os
import signal
from pathlib import Path
from subprocess import PIPE

import pytest

from cgroupctl import poll_until
from conftest import live_with_marker
from diskutil import data_of
from test_persistent import marker

MIB = 1 << 20


def detach(store, name, script, *args):
    """exec -d NAME -- sh -c SCRIPT ARGS: the exec's id."""
    r = store.hutch("exec", name, "-d", "--", "sh", "-c", script, *args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().isdigit(), r.stdout
    return int(r.stdout.strip())


def ps(store, name):
    r = store.hutch("ps", name, "--json")
    assert r.returncode == 0, r.stderr
    return {e["id"]: e for e in json.loads(r.stdout)}


def wait_json(store, name, xid):
    r = store.hutch("wait", name, xid, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def made(store, name, path):
    """Waits (on the file, made by the sandbox) until @path exists inside."""
    return poll_until(lambda: store.exec(name, "test", "-e", path).returncode == 0, 30)


# A server that says it is up, then serves until told otherwise.
SERVER = "echo listening; echo warming >&2; touch /tmp/up; while :; do sleep 1; done"


def test_a_detached_server_shows_in_ps_and_term_ends_it(store):
    m = marker()
    store.create("box")
    xid = detach(store, "box", SERVER, m)
    assert made(store, "box", "/tmp/up")
    rows = ps(store, "box")
    assert xid in rows, rows
    row = rows[xid]
    assert row["argv"] == ["sh", "-c", SERVER, m] and row["detached"] is True, row
    assert row["pid"] > 1 and row["start_ms"] > 0, row
    # The pid is the sandbox's own view of it: the command's, or without
    # cgroups the shim's that runs it (its parent).
    find = (f"for p in /proc/[0-9]*; do grep -qa {m} $p/cmdline 2>/dev/null && "
            "echo ${p#/proc/} $(cut -d' ' -f4 $p/stat); done; true")
    pids = [ln.split() for ln in store.sh("box", find).splitlines()]
    assert any(str(row["pid"]) in (pid, ppid) for pid, ppid in pids), (row, pids)
    text = store.hutch("ps", "box").stdout
    assert text.splitlines()[0].split()[:2] == ["ID", "PID"] and "detached" in text, text
    # An exec that ended is not listed (the twin): the `true` above.
    assert set(rows) == {xid}, rows

    r = store.hutch("kill", "box", xid)
    assert r.returncode == 0, r.stderr
    assert xid not in ps(store, "box")
    assert not live_with_marker(m)
    o = wait_json(store, "box", xid)
    assert (o["reason"], o["signal"], o["exit_code"]) == ("killed", 15, 143), o
    r = store.hutch("wait", "box", xid)
    assert (r.returncode, r.stdout) == (0, "143\n"), (r.stdout, r.stderr)


def test_logs_follow_prints_lines_as_written_and_ends_with_the_exec(store):
    store.create("box")
    script = ("echo first; echo warn >&2; while [ ! -e /tmp/go ]; do sleep 0.1; done; "
              "echo second; exit 3")
    xid = detach(store, "box", script)
    p = store.popen("logs", "box", "--exec", xid, "--follow", stdout=PIPE, stderr=PIPE)
    try:
        # Printed while the exec still runs (it waits for /tmp/go).
        assert p.stdout.readline() == "first\n"
        assert p.poll() is None
        assert store.exec("box", "touch", "/tmp/go").returncode == 0
        assert p.stdout.readline() == "second\n"
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    # stdout and stderr kept apart.
    assert out == "" and err == "warn\n", (out, err)
    assert wait_json(store, "box", xid)["exit_code"] == 3
    # Without --follow: what there is, at once; the same apart.
    r = store.hutch("logs", "box", "--exec", xid)
    assert (r.returncode, r.stdout, r.stderr) == (0, "first\nsecond\n", "warn\n")


def test_follow_ends_when_the_sandbox_stops(store):
    store.create("box")
    xid = detach(store, "box", SERVER)
    p = store.popen("logs", "box", "--exec", xid, "-f", stdout=PIPE, stderr=PIPE)
    try:
        assert p.stdout.readline() == "listening\n"
        assert store.hutch("stop", "box").returncode == 0
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0 and err == "warming\n", (p.returncode, err)
    o = wait_json(store, "box", xid)
    assert o["reason"] == "killed", o
    # Stopped: the log is still there, read from the store.
    r = store.hutch("logs", "box", "--exec", xid)
    assert (r.returncode, r.stdout) == (0, "listening\n"), r.stderr


def test_kill_sends_sigkill_after_the_grace_when_term_is_ignored(store):
    m = marker()
    store.create("box")
    xid = detach(store, "box", "trap '' TERM; touch /tmp/up; while :; do sleep 1; done", m)
    assert made(store, "box", "/tmp/up")
    r = store.hutch("kill", "box", xid, "-t", "1")
    assert r.returncode == 0, r.stderr
    o = wait_json(store, "box", xid)
    # TERM did nothing; the grace's SIGKILL ended it (the twin of the test
    # above, where TERM was enough).
    assert (o["reason"], o["signal"], o["exit_code"]) == ("killed", 9, 137), o
    assert not live_with_marker(m)


def test_kill_with_a_signal_sends_only_that_signal(store):
    store.create("box")
    script = "trap 'echo got-hup' HUP; touch /tmp/up; while :; do sleep 0.1; done"
    xid = detach(store, "box", script)
    assert made(store, "box", "/tmp/up")
    r = store.hutch("kill", "box", xid, "HUP")
    assert r.returncode == 0, r.stderr

    def said():
        r = store.hutch("logs", "box", "--exec", xid)
        return "got-hup" in r.stdout

    assert poll_until(said, 30)
    # It lives on: HUP alone, no KILL after a grace.
    assert xid in ps(store, "box")
    assert store.hutch("kill", "box", xid, "KILL").returncode == 0
    o = wait_json(store, "box", xid)
    assert (o["signal"], o["exit_code"]) == (9, 137), o
    assert xid not in ps(store, "box")


def test_wait_returns_when_the_exec_ends(store):
    store.create("box")
    xid = detach(store, "box", "while [ ! -e /tmp/go ]; do sleep 0.1; done; exit 7")
    p = store.popen("wait", "box", xid, stdout=PIPE, stderr=PIPE)
    try:
        assert store.exec("box", "touch", "/tmp/go").returncode == 0
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert (p.returncode, out) == (0, "7\n"), err
    # An attached exec has an id and an outcome too.
    assert store.exec("box", "sh", "-c", "exit 4").returncode == 4
    last = store.history("box")[-1]
    assert store.hutch("wait", "box", last["id"]).stdout == "4\n"


def test_detached_output_is_capped_keeping_the_head(store):
    store.create("box")
    xid = detach(store, "box", "echo start; head -c 20M /dev/zero | tr '\\0' a; echo done >&2")
    o = wait_json(store, "box", xid)
    assert o["exit_code"] == 0 and o["stdout_truncated"] is True, o
    assert o["stderr_truncated"] is False, o
    r = store.runner.run_raw(["logs", "box", "--exec", str(xid)], env=store.env(), text=False)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) == 8 * MIB and r.stdout.startswith(b"start\naaa"), len(r.stdout)
    assert r.stderr == b"done\n"


def log_files(store, name):
    """The names in the sandbox's logs folder: in its disk image (root),
    else beside data/."""
    with data_of(store.home, store.state, name) as data:
        logs = Path(data) / "logs"
        if not logs.exists():
            logs = Path(data).parent / "logs"
        return sorted(p.name for p in logs.iterdir())


def test_rm_leaves_no_log_file(store):
    store.create("box")
    xid = detach(store, "box", "echo hello")
    wait_json(store, "box", xid)
    # The twin: it is there while the sandbox is.
    assert f"exec-{xid}.out" in log_files(store, "box")
    assert store.hutch("rm", "--force", "box").returncode == 0
    left = [p for p in store.dir.rglob(f"exec-{xid}.*")]
    assert not left and not store.sandbox_dir("box").exists(), left
    r = store.hutch("logs", "box", "--exec", xid)
    assert r.returncode == 125 and "box" in r.stderr, r.stderr


BAD = [
    (["kill", "box", "{ended}"], "exec {ended} has already ended (exit 0)"),
    (["kill", "box", "999"], "there is no exec 999"),
    (["kill", "box", "{ended}", "NOSUCHSIG"], "invalid signal 'NOSUCHSIG'"),
    (["kill", "box", "abc"], "invalid exec id 'abc'"),
    (["kill", "box"], "usage"),
    (["wait", "box", "999"], "there is no exec 999"),
    (["wait", "box", "0"], "invalid exec id '0'"),
    (["logs", "box", "--exec", "{attached}"], "has no output log"),
    (["logs", "box", "--follow"], "usage"),
    (["ps"], "usage"),
    (["ps", "nosuchbox"], "nosuchbox"),
]


@pytest.mark.parametrize("running", [True, False], ids=["running", "stopped"])
@pytest.mark.parametrize("args,needle", BAD, ids=[" ".join(a)[:30] for a, _ in BAD])
def test_bad_input_is_125_and_changes_nothing(store, args, needle, running):
    store.create("box")
    ended = detach(store, "box", "true")
    assert wait_json(store, "box", ended)["exit_code"] == 0
    assert store.exec("box", "true").returncode == 0
    attached = store.history("box")[-1]["id"]
    if not running:
        assert store.hutch("stop", "box").returncode == 0
    before = store.listing()
    fill = {"ended": ended, "attached": attached}
    r = store.hutch(*[a.format(**fill) for a in args])
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert needle.format(**fill) in r.stderr, r.stderr
    assert r.stdout == ""
    assert store.listing() == before
    assert store.state_of("box") == ("running" if running else "stopped")


def test_a_kill_at_once_after_the_start_is_sigkill(store):
    """A kill that comes while the exec is still being set up (here a
    timeout of 1 ms, before the command runs) ends it: never with the shim's
    own kill signal (SIGRTMIN+1) of an unprivileged user's exec, which once
    ended the shim before it could kill (init now forks with every signal
    blocked), and never missing a process that had not joined the exec's
    cgroup yet (the keeper kills again until it ended)."""
    store.create("box")
    for _ in range(5):
        # It ends at once (exec's 30 s bound: a kill that missed it would
        # leave `sleep 30` running), by SIGKILL, or before its command ran
        # (125: it was killed while it joined its cgroup).
        r, o = store.exec_json("box", "sleep", "30", flags=["--timeout", "1ms"])
        assert o["reason"] == "timeout", o
        assert (o["signal"], o["exit_code"]) in ((9, 137), (None, 125)), o
