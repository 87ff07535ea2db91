# SPDX-License-Identifier: LGPL-2.1-or-later
"""Mount points are never made through symlinks (issue 15, item 1).

The parents of a -v or --tmpfs target may be in a copied or overlaid
workspace (a repository's files) or in a persistent sandbox's own
directories (what the sandbox wrote last time). A symlink there to
/oldroot/... (the host's root while the sandbox's tree is built) used to
lead the creation of the mount point onto the host. Now every mount point
is walked from the sandbox's root one component at a time without
following a symlink, after the host's root is gone: a symlink on the way
is exit 125 naming the target, and nothing is made on the host. Each
case has its twin: the same target through a real directory is made and
works.

The "host" folder that a symlink points to is the caller's (as a user) or
writable by everyone (as root, like /var/tmp): there the old code did
create the mount point."""

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from cgroupctl import poll_until
from diskutil import data_of

KINDS = ("dir-bind", "file-bind", "tmpfs")


def host_dir(runner):
    """The folder on the host that a planted symlink leads to: writable by
    the sandbox's root, so that only the walk keeps it empty."""
    d = runner.make_dir(mode=0o1777 if runner.mode == "root" else 0o755, name="host")
    return d


def source(runner):
    d = runner.make_dir(name="src")
    (d / "f").write_text("from the source\n")
    runner.chown(d)
    return d


def mount_flags(kind, src, target):
    if kind == "dir-bind":
        return ["-v", f"{src}:{target}:ro"]
    if kind == "file-bind":
        return ["-v", f"{src}/f:{target}:ro"]
    return ["--tmpfs", target]


def check_target(kind, target):
    """A script that succeeds when @target is the mount that was asked for."""
    if kind == "dir-bind":
        return f"test \"$(cat {target}/f)\" = 'from the source'"
    if kind == "file-bind":
        return f"test \"$(cat {target})\" = 'from the source'"
    return f"grep -q ' {target} tmpfs ' /proc/mounts && touch {target}/w"


def tree(path):
    return sorted(str(p.relative_to(path)) for p in Path(path).rglob("*"))


def assert_refused(r, target):
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert f"the mount target '{target}' has a symlink in its path" in r.stderr, r.stderr


# ------------------------------------------------------------ one-shot runs


def hostile_workspace(runner, host, absolute):
    """A repository with `link` -> the host folder through /oldroot."""
    ws = runner.make_dir(name="ws")
    (ws / "README").write_text("hello\n")
    (ws / "link").symlink_to(f"/oldroot{host}" if absolute else f"../../oldroot{host}")
    runner.chown(ws)
    return ws


@pytest.mark.parametrize("mode", ["copy", "overlay"])
@pytest.mark.parametrize("kind", KINDS)
def test_workspace_symlink_does_not_lead_a_mount_point_to_the_host(sbx, mode, kind):
    host, src = host_dir(sbx), source(sbx)
    for absolute in (False, True):
        ws = hostile_workspace(sbx, host, absolute)
        before = tree(ws)
        # Through the link, and the link itself as the mount point.
        for target in ("/workspace/link/squat/sub", "/workspace/link"):
            flags = ["--workspace", f"{ws}:{mode}", *mount_flags(kind, src, target)]
            r = sbx.run([*flags, "--", "true"])
            assert list(host.iterdir()) == [], tree(host)
            assert_refused(r, target)
            assert tree(ws) == before


@pytest.mark.parametrize("mode", ["copy", "overlay"])
@pytest.mark.parametrize("kind", KINDS)
def test_nested_mount_point_in_a_workspace_is_made(sbx, mode, kind):
    """Twin: `link` a real folder: the missing folders are made (in the
    sandbox's copy or overlay) and the mount works."""
    host, src = host_dir(sbx), source(sbx)
    ws = sbx.make_dir(name="ws")
    (ws / "link").mkdir()
    sbx.chown(ws)
    target = "/workspace/link/squat/sub"
    flags = ["--workspace", f"{ws}:{mode}", *mount_flags(kind, src, target)]
    r = sbx.run([*flags, "--", "sh", "-c", check_target(kind, target)])
    assert r.returncode == 0, r.stderr
    assert tree(ws) == ["link"]
    assert list(host.iterdir()) == []


@pytest.mark.parametrize("kind", KINDS)
def test_symlink_in_a_bound_folder_does_not_lead_a_mount_point_out(sbx, kind):
    """The parent of a target in another bind, a folder with a symlink to
    the host (one the sandbox wrote in an earlier run, say)."""
    host, src = host_dir(sbx), source(sbx)
    outer = sbx.make_dir(name="outer")
    (outer / "link").symlink_to(f"../oldroot{host}")
    sbx.chown(outer)
    target = "/data/link/sub"
    r = sbx.run(["-v", f"{outer}:/data:ro", *mount_flags(kind, src, target), "--", "true"])
    assert list(host.iterdir()) == [], tree(host)
    assert_refused(r, target)
    # Twin: a target next to the link, in a folder that is there.
    (outer / "dir").mkdir()
    sbx.chown(outer)
    target = "/data/dir"
    if kind == "file-bind":
        (outer / "dir" / "file").write_text("")
        sbx.chown(outer)
        target = "/data/dir/file"
    r = sbx.run(["-v", f"{outer}:/data:ro", *mount_flags(kind, src, target), "--", "sh", "-c",
                 check_target(kind, target)])
    assert r.returncode == 0, r.stderr


