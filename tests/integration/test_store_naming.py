# SPDX-License-Identifier: LGPL-2.1-or-later
"""Store and naming defects (issue 15 item 6, issue 26 item 4), driven
through the real binary:

- two stores (two HUTCH_HOMEs) of one caller keep their runtime state
  apart: a sandbox of one never reaches the same-named sandbox of the
  other (docs/persistent.md, "Where things live");
- another local user cannot stop hutch by making its runtime or template
  folders first, and a folder of the caller's own that others can write is
  refused (docs/threat-model.md);
- snapshots that hold absolute symlinks export and import, and an archive
  whose symlink would carry a later entry out of the store is refused;
- `hutch mcp` snapshot names of one sandbox are never another's.

These tests use the default runtime folder (no HUTCH_STATE_DIR) on
purpose: that is where the stores met. Their sandbox names carry a random
tag, and every folder they make is removed at the end."""

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from conftest import IS_ROOT
from test_persistent import Store
from test_mcp import call, error_text, ok_result, run_client, sdk, smenv  # noqa: F401 (fixtures)
from test_snapshots import entry, hx, make_hutch, rebuild, zstd  # noqa: F401 (fixture)

ATTACKER_UID = 65534  # nobody


def tag():
    return uuid.uuid4().hex[:8]


def runtime_base(runner, home):
    """Where the caller's runtime folder is when nothing names it: /run/hutch
    for root; for the test user (no XDG_RUNTIME_DIR, no /run/user/UID of its
    own) inside the store."""
    if runner.uid == 0:
        return Path("/run/hutch")
    run_user = Path(f"/run/user/{runner.uid}")
    if run_user.is_dir() and run_user.stat().st_uid == runner.uid:
        return run_user / "hutch"
    return Path(os.path.realpath(home)) / "run"


class DefaultStateStore(Store):
    """A store whose runtime folder is the default one (HUTCH_HOME only)."""

    def env(self, extra=None):
        e = {"HUTCH_HOME": str(self.home)}
        e.update(extra or {})
        return e

    def state_dir(self):
        key = hashlib.sha256(os.path.realpath(self.home).encode()).hexdigest()[:12]
        return runtime_base(self.runner, self.home) / f"s-{key}"

    def finalize(self):
        state = self.state_dir()
        try:
            super().finalize()
        finally:
            shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(params=["root", "user"])
def two_stores(request):
    runner = request.getfixturevalue(f"{request.param}_runner")
    a, b = DefaultStateStore(runner), DefaultStateStore(runner)
    yield a, b
    try:
        a.finalize()
    finally:
        b.finalize()


# ---- 1. two stores, one runtime folder ----


def test_two_stores_keep_same_named_sandboxes_apart(two_stores):
    a, b = two_stores
    name = f"web-{tag()}"
    a.create(name)
    assert a.sh(name, "echo store-a > /root/who; cat /root/who") == "store-a\n"
    a_keeper = a.keeper_pid(name)

    b.create(name)
    # The second store's sandbox runs in its own layer: it does not see
    # the first's file (on the shared folder it ran in the first's).
    assert b.sh(name, "cat /root/who 2>/dev/null; echo store-b > /root/who") == ""
    b_keeper = b.keeper_pid(name)
    assert b_keeper != a_keeper
    assert a.sh(name, "cat /root/who") == "store-a\n"
    assert b.sh(name, "cat /root/who") == "store-b\n"
    # Each store's state is its own folder, named by its canonical path.
    for st in (a, b):
        assert (st.state_dir() / name / "keeper.sock").exists()
        assert (st.state_dir() / "store").read_text() == os.path.realpath(st.home)
    assert a.state_dir() != b.state_dir()

    # rm --force of one leaves the other running.
    r = b.hutch("rm", "--force", name)
    assert r.returncode == 0, r.stderr
    assert a.state_of(name) == "running"
    assert a.keeper_pid(name) == a_keeper
    assert a.sh(name, "cat /root/who") == "store-a\n"


def test_explicit_state_dir_is_still_the_state(caller):
    s = Store(caller)  # HUTCH_HOME and HUTCH_STATE_DIR
    try:
        name = f"st-{tag()}"
        s.create(name)
        assert s.sh(name, "echo ok") == "ok\n"
        assert (s.state / name / "keeper.sock").exists()
    finally:
        s.finalize()


def test_runtime_folder_of_another_store_is_refused(caller):
    """The folder names its store: one claimed by another store (a hash
    collision, a store moved) is refused, never shared."""
    s = DefaultStateStore(caller)
    try:
        name = f"cl-{tag()}"
        s.create(name)
        claim = s.state_dir() / "store"
        claim.write_text("/somewhere/else")
        r = s.hutch("exec", name, "--", "true")
        assert r.returncode != 0
        assert "belongs to the store /somewhere/else" in r.stderr
        claim.write_text(os.path.realpath(s.home))
        assert s.sh(name, "echo ok") == "ok\n"
    finally:
        s.finalize()


