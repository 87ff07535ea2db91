# SPDX-License-Identifier: LGPL-2.1-or-later
"""Snapshots, diff/apply and export/import of persistent sandboxes (issue
6, docs/persistent.md), driven as a user would: `hutch diff` and `hutch
apply` on an overlay workspace, `hutch snapshot` of a stopped sandbox (a
rename: same inode) and of a running one (frozen, copied, thawed), forks
from a snapshot, export and import (and corrupt archives refused), crash
safety at every step of a snapshot (HUTCH_TEST_CRASH_POINT) and under
random SIGKILLs, concurrent commands, and bad input.

Every test has its own store (HUTCH_HOME) and state directory
(HUTCH_STATE_DIR), owned by whoever runs hutch: root, and the unprivileged
user `hutchtest` where that makes sense ("user"; "user-deleg" is the same
user inside cgroups delegated to it, which a running snapshot needs to
freeze the sandbox). When a test ends, every sandbox is removed with `hutch
rm --force`, and no keeper of that store and no cgroup of one may be left.
"""

import fcntl
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

import cgroupctl
from cgroupctl import poll_until
from conftest import IS_ROOT, free_vm_templates, kill_quietly
from diskutil import data_of

GIB = 1 << 30
# What a disk image's root holds besides the layers (docs/persistent.md).
IMAGE_ONLY = ("lost+found", "logs")
KEEPER_CMDLINE = b"hutch\0__keeper\0"
CRASHED = (-signal.SIGKILL, 128 + signal.SIGKILL)
# The random-kill loop: its seed (printed; HUTCH_TEST_SEED overrides it),
# the rounds per kind of command, and the longest delay before the SIGKILL:
# 50 ms, but 10 ms for the snapshot of a stopped sandbox, which takes
# about that long in all.
DEFAULT_SEED = 6006
KILL_ROUNDS = 10
KILL_DELAY_S = 0.050
KILL_DELAY_STOPPED_S = 0.010


def keeper_pids(home):
    """The live keepers (`hutch __keeper ...`) whose environment names
    HUTCH_HOME=@home."""
    want = b"HUTCH_HOME=" + str(home).encode()
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if not Path(f"/proc/{entry}/cmdline").read_bytes().startswith(KEEPER_CMDLINE):
                continue
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if want in env:
            found.add(int(entry))
    return found


def keeper_cgroups(pids):
    """The cgroups ("run-<pid>-<hex>", any hierarchy) of the keepers @pids."""
    if not pids:
        return []
    prefixes = tuple(f"run-{p}-" for p in pids)
    return sorted(d for d in cgroupctl.cgroup_dirs() if d.name.startswith(prefixes))


class Hutch:
    """One store and state directory, and the hutch binary run on them as
    @runner's caller (inside @deleg's cgroups when given)."""

    def __init__(self, runner, deleg=None):
        self.runner = runner
        self.deleg = deleg
        self.mode = runner.mode if deleg is None else "user-deleg"
        self.home = runner.make_dir(mode=0o700, name="home")
        self.state = runner.make_dir(mode=0o700, name="state")
        self.seen_keepers = set()

    # ---- running hutch ----

    def argv(self, args):
        argv = self.runner.argv([str(a) for a in args], verb=None)
        return self.deleg.wrap(argv) if self.deleg else argv

    def env(self, extra=None):
        return self.runner.env(
            {"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.state), **(extra or {})}
        )

    def note_keepers(self):
        self.seen_keepers |= keeper_pids(self.home)

    def run(self, *args, env=None, timeout=120):
        """`hutch ARGS...` to completion (text output captured)."""
        try:
            return subprocess.run(
                self.argv(args),
                env=self.env(env),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=str(self.runner.base_dir),
            )
        finally:
            self.note_keepers()

    def popen(self, *args, env=None):
        """`hutch ARGS...` started (output to pipes, bytes)."""
        return subprocess.Popen(
            self.argv(args),
            env=self.env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(self.runner.base_dir),
        )

    def ok(self, *args, **kw):
        """stdout of `hutch ARGS...`, which must exit 0."""
        r = self.run(*args, **kw)
        assert r.returncode == 0, f"hutch {args} exited {r.returncode}: {r.stderr}"
        return r.stdout

    def fails(self, *args, msg, **kw):
        """stderr of `hutch ARGS...`, which must exit 125 saying @msg (a
        regular expression)."""
        r = self.run(*args, **kw)
        assert r.returncode == 125, f"hutch {args}: want 125, got {r.returncode}: {r.stderr}"
        assert re.search(msg, r.stderr), f"hutch {args}: want /{msg}/ in {r.stderr!r}"
        return r.stderr

    def sh(self, name, script, **kw):
        """stdout of `hutch exec NAME -- sh -c SCRIPT`, which must exit 0."""
        return self.ok("exec", name, "--", "sh", "-c", script, **kw)

    # ---- the store, as files ----

    def workspace(self):
        return self.runner.make_dir(mode=0o755, name="ws")

    def chown(self, path):
        self.runner.chown(path)

    def sandbox_dir(self, name):
        return self.home / "sandboxes" / name

    def snapshot_dir(self, name):
        return self.home / "snapshots" / name

    def record(self, name):
        return json.loads((self.sandbox_dir(name) / "sandbox.json").read_text())

    def upper(self, name, data=None):
        """The sandbox's own layer, as its record names it (in @data, from
        self.data(), for a sandbox with a disk image)."""
        return (data or self.sandbox_dir(name) / "data") / f"upper-{self.record(name)['gen']}"

    def data(self, name):
        """The sandbox's data/ to look into: diskutil.data_of()."""
        return data_of(self.home, self.state, name)

    def has_image(self, name):
        return (self.sandbox_dir(name) / "disk.img").exists()

    def temps(self):
        """Leftover temporary folders of the store."""
        return sorted(
            str(p)
            for kind in ("snapshots", "sandboxes")
            for p in (self.home / kind).iterdir()
            if p.name.startswith(".tmp-")
        )

    def snapshot_dirs(self):
        return sorted(p.name for p in (self.home / "snapshots").iterdir() if p.name[0] != ".")

    def sandboxes(self):
        r = self.run("ls", "--json")
        assert r.returncode == 0, f"hutch ls: {r.stderr}"
        return {s["name"]: s for s in json.loads(r.stdout)}

    def snapshots(self):
        r = self.run("snapshot", "ls", "--json")
        assert r.returncode == 0, f"hutch snapshot ls: {r.stderr}"
        return {s["name"]: s for s in json.loads(r.stdout)}

    # ---- the end of a test ----

    def close(self):
        """Removes every sandbox, then checks that no keeper of this store
        and no cgroup of one is left (removing what is, and failing)."""
        problems = []
        self.note_keepers()
        for p in sorted((self.home / "sandboxes").iterdir()):
            if p.name.startswith("."):
                continue
            r = self.run("rm", "--force", p.name, timeout=60)
            if r.returncode != 0:
                problems.append(f"hutch rm --force {p.name}: {r.returncode}: {r.stderr.strip()}")
        left = poll_until(lambda: not keeper_pids(self.home), 10.0)
        if not left:
            alive = keeper_pids(self.home)
            problems.append(f"keepers still running after rm --force: {sorted(alive)}")
            for pid in alive:  # ours: started by this test's execs
                kill_quietly(pid)
            poll_until(lambda: not keeper_pids(self.home), 5.0)
        stale = poll_until(lambda: not keeper_cgroups(self.seen_keepers), 5.0)
        if not stale:
            dirs = keeper_cgroups(self.seen_keepers)
            problems.append(f"cgroups left behind: {[str(d) for d in dirs]}")
            for d in dirs:
                cgroupctl.remove_tree(d)
        free_vm_templates(self.home)
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.state, ignore_errors=True)
        assert not problems, "; ".join(problems)


