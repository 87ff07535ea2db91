# SPDX-License-Identifier: LGPL-2.1-or-later
"""Hardening of the command: no capabilities, no_new_privs, a seccomp
filter that denies the dangerous calls on the native ABI and through
int $0x80, landlock, and no fd beyond 0-2."""

import fcntl
import os
import subprocess

import pytest

CAPS = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]

# Denied with EPERM on x86_64 (docs/style.md §10: make the forbidden call).
DENIED = [
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "clone",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "iopl",
    "ioperm",
    "open_by_handle_at",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "personality",
    "tiocsti",
    "tioclinux",
]
# The same through the i386 entry point (int $0x80), i386 numbers.
DENIED_I386 = [
    "mount",
    "umount2",
    "ptrace",
    "unshare",
    "setns",
    "chroot",
    "reboot",
    "personality",
    "pivot_root",
    "bpf",
    "clone",
    "keyctl",
    "userfaultfd",
    "perf_event_open",
    "process_vm_readv",
    "tiocsti",
]
# The new mount API is the "mount family" too; ENOSYS (make libc fall back)
# is an acceptable answer for it.
MOUNT_API = ["fsopen", "fsmount", "move_mount", "open_tree", "mount_setattr"]
# Twins: calls that must keep working (or fail only for their own reason).
ALLOWED = {
    "getpid": "ok",
    "clone-plain": "ok",
    "personality-query": "ok",
    "personality-zero": "ok",
    "tiocgwinsz": "EBADF",
}


def test_no_capabilities(sbx):
    lines = sbx.fact("caps").splitlines()
    caps = dict(line.split(": ", 1) for line in lines)
    assert set(caps) == set(CAPS)
    for name in CAPS:
        assert int(caps[name], 16) == 0, f"{name} is {caps[name]}"


def test_no_new_privs(sbx):
    assert sbx.fact("status-field", "NoNewPrivs") == "1"


def test_seccomp_filter_mode(sbx):
    assert sbx.fact("status-field", "Seccomp") == "2"
    assert int(sbx.fact("status-field", "Seccomp_filters")) >= 1


@pytest.mark.parametrize("name", DENIED)
def test_seccomp_denies_native(sbx, name):
    r = sbx.probe("syscall", name)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.strip() == "EPERM"


def test_clone3_is_enosys(sbx):
    """clone3 takes its flags in memory a filter cannot read: it is made
    ENOSYS so libc falls back to clone, which the filter can check."""
    assert sbx.fact("syscall", "clone3") == "ENOSYS"


@pytest.mark.parametrize("name", MOUNT_API)
def test_seccomp_denies_new_mount_api(sbx, name):
    assert sbx.fact("syscall", name) in ("EPERM", "ENOSYS")


@pytest.mark.parametrize("name", DENIED_I386)
def test_seccomp_denies_i386(sbx, name):
    r = sbx.probe("syscall32", name)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.strip() == "EPERM"


@pytest.mark.parametrize("name", ["mount", "unshare", "ptrace", "bpf", "keyctl"])
def test_seccomp_x32_is_no_bypass(sbx, name):
    """The x32 entry point (nr | 0x40000000) is denied or killed, never
    executed: EPERM, ENOSYS, or the probe dies of SIGSYS."""
    r = sbx.probe("syscallx32", name)
    if r.returncode == 128 + 31:
        return
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.strip() in ("EPERM", "ENOSYS")


@pytest.mark.parametrize("abi", ["syscall", "syscall32"])
@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_seccomp_allows_twins(sbx, abi, name):
    r = sbx.probe(abi, name)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.strip() == ALLOWED[name]


def test_fds_beyond_stdio_are_closed(sbx):
    """fds from 5 up, open in the caller and inherited by hutch, are not
    in the sandbox; 0-2 are (the twin)."""
    leak = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    fds = []
    try:
        # The lowest free fds from 5 (5 itself unless the runner uses it).
        fds = [fcntl.fcntl(leak, fcntl.F_DUPFD, 5), fcntl.fcntl(leak, fcntl.F_DUPFD, 9)]
        r = sbx.run(sbx.probe_args("fds"), pass_fds=tuple(fds))
    finally:
        for fd in [leak, *fds]:
            os.close(fd)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "1", "2"]


