# SPDX-License-Identifier: LGPL-2.1-or-later
"""--workspace DIR[:mount|:copy|:overlay]: mounted at /workspace and made the cwd.
:mount is the live folder (with a warning), :copy a tmpfs copy that never
follows a symlink out of DIR and never reaches back into DIR, :overlay DIR
as the lower layer with the changes kept in the sandbox."""

import os

import pytest

from conftest import parse_kv

TMPFS_MAGIC = 0x01021994
DENIED_CREATE = ("EROFS", "EACCES", "EPERM")


def workspace(sbx, mode=0o755):
    d = sbx.make_dir(mode=mode, name="ws")
    (d / "file.txt").write_text("original\n")
    (d / "sub").mkdir()
    (d / "sub" / "nested.txt").write_text("nested\n")
    sbx.chown(d)
    return d


@pytest.mark.parametrize("spec", ["", ":mount"])
def test_mount_is_live_and_warns(sbx, spec):
    d = workspace(sbx)
    script = "cat file.txt; echo new > new.txt; echo changed > file.txt"
    r = sbx.run(["--workspace", f"{d}{spec}", "--", "sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "original\n"
    assert (d / "new.txt").read_text() == "new\n"
    assert (d / "file.txt").read_text() == "changed\n"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, f"want one warning line, got {r.stderr!r}"
    assert lines[0].startswith("hutch: ")


def test_workspace_is_cwd(sbx):
    d = workspace(sbx)
    assert sbx.fact("cwd", flags=["--workspace", str(d)]) == "/workspace"


def test_workdir_overrides_cwd(sbx):
    d = workspace(sbx)
    assert sbx.fact("cwd", flags=["--workspace", str(d), "-w", "/tmp"]) == "/tmp"


def test_cwd_without_workspace_is_home(sbx):
    assert sbx.fact("cwd") == "/root"


def test_relative_workspace(sbx):
    d = workspace(sbx)
    r = sbx.run(["--workspace", ".", "--", "cat", "file.txt"], cwd=str(d))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "original\n"


def test_read_only_workspace_mount(sbx):
    d = workspace(sbx)
    flags = ["--read-only", "--workspace", f"{d}:mount"]
    assert sbx.fact("create", "/workspace/new", flags=flags) in DENIED_CREATE
    assert sbx.fact("create", "/workspace/file.txt", flags=flags) in DENIED_CREATE
    assert not (d / "new").exists()
    assert (d / "file.txt").read_text() == "original\n"
    # Still readable.
    r = sbx.probe("read", "/workspace/file.txt", flags=flags)
    assert r.stdout == "original\n"


def test_writable_workspace_twin(sbx):
    d = workspace(sbx)
    assert sbx.fact("create", "/workspace/new", flags=["--workspace", f"{d}:mount"]) == "ok"
    assert (d / "new").exists()


def test_copy_is_a_tmpfs_and_changes_stay_inside(sbx):
    d = workspace(sbx)
    r = sbx.run(
        [
            "--workspace",
            f"{d}:copy",
            "--",
            "sh",
            "-c",
            "cat file.txt sub/nested.txt; echo new > new.txt; echo changed > file.txt;"
            " rm sub/nested.txt; cat new.txt file.txt",
        ]
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "original\nnested\nnew\nchanged\n"
    assert r.stderr == "", "copy mode must not print the live-folder warning"
    assert not (d / "new.txt").exists()
    assert (d / "file.txt").read_text() == "original\n"
    assert (d / "sub" / "nested.txt").read_text() == "nested\n"
    fstype = int(parse_kv(sbx.fact("statfs", "/workspace", flags=["--workspace", f"{d}:copy"]))["type"], 16)
    assert fstype == TMPFS_MAGIC


def test_overlay_shows_the_folder_and_changes_stay_inside(sbx):
    d = workspace(sbx)
    script = (
        "cat file.txt sub/nested.txt; echo new > new.txt; echo changed > file.txt;"
        " rm sub/nested.txt; cat new.txt file.txt; ls sub"
    )
    r = sbx.run(["--workspace", f"{d}:overlay", "--", "sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "original\nnested\nnew\nchanged\n"
    assert r.stderr == "", "overlay mode must not print the live-folder warning"
    assert sorted(os.listdir(d)) == ["file.txt", "sub"]
    assert (d / "file.txt").read_text() == "original\n"
    assert (d / "sub" / "nested.txt").read_text() == "nested\n"


def test_copy_never_follows_symlinks_out(sbx):
    base = sbx.make_dir(name="copyroot")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("HOST-SECRET-6d1f\n")
    d = base / "ws"
    d.mkdir()
    (d / "file.txt").write_text("inside\n")
    os.symlink(str(outside / "secret.txt"), d / "abs-link")
    os.symlink("../outside/secret.txt", d / "rel-link")
    os.symlink(str(outside), d / "dir-link")
    os.symlink("file.txt", d / "inner-link")
    sbx.chown(base)
    flags = ["--workspace", f"{d}:copy"]

    # Symlinks are copied as symlinks, with their targets unchanged.
    for name, target in [
        ("abs-link", str(outside / "secret.txt")),
        ("rel-link", "../outside/secret.txt"),
        ("dir-link", str(outside)),
        ("inner-link", "file.txt"),
    ]:
        assert parse_kv(sbx.fact("lstat", f"/workspace/{name}", flags=flags))["type"] == "lnk"
        assert sbx.fact("readlink", f"/workspace/{name}", flags=flags) == target
    # Their outside targets are not in the sandbox; nothing of the secret is.
    script = "cat abs-link rel-link dir-link/secret.txt; grep -R HOST-SECRET /workspace"
    r = sbx.run([*flags, "--", "sh", "-c", script])
    assert "HOST-SECRET" not in r.stdout
    # Twin: a link inside the folder works.
    r = sbx.probe("read", "/workspace/inner-link", flags=flags)
    assert r.returncode == 0 and r.stdout == "inside\n"


def test_copy_makes_no_hard_links_to_host_files(sbx):
    d = workspace(sbx)
    flags = ["--workspace", f"{d}:copy"]
    r = sbx.run(
        [*flags, "-v", f"{sbx.probe_dir}:/probe:ro", "--", "sh", "-c",
         "/probe/probe lstat /workspace/file.txt; /probe/probe lstat /workspace"]
    )
    assert r.returncode == 0, r.stderr
    kv, ws = (parse_kv(line) for line in r.stdout.splitlines())
    assert kv["type"] == "reg"
    assert kv["nlink"] == "1"
    assert kv["dev"] == ws["dev"], "the copied file is not on the workspace tmpfs"
    # An in-place write inside cannot reach the host inode.
    r = sbx.run([*flags, "--", "sh", "-c", "echo appended >> file.txt"])
    assert r.returncode == 0, r.stderr
    assert (d / "file.txt").read_text() == "original\n"
    assert os.stat(d / "file.txt").st_nlink == 1


def test_read_only_workspace_copy(sbx):
    d = workspace(sbx)
    flags = ["--read-only", "--workspace", f"{d}:copy"]
    assert sbx.fact("create", "/workspace/new", flags=flags) in DENIED_CREATE


def test_private_workspace_ownership(sbx):
    """A 0700 folder owned by the caller (root-owned as root) is readable
    and writable inside, and new files belong to the caller on the host,
    not to a sub-id."""
    d = workspace(sbx, mode=0o700)
    flags = ["--workspace", f"{d}:mount"]
    r = sbx.probe("read", "/workspace/file.txt", flags=flags)
    assert r.returncode == 0 and r.stdout == "original\n", r.stdout
    assert sbx.fact("owner", "/workspace/file.txt", flags=flags) == "0:0"
    assert sbx.fact("create", "/workspace/created", flags=flags) == "ok"
    st = os.stat(d / "created")
    assert (st.st_uid, st.st_gid) == (sbx.uid, sbx.gid), f"created file owned by {st.st_uid}:{st.st_gid}"
    r = sbx.run([*flags, "--", "mkdir", "newdir"])
    assert r.returncode == 0, r.stderr
    st = os.stat(d / "newdir")
    assert (st.st_uid, st.st_gid) == (sbx.uid, sbx.gid)


def test_private_workspace_copy_readable(sbx):
    d = workspace(sbx, mode=0o700)
    r = sbx.run(["--workspace", f"{d}:copy", "--", "cat", "sub/nested.txt"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "nested\n"
