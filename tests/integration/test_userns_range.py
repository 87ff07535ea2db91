# SPDX-License-Identifier: LGPL-2.1-or-later
"""The id range of persistent sandboxes (issue 17 "Packages work",
docs/persistent.md "Id range"): a user with sub-ids gets podman's
rootless map through newuidmap/newgidmap (0 is the user, 1..65536 the
sub-ids, setgroups allowed) and the sandbox's root keeps the capabilities
package managers need over that range only; a user without sub-ids keeps
the single-id map and is told so. Every store operation that touches a
sandbox's files from outside (snapshot, fork, diff, apply, export, import,
rm, gc) works on files owned by ids 0, 42 (_apt) and 1000 inside, and rm
leaves nothing of the sub-ids behind. Negative twins: `hutch run` keeps
the single-id map and no capability; the range opens nothing of a host id
outside it (a bound folder of another user, setgroups or chown to an
unmapped id).

Runs as root and as the test user `hutchtest` (with a range of sub-ids,
given for the time of the module when it has none), and as `nobody` (no
sub-ids) for the fallback."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import IS_ROOT, Runner, stage_binaries
from subids import SubIds
from test_persistent import Store

IDS = (0, 42, 1000)
# chown, dac_override, fowner, fsetid, kill, setgid, setuid.
PACKAGE_CAPS = "00000000000000fb"
NO_CAPS = "0000000000000000"

SETUP = r"""
set -e
for u in 0 42 1000; do
  for d in /root/d$u /var/lib/t/d$u /workspace/d$u; do
    mkdir -p $d
    echo "secret of $u" > $d/f
    chmod 600 $d/f
    chmod 700 $d
    chown -R $u:$u $d
  done
done
"""
CHECK = r"""
for u in 0 42 1000; do for d in /root/d$u /var/lib/t/d$u /workspace/d$u; do
  stat -c '%u:%g %a %n' $d $d/f; cat $d/f
