# SPDX-License-Identifier: LGPL-2.1-or-later
"""cgroup helpers for test_limits.py, all run as root by the test process:

 - reading the host's cgroup layout (mountinfo, /proc/cgroups);
 - finding the cgroup directories one hutch process made (run-<pid>-*);
 - Delegation: cgroups handed to the unprivileged user the way systemd
   would (a directory the user owns, the user's process inside it), plus
   the wrapper command that puts a hutch process there before dropping
   privileges;
 - moved_to_v2(): takes v1 controllers off their v1 hierarchy so that the
   unified (v2) hierarchy offers them, and puts everything back.

Every wait here is a bounded poll on a kernel file, never a fixed sleep."""

import contextlib
import fcntl
import os
import re
import shlex
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

# The v1 hierarchies a delegated user gets, as the brief of issue 3 says.
V1_DELEGATED = ("memory", "pids", "cpu", "cpuacct", "freezer")
POLL_S = 0.02
LAYOUT_LOCK = "/tmp/hutch-test-cgroup.lock"


def poll_until(cond, timeout, interval=POLL_S):
    """Calls @cond until it returns something true, at most @timeout
    seconds, every @interval seconds; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def _unescape(s):
    """mountinfo's octal escapes (\\040 is a space)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def cgroup_mounts():
    """The host's cgroup mounts: dicts with mount_point, mount_opts,
    fstype, source, super_opts (the option list as a list)."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        head, _, tail = line.partition(" - ")
        h, t = head.split(), tail.split()
        if len(t) < 3 or t[0] not in ("cgroup", "cgroup2"):
            continue
        out.append(
            {
                "mount_point": _unescape(h[4]),
                "mount_opts": h[5],
                "fstype": t[0],
                "source": t[1],
                "super_opts": t[2].split(","),
            }
        )
    return out


def v1_controllers(m):
    """The controllers of v1 mount @m (super options minus rw/ro/name=)."""
    return {o for o in m["super_opts"] if o not in ("rw", "ro") and "=" not in o}


def v1_mount(controller):
    """The v1 mount serving @controller, or None."""
    for m in cgroup_mounts():
        if m["fstype"] == "cgroup" and controller in v1_controllers(m):
            return m
    return None


def v2_mount_point():
    for m in cgroup_mounts():
        if m["fstype"] == "cgroup2":
            return Path(m["mount_point"])
    return None


def proc_cgroups():
    """{controller: (hierarchy id, num_cgroups, enabled)} of /proc/cgroups."""
    out = {}
    for line in Path("/proc/cgroups").read_text().splitlines():
        if line.startswith("#"):
            continue
        name, hier, num, enabled = line.split()
        out[name] = (int(hier), int(num), int(enabled))
    return out


def v2_offers(controller):
    mp = v2_mount_point()
    if mp is None:
        return False
    return controller in (mp / "cgroup.controllers").read_text().split()


def cgroup_dirs(depth=4):
    """Every cgroup directory of every hierarchy, at most @depth levels
    below its mount point."""
    seen = set()
    out = []
    for m in cgroup_mounts():
        top = Path(m["mount_point"])
        if top in seen or not top.is_dir():
            continue
        seen.add(top)
        todo = [(top, 0)]
        while todo:
            d, n = todo.pop()
            out.append(d)
            if n >= depth:
                continue
            try:
                for e in os.scandir(d):
                    if e.is_dir(follow_symlinks=False):
                        todo.append((Path(e.path), n + 1))
            except OSError:
                continue
    return out


def run_dirs(hutch_pid):
    """The sandbox cgroups ("run-<pid>-<hex>") of the hutch process
    @hutch_pid, wherever they are (any hierarchy, any base)."""
    prefix = f"run-{hutch_pid}-"
    return sorted(d for d in cgroup_dirs() if d.name.startswith(prefix))


def procs_below(top):
    """The pids in @top's cgroup.procs and in every cgroup below it."""
    pids = set()
    for dirpath, _dirs, _files in os.walk(top):
        try:
            text = (Path(dirpath) / "cgroup.procs").read_text()
        except OSError:
            continue
        pids.update(int(p) for p in text.split())
    return pids


