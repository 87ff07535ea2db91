# SPDX-License-Identifier: LGPL-2.1-or-later
"""Who the command is: uid 0 in a new user namespace mapped to an
unprivileged host id, in new namespaces of every kind, pid 2 under hutch's
init, in its own session without a terminal, with hostname "hutch"."""

import fcntl
import os
import pty
import signal
import subprocess
import termios
import uuid
from pathlib import Path

import pytest

from conftest import (
    DEFAULT_SUBID_BASE,
    SUBID_COUNT,
    kill_quietly,
    live_with_marker,
    proc_table,
    wait_pidfds,
)

NAMESPACES = ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"]


def test_uid_map(sbx):
    line = sbx.fact("uid-map")
    assert sbx.run_map_ok(line), line


def test_gid_map(sbx):
    line = sbx.fact("gid-map")
    assert sbx.run_map_ok(line, gid=True), line


SUBID_CASES = {
    "root-range": ("root:300000:65536\n", "root:400000:65536\n", "0 300000 65536", "0 400000 65536"),
    "by-uid": ("0:310000:100000\n", "0:410000:100000\n", "0 310000 65536", "0 410000 65536"),
    "too-small": ("root:300000:1000\n", "root:400000:1000\n", None, None),
    "other-user": ("daemon:300000:65536\n", "daemon:400000:65536\n", None, None),
}


@pytest.mark.parametrize("case", sorted(SUBID_CASES))
def test_root_map_follows_etc_subuid(root_runner, tmp_path, case):
    """As root the store's fixed ids come from root's first range in
    /etc/subuid and /etc/subgid (>= 65536 ids), else the default base. A
    one-shot run maps onto a range of the id pool instead (test_run_id_pool.py),
    except where nothing can be idmapped (no CAP_SYS_ADMIN: a container's
    root, docs/containers.md), which is where this test runs it: with
    CAP_SYS_ADMIN dropped. The files are replaced in a private mount
    namespace; the host's stay untouched."""
    subuid, subgid, want_uid, want_gid = SUBID_CASES[case]
    default = f"0 {DEFAULT_SUBID_BASE} {SUBID_COUNT}"
    top = tmp_path / "etc"
    top.mkdir()
    (top / "subuid").write_text(subuid)
    (top / "subgid").write_text(subgid)
    script = "/probe/probe uid-map; /probe/probe gid-map"
    inner = ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--",
             *root_runner.argv(["-v", f"{root_runner.probe_dir}:/probe:ro", "--", "sh", "-c",
                                script])]
    # An overlay with the test's files on top of /etc, whether or not the
    # host has the files.
    setup = 'mount -t overlay overlay -o "lowerdir=$1:/etc" /etc && shift && exec "$@"'
    r = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", setup, "sh", str(top), *inner],
        env=root_runner.env(),
        cwd=str(root_runner.base_dir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [want_uid or default, want_gid or default]


def test_ids_inside_are_zero(sbx):
    r = sbx.run(["--", "sh", "-c", "id -u; id -g"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "0"]


@pytest.mark.parametrize("ns", NAMESPACES)
def test_namespace_is_new(sbx, ns):
    host = os.readlink(f"/proc/self/ns/{ns}")
    inside = sbx.fact("ns", ns)
    assert inside.startswith(f"{ns}:["), inside
    assert inside != host, f"{ns} namespace is the host's"


def test_namespaces_are_fresh_per_run(sbx):
    """Twin: two runs do not share a namespace (a fresh sandbox each)."""
    a = sbx.fact("ns", "net")
    b = sbx.fact("ns", "net")
    assert a != b


def test_command_is_pid_2_in_its_own_session(sbx):
    assert sbx.fact("pid") == "2"
    assert sbx.fact("sid") == "2"
    assert sbx.fact("ppid") == "1"


def test_pid_1_is_hutch_init_not_the_command(sbx):
    ps = dict(line.split(" ", 1) for line in sbx.fact("ps").splitlines())
    assert set(ps) == {"1", "2"}, f"the sandbox's /proc shows more than init + the command: {ps}"
    assert ps["2"] == "probe"
    assert ps["1"] != "probe"


def test_no_controlling_terminal(sbx):
    assert sbx.fact("tty") in ("ENXIO", "EACCES", "ENOENT", "EPERM", "EIO")


def test_no_terminal_even_when_caller_has_one(sbx):
    """Twin with a real controlling terminal on the caller's side: the
    command still cannot open /dev/tty, and its session is its own."""
    master, slave = pty.openpty()

    def make_ctty():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        # The caller really has the terminal: opening /dev/tty works here.
        check = subprocess.run(
            ["sh", "-c", "exec 3<>/dev/tty && echo caller-has-tty"],
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=make_ctty,
            timeout=10,
        )
        assert b"caller-has-tty" in check.stdout
        p = subprocess.Popen(
            sbx.argv(sbx.probe_args("tty")),
            env=sbx.env(),
            cwd=str(sbx.base_dir),
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=make_ctty,
        )
        out, err = p.communicate(timeout=30)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 0, err
    assert out.decode().strip() != "ok", "the command opened the caller's terminal"


def test_no_input_injection_into_callers_terminal(sbx):
    """stdin is the caller's terminal: TIOCSTI on it (typing into the
    caller's shell) is refused."""
    master, slave = pty.openpty()
    try:
        r = subprocess.run(
            sbx.argv(sbx.probe_args("syscall", "tiocsti-stdin")),
            env=sbx.env(),
            cwd=str(sbx.base_dir),
            stdin=slave,
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        os.close(slave)
        os.close(master)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "EPERM"


def test_hostname_default(sbx):
    assert sbx.fact("hostname") == "hutch"


def test_hostname_flag(sbx):
    assert sbx.fact("hostname", flags=["--hostname", "agent-7"]) == "agent-7"


def test_host_uid_of_sandbox_processes_is_not_callers_root(sbx):
    """Seen from the host, every process of the sandbox runs as the mapped
    id (the sub-id base as root, the caller's uid as a user), never as
    host root."""
    marker = f"hutch-uid-{uuid.uuid4().hex}"
    p = sbx.popen(
        sbx.probe_args("sleep-marker", marker), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        line = p.stdout.readline()
        assert line.startswith("ready"), (line, p.stderr.read() if p.poll() is not None else "")
        table = proc_table()
        probe = {
            pid: info
            for pid, info in table.items()
            if marker in info[3] and info[1] != "Z" and info[3].split()[0] == "/probe/probe"
        }
        assert len(probe) == 1, probe
        (pid, info), = probe.items()
        init_pid = info[0]
        want = int(Path(f"/proc/{pid}/uid_map").read_text().split()[1])
        assert sbx.run_map_ok(f"0 {want} {SUBID_COUNT if sbx.mode == 'root' else 1}")
        assert info[2] == want, f"command runs as host uid {info[2]}, want {want}"
        init_uid = table[init_pid][2]
        assert init_uid == want, f"sandbox init runs as host uid {init_uid}, want {want}"
        if sbx.mode == "root":
            assert want != 0
    finally:
        kill_quietly(p.pid, signal.SIGTERM)
        p.communicate(timeout=30)
    assert not wait_pidfds([pid, init_pid], 10)
    assert not live_with_marker(marker)