def delegation_for(user_runner):
    """cgroups delegated to the test user, as test_limits.py makes them:
    v1 and a v2 subtree on a hybrid host, a v2 subtree on a pure v2 one."""
    if not IS_ROOT:
        pytest.fail("needs root: delegating cgroups to the test user")
    if cgroupctl.v1_mount("memory") or not cgroupctl.v2_mount_point():
        d = cgroupctl.Delegation(user_runner.uid, user_runner.gid, v1=True, v2=True)
    else:
        d = cgroupctl.Delegation(
            user_runner.uid, user_runner.gid, v1=False, v2=True, v2_controllers=("memory", "pids")
        )
    why = d.create()
    if why:
        d.destroy()
        pytest.fail(f"cannot delegate cgroups to {user_runner.uid}: {why}")
    return d


def make_hutch(request, mode):
    if mode == "user-deleg":
        user = request.getfixturevalue("user_runner")
        deleg = delegation_for(user)
        h = Hutch(user, deleg)
    else:
        deleg = None
        h = Hutch(request.getfixturevalue(f"{mode}_runner"))

    def done():
        try:
            h.close()
        finally:
            if deleg:
                left = deleg.destroy()
                assert not left, f"delegated cgroups left behind: {left}"

    request.addfinalizer(done)
    return h


@pytest.fixture(params=["root", "user"])
def hx(request):
    """A store of root's and one of the unprivileged user's."""
    return make_hutch(request, request.param)


@pytest.fixture
def hroot(request):
    """A store of root's (what needs a cgroup to freeze or much time)."""
    return make_hutch(request, "root")


@pytest.fixture(params=["root", "user-deleg"])
def hfreeze(request):
    """Where a running sandbox can be frozen: root, and the user in
    delegated cgroups."""
    return make_hutch(request, request.param)


# ---- helpers on sandboxes ----

# A listing of a tree: type, mode, path and link target of every entry,
# then the SHA-256 of every regular file. Run on the host (in the folder)
# and in the sandbox (in /workspace) with the same host tools.
TREE = (
    "find . -mindepth 1 -printf '%y %m %p %l\\n' | LC_ALL=C sort; "
    "find . -type f -exec sha256sum {} + | LC_ALL=C sort -k2"
)