def test_mount_points_outside_any_workspace_are_still_made(sbx):
    """Twin: targets whose folders do not exist yet in the root."""
    src = source(sbx)
    r = sbx.run(["-v", f"{src}:/opt/a/b/c:ro", "-v", f"{src}/f:/srv/x/file:ro",
                 "--tmpfs", "/var/cache/t", "--", "sh", "-c",
                 "cat /opt/a/b/c/f /srv/x/file && touch /var/cache/t/w"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "from the source\n" * 2


# ------------------------------------------------------ persistent sandboxes


@contextmanager
def upper(store, name, part):
    """The stopped sandbox's upper layer on the host: "root" (its
    persistent directories) or "ws" (the workspace's); as root it is in the
    sandbox's disk image, mounted while the block runs (diskutil)."""
    assert poll_until(lambda: not store.keeper_pids(), 10), store.keeper_pids()
    with data_of(store.home, store.state, name) as data:
        (up,) = Path(data).glob("upper-*")
        yield up / part


def replace_link_with_dir(path):
    """As the sandbox would have left it: a folder of the link's owner."""
    st = os.lstat(path)
    path.unlink()
    path.mkdir()
    os.lchown(path, st.st_uid, st.st_gid)


@pytest.mark.parametrize("kind", KINDS)
def test_symlink_planted_between_runs_of_a_persistent_sandbox(store, kind):
    """The issue's repro: the first start makes /root/cache/data; the
    sandbox moves /root/cache away and puts a symlink to the host in its
    place; the next start is refused and makes nothing on the host."""
    host, src = host_dir(store.runner), source(store.runner)
    target = "/root/cache/data"
    store.create("p2", *mount_flags(kind, src, target))
    store.sh("p2", check_target(kind, target))
    store.sh("p2", f"mv /root/cache /root/old && ln -s /oldroot{host} /root/cache")
    assert store.hutch("stop", "p2").returncode == 0
    r = store.exec("p2", "true")
    assert list(host.iterdir()) == [], tree(host)
    assert_refused(r, target)
    # The keeper that could not start is gone (it may take a moment).
    assert poll_until(lambda: not store.keeper_pids(), 10), store.keeper_pids()
    assert store.state_of("p2") == "stopped"
    # Twin: with a folder in the link's place it starts, and makes the
    # mount point there.
    with upper(store, "p2", "root") as root:
        replace_link_with_dir(root / "root" / "cache")
    store.sh("p2", check_target(kind, target))
    assert list(host.iterdir()) == []


@pytest.mark.parametrize("kind", KINDS)
def test_symlink_planted_in_an_overlay_workspace_between_runs(store, kind):
    """The same through the workspace's upper layer (overlay mode)."""
    host, src = host_dir(store.runner), source(store.runner)
    ws = store.runner.make_dir(name="ws")
    (ws / "README").write_text("hello\n")
    store.runner.chown(ws)
    before = tree(ws)
    target = "/workspace/sub/data"
    store.create("p3", "--workspace", f"{ws}:overlay", *mount_flags(kind, src, target))
    store.sh("p3", check_target(kind, target))
    store.sh("p3", f"mv /workspace/sub /workspace/old && ln -s ../../oldroot{host} /workspace/sub")
    assert store.hutch("stop", "p3").returncode == 0
    r = store.exec("p3", "true")
    assert list(host.iterdir()) == [], tree(host)
    assert_refused(r, target)
    assert tree(ws) == before
    with upper(store, "p3", "ws") as ws_upper:
        replace_link_with_dir(ws_upper / "sub")
    store.sh("p3", check_target(kind, target))
    assert list(host.iterdir()) == []
    assert tree(ws) == before


def test_target_itself_swapped_for_a_symlink(store):
    """The mount point itself (not a parent) a symlink to a host folder
    when the sandbox starts again (a sandbox cannot rename a mount point
    while it runs: the layer is changed from outside)."""
    host, src = host_dir(store.runner), source(store.runner)
    target = "/root/data"
    store.create("p4", *mount_flags("dir-bind", src, target))
    store.sh("p4", check_target("dir-bind", target))
    assert store.hutch("stop", "p4").returncode == 0
    with upper(store, "p4", "root") as root:
        point = root / "root" / "data"
        st = os.lstat(point)
        point.rmdir()
        point.symlink_to(f"/oldroot{host}")
        os.lchown(point, st.st_uid, st.st_gid)
    r = store.exec("p4", "true")
    assert list(host.iterdir()) == [], tree(host)
    assert_refused(r, target)
    with upper(store, "p4", "root") as root:
        replace_link_with_dir(root / "root" / "data")
    store.sh("p4", check_target("dir-bind", target))