# ---- 2. folders another user makes first ----


def as_attacker(*cmd):
    subprocess.run(
        ["setpriv", f"--reuid={ATTACKER_UID}", f"--regid={ATTACKER_UID}", "--clear-groups",
         "--", *cmd],
        check=True,
    )


@pytest.fixture
def planted(user_runner):
    """/tmp/hutch-UID and /dev/shm/hutch-vm-UID of the test user, made
    first (mode 0777) by another user; what was there is put back after."""
    if not IS_ROOT:
        pytest.skip("needs root: plays another local user")
    uid = user_runner.uid
    paths = [Path(f"/tmp/hutch-{uid}"), Path(f"/dev/shm/hutch-vm-{uid}")]
    saved = []
    for p in paths:
        if os.path.lexists(p):
            aside = p.with_name(f"{p.name}.saved-{tag()}")
            os.rename(p, aside)
            saved.append((aside, p))
    try:
        for p in paths:
            as_attacker("mkdir", "-m", "0777", str(p))
            st = os.lstat(p)
            assert st.st_uid == ATTACKER_UID and st.st_mode & 0o777 == 0o777
        yield paths
    finally:
        for p in paths:
            shutil.rmtree(p, ignore_errors=True)
        for aside, p in saved:
            os.rename(aside, p)


def test_folders_made_first_by_another_user_do_not_stop_hutch(user_runner, planted):
    s = DefaultStateStore(user_runner)
    try:
        name = f"dos-{tag()}"
        s.create(name)
        assert s.sh(name, "echo ok") == "ok\n"
        assert s.state_of(name) == "running"
        # The planted folders were neither used nor touched.
        for p in planted:
            assert os.listdir(p) == []
        assert planted[0] not in s.state_dir().parents
    finally:
        s.finalize()


def test_vm_template_folder_made_first_by_another_user_does_not_stop_hutch(user_runner, planted):
    """`--backend vm` as the test user, whose runtime folder (inside the
    store, on disk) is not tmpfs: the templates go to a /dev/shm folder of
    a random name recorded in the store, never the planted one."""
    s = DefaultStateStore(user_runner)
    tdir = None
    try:
        r = s.hutch("run", "--backend", "vm", "--vm-accel", "tcg", "--", "echo", "vm-ok",
                    timeout=240)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "vm-ok\n"
        for p in planted:
            assert os.listdir(p) == []
        tdir = Path((s.home / "vm-templates.path").read_text())
        assert tdir.parent == Path("/dev/shm")
        assert tdir.name.startswith(f"hutch-vm-{user_runner.uid}-") and tdir != planted[1]
        st = os.lstat(tdir)
        assert st.st_uid == user_runner.uid and st.st_mode & 0o7777 == 0o700
        assert os.listdir(tdir), "no template was kept there"
    finally:
        if tdir and str(tdir).startswith("/dev/shm/hutch-vm-"):
            shutil.rmtree(tdir, ignore_errors=True)
        s.finalize()


def test_own_folder_that_others_can_write_is_refused(caller):
    """Negative twin: a store or state folder of the caller's own that is
    group- or other-writable is refused, with its path and mode."""
    s = Store(caller)
    try:
        s.home.mkdir(mode=0o700)
        caller.chown(s.home)
        os.chmod(s.home, 0o777)
        r = s.hutch("create", f"w-{tag()}")
        assert r.returncode != 0
        assert str(s.home) in r.stderr and "mode 0777" in r.stderr, r.stderr
        assert not (s.home / "sandboxes").exists()
        os.chmod(s.home, 0o700)
        s.state.mkdir(mode=0o700)
        caller.chown(s.state)
        os.chmod(s.state, 0o1777)
        r = s.hutch("create", f"w-{tag()}")
        assert r.returncode != 0
        assert str(s.state) in r.stderr and "mode 1777" in r.stderr, r.stderr
        os.chmod(s.state, 0o700)
        name = f"w-{tag()}"
        s.create(name)
        assert s.sh(name, "echo ok") == "ok\n"
    finally:
        s.finalize()


# ---- 3. absolute symlinks in snapshots ----

VENV = (
    "mkdir -p /root/venv/bin && ln -s /usr/bin/python3 /root/venv/bin/python3 && "
    "ln -s /usr/bin/env /root/venv/bin/env && ln -s python3 /root/venv/bin/python"
)


@pytest.fixture(params=["root", "user"])
def two_hutches(request):
    return make_hutch(request, request.param), make_hutch(request, request.param)


