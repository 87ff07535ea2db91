# SPDX-License-Identifier: LGPL-2.1-or-later
"""The sandbox's mount tree: a read-only tmpfs root with the host's system
directories read-only, no secrets, fresh /proc, minimal /dev, writable
/tmp and $HOME tmpfs, nothing else of the host unless bound with -v."""

import glob
import os
from pathlib import Path

import pytest

from conftest import parse_kv

TMPFS_MAGIC = 0x01021994
PROC_MAGIC = 0x9FA0
DEVPTS_MAGIC = 0x1CD1
GIB = 1 << 30
MIB = 1 << 20

ROOT_ALLOWED = {
    "usr",
    "bin",
    "sbin",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "etc",
    "proc",
    "dev",
    "tmp",
    "root",
    "probe",
}
DEV_EXPECTED = {
    "null",
    "zero",
    "full",
    "random",
    "urandom",
    "tty",
    "pts",
    "ptmx",
    "shm",
    "fd",
    "stdin",
    "stdout",
    "stderr",
}
ABSENT = [
    "/home",
    "/run",
    "/var/run/docker.sock",
    "/var",
    "/mnt",
    "/media",
    "/srv",
    "/opt",
    "/boot",
    "/sys",
    "/workspace",
]
DENIED_CREATE = ("EROFS", "EACCES", "EPERM")


def statfs(sbx, path, flags=()):
    out = sbx.fact("statfs", path, flags=flags)
    kv = parse_kv(out)
    assert "type" in kv, out
    return int(kv["type"], 16), kv["flags"].split(","), int(kv["size"])


def test_root_is_read_only_tmpfs(sbx):
    fstype, flags, _ = statfs(sbx, "/")
    assert fstype == TMPFS_MAGIC
    assert "ro" in flags


def test_root_rejects_new_files(sbx):
    """Landlock and the ro mount both stop this; either errno is fine."""
    assert sbx.fact("create", "/hutch-new-file") in DENIED_CREATE


def test_root_has_nothing_else_of_the_host(sbx):
    names = set(sbx.fact("ls", "/").split())
    assert names <= ROOT_ALLOWED, f"unexpected in /: {sorted(names - ROOT_ALLOWED)}"
    assert {"usr", "etc", "proc", "dev", "tmp", "root"} <= names


@pytest.mark.parametrize("path", ["/usr", "/etc"])
def test_system_dirs_are_read_only(sbx, path):
    _, flags, _ = statfs(sbx, path)
    assert "ro" in flags
    assert sbx.fact("create", f"{path}/hutch-new-file") in DENIED_CREATE


@pytest.mark.parametrize("path", ["/bin", "/sbin", "/lib", "/lib64"])
def test_merged_usr_links_match_the_host(sbx, path):
    if not os.path.lexists(path):
        r = sbx.fact("lstat", path)
        assert r == "ENOENT"
        return
    if os.path.islink(path):
        assert sbx.fact("readlink", path) == os.readlink(path)
    else:
        kv = parse_kv(sbx.fact("lstat", path))
        assert kv["type"] == "dir"
        _, flags, _ = statfs(sbx, path)
        assert "ro" in flags