def test_writable_places_stay_writable_under_landlock(sbx):
    """Landlock confines writes to the policy's writable places. Every other
    mount is read-only, so from inside landlock can only show as a denial
    where its list misses one of them: each writable place takes a new
    file, and the read-only root does not."""
    ws = sbx.make_dir(name="ws")
    bind = sbx.make_dir(mode=0o777, name="bind")
    flags = ["--workspace", str(ws), "-v", f"{bind}:/srv/data:rw", "--tmpfs", "/scratch:size=4m"]
    script = "; ".join(
        f"/probe/probe create {p}"
        for p in ["/tmp/a", "/root/a", "/dev/shm/a", "/workspace/a", "/srv/data/a", "/scratch/a", "/hutch-a"]
    )
    r = sbx.run([*flags, "-v", f"{sbx.probe_dir}:/probe:ro", "--", "sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok"] * 6 + ["EROFS"], r.stdout


def test_landlock_denies_procfs_writes(sbx):
    """/proc is mounted read-write (the kernel needs that for the pid
    namespace), so only landlock stops the command from writing procfs
    files such as /proc/self/comm: the denial is landlock's EACCES, not
    EROFS. Negative twin: reading the same file works."""
    w = sbx.probe("can-open", "/proc/self/comm", "w")
    assert w.returncode == 0, w.stderr
    assert w.stdout.strip() == "EACCES"
    r = sbx.probe("can-open", "/proc/self/comm", "r")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_no_set_id_files(sbx):
    """The sandbox cannot create set-user-id or set-group-id files (on a
    mounted workspace they would belong to the caller on the host): chmod,
    and open(O_CREAT) with those bits fail with EPERM. Twin: plain modes
    work."""
    script = (
        "touch /tmp/f; "
        "chmod 4755 /tmp/f 2>/dev/null; echo suid=$?; "
        "chmod 2755 /tmp/f 2>/dev/null; echo sgid=$?; "
        "chmod 755 /tmp/f; echo plain=$?; "
        "python3 -c 'import os; os.open(\"/tmp/g\", os.O_CREAT | os.O_WRONLY, 0o4755)' "
        "2>/dev/null; echo creat_suid=$?; "
        "python3 -c 'import os; os.open(\"/tmp/h\", os.O_CREAT | os.O_WRONLY, 0o755)'; "
        "echo creat_plain=$?; stat -c %a /tmp/f"
    )
    r = sbx.run(["--", "sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["suid=1", "sgid=1", "plain=0", "creat_suid=1", "creat_plain=0", "755"]


def test_workspace_mount_is_not_shared_with_the_host(sbx):
    """The workspace and -v trees are private mounts inside the sandbox: no
    mount propagates between them and the host. The sources are made
    shared mounts first (in a throwaway mount namespace of the test), as
    they are on systemd hosts, where a clone of them would otherwise join
    their peer group."""
    ws = sbx.make_dir(name="ws")
    data = sbx.make_dir(name="data")
    setup = f"mount --bind {ws} {ws} && mount --make-shared {ws} && " \
        f"mount --bind {data} {data} && mount --make-shared {data} && exec \"$@\""
    argv = sbx.argv(["--workspace", str(ws), "-v", f"{data}:/data", "--", "cat", "/proc/self/mountinfo"])
    r = subprocess.run(
        ["unshare", "-m", "--propagation", "unchanged", "sh", "-c", setup, "sh", *argv],
        env=sbx.env(), capture_output=True, text=True, timeout=60, cwd=str(sbx.base_dir),
    )
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if " /workspace " in line or " /data " in line]
    assert len(lines) == 2, r.stdout
    for line in lines:
        assert "shared:" not in line and "master:" not in line, line