def remove_tree(top, timeout=5.0):
    """Kills what is left in cgroup @top and below, then removes the
    directories deepest first. Returns the directories that could not be
    removed."""
    top = Path(top)
    if not top.is_dir():
        return []

    def empty():
        for pid in procs_below(top):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return not procs_below(top)

    poll_until(empty, timeout)
    dirs = sorted(
        (Path(p) for p, _d, _f in os.walk(top)), key=lambda p: len(p.parts), reverse=True
    )
    left = []
    for d in dirs:

        def gone(d=d):
            try:
                d.rmdir()
            except FileNotFoundError:
                return True
            except OSError:
                return False
            return True

        if not poll_until(gone, timeout):
            left.append(d)
    return left


def remove_run_dirs(hutch_pid):
    """Removes what hutch @hutch_pid left behind (after a SIGKILL of
    hutch); returns the directories that could not be removed."""
    left = []
    for d in run_dirs(hutch_pid):
        left += remove_tree(d)
    return left


def hutch_alive(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "hutch"
    except OSError:
        return False


def remove_stale_run_dirs(base):
    """Removes the run-<pid>-* cgroups below @base that a hutch killed by
    SIGKILL left (hutch has no garbage collector): its pid is no hutch any
    more and nothing is inside. Returns what was removed."""
    gone = []
    for d in Path(base).glob("run-*-*"):
        pid = d.name.split("-")[1]
        if not pid.isdigit() or hutch_alive(int(pid)) or procs_below(d):
            continue
        if not remove_tree(d, timeout=1.0):
            gone.append(d)
    return gone


def chown_tree(top, uid, gid):
    for dirpath, _dirs, files in os.walk(top):
        os.chown(dirpath, uid, gid)
        for f in files:
            os.chown(os.path.join(dirpath, f), uid, gid)


class Delegation:
    """cgroups delegated to @uid: a directory "<tag>" in each v1 hierarchy
    of V1_DELEGATED (@v1), and a v2 subtree "<tag>.slice/session.scope"
    (@v2), chowned to the user, with the user's processes in the leaf and
    hutch's cgroups to go next to it. @v2_controllers are enabled in the v2
    root's cgroup.subtree_control first, so that the slice is offered them
    (systemd does the same on the way down)."""

    def __init__(self, uid, gid, v1=True, v2=True, v2_controllers=()):
        self.uid, self.gid = uid, gid
        self.tag = f"hutchtest-deleg-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.v1, self.v2 = v1, v2
        self.v2_controllers = tuple(v2_controllers)
        self.tops = []  # directories made, to remove deepest first
        self.procs = []  # cgroup.procs files the wrapper joins
        self.v1_dirs = {}
        self.v2_slice = None
        self.enabled = []  # (dir, controller) enabled here, undone at the end

    def create(self):
        """Makes the cgroups. Returns None, or why it cannot (no such
        hierarchy here): the caller skips with that reason."""
        if self.v1:
            for c in V1_DELEGATED:
                m = v1_mount(c)
                if m is None:
                    return f"no v1 hierarchy serves {c} here"
                d = Path(m["mount_point"]) / self.tag
                d.mkdir()
                self.tops.append(d)
                chown_tree(d, self.uid, self.gid)
                self.v1_dirs[c] = d
                self.procs.append(d / "cgroup.procs")
        if self.v2:
            mp = v2_mount_point()
            if mp is None:
                return "no v2 hierarchy is mounted here"
            on = (mp / "cgroup.subtree_control").read_text().split()
            for c in self.v2_controllers:
                if not v2_offers(c):
                    return f"the v2 hierarchy does not offer {c}"
                if c not in on:
                    (mp / "cgroup.subtree_control").write_text(f"+{c}")
                    self.enabled.append((mp, c))
            self.v2_slice = mp / f"{self.tag}.slice"
            scope = self.v2_slice / "session.scope"
            self.v2_slice.mkdir()
            self.tops.append(self.v2_slice)
            scope.mkdir()
            chown_tree(self.v2_slice, self.uid, self.gid)
            self.procs.append(scope / "cgroup.procs")
        return None

    def wrap(self, argv):
        """@argv (already dropping privileges, e.g. setpriv ... hutch ...)
        run by a root shell that first moves itself into the delegated
        cgroups: pid and cgroups carry over through exec."""
        files = " ".join(shlex.quote(str(p)) for p in self.procs)
        script = (
            f'for f in {files}; do echo $$ > "$f" || '
            '{ echo "cgroupctl: cannot join $f" >&2; exit 86; }; done; exec "$@"'
        )
        return ["sh", "-c", script, "sh", *argv]

    def destroy(self):
        """Removes every cgroup made (and anything left below them),
        deepest first. Returns the directories that could not be
        removed."""
        left = []
        for top in reversed(self.tops):
            left += remove_tree(top)
        self.tops = []
        for d, c in reversed(self.enabled):
            try:
                (d / "cgroup.subtree_control").write_text(f"-{c}")
            except OSError:
                pass  # in use again below (a hutch run as root enables it too)
        self.enabled = []
        return left


def _umount(path):
    return subprocess.run(["umount", str(path)], capture_output=True, text=True)


def _mount_v1(m):
    opts = ",".join([*m["mount_opts"].split(","), *sorted(v1_controllers(m))])
    return subprocess.run(
        ["mount", "-t", "cgroup", "-o", opts, m["source"], m["mount_point"]],
        capture_output=True,
        text=True,
    )


def _v1_mount_matches(saved):
    cur = v1_mount(next(iter(v1_controllers(saved))))
    return (
        cur is not None
        and cur["mount_point"] == saved["mount_point"]
        and cur["mount_opts"] == saved["mount_opts"]
        and cur["source"] == saved["source"]
        and set(cur["super_opts"]) == set(saved["super_opts"])
    )


class MoveResult:
    """What moved_to_v2() moved, and why the rest was not moved."""

    def __init__(self):
        self.moved = []
        self.not_moved = {}

    def need(self, controller):
        """Skips the calling test unless @controller was moved."""
        if controller not in self.moved:
            pytest.skip(
                f"{controller} could not be moved to v2 here: "
                + self.not_moved.get(controller, "not on a v1 hierarchy of its own")
            )


class Skip(Exception):
    """The move cannot be done on this machine; nothing was changed."""


class Broken(Exception):
    """The machine could not be put back as it was."""


@contextlib.contextmanager
def moved_to_v2(wanted, required=("pids",)):
    """Moves the v1 controllers @wanted (e.g. ("pids", "cpu")) to the v2
    hierarchy, yields a MoveResult, and puts them back on v1 with their old
    mount options afterwards. A controller whose v1 hierarchy it shares
    with another controller (cpu,cpuacct), or whose hierarchy cannot be
    unmounted (busy), is not moved (MoveResult.not_moved says why); one
    that v2 already offers (a pure v2 host) counts as moved. The @required
    ones must be movable or this raises Skip. Preconditions are checked
    before anything is changed (raising Skip): the v1 hierarchy has no
    cgroup but its root once hutch's own empty base dir ("hutch", recreated
    on demand by hutch and recreated here afterwards) and run-* cgroups
    that SIGKILLed hutch processes left are removed. Holds the lock of
    tests/unit/test-cgroup.c meanwhile. Raises Broken when the restore
    fails (with what is wrong)."""
    v2 = v2_mount_point()
    if v2 is None:
        raise Skip("no v2 hierarchy is mounted")
    plan, not_moved, already = [], {}, []
    for c in wanted:
        m = v1_mount(c)
        if m is None:
            if v2_offers(c):
                already.append(c)  # a pure v2 host: nothing to move
                continue
            raise Skip(f"{c} is neither on v1 nor offered by v2")
        if v1_controllers(m) != {c}:
            if c in required:
                raise Skip(f"the v1 {c} hierarchy also serves {sorted(v1_controllers(m))}")
            not_moved[c] = f"its v1 hierarchy also serves {sorted(v1_controllers(m))}"
            continue
        plan.append((c, m))
    for c in required:
        if c not in already and not any(c == p for p, _ in plan):
            raise Skip(f"{c} is not on a v1 hierarchy of its own")
    with _layout_lock():
        with _moved(v2, plan, not_moved, already, required) as moved:
            yield moved


@contextlib.contextmanager
def _layout_lock(timeout=20.0):
    """The lock tests/unit/test-cgroup.c holds while it may change the
    host's cgroup layout: one layout changer at a time."""
    fd = os.open(LAYOUT_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:

        def take():
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        if not poll_until(take, timeout):
            raise Skip(f"another test holds {LAYOUT_LOCK} (changing the cgroup layout)")
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _moved(v2, plan, not_moved, already, required):
    root_subtree = (v2 / "cgroup.subtree_control").read_text()
    bases = {}  # controller -> hutch base dir that existed
    for c, m in plan:
        base = Path(m["mount_point"]) / "hutch"
        if base.is_dir():
            remove_stale_run_dirs(base)
            try:
                base.rmdir()
            except OSError as e:
                _recreate(bases)
                raise Skip(f"{base} is in use (a hutch is running?): {e}") from None
            bases[c] = base

    def alone():
        pc = proc_cgroups()
        return all(pc[c][1] == 1 for c, _ in plan)

    if not poll_until(alone, 5.0):
        _recreate(bases)
        raise Skip(
            "a v1 hierarchy to move has cgroups besides its root: "
            + ", ".join(f"{c}={proc_cgroups()[c][1]}" for c, _ in plan)
        )

    unmounted = []
    moved = MoveResult()
    moved.not_moved.update(not_moved)
    moved.moved = list(already)
    try:
        for c, m in plan:
            r = _umount(m["mount_point"])
            if r.returncode == 0:
                unmounted.append((c, m))
                continue
            why = f"cannot unmount {m['mount_point']}: {r.stderr.strip()}"
            if c in required:
                raise Skip(why)
            # Not essential: it stays on v1, with its base back.
            moved.not_moved[c] = why
            base = bases.pop(c, None)
            if base:
                base.mkdir(mode=0o755, exist_ok=True)
        poll_until(lambda: all(v2_offers(c) for c, _ in unmounted), 3.0)
        stuck = [(c, m) for c, m in unmounted if not v2_offers(c)]
        for c, m in stuck:
            why = (
                f"its v1 hierarchy stayed alive after {m['mount_point']} was unmounted "
                f"(/proc/cgroups still lists it, v2 offers only: "
                f"{(v2 / 'cgroup.controllers').read_text().strip()}): the superblock is "
                "held by a mount outside this process's view"
            )
            if c in required:
                raise Skip(f"{c}: {why}")
            moved.not_moved[c] = why
        if stuck:
            # Put the stuck ones back now; the others stay moved.
            unmounted = [(c, m) for c, m in unmounted if (c, m) not in stuck]
            _restore(v2, stuck, {c: bases.pop(c) for c, _ in stuck if c in bases}, root_subtree)
        moved.moved = [*already, *(c for c, _ in unmounted)]
        yield moved
    finally:
        _restore(v2, unmounted, bases, root_subtree)


def _recreate(bases):
    for base in bases.values():
        base.mkdir(mode=0o755, exist_ok=True)


def _restore(v2, unmounted, bases, root_subtree):
    problems = []
    names = [c for c, _ in unmounted]
    if names:
        # Nothing below the v2 root may use them: disable them bottom-up
        # wherever they are enabled, then wait for dying cgroups to go.
        dirs = [d for d in cgroup_dirs(depth=8) if str(d).startswith(str(v2))]
        for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
            try:
                on = (d / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            off = [c for c in names if c in on]
            if off:
                try:
                    (d / "cgroup.subtree_control").write_text(" ".join(f"-{c}" for c in off))
                except OSError as e:
                    problems.append(f"cannot disable {off} in {d}: {e}")
    for c, m in unmounted:
        last = None

        def remount(m=m):
            nonlocal last
            last = _mount_v1(m)
            return last.returncode == 0

        if not poll_until(remount, 30.0):
            problems.append(f"cannot mount {c} back at {m['mount_point']}: {last.stderr.strip()}")
            continue
        if not _v1_mount_matches(m):
            problems.append(f"{c} came back differently: {v1_mount(c)} (was {m})")
        if proc_cgroups()[c][0] == 0 or v2_offers(c):
            problems.append(f"{c} is still on the v2 hierarchy")
    _recreate(bases)
    now = (v2 / "cgroup.subtree_control").read_text()
    if now != root_subtree:
        problems.append(f"v2 root cgroup.subtree_control is {now!r}, was {root_subtree!r}")
    if problems:
        raise Broken("; ".join(problems))