def test_system_binaries_run(sbx):
    r = sbx.run(["--", "/bin/sh", "-c", "ls /usr/bin/env >/dev/null && echo yes"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "yes\n"


def secret_paths():
    paths = ["/etc/shadow", "/etc/gshadow"]
    paths += sorted(glob.glob("/etc/sudoers*"))
    paths += sorted(p for p in glob.glob("/etc/sudoers.d/*") if os.path.isfile(p))
    paths += sorted(glob.glob("/etc/ssh/*key*"))
    return paths


@pytest.mark.parametrize("path", secret_paths())
def test_secrets_are_hidden(sbx, path):
    r = sbx.probe("read", path)
    if r.returncode == 0:
        assert r.stdout == "", f"{path} is readable with content inside the sandbox"
    else:
        assert r.stdout.strip().startswith("E"), r.stdout


def test_passwd_is_readable_twin(sbx):
    """Negative twin of the secrets: an ordinary /etc file is there."""
    r = sbx.probe("read", "/etc/passwd")
    assert r.returncode == 0, r.stdout
    assert "root:" in r.stdout


def test_proc_is_fresh(sbx):
    kv = parse_kv(sbx.fact("mountinfo", "/proc"))
    assert kv["fstype"] == "proc"
    pids = [line.split()[0] for line in sbx.fact("ps").splitlines()]
    assert sorted(pids) == ["1", "2"]


def test_dev_is_minimal(sbx):
    names = set(sbx.fact("ls", "/dev").split())
    assert names == DEV_EXPECTED, (
        f"extra: {sorted(names - DEV_EXPECTED)}, missing: {sorted(DEV_EXPECTED - names)}"
    )


@pytest.mark.parametrize(
    "link,target",
    [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ],
)
def test_dev_links(sbx, link, target):
    if link == "ptmx" and parse_kv(sbx.fact("lstat", "/dev/ptmx"))["type"] == "chr":
        return  # a bind of the instance's ptmx node is as good as the link
    assert sbx.fact("readlink", f"/dev/{link}") == target


@pytest.mark.parametrize("dev", ["null", "zero", "full", "random", "urandom"])
def test_dev_nodes_work(sbx, dev):
    kv = parse_kv(sbx.fact("lstat", f"/dev/{dev}"))
    assert kv["type"] == "chr"
    assert sbx.fact("can-open", f"/dev/{dev}", "r") == "ok"


def test_dev_full_and_null_behave(sbx):
    r = sbx.run(["--", "sh", "-c", "echo x >/dev/null && echo null-ok; echo x >/dev/full || echo full-fails"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["null-ok", "full-fails"]


def test_devpts_is_a_new_instance(sbx):
    kv = parse_kv(sbx.fact("mountinfo", "/dev/pts"))
    assert kv["fstype"] == "devpts"
    # None of the host's ptys: only the instance's own ptmx.
    assert sbx.fact("ls", "/dev/pts").split() == ["ptmx"]
    # And a pty can be allocated in it.
    assert sbx.fact("can-open", "/dev/ptmx", "w") == "ok"


def test_dev_shm_is_writable_tmpfs(sbx):
    fstype, flags, _ = statfs(sbx, "/dev/shm")
    assert fstype == TMPFS_MAGIC
    assert "ro" not in flags
    assert sbx.fact("create", "/dev/shm/x") == "ok"


def test_tmp_is_writable_1g_tmpfs(sbx):
    fstype, flags, size = statfs(sbx, "/tmp")
    assert fstype == TMPFS_MAGIC
    assert "ro" not in flags
    assert size == GIB
    assert sbx.fact("create", "/tmp/x") == "ok"


def test_tmp_size_flag(sbx):
    _, _, size = statfs(sbx, "/tmp", flags=["--tmpfs", "/tmp:size=64m"])
    assert size == 64 * MIB


def test_tmpfs_default_size(sbx):
    _, _, size = statfs(sbx, "/scratch", flags=["--tmpfs", "/scratch"])
    assert size == GIB


def test_extra_tmpfs(sbx):
    fstype, flags, size = statfs(sbx, "/scratch", flags=["--tmpfs", "/scratch:size=16m"])
    assert fstype == TMPFS_MAGIC and "ro" not in flags and size == 16 * MIB
    assert sbx.fact("create", "/scratch/x", flags=["--tmpfs", "/scratch:size=16m"]) == "ok"


def test_home_is_empty_writable_tmpfs(sbx):
    fstype, flags, _ = statfs(sbx, "/root")
    assert fstype == TMPFS_MAGIC
    assert "ro" not in flags
    assert sbx.fact("ls", "/root") == ""
    assert sbx.fact("create", "/root/x") == "ok"


def test_callers_home_is_not_visible(sbx):
    """The caller's real $HOME has files; none of them is inside."""
    home = Path(sbx.env()["HOME"])
    assert any(home.iterdir()), f"precondition: {home} is not empty"
    assert sbx.fact("ls", "/root") == ""
    assert sbx.fact("lstat", str(home)) in ("ENOENT",) or str(home) == "/root"


@pytest.mark.parametrize("path", ABSENT)
def test_host_paths_are_absent(sbx, path):
    assert sbx.fact("lstat", path) == "ENOENT"


def test_bind_ro_visible_and_read_only(sbx):
    d = sbx.make_dir()
    (d / "file").write_text("bound content\n")
    sbx.chown(d)
    flags = ["-v", f"{d}:/srv/data:ro"]
    r = sbx.probe("read", "/srv/data/file", flags=flags)
    assert r.returncode == 0 and r.stdout == "bound content\n", r.stdout
    assert sbx.fact("create", "/srv/data/new", flags=flags) in DENIED_CREATE
    assert not (d / "new").exists()


def test_bind_absent_without_flag_twin(sbx):
    assert sbx.fact("lstat", "/srv/data") == "ENOENT"


@pytest.mark.parametrize("suffix", ["", ":rw"])
def test_bind_rw_is_writable(sbx, suffix):
    d = sbx.make_dir(mode=0o777)
    flags = ["-v", f"{d}:/srv/data{suffix}"]
    assert sbx.fact("create", "/srv/data/new", flags=flags) == "ok"
    assert (d / "new").read_text() == "hutch-probe\n"


def test_read_only_flag(sbx):
    """--read-only means docker's: $HOME is read-only, a bind keeps its own
    :ro/:rw, tmpfs mounts stay writable."""
    d = sbx.make_dir(mode=0o777)
    ro = sbx.make_dir(mode=0o777)
    flags = ["--read-only", "-v", f"{d}:/srv/data:rw", "-v", f"{ro}:/srv/ro:ro",
             "--tmpfs", "/scratch:size=8m"]
    assert sbx.fact("create", "/srv/data/new", flags=flags) == "ok", \
        "--read-only must leave a :rw bind writable (docker's meaning)"
    assert (d / "new").read_text() == "hutch-probe\n"
    assert sbx.fact("create", "/srv/ro/new", flags=flags) in DENIED_CREATE
    assert not (ro / "new").exists()
    assert sbx.fact("create", "/root/new", flags=flags) in DENIED_CREATE
    # Its twin: without --read-only, $HOME is writable.
    assert sbx.fact("create", "/root/new", flags=flags[1:]) == "ok"
    # tmpfs mounts stay writable.
    assert sbx.fact("create", "/tmp/new", flags=flags) == "ok"
    assert sbx.fact("create", "/scratch/new", flags=flags) == "ok"