def host_tree(folder):
    r = subprocess.run(["sh", "-c", TREE], cwd=folder, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def host_state(folder):
    """Everything apply could change in @folder: per path, the type, mode,
    size, mtime and content (or link target)."""
    out = {}
    for dirpath, dirs, files in os.walk(folder):
        for n in dirs + files:
            p = Path(dirpath) / n
            st = p.lstat()
            if stat.S_ISREG(st.st_mode):
                what = hashlib.sha256(p.read_bytes()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                what = os.readlink(p)
            else:
                what = None
            out[str(p.relative_to(folder))] = (st.st_mode, st.st_size, st.st_mtime_ns, what)
    return out


def line_count(h, name, path="/root/loop"):
    """Lines in @path in sandbox @name (0 before it exists)."""
    return int(h.sh(name, f"if [ -e {path} ]; then wc -l < {path}; else echo 0; fi"))


def wait_growing(h, name, path="/root/loop", timeout=10.0):
    """Waits until the line count of @path in sandbox @name grows (the
    detached writer runs, so the sandbox is not frozen). Returns the
    counts seen."""
    first = line_count(h, name, path)
    seen = [first]

    def grew():
        seen.append(line_count(h, name, path))
        return seen[-1] > first

    assert poll_until(grew, timeout, interval=0.1), (
        f"{path} in '{name}' stopped growing at {first} lines: is the sandbox still frozen?"
    )
    return seen


LOOP = "i=0; while :; do i=$((i+1)); echo $i >> /root/loop; sleep 0.02; done"


def start_writer(h, name):
    """A detached exec appending a line to /root/loop every 20 ms; returns
    once it has written some."""
    out = h.ok("exec", name, "-d", "--", "sh", "-c", LOOP)
    assert out.strip().isdigit(), out
    assert poll_until(lambda: line_count(h, name) >= 3, 10.0, interval=0.05)


def check_store(h, sandboxes):
    """The consistency checks after an interrupted command: `hutch ls`
    works and shows every sandbox (none damaged); every snapshot folder is
    complete and listed, and nothing half is; each sandbox's marker is
    readable ("marker NAME", or with a dict {name: marker's NAME}); `hutch
    gc` leaves no temp folder and one layer per sandbox."""
    if not isinstance(sandboxes, dict):
        sandboxes = {n: n for n in sandboxes}
    listed = h.sandboxes()
    assert set(listed) == set(sandboxes), f"hutch ls shows {sorted(listed)}"
    r = h.run("ls")
    assert r.returncode == 0 and "damaged" not in r.stdout, r.stdout + r.stderr
    dirs = h.snapshot_dirs()
    for d in dirs:
        rec = json.loads((h.snapshot_dir(d) / "snapshot.json").read_text())
        assert rec["name"] == d
        for layer in rec["layers"]:
            assert (h.snapshot_dir(d) / layer).is_dir(), f"snapshot {d} lacks its layer {layer}"
    assert sorted(h.snapshots()) == dirs
    for name, marker in sandboxes.items():
        assert h.sh(name, "cat /root/marker") == f"marker {marker}\n"
    h.ok("gc")
    assert h.temps() == []
    for name in sandboxes:
        with h.data(name) as data:
            uppers = sorted(p.name for p in data.iterdir() if p.name not in IMAGE_ONLY)
        assert uppers == [h.upper(name).name, "work"], f"{name}: data/ holds {uppers}"


def new_sandbox(h, name, *flags):
    h.ok("create", name, *flags)
    h.sh(name, f"echo 'marker {name}' > /root/marker")


# ---- 1. diff and apply ----

WS_CHANGES = (
    "cd /workspace && printf 'one\\nTWO\\nthree\\n' > mod.txt && rm del.txt && "
    "rm -r deldir && mkdir -p newdir/inner && echo n1 > newdir/f1 && "
    "echo n2 > newdir/inner/f2 && ln -s keep.txt link && chmod 755 modeonly.sh && "
    "echo added > added.txt"
)

# (path, kind, type) of every change WS_CHANGES makes, in path order.
WS_DIFF = [
    ("added.txt", "added", "file"),
    ("del.txt", "deleted", "file"),
    ("deldir", "deleted", "dir"),
    ("deldir/sub", "deleted", "dir"),
    ("deldir/sub/x", "deleted", "file"),
    ("deldir/y", "deleted", "file"),
    ("link", "added", "symlink"),
    ("mod.txt", "modified", "file"),
    ("modeonly.sh", "modified", "file"),
    ("newdir", "added", "dir"),
    ("newdir/f1", "added", "file"),
    ("newdir/inner", "added", "dir"),
    ("newdir/inner/f2", "added", "file"),
]
WS_JSON = [{"path": p, "kind": k, "type": t} for p, k, t in WS_DIFF]
# --name-status: "A path" ("path/" for a directory), then the counts.
WS_STAT = [f"{k[0].upper()} {p}{'/' if t == 'dir' else ''}" for p, k, t in WS_DIFF] + [
    "13 changes: 6 added, 2 modified, 5 deleted"
]


def populated_workspace(h):
    ws = h.workspace()
    (ws / "mod.txt").write_text("one\ntwo\nthree\n")
    (ws / "del.txt").write_text("del\n")
    (ws / "deldir" / "sub").mkdir(parents=True)
    (ws / "deldir" / "sub" / "x").write_text("a\n")
    (ws / "deldir" / "y").write_text("b\n")
    (ws / "modeonly.sh").write_text("m\n")
    os.chmod(ws / "modeonly.sh", 0o644)
    (ws / "keep.txt").write_text("keep\n")
    (ws / "same").mkdir()
    (ws / "same" / "unchanged.txt").write_text("unchanged\n")
    h.chown(ws)
    return ws


def test_diff_apply_round_trip(hx):
    h = hx
    ws = populated_workspace(h)
    new_sandbox(h, "d", "--workspace", ws)
    before = host_state(ws)
    h.sh("d", WS_CHANGES)

    patch = h.ok("diff", "d").splitlines()
    for line in (
        "--- a/mod.txt",
        "+++ b/mod.txt",
        "-two",
        "+TWO",
        " one",
        "+++ b/added.txt",
        "+added",
        "--- a/del.txt",
        "-del",
        "--- a/deldir/sub/x",
        "-a",
        "+++ b/newdir/inner/f2",
        "+n2",
    ):
        assert line in patch, f"{line!r} not in the diff:\n" + "\n".join(patch)
    assert not any("keep.txt" in line or "unchanged" in line for line in patch)
    assert h.ok("diff", "d", "--name-status").splitlines() == WS_STAT
    assert json.loads(h.ok("diff", "d", "--json")) == WS_JSON
    # PATH limits what diff shows.
    assert json.loads(h.ok("diff", "d", "--json", "deldir")) == WS_JSON[2:6]
    assert host_state(ws) == before, "the sandbox wrote to the host folder"

    # apply with a PATH: only that.
    out = h.ok("apply", "d", "newdir", "/workspace/added.txt")
    assert out.startswith("applied 5 changes"), out
    assert (ws / "newdir" / "inner" / "f2").read_text() == "n2\n"
    assert (ws / "added.txt").read_text() == "added\n"
    assert (ws / "mod.txt").read_text() == "one\ntwo\nthree\n"
    assert (ws / "del.txt").exists() and (ws / "deldir").is_dir()
    assert not os.path.lexists(ws / "link")
    rest = [s for s in WS_STAT[:-1] if "newdir" not in s and "added.txt" not in s]
    assert h.ok("diff", "d", "--name-status").splitlines() == [
        *rest,
        "8 changes: 1 added, 2 modified, 5 deleted",
    ]

    # A file the sandbox changed is edited on the host: refused, nothing
    # changes; --force applies.
    (ws / "mod.txt").write_text("host edit\n")
    before = host_state(ws)
    err = h.fails("apply", "d", msg=r"conflict: 'mod\.txt' changed on the host")
    assert "nothing was applied" in err
    assert "del.txt" not in err and "modeonly" not in err
    assert host_state(ws) == before, "a refused apply changed the host folder"

    out = h.ok("apply", "d", "--force")
    assert out.startswith("applied 8 changes"), out
    assert host_tree(ws) == h.sh("d", "cd /workspace && " + TREE)
    assert h.ok("diff", "d", "--name-status").strip() == "no changes"
    assert json.loads(h.ok("diff", "d", "--json")) == []
    assert (ws / "mod.txt").read_text() == "one\nTWO\nthree\n"
    assert not (ws / "del.txt").exists() and not (ws / "deldir").exists()
    assert os.readlink(ws / "link") == "keep.txt"
    assert stat.S_IMODE((ws / "modeonly.sh").stat().st_mode) == 0o755
    assert (ws / "same" / "unchanged.txt").read_text() == "unchanged\n"

    # The applied state is the new baseline: the next change applies
    # without --force.
    h.sh("d", "echo again >> /workspace/keep.txt")
    h.ok("apply", "d")
    assert (ws / "keep.txt").read_text() == "keep\nagain\n"


def test_apply_selects_a_name_with_two_dots(hx):
    """'..' inside a file name is no '..' component."""
    h = hx
    ws = h.workspace()
    h.ok("create", "w", "--workspace", ws)
    h.sh("w", "echo 1 > /workspace/v1..2.txt && echo 2 > /workspace/other")
    assert json.loads(h.ok("diff", "w", "--json", "v1..2.txt")) == [
        {"path": "v1..2.txt", "kind": "added", "type": "file"}
    ]
    h.ok("apply", "w", "v1..2.txt")
    assert sorted(os.listdir(ws)) == ["v1..2.txt"]


def test_diff_apply_through_snapshot_layers(hx):
    """A sandbox made from a snapshot of an overlay-workspace sandbox sees
    (and diffs, and applies) the snapshot's changes below its own; one made
    from an imported snapshot has no record of the host folder, so apply
    needs --force."""
    h = hx
    ws = h.workspace()
    (ws / "a").write_text("orig\n")
    (ws / "b").write_text("b\n")
    h.chown(ws)
    h.ok("create", "w", "--workspace", ws)
    h.sh("w", "echo changed > /workspace/a && rm /workspace/b && echo n > /workspace/n")
    h.ok("stop", "w")
    h.ok("snapshot", "w", "ws1")
    h.ok("create", "w2", "--from", "ws1")
    h.sh("w2", "echo w2 > /workspace/only2")
    assert json.loads(h.ok("diff", "w2", "--json")) == [
        {"path": "a", "kind": "modified", "type": "file"},
        {"path": "b", "kind": "deleted", "type": "file"},
        {"path": "n", "kind": "added", "type": "file"},
        {"path": "only2", "kind": "added", "type": "file"},
    ]
    stat_w = h.ok("diff", "w", "--name-status").splitlines()
    assert stat_w == ["M a", "D b", "A n", "3 changes: 1 added, 1 modified, 1 deleted"]
    h.ok("apply", "w2", "a", "only2")
    assert sorted(os.listdir(ws)) == ["a", "b", "only2"]
    assert (ws / "a").read_text() == "changed\n"
    # The host now has w's change to a: w's diff no longer shows it.
    stat_w = h.ok("diff", "w", "--name-status").splitlines()
    assert stat_w == ["D b", "A n", "2 changes: 1 added, 0 modified, 1 deleted"]

    out = h.workspace()
    h.ok("snapshot", "export", "ws1", "-o", out / "ws1.tar.zst")
    h.ok("snapshot", "import", out / "ws1.tar.zst", "--name", "imp")
    # An imported snapshot brings no policy (test_snapshot_authority.py):
    # the workspace is the caller's.
    h.ok("create", "w3", "--from", "imp", "--workspace", ws)
    before = host_state(ws)
    h.fails("apply", "w3", msg=r"sandbox 'w3' has no record of the host folder.*--force")
    assert host_state(ws) == before
    assert h.ok("apply", "w3", "--force").startswith("applied 2 changes")
    assert sorted(os.listdir(ws)) == ["a", "n", "only2"]
    assert h.ok("diff", "w3", "--name-status").strip() == "no changes"


# ---- 2. a stopped sandbox's snapshot is a rename ----


def test_snapshot_of_stopped_sandbox_is_a_rename(hx, record_property):
    h = hx
    free = shutil.disk_usage(h.home).free
    if free < 4 * GIB:
        pytest.fail(
            f"this test writes a 1 GiB file: {h.home} has {free / GIB:.1f} GiB free, "
            "it needs at least 4 GiB"
        )
    new_sandbox(h, "big")
    h.sh("big", "head -c 1G /dev/zero > /root/big")
    h.ok("stop", "big")
    assert h.sandboxes()["big"]["state"] == "stopped"
    image = h.has_image("big")
    with h.data("big") as data:
        old = h.upper("big", data) / "root" / "root" / "big"
        before = old.stat()
    assert before.st_size == GIB

    t0 = time.monotonic()
    assert h.ok("snapshot", "big", "s") == "s\n"
    elapsed = time.monotonic() - t0
    print(f"snapshot of a stopped sandbox with a 1 GiB layer ({h.mode}): {elapsed * 1000:.1f} ms")
    record_property("snapshot_1gib_ms", round(elapsed * 1000, 1))

    after = (h.snapshot_dir("s") / "layer" / "root" / "root" / "big").stat()
    if image:
        # Root's sandbox keeps its layer in its disk image (another file
        # system): the layer is copied out (docs/persistent.md "Disk limit").
        assert after.st_size == GIB
    else:
        assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino), (
            "the snapshot's layer is not the sandbox's old layer (copied, not renamed)"
        )
    rec = h.record("big")
    assert rec["parent"] == "s" and rec["gen"] == 2
    with h.data("big") as data:
        assert not (data / "upper-1").exists()
        listing = sorted(n for n in os.listdir(data) if n not in IMAGE_ONLY)
    assert listing == ["upper-2", "work"]
    assert h.sh("big", "stat -c %s /root/big") == f"{GIB}\n"
    assert h.snapshots()["s"]["disk_bytes"] >= GIB
    check_store(h, ["big"])


# ---- 3. a running sandbox's snapshot is a copy ----


def test_snapshot_of_running_sandbox(hfreeze):
    h = hfreeze
    new_sandbox(h, "r")
    h.sh("r", "mkdir /root/before && for i in 1 2 3; do echo $i > /root/before/f$i; done")
    start_writer(h, "r")
    gen = h.record("r")["gen"]
    out = h.run("snapshot", "r", "rs")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "rs\n"
    assert "not its running processes" in out.stderr

    # Still running, and thawed: the writer goes on.
    assert h.sandboxes()["r"]["state"] == "running"
    wait_growing(h, "r")
    # The sandbox stays on its layer; the snapshot has a copy.
    rec = h.record("r")
    assert rec["gen"] == gen and rec["parent"] is None
    layer = h.snapshot_dir("rs") / "layer" / "root" / "root"
    for i in (1, 2, 3):
        assert (layer / "before" / f"f{i}").read_text() == f"{i}\n"
        copy = (layer / "before" / f"f{i}").stat()
        with h.data("r") as data:
            own = (h.upper("r", data) / "root/root/before" / f"f{i}").stat()
        assert copy.st_ino != own.st_ino, "the running sandbox's layer was moved, not copied"
    copied = [int(x) for x in (layer / "loop").read_text().split()]
    assert copied and copied == list(range(1, len(copied) + 1)), "the copy of /root/loop is torn"
    assert h.snapshots()["rs"]["origin"] == "r"

    # A sandbox from it has the files, not the processes.
    h.ok("create", "rf", "--from", "rs")
    assert h.sh("rf", "cat /root/before/f2 /root/marker") == "2\nmarker r\n"
    n = line_count(h, "rf")
    assert n == len(copied)
    time.sleep(0.3)
    assert line_count(h, "rf") == n, "the snapshot's sandbox runs the writer"
    wait_growing(h, "r")


def test_snapshot_of_running_sandbox_without_cgroup_is_refused(request):
    """The unprivileged user without delegated cgroups: the sandbox cannot
    be frozen, so the snapshot fails cleanly and nothing changes."""
    h = make_hutch(request, "user")
    new_sandbox(h, "r")
    start_writer(h, "r")
    h.fails("snapshot", "r", "rs", msg=r"cannot be frozen")
    assert h.snapshot_dirs() == [] and h.temps() == []
    assert h.sandboxes()["r"]["state"] == "running"
    wait_growing(h, "r")
    # Stopped, it can.
    h.ok("stop", "r")
    assert h.ok("snapshot", "r") == "r.1\n"
    check_store(h, ["r"])


# ---- 4. forks ----


def test_forks_diverge_and_stack(hx):
    h = hx
    new_sandbox(h, "base")
    h.sh("base", "echo base > /root/common")
    h.ok("stop", "base")
    assert h.ok("snapshot", "base", "s0") == "s0\n"
    h.ok("create", "f1", "--from", "s0")
    h.ok("create", "f2", "--from", "s0")
    h.sh("f1", "echo f1 > /root/common && echo one > /root/only-f1")
    h.sh("f2", "rm /root/common && echo two > /root/only-f2")
    show = "ls /root; cat /root/common 2>/dev/null || true"
    assert h.sh("f1", show) == "common\nmarker\nonly-f1\nf1\n"
    assert h.sh("f2", show) == "marker\nonly-f2\n"
    assert h.sh("base", show) == "common\nmarker\nbase\n"
    h.ok("create", "f3", "--from", "s0")
    assert h.sh("f3", show) == "common\nmarker\nbase\n"
    # The snapshot did not change.
    assert (h.snapshot_dir("s0") / "layer/root/root/common").read_text() == "base\n"

    # A snapshot of a sandbox made from a snapshot stacks on it.
    h.ok("stop", "f1")
    h.ok("snapshot", "f1", "s1")
    snaps = h.snapshots()
    assert snaps["s1"]["parent"] == "s0" and snaps["s1"]["origin"] == "f1"
    assert snaps["s0"]["parent"] is None and snaps["s0"]["origin"] == "base"
    h.ok("create", "g", "--from", "s1")
    assert h.sandboxes()["g"]["parent"] == "s1"
    assert h.sh("g", show) == "common\nmarker\nonly-f1\nf1\n"
    assert h.sh("f1", show) == "common\nmarker\nonly-f1\nf1\n"

    # snapshot rm is refused while anything depends on the snapshot.
    h.fails("snapshot", "rm", "s0", msg=r"snapshot 's0' is used by sandbox '(base|f2|f3)'")
    for n in ("base", "f2", "f3"):
        h.ok("rm", "--force", n)
    h.fails("snapshot", "rm", "s0", msg=r"snapshot 's0' is used by snapshot 's1'")
    h.fails("snapshot", "rm", "s1", msg=r"snapshot 's1' is used by sandbox '(f1|g)'")
    h.ok("rm", "--force", "f1")
    h.fails("snapshot", "rm", "s1", msg=r"snapshot 's1' is used by sandbox 'g'")
    h.ok("rm", "--force", "g")
    h.ok("snapshot", "rm", "s1")
    h.ok("snapshot", "rm", "s0")
    assert h.snapshots() == {} and h.snapshot_dirs() == [] and h.temps() == []


def test_stack_limit(hroot):
    """15 snapshot layers can be stacked under a sandbox; a snapshot that
    would make a 16th is refused, changing nothing."""
    h = hroot
    new_sandbox(h, "c")
    for i in range(1, 16):
        h.sh("c", f"echo {i} > /root/f{i}")
        h.ok("stop", "c")
        assert h.ok("snapshot", "c") == f"c.{i}\n"
    assert h.record("c")["parent"] == "c.15"
    h.sh("c", "echo 16 > /root/f16")
    h.ok("stop", "c")
    h.fails("snapshot", "c", msg=r"at most 14 can be stacked")
    assert len(h.snapshot_dirs()) == 15 and h.temps() == []
    assert h.record("c")["parent"] == "c.15"
    assert h.sh("c", "cat /root/f1 /root/f15 /root/f16") == "1\n15\n16\n"
    h.ok("create", "d", "--from", "c.15")
    assert h.sh("d", "ls /root | wc -l") == "16\n"  # f1..f15 and the marker
    check_store(h, {"c": "c", "d": "c"})


# ---- 5. export and import ----


def zstd():
    z = shutil.which("zstd")
    if not z:
        pytest.fail("the zstd command is needed to take archives apart (tools/deps.sh test)")
    return z


def exported(h, tmp_dir):
    """A sandbox whose two-layer snapshot "top" holds a 10 MiB random
    file, a whiteout, a symlink and an opaque directory; exported. Returns
    (archive path, {path: sha256 in the sandbox})."""
    new_sandbox(h, "e")
    h.sh(
        "e",
        "mkdir -p /root/od/sub && echo 1 > /root/od/sub/a && echo gone > /root/gone && "
        "echo keep > /root/keep",
    )
    h.ok("stop", "e")
    h.ok("snapshot", "e", "base")
    sums = h.sh(
        "e",
        "head -c 10M /dev/urandom > /root/rand && rm /root/gone && rm -r /root/od && "
        "mkdir /root/od && echo new > /root/od/n && ln -s keep /root/lnk && "
        "cd /root && sha256sum rand keep od/n marker",
    )
    h.ok("stop", "e")
    h.ok("snapshot", "e", "top")
    # The layer really holds what the archive must carry.
    top = h.snapshot_dir("top") / "layer" / "root" / "root"
    st = (top / "gone").lstat()
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == 0, "no whiteout for /root/gone"
    assert os.getxattr(top / "od", "user.overlay.opaque") == b"y", "/root/od is not opaque"
    assert os.readlink(top / "lnk") == "keep"

    archive = tmp_dir / "top.tar.zst"
    h.ok("snapshot", "export", "top", "-o", archive)
    assert sorted(os.listdir(tmp_dir)) == ["top.tar.zst"], "export left a temp file"
    return archive, {line.split()[1]: line.split()[0] for line in sums.splitlines()}


def test_export_import_round_trip(hx):
    h = hx
    out_dir = h.workspace()
    archive, sums = exported(h, out_dir)
    assert h.ok("snapshot", "import", archive, "--name", "imp") == "imp\n"
    imp = h.snapshots()["imp"]
    assert imp["parent"] is None
    assert imp["id"] != h.snapshots()["top"]["id"]
    h.ok("create", "x", "--from", "imp")
    got = h.sh("x", "cd /root && sha256sum rand keep od/n marker")
    assert {line.split()[1]: line.split()[0] for line in got.splitlines()} == sums
    assert h.sh("x", "ls -A /root; ls -A /root/od; readlink /root/lnk") == (
        "keep\nlnk\nmarker\nod\nrand\nn\nkeep\n"
    )
    assert h.run("exec", "x", "--", "test", "-e", "/root/gone").returncode == 1
    # Again under its own name, which is taken: refused, nothing added.
    h.fails("snapshot", "import", archive, msg=r"a snapshot named 'top' already exists")
    assert h.snapshot_dirs() == ["base", "imp", "top"] and h.temps() == []
    # An imported snapshot exports again, to the same content.
    again = out_dir / "imp.tar.zst"
    h.ok("snapshot", "export", "imp", "-o", again)
    assert h.ok("snapshot", "import", again, "--name", "imp2") == "imp2\n"
    h.ok("create", "y", "--from", "imp2")
    assert h.sh("y", "cd /root && sha256sum rand") == f"{sums['rand']}  rand\n"


def rebuild(tar_bytes, dest, edit_manifest=None, extra=()):
    """A copy of the tar stream @tar_bytes with the manifest changed by
    @edit_manifest and the (TarInfo, data) pairs @extra appended,
    compressed to @dest with the zstd command."""
    src = tarfile.open(fileobj=io.BytesIO(tar_bytes))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as out:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name == "manifest.json" and edit_manifest:
                j = json.loads(data)
                edit_manifest(j)
                data = json.dumps(j).encode()
                m.size = len(data)
            out.addfile(m, io.BytesIO(data) if data is not None else None)
        for ti, data in extra:
            if data is not None:
                ti.size = len(data)
            out.addfile(ti, io.BytesIO(data) if data is not None else None)
    subprocess.run(
        [zstd(), "-q", "-f", "-o", str(dest)], input=buf.getvalue(), check=True, capture_output=True
    )


def entry(name, data=None, link=None, kind=tarfile.REGTYPE):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    if link is not None:
        ti.linkname = link
    return ti, data


def one_more_entry(j):
    j["layers"][0]["entries"] += 1


def corrupt_cases(archive, work):
    """(name, path, message) of every corrupt archive made from @archive."""
    raw = archive.read_bytes()
    size = len(raw)
    cases = []

    def put(name, data):
        p = work / f"{name}.tar.zst"
        p.write_bytes(data)
        return p

    flipped = bytearray(raw)
    flipped[size // 2] ^= 0xFF
    cases.append(
        ("flipped", put("flipped", bytes(flipped)), r"checksum mismatch for '|corrupt or truncated")
    )
    for cut in (10, 100, size // 3, size // 2, size - 49, size - 1):
        cases.append((f"cut-{cut}", put(f"cut-{cut}", raw[:cut]), r"corrupt or truncated"))
    # The checksum frame (8 bytes of header, 40 of content) cut off whole.
    cases.append(("no-sum", put("no-sum", raw[: size - 48]), r"does not end with its checksum"))

    tar = subprocess.run([zstd(), "-q", "-d", "-c", str(archive)], capture_output=True, check=True)
    tar = tar.stdout

    def v2(j):
        j["format_version"] = 2

    made = [
        ("version-2", dict(edit_manifest=v2), r"format_version 2 is not supported"),
        (
            "dotdot",
            dict(extra=[entry("layers/0/root/../../../evil", b"evil\n")]),
            r"'\.\.' component",
        ),
        ("dotdot-top", dict(extra=[entry("../evil", b"evil\n")]), r"'\.\.' component"),
        ("absolute", dict(extra=[entry("/tmp/hutch-test-evil", b"evil\n")]), r"absolute path"),
        (
            "symlink-abs",
            dict(
                edit_manifest=one_more_entry,
                extra=[entry("layers/0/root/root/esc", link="/../etc", kind=tarfile.SYMTYPE)],
            ),
            r"symlink",
        ),
        (
            "symlink-up",
            dict(
                edit_manifest=one_more_entry,
                extra=[
                    entry("layers/0/root/root/esc", link="../../../../etc", kind=tarfile.SYMTYPE)
                ],
            ),
            r"symlink",
        ),
        (
            "hardlink",
            dict(
                extra=[
                    entry(
                        "layers/0/root/root/hard",
                        link="layers/0/root/root/rand",
                        kind=tarfile.LNKTYPE,
                    )
                ]
            ),
            r"hard link",
        ),
    ]
    for name, kw, msg in made:
        p = work / f"{name}.tar.zst"
        rebuild(tar, p, **kw)
        cases.append((name, p, msg))
    return cases


def test_import_refuses_corrupt_archives(hx):
    h = hx
    out_dir = h.workspace()
    archive, _ = exported(h, out_dir)
    work = h.workspace()
    cases = corrupt_cases(archive, work)
    h.chown(work)
    snaps = h.snapshot_dirs()
    for name, path, msg in cases:
        r = h.run("snapshot", "import", path, "--name", "bad")
        assert r.returncode == 125, f"{name}: exit {r.returncode}: {r.stderr}"
        assert re.search(msg, r.stderr), f"{name}: want /{msg}/ in {r.stderr!r}"
        assert len(r.stderr.strip().splitlines()) == 1, f"{name}: {r.stderr!r}"
        assert h.snapshot_dirs() == snaps, f"{name}: the store changed"
        assert h.temps() == [], f"{name}: left {h.temps()}"
    evil = [Path("/tmp/hutch-test-evil"), h.home / "evil", h.home / "snapshots" / "evil"]
    for p in [*evil, work / "evil"]:
        assert not p.exists(), f"an import wrote {p}"
    assert "bad" not in h.snapshots()


def user_export(request):
    """An archive exported by the unprivileged user (a file in /root and
    one in /var), and the user's store."""
    u = make_hutch(request, "user")
    new_sandbox(u, "u")
    u.sh("u", "mkdir -p /var/x && echo v > /var/x/y && echo fromuser > /root/f")
    u.ok("stop", "u")
    u.ok("snapshot", "u", "us")
    out = u.workspace()
    u.ok("snapshot", "export", "us", "-o", out / "us.tar.zst")
    return u, out / "us.tar.zst"


def test_import_as_user_of_an_export_by_root(request):
    r = make_hutch(request, "root")
    new_sandbox(r, "r")
    r.sh("r", "mkdir -p /var/x && echo v > /var/x/y && echo fromroot > /root/f")
    r.ok("stop", "r")
    r.ok("snapshot", "r", "rs")
    out = r.workspace()
    r.ok("snapshot", "export", "rs", "-o", out / "rs.tar.zst")
    os.chmod(out / "rs.tar.zst", 0o644)  # handed over to the user
    u = make_hutch(request, "user")
    u.ok("snapshot", "import", out / "rs.tar.zst")
    u.ok("create", "u", "--from", "rs")
    assert u.sh("u", "cat /root/f /var/x/y /root/marker && echo new > /root/new") == (
        "fromroot\nv\nmarker r\n"
    )


def test_import_as_root_of_an_export_by_user(request):
    _u, archive = user_export(request)
    r = make_hutch(request, "root")
    r.ok("snapshot", "import", archive)
    r.ok("create", "r", "--from", "us")
    assert r.sh("r", "cat /root/f /var/x/y /root/marker && echo new > /root/new") == (
        "fromuser\nv\nmarker u\n"
    )


# ---- 6. crash safety ----


@pytest.mark.parametrize("point", ["snapshot-1", "snapshot-2", "snapshot-3", "snapshot-4"])
def test_crash_during_snapshot_of_stopped_sandbox(hx, point):
    h = hx
    new_sandbox(h, "c")
    h.sh("c", "echo layer > /root/file")
    h.ok("stop", "c")
    r = h.run("snapshot", "c", "snap", env={"HUTCH_TEST_CRASH_POINT": point})
    assert r.returncode in CRASHED, f"no crash at {point}: {r.returncode}: {r.stderr}"

    committed = point == "snapshot-4"  # after the rename of the temp folder
    assert h.sandboxes()["c"]["parent"] == ("snap" if committed else None)
    assert h.snapshot_dirs() == (["snap"] if committed else [])
    check_store(h, ["c"])
    assert h.sh("c", "cat /root/file") == "layer\n"
    if committed:
        h.ok("create", "from", "--from", "snap")
        assert h.sh("from", "cat /root/file /root/marker") == "layer\nmarker c\n"
        check_store(h, {"c": "c", "from": "c"})
    else:
        # The name is free and the snapshot can be taken again.
        h.ok("stop", "c")
        assert h.ok("snapshot", "c", "snap") == "snap\n"
        check_store(h, ["c"])


def test_crash_during_snapshot_of_running_sandbox(hfreeze):
    h = hfreeze
    new_sandbox(h, "c")
    start_writer(h, "c")
    r = h.run("snapshot", "c", "snap", env={"HUTCH_TEST_CRASH_POINT": "copy-1"})
    assert r.returncode in CRASHED, f"no crash at copy-1: {r.returncode}: {r.stderr}"
    assert h.snapshot_dirs() == []
    # The keeper thawed the sandbox when the dead command's connection closed.
    wait_growing(h, "c")
    assert h.sandboxes()["c"]["state"] == "running"
    check_store(h, ["c"])
    assert h.ok("snapshot", "c", "snap") == "snap\n"
    wait_growing(h, "c")
    check_store(h, ["c"])


def kill_after(p, delay):
    """SIGKILLs @p (one of ours) after @delay seconds unless it ended;
    returns its exit status."""
    try:
        return p.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        pass
    kill_quietly(p.pid)
    p.communicate(timeout=60)
    return p.returncode


def test_random_kills(hroot, record_property):
    """hutch snapshot (stopped and running sandboxes) and hutch exec,
    SIGKILLed after a random delay; the store stays consistent."""
    h = hroot
    seed = int(os.environ.get("HUTCH_TEST_SEED", DEFAULT_SEED))
    print(f"random-kill seed: {seed} (HUTCH_TEST_SEED)")
    record_property("seed", seed)
    rng = random.Random(seed)
    fill = (
        "mkdir -p /root/data && for i in $(seq 50); do head -c 1M /dev/zero > /root/data/f$i; done"
    )
    new_sandbox(h, "st")
    new_sandbox(h, "rn")
    h.sh("rn", fill)
    start_writer(h, "rn")
    ops = ["snapshot-stopped", "snapshot-running", "exec"] * KILL_ROUNDS
    rng.shuffle(ops)
    deadline = time.monotonic() + 120
    outcomes = []
    for i, op in enumerate(ops):
        assert time.monotonic() < deadline, f"the loop took too long ({i} iterations)"
        delay = rng.uniform(0, KILL_DELAY_STOPPED_S if op == "snapshot-stopped" else KILL_DELAY_S)
        if op == "snapshot-stopped":
            h.sh("st", fill)
            h.ok("stop", "st")
            p = h.popen("snapshot", "st", f"k{i}")
        elif op == "snapshot-running":
            p = h.popen("snapshot", "rn", f"k{i}")
        else:
            target = rng.choice(["st", "rn"])
            if target == "st":
                h.ok("stop", "st")  # the exec starts it
            work = "echo x >> /root/log; head -c 20M /dev/zero > /root/scratch"
            p = h.popen("exec", target, "--", "sh", "-c", work)
        rc = kill_after(p, delay)
        outcomes.append((op, round(delay * 1000, 1), rc))
        print("iteration", i, outcomes[-1], flush=True)
        assert rc in (0, *CRASHED), f"iteration {i} ({op}): exit {rc}"
        check_store(h, ["st", "rn"])
        wait_growing(h, "rn")
    record_property("outcomes", outcomes)
    for kind in ("snapshot-stopped", "snapshot-running", "exec"):
        assert any(op == kind and rc in CRASHED for op, _d, rc in outcomes), (
            f"no {kind} was killed: the loop did not test what it should"
        )
    # Every snapshot that exists is whole: a sandbox can start from it.
    snaps = h.snapshot_dirs()
    for s in snaps:
        h.ok("create", f"from-{s}", "--from", s)
        origin = h.snapshots()[s]["origin"]
        assert h.sh(f"from-{s}", "cat /root/marker") == f"marker {origin}\n"
        h.ok("rm", "--force", f"from-{s}")


# ---- 7. concurrency ----


def test_concurrent_snapshots(hroot):
    h = hroot
    new_sandbox(h, "st")
    h.ok("stop", "st")
    new_sandbox(h, "rn")
    start_writer(h, "rn")
    for name, args in (("st", ((), ())), ("rn", (("a",), ("b",)))):
        ps = [h.popen("snapshot", name, *a) for a in args]
        results = []
        for p in ps:
            out, err = p.communicate(timeout=120)
            results.append((p.returncode, out.decode().strip(), err.decode()))
        made = [out for rc, out, _e in results if rc == 0]
        for rc, _out, err in results:
            assert rc == 0 or (rc == 125 and err.startswith("hutch: ")), results
        assert made and len(set(made)) == len(made), results
        for s in made:
            assert s in h.snapshots()
    snaps = h.snapshots()
    # Serialised on the sandbox: the second stopped snapshot stacks on the first.
    st = sorted(s for s in snaps if snaps[s]["origin"] == "st")
    if st == ["st.1", "st.2"]:
        assert {snaps["st.1"]["parent"], snaps["st.2"]["parent"]} == {None, "st.1"}
    wait_growing(h, "rn")
    check_store(h, ["st", "rn"])
    for s in snaps:
        h.ok("create", f"f-{s}", "--from", s)
        assert h.sh(f"f-{s}", "cat /root/marker") == f"marker {snaps[s]['origin']}\n"


def test_exec_during_snapshot_of_stopped_sandbox(hroot):
    """`hutch exec` and `hutch snapshot` of a stopped sandbox started
    together, in either order, a few ms apart: the exec succeeds (before
    or after the snapshot) or fails saying the sandbox is busy; the
    snapshot is of the stopped or of the just started sandbox."""
    h = hroot
    rng = random.Random(DEFAULT_SEED)
    new_sandbox(h, "c")
    seen = []
    for i in range(10):
        h.sh("c", f"echo {i} > /root/round")
        h.ok("stop", "c")
        first, stagger = rng.choice(["snapshot", "exec"]), rng.uniform(0, 0.008)
        start = {
            "snapshot": lambda: h.popen("snapshot", "c", f"s{i}"),
            "exec": lambda: h.popen("exec", "c", "--", "cat", "/root/round", "/root/marker"),
        }
        procs = {first: start[first]()}
        time.sleep(stagger)
        second = "exec" if first == "snapshot" else "snapshot"
        procs[second] = start[second]()
        so, se = procs["snapshot"].communicate(timeout=120)
        eo, ee = procs["exec"].communicate(timeout=120)
        snap_rc, exec_rc = procs["snapshot"].returncode, procs["exec"].returncode
        seen.append((first, round(stagger * 1000, 1), snap_rc, b"running" in se, exec_rc))
        assert snap_rc == 0 or (snap_rc == 125 and se.startswith(b"hutch: ")), se
        if exec_rc == 0:
            assert eo == f"{i}\nmarker c\n".encode()
        else:
            assert exec_rc == 125 and re.search(rb"busy|try again", ee), (exec_rc, ee)
        check_store(h, ["c"])
        assert h.sh("c", "cat /root/round") == f"{i}\n"
        if snap_rc == 0:
            h.ok("create", f"f{i}", "--from", f"s{i}")
            assert h.sh(f"f{i}", "cat /root/round /root/marker") == f"{i}\nmarker c\n"
            h.ok("rm", "--force", f"f{i}")
    print("(first, stagger ms, snapshot exit, of running sandbox, exec exit):", seen)


def blocked_on_lock(pid):
    """Whether process @pid waits for a file lock (/proc/locks "->")."""
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if len(f) > 5 and f[1] == "->" and f[5] == str(pid):
            return True
    return False


def test_create_from_races_snapshot_rm(hroot):
    """`create X --from S` and `snapshot rm S`, both past their checks and
    waiting for the store's lock (which the test holds, as a long command
    would): whichever gets it first wins, and the other fails. A sandbox
    is never made from a snapshot that is gone."""
    h = hroot
    new_sandbox(h, "src")
    start_writer(h, "src")  # running: its snapshots are copies, nothing depends on them
    seen = []
    for i in range(10):
        h.ok("snapshot", "src", f"t{i}")
        fd = os.open(h.home / "lock", os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # Each first in turn (the lock tends to go to the first waiter).
            order = ["create", "rm"] if i % 2 == 0 else ["rm", "create"]
            procs = {}
            for what in order:
                if what == "create":
                    procs[what] = h.popen("create", f"x{i}", "--from", f"t{i}")
                else:
                    procs[what] = h.popen("snapshot", "rm", f"t{i}")
                pid = procs[what].pid
                assert poll_until(lambda: blocked_on_lock(pid), 10.0), f"{what} did not wait"
            create, rm = procs["create"], procs["rm"]
        finally:
            os.close(fd)
        _co, ce = create.communicate(timeout=60)
        _ro, re_ = rm.communicate(timeout=60)
        created, removed = create.returncode == 0, rm.returncode == 0
        seen.append((created, removed))
        assert created != removed, f"round {i}: create {ce!r}, snapshot rm {re_!r}"
        if created:
            assert re.search(rb"snapshot 't\d+' is used by sandbox 'x\d+'", re_), re_
            assert h.sh(f"x{i}", "cat /root/marker") == "marker src\n"
            h.ok("rm", "--force", f"x{i}")
            h.ok("snapshot", "rm", f"t{i}")
        else:
            assert re.search(rb"no snapshot named 't\d+'", ce), ce
        assert h.snapshot_dirs() == [] and h.temps() == []
        assert sorted(h.sandboxes()) == ["src"]
    print("(created, removed):", seen)


def test_gc_during_import(hroot):
    """An import fed through a FIFO is held half-way while `hutch gc` runs:
    gc must leave the import's temp folder alone, and the import then
    succeeds."""
    h = hroot
    out = h.workspace()
    archive, sums = exported(h, out)
    data = archive.read_bytes()
    fifo = out / "fifo"
    os.mkfifo(fifo, 0o600)
    p = h.popen("snapshot", "import", fifo, "--name", "imp")
    with open(fifo, "wb") as w:
        w.write(data[: len(data) // 2])
        w.flush()
        assert poll_until(lambda: h.temps(), 10.0), "the import made no temp folder"
        h.ok("gc")
        try:
            w.write(data[len(data) // 2 :])
        except BrokenPipeError:
            pass  # the import gave up
    so, se = p.communicate(timeout=60)
    assert p.returncode == 0, se.decode()
    assert so == b"imp\n"
    h.ok("create", "x", "--from", "imp")
    assert h.sh("x", "cd /root && sha256sum rand") == f"{sums['rand']}  rand\n"


# ---- 8. bad input ----


def test_bad_input(hx):
    h = hx
    ws = h.workspace()
    h.ok("create", "c")
    h.ok("create", "w", "--workspace", ws)
    h.ok("create", "m", "--workspace", f"{ws}:mount")
    h.sh("w", "echo x > /workspace/x")
    out = h.workspace()

    h.fails("snapshot", "nope", "s", msg=r"no sandbox named 'nope'")
    h.fails("snapshot", "c", "BAD", msg=r"invalid snapshot name 'BAD'")
    h.fails("snapshot", "c", "../x", msg=r"invalid snapshot name '\.\./x'")
    h.ok("snapshot", "c", "s1")
    h.fails("snapshot", "c", "s1", msg=r"a snapshot named 's1' already exists")
    h.fails("snapshot", "rm", "nope", msg=r"no snapshot named 'nope'")
    h.fails("snapshot", "export", "nope", "-o", out / "x.tar.zst", msg=r"no snapshot named 'nope'")
    h.fails("snapshot", "export", "s1", msg=r"usage: hutch snapshot export")
    h.fails("snapshot", "export", "s1", "-o", out / "no" / "x.tar.zst", msg=r"cannot create")
    h.fails("snapshot", "import", out / "missing.tar.zst", msg=r"cannot open '.*missing\.tar\.zst'")
    (out / "empty.tar.zst").write_bytes(b"")
    h.chown(out)
    h.fails("snapshot", "import", out / "empty.tar.zst", msg=r"snapshot archive")
    h.fails("snapshot", "import", msg=r"usage: hutch snapshot import")
    h.fails("snapshot", "import", out / "empty.tar.zst", "--name", "Bad", msg=r"invalid snapshot")
    h.fails("create", "z", "--from", "nope", msg=r"no snapshot named 'nope'")
    for verb in ("diff", "apply"):
        h.fails(verb, "c", msg=r"sandbox 'c' has no overlay workspace")
        h.fails(verb, "m", msg=r"sandbox 'm' has no overlay workspace")
        h.fails(verb, "nope", msg=r"no sandbox named 'nope'")
    for path in ("../x", "/etc", "a/../../x", "/workspace/../x"):
        h.fails("apply", "w", path, msg=r"must be relative to the workspace")
        h.fails("diff", "w", path, msg=r"must be relative to the workspace")
    h.fails("apply", "w", "nothere", msg=r"no change at or below 'nothere'")
    assert sorted(os.listdir(ws)) == [], "a refused apply wrote to the host folder"
    assert sorted(os.listdir(out)) == ["empty.tar.zst"]
    assert h.snapshot_dirs() == ["s1"] and h.temps() == []
    assert sorted(h.sandboxes()) == ["c", "m", "w"]