done; done
"""
# An imported snapshot brings no policy, so no workspace.
CHECK_NO_WS = CHECK.replace(" /workspace/d$u", "")


def expected_check(ws=True):
    out = []
    for u in IDS:
        for d in (f"/root/d{u}", f"/var/lib/t/d{u}", *([f"/workspace/d{u}"] if ws else [])):
            out += [f"{u}:{u} 700 {d}", f"{u}:{u} 600 {d}/f", f"secret of {u}"]
    return out


@pytest.fixture(scope="module")
def subids(user_runner):
    """The test user's range of sub-ids (added for this module when it
    has none)."""
    if not IS_ROOT:
        pytest.skip("needs root: gives the test user a range of sub-ids")
    if not (shutil.which("newuidmap") and shutil.which("newgidmap")):
        pytest.fail("newuidmap/newgidmap missing: apt-get install uidmap (tools/deps.sh)")
    s = SubIds("hutchtest", user_runner.uid)
    yield s
    s.close()


@pytest.fixture(params=["root", "user"])
def rstore(request, subids):
    """A store of its own, as root and as the test user with sub-ids."""
    s = Store(request.getfixturevalue(f"{request.param}_runner"))
    yield s
    s.finalize()


@pytest.fixture
def user_store(user_runner, subids):
    s = Store(user_runner)
    yield s
    s.finalize()


@pytest.fixture
def nobody_store(binaries):
    """A store of `nobody`, who has no sub-ids."""
    if not IS_ROOT:
        pytest.skip("needs root: runs hutch as nobody")
    base = Path(tempfile.mkdtemp(prefix="hutch-nobody-"))
    hutch, pdir = stage_binaries(base, *binaries)
    s = Store(Runner("user", hutch, pdir, 65534, 65534, base))
    yield s
    s.finalize()
    shutil.rmtree(base, ignore_errors=True)


def map_lines(text):
    return [" ".join(line.split()) for line in text.strip().splitlines()]


def test_user_persistent_sandbox_maps_its_sub_ids(user_store, subids):
    st = user_store
    r = st.runner
    st.create("box")
    out = st.sh("box", "cat /proc/self/uid_map; echo; cat /proc/self/gid_map; echo; "
                       "cat /proc/self/setgroups")
    uid, gid, sg = out.split("\n\n")
    assert map_lines(uid) == [f"0 {r.uid} 1", f"1 {subids.uid_base} 65536"]
    assert map_lines(gid) == [f"0 {r.gid} 1", f"1 {subids.gid_base} 65536"]
    assert sg.strip() == "allow"
    # Twin: a one-shot run keeps the single-id map, setgroups denied.
    one = r.run(["--", "sh", "-c", "cat /proc/self/uid_map /proc/self/setgroups"])
    assert one.returncode == 0, one.stderr
    assert map_lines(one.stdout) == [f"0 {r.uid} 1", "deny"]


def test_root_of_a_ranged_sandbox_switches_users(rstore):
    st = rstore
    st.create("box")
    out = st.sh("box", "grep -E '^Cap(Eff|Bnd)' /proc/self/status; "
                       "su -s /bin/sh nobody -c 'grep CapEff /proc/self/status; id -u'; "
                       "cd /root && touch f && chown 42:42 f && stat -c %u:%g f; "
                       "/usr/bin/python3 -c 'import os; os.setgroups([42, 100]); os.setresgid(42, 42, 42); "
                       "os.setresuid(42, 42, 42); print(os.getuid(), sorted(os.getgroups()))'")
    lines = [" ".join(x.split()) for x in out.splitlines()]
    assert lines == [
        f"CapEff: {PACKAGE_CAPS}", f"CapBnd: {PACKAGE_CAPS}",
        f"CapEff: {NO_CAPS}", "65534",
        "42:42",
        "42 [42, 100]",
    ], out
    # Twin: hutch run's root keeps no capability and cannot chown.
    one = st.runner.run(["--", "sh", "-c", "grep CapEff /proc/self/status; touch /tmp/f; "
                                          "chown 42 /tmp/f"])
    assert one.returncode != 0
    assert NO_CAPS in one.stdout
    assert "chown" in one.stderr


def test_files_of_sub_ids_go_through_every_store_operation(rstore, subids):
    st = rstore
    r = st.runner
    ws = r.make_dir(name="ws")
    (ws / "kept").write_text("host file\n")
    r.chown(ws)
    st.create("box", "--workspace", ws)
    st.sh("box", SETUP)
    want = expected_check()
    assert st.sh("box", CHECK).splitlines() == want

    if r.mode == "user":
        # The layer on the host: ids 42 and 1000 are the user's sub-ids,
        # which the user cannot read (0600 in a 0700 folder).
        layer = next((st.sandbox_dir("box") / "data").glob("upper-*")) / "root"
        assert (layer / "var/lib/t/d42").stat().st_uid == subids.uid_base + 41
        assert (layer / "var/lib/t/d1000/f").stat().st_gid == subids.gid_base + 999
        assert (layer / "root/d0/f").stat().st_uid == r.uid
    else:
        # A running sandbox's snapshot is a copy that keeps every owner.
        snap = st.hutch("snapshot", "box", "run1")
        assert snap.returncode == 0, snap.stderr
        st.create("frun", "--from", "run1")
        assert st.sh("frun", CHECK).splitlines() == want

    d = st.hutch("diff", "box")
    assert d.returncode == 0, d.stderr
    for u in IDS:
        assert f"+secret of {u}" in d.stdout, d.stdout
    ns = st.hutch("diff", "box", "--name-status")
    assert ns.returncode == 0, ns.stderr
    assert "A d42/f" in ns.stdout and "A d1000/f" in ns.stdout, ns.stdout

    ap = st.hutch("apply", "box")
    assert ap.returncode == 0, ap.stderr
    for u in IDS:
        f = ws / f"d{u}" / "f"
        assert f.read_text() == f"secret of {u}\n"
        assert f.stat().st_uid == r.uid  # apply writes as the caller

    assert st.hutch("stop", "box").returncode == 0
    snap = st.hutch("snapshot", "box", "snap1")
    assert snap.returncode == 0, snap.stderr
    assert st.sh("box", CHECK).splitlines() == want
    st.create("fork", "--from", "snap1")
    assert st.sh("fork", CHECK).splitlines() == want

    archive = st.dir / "snap1.tar.zst"
    ex = st.hutch("snapshot", "export", "snap1", "-o", archive, "-q")
    assert ex.returncode == 0, ex.stderr
    im = st.hutch("snapshot", "import", archive, "--name", "imp", "-q")
    assert im.returncode == 0, im.stderr
    st.create("fimp", "--from", "imp")
    assert st.sh("fimp", CHECK_NO_WS).splitlines() == expected_check(ws=False)

    for name in st.names:
        rm = st.hutch("rm", "--force", name)
        assert rm.returncode == 0, rm.stderr
    for snap in ("snap1", "imp", *(["run1"] if r.mode == "root" else [])):
        rm = st.hutch("snapshot", "rm", snap)
        assert rm.returncode == 0, rm.stderr
    gc = st.hutch("gc")
    assert gc.returncode == 0, gc.stderr
    left = [str(p) for p in (st.home / "sandboxes").iterdir()]
    left += [str(p) for p in (st.home / "snapshots").iterdir()]
    assert left == [], left
    # Nothing of the sandboxes' other ids is left anywhere in the store.
    if r.mode == "user":
        for dirpath, dirs, files in os.walk(st.dir):
            for n in dirs + files:
                s = os.lstat(Path(dirpath, n))
                assert not subids.owns(s.st_uid) and not subids.owns(s.st_gid), (dirpath, n)


def test_the_range_opens_nothing_of_an_unmapped_host_id(rstore, subids):
    st = rstore
    r = st.runner
    other = r.make_dir(name="other")
    os.chown(other, 2000, 2000)
    (other / "f").write_text("not yours\n")
    os.chown(other / "f", 2000, 2000)
    os.chmod(other / "f", 0o600)
    mine = r.make_dir(name="mine")
    (mine / "f").write_text("yours\n")
    os.chmod(mine / "f", 0o600)
    r.chown(mine)
    st.create("box", "-v", f"{other}:/mnt/other", "-v", f"{mine}:/mnt/mine")

    def sh(script):
        return st.exec("box", "sh", "-c", script)

    # A host folder and a file of an id outside the range stay closed,
    # whatever the sandbox's root holds (dac_override, fowner, chown).
    assert sh("touch /mnt/other/new").returncode != 0
    assert sh("cat /mnt/other/f").returncode != 0
    assert sh("chmod 666 /mnt/other/f").returncode != 0
    assert not (other / "new").exists()
    # Twin: the caller's own folder and file.
    ok = sh("touch /mnt/mine/new && cat /mnt/mine/f")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "yours\n"
    assert (mine / "new").exists()

    # setgroups and chown take mapped ids only (70000 is past the range).
    py = "/usr/bin/python3 -c 'import os; os.setgroups([{}]); print(os.getgroups())'"
    bad = sh(py.format(70000))
    assert bad.returncode != 0 and "Invalid argument" in bad.stderr, bad.stderr
    good = sh(py.format(42))
    assert good.returncode == 0 and good.stdout.strip() == "[42]", good.stderr
    bad = sh("touch /root/g && chown 70000 /root/g")
    assert bad.returncode != 0
    good = sh("chown 65535 /root/g && stat -c %u /root/g")
    assert good.returncode == 0 and good.stdout.strip() == "65535", good.stderr


def test_a_user_without_sub_ids_keeps_one_id_and_is_told(nobody_store):
    st = nobody_store
    r = st.hutch("create", "box")
    st.names.append("box")
    assert r.returncode == 0, r.stderr
    assert "maps only your own id" in r.stderr, r.stderr
    assert "usermod --add-subuids" in r.stderr, r.stderr
    out = st.sh("box", "cat /proc/self/uid_map /proc/self/setgroups; "
                       "grep CapEff /proc/self/status")
    assert [" ".join(x.split()) for x in out.splitlines()] == [
        "0 65534 1", "deny", f"CapEff: {NO_CAPS}"]
    bad = st.exec("box", "sh", "-c", "touch /root/f && chown 42 /root/f")
    assert bad.returncode != 0
    doc = st.hutch("doctor")
    line = next(x for x in doc.stdout.splitlines() if x.startswith("sub_ids"))
    assert "missing" in line and "usermod --add-subuids" in line, line
    # Twin: the user with sub-ids is told nothing and doctor says ok.


def test_a_range_the_helpers_refuse_fails_closed(user_store, subids):
    """The user has a range, but newuidmap refuses it (here a helper of the
    test's own, HUTCH_TEST_IDMAP_HELPERS, test builds only): the exec
    fails with 125 naming what the helper said, never one id instead."""
    st = user_store
    helpers = st.runner.make_dir(name="helpers")
    for prog in ("newuidmap", "newgidmap"):
        f = helpers / prog
        f.write_text(f"#!/bin/sh\necho '{prog}: range not allowed by the test' >&2\nexit 1\n")
        os.chmod(f, 0o755)
    st.runner.chown(helpers)
    st.create("box")
    r = st.exec("box", "true", env={"HUTCH_TEST_IDMAP_HELPERS": str(helpers)})
    assert r.returncode == 125, (r.returncode, r.stderr)
    assert "refused the sub-id map" in r.stderr and "range not allowed by the test" in r.stderr, \
        r.stderr
    # Twin: the system's helpers map the range.
    assert st.hutch("stop", "box").returncode == 0
    ok = st.exec("box", "sh", "-c", "wc -l < /proc/self/uid_map")
    assert ok.returncode == 0 and ok.stdout.strip() == "2", ok.stderr
