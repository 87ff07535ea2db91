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

import os
import subprocess

import pytest

from test_e2b_file_owner import PlainServer, images, sh  # noqa: F401  (a fixture)
from test_e2b_user import subids  # noqa: F401  (a fixture)
from test_limits import delegated  # noqa: F401  (a fixture)
from test_persistent import cg_store, root_store  # noqa: F401  (fixtures)
from test_processes import detach, made, wait_json

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


def test_a_pids_limit_lowered_while_running_gives_the_next_exec_its_room(root_store):
    # Two were prepared under the default limit; `hutch update --pids 3`
    # drops one, or the next exec's subshell failed to fork (exit 2).
    store = root_store
    store.create("box")
    store.sh("box", "true")
    r = store.hutch("update", "box", "--pids", "3")
    assert r.returncode == 0, r.stderr
    seen = [store.exec("box", "sh", "-c", ONE_CHILD) for _ in range(3)]
    assert [(r.returncode, r.stdout) for r in seen] == [(0, "ok\n")] * 3, \
        [(r.returncode, r.stderr) for r in seen]
    # The twin: raised again, two are prepared and the execs run on.
    r = store.hutch("update", "box", "--pids", "1000")
    assert r.returncode == 0, r.stderr
    for _ in range(3):
        assert store.sh("box", ONE_CHILD) == "ok\n"


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


def test_execs_run_after_the_sandbox_killed_its_prepared_processes(cg_store):
    # As root, and as the user in delegated cgroups (v1, hybrid).
    store = cg_store
    store.create("box")
    store.sh("box", "true")  # from its end on, two are prepared
    assert int(store.sh("box", KILL_PREPARED)) >= 1
    seen = []
    cgroups = []
    for _ in range(3):
        r = store.exec("box", "cat", "/proc/self/cgroup")
        seen.append((r.returncode, r.stderr))
        cgroups.append(r.stdout)
    assert seen == [(0, "")] * 3, seen
    # The twin: an exec forked afresh still gets a cgroup of its own, not
    # the sandbox's (where a kill of the exec would miss it).
    assert len(set(cgroups)) == 3 and all("/x-" in c for c in cgroups), cgroups


# ---- files written as a user (h20u) ----

def test_a_hard_link_to_a_host_file_written_as_user_leaves_the_host_file_alone(images):
    """A file of the host, bound read-write, hard-linked by the sandbox
    within the bind, then written "as user" through the API at the link.
    The write makes a new file and renames it over the link, so the host
    file keeps its owner, mode and bytes (no fchown() reaches it); the
    twin: the new file at the link's name is the user's, on the host too.
    A sandbox of root holds a host tree through an idmap of its root
    alone, which cannot store uid 1000 (EOVERFLOW): that write was a 500
    "Value too large for defined data type" on main; now 403
    permission_denied naming the reason, with nothing left behind."""
    runner = images.runner
    host = runner.make_dir(name="bound")
    victim = host / "victim.txt"
    victim.write_text("host's\n")
    os.chmod(victim, 0o600)
    runner.chown(victim)
    before = os.stat(victim)
    srv = PlainServer(images)
    try:
        api = srv.api
        api.ok("POST", "/v1/sandboxes",
               {"name": "hl", "policy": {"image": "e2bu",
                                         "binds": [{"source": str(host), "target": "/data"}]}},
               status=201)
        sh(api, "hl", "ln /data/victim.txt /data/link")
        base = "/v1/sandboxes/hl/files"
        r = api.call("PUT", f"{base}?path=/data/link&user=user", b"agent's\n")
        after = os.stat(victim)
        assert (after.st_uid, after.st_gid, after.st_mode, after.st_ino) == \
            (before.st_uid, before.st_gid, before.st_mode, before.st_ino)
        assert victim.read_text() == "host's\n"
        names = sorted(p.name for p in host.iterdir())
        if runner.mode == "root":
            assert r.status == 403, r
            assert r.error["code"] == "permission_denied" and "bound" in r.error["message"], r
            assert names == ["link", "victim.txt"], names
            assert os.stat(host / "link").st_ino == before.st_ino
            # Nor are the directories it would have made left as root's.
            r = api.call("PUT", f"{base}?path=/data/new/deeper/f&parents=true&user=user", b"x")
            assert r.status == 403, r
            r = api.call("POST", f"{base}/mkdir?path=/data/made&user=user")
            assert r.status == 403, r
            assert sorted(p.name for p in host.iterdir()) == names
        else:
            assert r.status == 200, r
            # The twin: the file at the link's name is new and the user's.
            link = os.stat(host / "link")
            assert link.st_ino != before.st_ino and (host / "link").read_text() == "agent's\n"
            assert link.st_uid != before.st_uid, (link.st_uid, before.st_uid)
            assert sh(api, "hl", "stat -c %u /data/link") == "1000\n"
            assert names == ["link", "victim.txt"], names
        # The twin in both modes: written as root, the bind takes it.
        api.ok("PUT", f"{base}?path=/data/root.txt&user=root", b"r")
        assert (host / "root.txt").read_text() == "r"
    finally:
        srv.stop()
        r = images.hutch("rm", "--force", "hl")
        assert r.returncode == 0 or "no sandbox" in r.stderr, r.stderr
        subprocess.run(["rm", "-rf", str(host)], check=False)


# How many sleeps run in the sandbox.
SLEEPS = "cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$' || true"


def test_a_kill_reaches_an_exec_forked_for_a_killed_prepared_process(cg_store):
    # The twin of the above from the other side: the exec forked afresh
    # is in its cgroup, so `hutch kill` ends it and what it forked.
    store = cg_store
    store.create("box")
    store.sh("box", "true")
    store.sh("box", KILL_PREPARED)
    xid = detach(store, "box", "sleep 1000 & touch /tmp/up; wait")
    assert made(store, "box", "/tmp/up")
    assert store.sh("box", SLEEPS).strip() == "1"
    r = store.hutch("kill", "box", xid)
    assert r.returncode == 0, r.stderr
    assert wait_json(store, "box", xid)["reason"] == "killed"
    assert store.sh("box", SLEEPS).strip() == "0"