def test_absolute_symlinks_export_and_import(two_hutches):
    """A venv's bin/python3 -> /usr/bin/python3 (and one deleted in the
    child layer) exports, imports into another store and resolves inside
    the sandbox made from it."""
    h, other = two_hutches
    h.ok("create", "venv")
    h.sh("venv", VENV)
    h.ok("stop", "venv")
    h.ok("snapshot", "venv", "s1")
    # Deleted in the child layer: the parent layer still holds it.
    h.sh("venv", "rm /root/venv/bin/env && echo 2 > /root/venv/marker")
    h.ok("stop", "venv")
    h.ok("snapshot", "venv", "s2")
    out = h.workspace()
    archive = out / "s2.tar.zst"
    h.ok("snapshot", "export", "s2", "-o", archive)
    h.chown(out)

    assert other.ok("snapshot", "import", archive, "--name", "imp") == "imp\n"
    # Stored as it is: the link names the sandbox's path, never followed.
    layers = sorted(other.snapshot_dir("imp").rglob("venv/bin/python3"))
    assert layers and all(os.readlink(p) == "/usr/bin/python3" for p in layers), layers
    other.ok("create", "copy", "--from", "imp")
    got = other.sh(
        "copy",
        "readlink /root/venv/bin/python3; /root/venv/bin/python -c 'print(6 * 7)'; "
        "cat /root/venv/marker; test -e /root/venv/bin/env && echo env-back || echo env-gone",
    )
    assert got == "/usr/bin/python3\n42\n2\nenv-gone\n"


def test_import_never_writes_through_an_absolute_symlink(hx):
    """Negative twin: an archive whose symlink `a -> OUTSIDE` comes before
    a file `a/evil` is refused, and nothing is written outside the store."""
    h = hx
    h.ok("create", "src")
    h.sh("src", "echo x > /root/x")
    h.ok("stop", "src")
    h.ok("snapshot", "src", "s")
    out = h.workspace()
    archive = out / "s.tar.zst"
    h.ok("snapshot", "export", "s", "-o", archive)
    outside = h.runner.make_dir(mode=0o777, name="outside")

    def two_more(j):
        j["layers"][0]["entries"] += 2
        j["layers"][0]["files"]["root/root/a/evil"] = hashlib.sha256(b"evil\n").hexdigest()

    tar = subprocess.run([zstd(), "-q", "-d", "-c", str(archive)], capture_output=True, check=True)
    bad = out / "through.tar.zst"
    rebuild(
        tar.stdout,
        bad,
        edit_manifest=two_more,
        extra=[
            entry("layers/0/root/root/a", link=str(outside), kind=tarfile.SYMTYPE),
            entry("layers/0/root/root/a/evil", b"evil\n"),
        ],
    )
    h.chown(out)
    snaps = h.snapshot_dirs()
    r = h.run("snapshot", "import", bad, "--name", "bad")
    assert r.returncode == 125, r.stderr
    assert "'layers/0/root/root/a/evil' is not a directory" in r.stderr, r.stderr
    assert os.listdir(outside) == []
    assert h.snapshot_dirs() == snaps
    assert h.temps() == []


# ---- 4. hutch mcp snapshot names ----


def test_mcp_snapshot_names_never_cross_sandboxes(sdk, smenv):
    """The agent of `--name proj` cannot restore the snapshot `s2` of
    `--name proj.v2` by asking for `v2.s2` (both are `proj.v2.s2` in the
    store without a separator that names cannot hold)."""
    proj = f"proj-{tag()}"
    a = run_client(sdk, smenv, [
        call("write_file", path="owner.txt", content="v2\n"),
        call("exec", command="echo v2-secret > /root/secret"),
        call("snapshot", name="s2"),
    ], args=("--name", f"{proj}.v2"))
    snap = ok_result(a["steps"][2])["structuredContent"]
    assert snap["snapshot"] == f"{proj}.v2.s2"

    b = run_client(sdk, smenv, [
        call("restore", name="v2.s2"),
        call("snapshot", name="v2.s2"),
        call("exec", command="cat /root/secret 2>/dev/null || echo none"),
        call("snapshot", name="s2"),
        call("restore", name="s2"),
    ], args=("--name", proj))
    assert "invalid snapshot name 'v2.s2'" in error_text(b["steps"][0])
    assert "invalid snapshot name 'v2.s2'" in error_text(b["steps"][1])
    assert ok_result(b["steps"][2])["structuredContent"]["stdout"] == "none\n"
    # Twin: its own names work, in its own namespace.
    assert ok_result(b["steps"][3])["structuredContent"]["snapshot"] == f"{proj}.s2"
    assert ok_result(b["steps"][4])["structuredContent"]["snapshot"] == f"{proj}.s2"
    r = smenv.hutch("snapshot", "ls", "--json")
    assert r.returncode == 0, r.stderr
    names = sorted(s["name"] for s in json.loads(r.stdout))
    assert names == [f"{proj}.s2", f"{proj}.v2.s2"]
