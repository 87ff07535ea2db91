# SPDX-License-Identifier: LGPL-2.1-or-later
"""Persistent sandboxes (issue 6, docs/persistent.md), driven through the
real binary as a user would: hutch create, exec, ls, stop, rm, logs, gc,
and the keeper that `exec` starts.

Every test has a store of its own (HUTCH_HOME and HUTCH_STATE_DIR in a
fresh directory that the caller owns) and runs as root and as the
unprivileged user `hutchtest` (conftest's runners) where the privilege
matters. The `store` fixture's finalizer removes every sandbox the test
created with `hutch rm --force`, then checks that no keeper of the store
is left and that no cgroup of any keeper it saw is left. Keepers are found
by their command line (`hutch __keeper NAME ...`) and their HUTCH_HOME, so
only the test's own are ever looked at or killed.

Without delegated cgroups the unprivileged user's sandboxes run degraded
(no cgroup, as for `hutch run`); the cgroup checks run as root and as the
user in cgroups delegated to it (test_limits' `delegated`)."""

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from subprocess import DEVNULL, PIPE

import pytest

import cgroupctl
from cgroupctl import poll_until
from conftest import (IS_ROOT, descendants, free_vm_templates, kill_quietly, live_with_marker,
                      wait_pidfds)
from diskutil import data_of
from proxyutil import Upstream
from test_limits import delegated, user_modes  # noqa: F401 (fixture)

# Lists the command line of every process in the sandbox's pid namespace.
PS = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
API = "api.example.test"


def marker():
    return f"mark-{uuid.uuid4().hex[:12]}"


class Store:
    """A store of its own for one test, used through one Runner."""

    def __init__(self, runner):
        self.runner = runner
        self.dir = runner.make_dir(mode=0o700, name="pstore")
        self.home = self.dir / "home"
        self.state = self.dir / "state"
        self.names = []
        self.keepers = set()  # every keeper pid seen (its cgroups are checked)

    # ---- running hutch ----

    def env(self, extra=None):
        e = {"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.state)}
        e.update(extra or {})
        return e

    def hutch(self, *args, env=None, **kw):
        r = self.runner.run_raw([str(a) for a in args], env=self.env(env), **kw)
        self.note_keepers()
        return r

    def popen(self, *args, env=None, **kw):
        kw.setdefault("cwd", str(self.runner.base_dir))
        kw.setdefault("text", True)
        kw.setdefault("stdin", DEVNULL)
        return subprocess.Popen(
            self.runner.argv([str(a) for a in args], verb=None),
            env=self.runner.env(self.env(env)),
            **kw,
        )

    def create(self, name, *flags):
        self.names.append(name)
        r = self.hutch("create", name, *flags)
        assert r.returncode == 0, f"create {name}: {r.stderr}"
        sid = r.stdout.strip()
        assert len(sid) == 16 and all(c in "0123456789abcdef" for c in sid), r.stdout
        return sid

    def exec(self, name, *cmd, flags=(), **kw):
        return self.hutch("exec", name, *flags, "--", *cmd, **kw)

    def exec_reaped(self, name, *cmd, timeout=60):
        """exec NAME -- CMD under a child subreaper (REAPER): every process
        it starts that outlives its parent (the keeper, detached by a
        double fork, and whatever the keeper leaves) is reparented to the
        reaper, which waits for all of them. Returns (CompletedProcess, the
        pids it reaped, the pids still alive after @timeout s: killed)."""
        fd, pidfile = tempfile.mkstemp(prefix="hutch-reaped-")
        os.close(fd)
        argv = self.runner.argv(["exec", name, "--", *cmd], verb=None)
        p = subprocess.Popen([sys.executable, "-c", REAPER, pidfile, *argv],
                             env=self.runner.env(self.env()), cwd=str(self.runner.base_dir),
                             stdin=DEVNULL, stdout=PIPE, stderr=PIPE, text=True)
        alive = set()
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            alive = descendants(p.pid)
            for pid in alive:  # ours: started by this exec
                kill_quietly(pid)
            out, err = p.communicate(timeout=30)
        self.note_keepers()
        reaped = {int(x) for x in Path(pidfile).read_text().split()}
        os.unlink(pidfile)
        return subprocess.CompletedProcess(p.args, p.returncode, out, err), reaped, alive

    def sh(self, name, script, flags=(), **kw):
        """exec NAME -- sh -c SCRIPT; fails the test unless it exits 0."""
        r = self.exec(name, "sh", "-c", script, flags=flags, **kw)
        assert r.returncode == 0, f"{script!r} exited {r.returncode}: {r.stderr}"
        return r.stdout

    def exec_json(self, name, *cmd, flags=(), **kw):
        out = self.dir / f"outcome-{uuid.uuid4().hex[:8]}.json"
        r = self.exec(name, *cmd, flags=[*flags, "--json", out], **kw)
        assert out.exists() and out.stat().st_size, f"no outcome (exit {r.returncode}: {r.stderr})"
        return r, json.loads(out.read_text())

    def ls(self):
        r = self.hutch("ls", "--json")
        assert r.returncode == 0, r.stderr
        return {e["name"]: e for e in json.loads(r.stdout)}

    def state_of(self, name):
        return self.ls()[name]["state"]

    def history(self, name):
        r = self.hutch("logs", name, "--json")
        assert r.returncode == 0, r.stderr
        return [json.loads(line) for line in r.stdout.splitlines()]

    def procs_inside(self, name):
        """The command lines of the processes in the running sandbox."""
        return self.sh(name, PS)

    # ---- looking from the host ----

    def keeper_pids(self, name=None):
        """{pid: name} of the live keepers of this store (of @name)."""
        out = {}
        want = f"HUTCH_HOME={self.home}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                if len(argv) < 3 or argv[0] != b"hutch" or argv[1] != b"__keeper":
                    continue
                environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
                st = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if want not in environ or st.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            n = argv[2].decode()
            if name is None or n == name:
                out[int(entry)] = n
        return out

    def note_keepers(self):
        self.keepers.update(self.keeper_pids())

    def keeper_pid(self, name):
        pids = list(self.keeper_pids(name))
        assert len(pids) == 1, f"keepers of {name}: {pids}"
        return pids[0]

    def listing(self, state=True):
        """Every entry of the store (and the state dir), to compare before
        and after a refused command: directories by path and mode, files by
        path, mode, size and mtime. The empty lock files that commands
        create to flock are left out."""
        out = []
        for top in (self.home, self.state) if state else (self.home,):
            for dirpath, dirs, files in os.walk(top):
                out.append((dirpath, os.lstat(dirpath).st_mode))
                for n in files:
                    s = os.lstat(Path(dirpath, n))
                    if n == "lock" and s.st_size == 0:
                        continue
                    # A disk image's superblock notes each mount (a
                    # keeper's start, even one that fails): its files are
                    # what counts, and they are compared through hutch.
                    mtime = None if n == "disk.img" else s.st_mtime_ns
                    out.append((os.path.join(dirpath, n), s.st_mode, s.st_size, mtime))
        return sorted(out)

    def sandbox_dir(self, name):
        return self.home / "sandboxes" / name

    # ---- the end ----

    def finalize(self):
        problems = []
        self.note_keepers()
        for name in self.names:
            r = self.hutch("rm", "--force", name)
            if r.returncode != 0 and "no sandbox named" not in r.stderr:
                problems.append(f"rm --force {name}: exit {r.returncode}: {r.stderr.strip()}")
        if not poll_until(lambda: not self.keeper_pids(), 15):
            left = self.keeper_pids()
            problems.append(f"keepers left running: {left}")
            for pid in left:  # ours: this store's keepers
                os.kill(pid, signal.SIGKILL)
        for pid in self.keepers:
            if not poll_until(lambda pid=pid: not cgroupctl.run_dirs(pid), 10):
                dirs = cgroupctl.run_dirs(pid)
                problems.append(f"cgroups of keeper {pid} left: {[str(d) for d in dirs]}")
                if IS_ROOT:
                    cgroupctl.remove_run_dirs(pid)
        r = self.hutch("ls", "--json")
        if r.returncode != 0 or json.loads(r.stdout) != []:
            problems.append(f"sandboxes left after rm --force: {r.stdout} {r.stderr}")
        free_vm_templates(self.home)
        subprocess.run(["rm", "-rf", "--one-file-system", str(self.dir)], check=False)
        assert not problems, "; ".join(problems)


@pytest.fixture
def root_store(root_runner):
    s = Store(root_runner)
    yield s
    s.finalize()


@pytest.fixture(params=["root", *user_modes()])
def cg_store(request):
    """Where execs get cgroups: root, and the user in delegated cgroups."""
    if request.param == "root":
        runner = request.getfixturevalue("root_runner")
    else:
        make = request.getfixturevalue("delegated")
        runner = make(v1=True, v2=request.param == "user-hybrid")
    s = Store(runner)
    yield s
    s.finalize()


# Store.exec_reaped()'s reaper: `python3 -c REAPER PIDFILE ARGV...` runs
# ARGV as a child subreaper (PR_SET_CHILD_SUBREAPER), waits until every
# process reparented to it is gone, writes each pid it reaped (not ARGV's
# own) to PIDFILE as it goes, and exits as ARGV did.
REAPER = """
import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:
    sys.exit(126)
child = os.fork()
if child == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
code = 126
with open(sys.argv[1], "w") as out:
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == child:
            code = os.waitstatus_to_exitcode(status) & 0xFF
        else:
            out.write(f"{pid}\\n")
            out.flush()
sys.exit(code)
"""


def left_behind(reaped, alive):
    """What a keeper that failed to start left: processes still alive
    (Store.exec_reaped's @alive) and the sandbox cgroups ("run-<pid>-<hex>")
    of the processes it started (@reaped), once the ones being removed are
    gone (10 s at most). Only this exec's own processes are looked at."""

    def cgroups():
        return [d for pid in reaped for d in cgroupctl.run_dirs(pid)]

    poll_until(lambda: not cgroups(), 10)
    return sorted(alive) + [str(d) for d in cgroups()]


def workspace(store, files):
    """A host folder the caller owns, with @files ({name: text})."""
    ws = store.runner.make_dir(name="ws")
    for n, text in files.items():
        (ws / n).write_text(text)
    store.runner.chown(ws)
    return ws


def file_holds(path, needle):
    """Whether file @path holds @needle (no NUL byte in it), read 1 MiB at
    a time over its data only: a sandbox's disk image is a sparse file of
    10 GiB (read whole, it would take that much memory)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        pos, size = 0, os.fstat(fd).st_size
        while pos < size:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: no data past @pos
                return False
            end, tail = os.lseek(fd, pos, os.SEEK_HOLE), b""
            while pos < end:
                chunk = os.pread(fd, min(1 << 20, end - pos), pos)
                if not chunk:
                    return False
                if needle in tail + chunk:
                    return True
                tail, pos = chunk[-len(needle):], pos + len(chunk)
        return False
    finally:
        os.close(fd)


def tree(path):
    """{relative path: content or None for a dir} of a host folder."""
    out = {}
    for dirpath, dirs, files in os.walk(path):
        for d in dirs:
            out[os.path.relpath(os.path.join(dirpath, d), path)] = None
        for f in files:
            out[os.path.relpath(os.path.join(dirpath, f), path)] = Path(dirpath, f).read_bytes()
    return out


# ---------------------------------------------------------------- 1. basics


def test_exit_codes(store):
    store.create("box")
    assert store.exec("box", "true").returncode == 0
    assert store.exec("box", "sh", "-c", "exit 3").returncode == 3
    r = store.exec("box", "no-such-command-xyz")
    assert r.returncode == 127, r.stderr
    assert "no-such-command-xyz" in r.stderr
    store.sh("box", "printf '#!/bin/sh\\necho ran\\n' > /root/script; chmod 0644 /root/script")
    r = store.exec("box", "/root/script")
    assert r.returncode == 126, r.stderr
    assert "ran" not in r.stdout
    # Twin: the same file made executable runs.
    store.sh("box", "chmod 0755 /root/script")
    r = store.exec("box", "/root/script")
    assert (r.returncode, r.stdout) == (0, "ran\n"), r.stderr
    r = store.exec("box", "sh", "-c", "kill -USR1 $$")
    assert r.returncode == 128 + signal.SIGUSR1, r.stderr


def test_stdio_pass_through(store):
    store.create("box")
    r = store.exec("box", "cat", input="hello\nworld\n")
    assert (r.returncode, r.stdout, r.stderr) == (0, "hello\nworld\n", "")
    r = store.exec("box", "sh", "-c", "echo out; echo err >&2")
    assert (r.returncode, r.stdout, r.stderr) == (0, "out\n", "err\n")
    # A MiB through the sandbox and back, byte for byte.
    data = os.urandom(1 << 20)
    r = store.runner.run_raw(
        ["exec", "box", "--", "cat"], env=store.env(), input=data, text=False
    )
    assert r.returncode == 0 and r.stdout == data, r.stderr
    # The command gets the caller's descriptors themselves.
    script = "test -p /proc/self/fd/0 && test -p /proc/self/fd/1 && echo pipes"
    r = store.exec("box", "sh", "-c", script, input="")
    assert r.stdout == "pipes\n", r.stderr


def test_json_outcome_env_workdir_and_id(store):
    sid = store.create("box")
    r, o = store.exec_json("box", "sh", "-c", "echo hi; exit 3")
    assert r.returncode == 3 and r.stdout == "hi\n"
    assert o["exit_code"] == 3 and o["reason"] == "exited" and o["signal"] is None
    for k in ("wall_ms", "cpu_ms", "mem_peak_bytes"):
        assert isinstance(o[k], int) and o[k] >= 0, o
    assert o["stdout_truncated"] is False and o["denied"] == []
    if store.runner.mode == "root":
        assert o["degraded"] == [] and o["mem_peak_bytes"] > 0, o
    else:  # no delegated cgroups: said, not hidden
        assert {"memory", "pids"} <= set(o["degraded"]), o
    r, o = store.exec_json("box", "sh", "-c", "kill -TERM $$")
    assert (r.returncode, o["exit_code"], o["signal"], o["reason"]) == (143, 143, 15, "signaled"), o

    out = store.sh("box", 'echo "$K|$HOME|$(pwd)"', flags=["-e", "K=V=1", "-e", "HOME=/opt"])
    assert out == "V=1|/opt|/root\n"
    # Per command only.
    assert store.sh("box", 'echo "${K-unset}|$HOME"') == "unset|/root\n"
    assert store.sh("box", "pwd", flags=["-w", "/tmp"]) == "/tmp\n"
    r = store.exec("box", "pwd", flags=["-w", "/no/such/dir"])
    assert r.returncode == 125 and "/no/such/dir" in r.stderr
    # The id is accepted wherever the name is.
    assert store.sh(sid, "echo by-id") == "by-id\n"
    assert store.ls()["box"]["id"] == sid
    assert store.hutch("logs", sid).returncode == 0


# ---------------------------------------------------------------- 2. persistence

WRITE_ALL = (
    "echo r > /root/f; mkdir -p /var/lib/x && echo v > /var/lib/x/f; echo o > /opt/f; "
    "echo s > /srv/f; echo h > /home/f; echo m > /mnt/f; echo w > /workspace/new.txt; "
    "echo changed > /workspace/keep.txt; rm /workspace/del.txt; mkdir /workspace/sub; "
    "echo t > /tmp/f"
)
READ_ALL = (
    "cat /root/f /var/lib/x/f /opt/f /srv/f /home/f /mnt/f /workspace/new.txt "
    "/workspace/keep.txt; test -e /workspace/del.txt && echo del-back; test -d /workspace/sub && echo sub"
)
EXPECTED = "r\nv\no\ns\nh\nm\nw\nchanged\nsub\n"


def test_files_persist_across_execs_and_stops(store):
    ws = workspace(store, {"keep.txt": "orig\n", "del.txt": "gone?\n"})
    before = tree(ws)
    store.create("box", "--workspace", ws)
    store.sh("box", WRITE_ALL)
    assert store.sh("box", READ_ALL + "; cat /tmp/f") == EXPECTED + "t\n"
    assert store.hutch("stop", "box").returncode == 0
    assert store.state_of("box") == "stopped"
    # A new start: the files are there, /tmp is a new empty tmpfs.
    assert store.sh("box", READ_ALL) == EXPECTED
    assert store.sh("box", "ls -A /tmp; echo end") == "end\n"
    assert store.sh("box", "stat -f -c %T /tmp") == "tmpfs\n"
    # Overlay mode: the host folder is untouched.
    assert tree(ws) == before


def test_workspace_mount_mode_writes_to_the_host(store):
    ws = workspace(store, {"keep.txt": "orig\n", "del.txt": "x\n"})
    store.create("box", "--workspace", f"{ws}:mount")
    store.sh(
        "box",
        "echo new > /workspace/new.txt; echo changed > /workspace/keep.txt; rm /workspace/del.txt",
    )
    assert tree(ws) == {"keep.txt": b"changed\n", "new.txt": b"new\n"}
    # And the other way: a host change is seen at once.
    (ws / "host.txt").write_text("from host\n")
    assert store.sh("box", "cat /workspace/host.txt") == "from host\n"


def test_overlay_workspace_sees_host_files_it_did_not_change(store):
    ws = workspace(store, {"a.txt": "a1\n"})
    store.create("box", "--workspace", ws)
    store.sh("box", "echo mine > /workspace/b.txt")
    (ws / "a.txt").write_text("a2\n")
    store.hutch("stop", "box")
    assert store.sh("box", "cat /workspace/a.txt /workspace/b.txt") == "a2\nmine\n"
    assert not (ws / "b.txt").exists()


# ---------------------------------------------------------------- 3. containment


def test_root_and_system_dirs_are_read_only(store):
    store.create("box")
    for script in ("mkdir /newdir", "touch /newfile", "touch /usr/x", "touch /etc/x", "rm /bin/sh"):
        r = store.exec("box", "sh", "-c", script)
        assert r.returncode != 0, f"{script!r} worked"
        assert "Read-only file system" in r.stderr or "Permission denied" in r.stderr, r.stderr
    # Twins: the persistent dirs take new entries.
    store.sh("box", "mkdir /root/newdir /var/newdir /opt/newdir && touch /srv/newfile")
    store.hutch("stop", "box")
    assert store.sh("box", "ls -d /newdir /newfile 2>/dev/null; ls /usr/x 2>/dev/null; echo end") == "end\n"


def test_persistent_dirs_are_mount_points_that_cannot_be_replaced(store):
    store.create("box")
    store.sh("box", "echo keep > /var/keep")
    for script in ("rm -rf /var", "rmdir /opt", "mv /var /var2", "mv /srv /root/srv"):
        r = store.exec("box", "sh", "-c", script)
        assert r.returncode != 0, f"{script!r} worked"
    # `rm -rf /var` emptied it as far as it could, but /var is still the
    # sandbox's directory, not something else, also after a restart.
    store.sh("box", "echo again > /var/keep; ln -s /etc /var/etc")
    store.hutch("stop", "box")
    out = store.sh("box", "test -d /var -a ! -L /var && cat /var/keep && readlink /var/etc")
    assert out == "again\n/etc\n"


def test_symlinks_in_persistent_dirs_resolve_inside(store):
    secret = store.dir / f"host-secret-{uuid.uuid4().hex[:6]}"
    secret.write_text("host only\n")
    store.runner.chown(secret)
    store.create("box")
    store.sh(
        "box",
        f"ln -s /etc /root/etclink; ln -s /etc/shadow /root/shadowlink; ln -s {secret} /root/hostlink; "
        f"ln -s ../../../..{secret} /root/rellink",
    )
    store.hutch("stop", "box")
    # After a restart the links are still the sandbox's view.
    assert store.sh("box", "readlink /root/etclink") == "/etc\n"
    inside_etc = store.sh("box", "ls /etc")
    assert store.sh("box", "ls /root/etclink/") == inside_etc
    # /etc/shadow is masked (empty) in the sandbox; on the host it is not.
    assert Path("/etc/shadow").stat().st_size > 0
    assert store.sh("box", "wc -c < /root/shadowlink") == "0\n"
    r = store.exec("box", "touch", "/root/etclink/planted")
    assert r.returncode != 0 and not Path("/etc/planted").exists()
    # A host path is not reachable through a link, absolute or relative.
    for link in ("/root/hostlink", "/root/rellink"):
        r = store.exec("box", "cat", link)
        assert r.returncode != 0 and "host only" not in r.stdout, r.stdout
        assert "No such file" in r.stderr, r.stderr
    # Twin: the file is there and readable by the caller on the host.
    r = store.runner.run_raw(["exec", "box", "--", "true"], env=store.env())
    assert r.returncode == 0
    assert secret.read_text() == "host only\n"


def test_store_layers_are_not_visible_inside(store):
    store.create("box")
    out = store.sh("box", "cat /proc/self/mountinfo")
    assert str(store.home) not in out and str(store.dir) not in out, out
    r = store.exec("box", "ls", "/.hutch")
    assert r.returncode != 0 and "No such file" in r.stderr


def test_keeper_socket_is_private(root_store, user_runner):
    s = root_store
    s.create("box")
    assert s.exec("box", "true").returncode == 0
    sdir = s.state / "box"
    sock = sdir / "keeper.sock"
    assert stat.S_IMODE(os.stat(s.state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(sdir).st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert os.stat(sock).st_uid == 0 and os.stat(sdir).st_uid == 0

    client = (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except OSError as e:\n"
        "    print('connect:', e.strerror); sys.exit(0)\n"
        "s.send(json.dumps({'op': sys.argv[2]}).encode())\n"
        "print(s.recv(65536).decode())\n"
    )

    def as_user(op):
        drop = ["setpriv", f"--reuid={user_runner.uid}", f"--regid={user_runner.gid}", "--clear-groups", "--"]
        return subprocess.run(
            [*drop, "/usr/bin/python3", "-c", client, str(sock), op],
            capture_output=True, text=True, timeout=30, cwd="/",
        )

    # The test user cannot reach root's socket (0700 directories).
    r = as_user("ping")
    assert r.stdout.strip() == "connect: Permission denied", (r.stdout, r.stderr)
    # Nor through hutch with root's store.
    r = user_runner.run_raw(["exec", "box", "--", "true"], env=s.env())
    assert r.returncode == 125 and str(s.home) in r.stderr, r.stderr
    r = user_runner.run_raw(["stop", "box"], env=s.env())
    assert r.returncode == 125
    assert s.state_of("box") == "running"
    # The keeper checks the peer too: with the directories opened up, the
    # user connects, and is refused.
    modes = {p: stat.S_IMODE(os.stat(p).st_mode) for p in (s.dir, s.state, sdir, sock)}
    try:
        for p in (s.dir, s.state, sdir):
            os.chmod(p, 0o711)
        os.chmod(sock, 0o666)
        r = as_user("stop")
        assert json.loads(r.stdout) == {"op": "error", "message": "permission denied"}, (r.stdout, r.stderr)
        assert s.state_of("box") == "running"
    finally:
        for p, m in modes.items():
            os.chmod(p, m)
    # Twin: the owner is answered.
    r = subprocess.run(
        ["/usr/bin/python3", "-c", client, str(sock), "ping"], capture_output=True, text=True, timeout=30
    )
    ans = json.loads(r.stdout)
    assert ans["op"] == "ok" and ans["pid"] == s.keeper_pid("box"), ans


def test_each_exec_has_a_cgroup_of_its_own(cg_store):
    s = cg_store
    s.create("box")
    script = "cat /proc/self/cgroup; echo ready; read x"
    p = s.popen("exec", "box", "--", "sh", "-c", script, stdin=PIPE, stdout=PIPE)
    try:
        lines = []
        while True:
            line = p.stdout.readline()
            assert line, "the exec ended early"
            if line == "ready\n":
                break
            lines.append(line.strip())
        first = s.history("box")
        # Running now: exec 1 (nothing finished yet).
        assert first == []
        mine = [ln for ln in lines if ln.endswith("/x-1/exec")]
        assert mine, lines
        # Seen from the host: the keeper's cgroup has a child x-1 now.
        kp = s.keeper_pid("box")
        runs = cgroupctl.run_dirs(kp)
        assert runs, "the keeper made no cgroup"
        assert any((d / "x-1").is_dir() for d in runs), runs
        # A second exec at the same time is in x-2.
        out = s.sh("box", "cat /proc/self/cgroup")
        assert any(ln.endswith("/x-2/exec") for ln in out.splitlines()), out
        assert not any(ln.endswith("/x-1/exec") for ln in out.splitlines()), out
        p.stdin.write("go\n")
        p.stdin.close()
        assert p.wait(timeout=20) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # The exec's cgroup goes with it; the sandbox's stays while it runs.
    assert poll_until(lambda: not any((d / "x-1").exists() for d in runs), 10), runs
    assert all(d.is_dir() for d in runs)


# ---------------------------------------------------------------- 4. background


def test_detached_exec_keeps_running_until_stop(store):
    m = marker()
    store.create("box")
    script = "echo started; echo oops >&2; while :; do sleep 1; done"
    r = store.hutch("exec", "box", "-d", "--", "sh", "-c", script, m)
    assert r.returncode == 0, r.stderr
    eid = r.stdout.strip()
    assert eid.isdigit(), r.stdout
    assert poll_until(lambda: m in store.procs_inside("box"), 10), "the detached command is not running"
    # Other execs come and go; it stays.
    for _ in range(3):
        assert store.exec("box", "true").returncode == 0
    assert m in store.procs_inside("box")

    def log():
        r = store.hutch("logs", "box", "--exec", eid)
        return r.returncode == 0 and "started" in r.stdout and "oops" in r.stderr and r

    r = poll_until(log, 10)
    # stdout to stdout, stderr to stderr (docs/processes.md).
    assert r and (r.stdout, r.stderr) == ("started\n", "oops\n"), r
    assert store.hutch("stop", "box").returncode == 0
    assert store.state_of("box") == "stopped"
    assert not live_with_marker(m)
    assert m not in store.procs_inside("box")
    hist = {h["id"]: h for h in store.history("box")}
    assert hist[int(eid)]["detached"] is True
    assert hist[int(eid)]["outcome"]["reason"] == "killed", hist[int(eid)]
    text = store.hutch("logs", "box").stdout
    assert "(detached)" in text


def cpus_allowed(text):
    """The CPU numbers of a Cpus_allowed_list line ("0-3,6")."""
    line = next(x for x in text.splitlines() if x.startswith("Cpus_allowed_list:"))
    cpus = set()
    for part in line.split(":", 1)[1].strip().split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def test_commands_get_every_cpu_while_the_keeper_keeps_to_one(store):
    """The keeper and init stay on one CPU (fewer cross-CPU wake-ups per
    exec); the commands, detached ones too, must get the caller's CPUs
    back. The twin: the keeper itself is pinned (where there are two CPUs
    or more), so the command's full set is the restore's doing."""
    mine = os.sched_getaffinity(0)
    store.create("box")
    for _ in range(3):  # the prepared process of the next exec, and a new fork
        assert cpus_allowed(store.sh("box", "cat /proc/self/status")) == mine
    r = store.hutch("exec", "box", "-d", "--", "sh", "-c", "cat /proc/self/status")
    assert r.returncode == 0, r.stderr
    eid = r.stdout.strip()

    def log():
        r = store.hutch("logs", "box", "--exec", eid)
        return r.returncode == 0 and "Cpus_allowed_list" in r.stdout and r.stdout

    out = poll_until(log, 10)
    assert out and cpus_allowed(out) == mine, out
    keeper = store.keeper_pid("box")
    pinned = os.sched_getaffinity(keeper)
    assert len(pinned) == (1 if len(mine) > 1 else len(mine)) and pinned <= mine, pinned


# ---------------------------------------------------------------- 5. timeouts


def test_exec_timeout_kills_everything_it_started(store):
    m = marker()
    store.create("box")
    script = f"sh -c 'sleep 30' {m} >/dev/null 2>&1 & sleep 30"
    t0 = time.monotonic()
    r, o = store.exec_json("box", "sh", "-c", script, flags=["--timeout", "1s"])
    took = time.monotonic() - t0
    assert r.returncode == 137, r.stderr
    assert took < 10, took
    assert o["reason"] == "timeout" and o["exit_code"] == 137, o
    assert m not in store.procs_inside("box")
    # Twin: within its time it runs to the end.
    r = store.exec("box", "sh", "-c", "sleep 0.2; echo done", flags=["--timeout", "10s"])
    assert (r.returncode, r.stdout) == (0, "done\n")


def test_leftovers_of_an_exec_are_killed_when_it_ends(store):
    m = marker()
    store.create("box")
    r = store.exec("box", "sh", "-c", f"sh -c 'sleep 30' {m} >/dev/null 2>&1 & echo bye")
    assert (r.returncode, r.stdout) == (0, "bye\n")
    assert poll_until(lambda: m not in store.procs_inside("box"), 5), "the leftover still runs"


@pytest.mark.parametrize("store", ["root", "user"], indirect=True)
def test_a_daemon_an_exec_started_is_killed_when_it_ends(store):
    m = marker()
    store.create("box")
    # The exec ends once the daemon is in its own session.
    script = (
        f"setsid sh -c 'echo $$ > /tmp/d; sleep 30' {m} </dev/null >/dev/null 2>&1 & "
        "while [ ! -s /tmp/d ]; do sleep 0.05; done; echo bye"
    )
    r = store.exec("box", "sh", "-c", script)
    assert (r.returncode, r.stdout) == (0, "bye\n"), r.stderr
    assert poll_until(lambda: m not in store.procs_inside("box"), 5), "the daemon still runs"


def test_policy_timeout_applies_to_every_exec(store):
    store.create("box", "--timeout", "1s")
    for _ in range(2):
        t0 = time.monotonic()
        r, o = store.exec_json("box", "sleep", "30")
        assert r.returncode == 137 and o["reason"] == "timeout", o
        assert time.monotonic() - t0 < 10
    # An exec's own --timeout is used instead.
    r = store.exec("box", "sh", "-c", "sleep 1.5; echo done", flags=["--timeout", "20s"])
    assert (r.returncode, r.stdout) == (0, "done\n"), r.stderr
    assert store.exec("box", "true").returncode == 0


# ---------------------------------------------------------------- 6. signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["TERM", "INT", "HUP"])
def test_signal_to_the_client_goes_to_the_command(store, sig):
    store.create("box")
    name = signal.Signals(sig).name[3:]
    script = f"trap 'echo got; exit 7' {name}; echo ready; while :; do sleep 0.1; done"
    p = store.popen("exec", "box", "--", "sh", "-c", script, stdout=PIPE)
    try:
        assert p.stdout.readline() == "ready\n"
        p.send_signal(sig)
        assert p.wait(timeout=20) == 7
        assert p.stdout.read() == "got\n"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert store.history("box")[-1]["outcome"]["exit_code"] == 7


def test_sigkill_of_the_client_kills_the_command(store):
    m, bg = marker(), marker()
    store.create("box")
    script = (
        f"sh -c 'while :; do sleep 1; done' {bg} >/dev/null 2>&1 & "
        "echo ready; while :; do sleep 0.1; done"
    )
    p = store.popen("exec", "box", "--", "sh", "-c", script, m, stdout=PIPE)
    try:
        assert p.stdout.readline() == "ready\n"
        assert m in store.procs_inside("box")
        p.kill()
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    def gone():
        out = store.procs_inside("box")
        return m not in out and bg not in out

    assert poll_until(gone, 10), store.procs_inside("box")
    assert not live_with_marker(m) and not live_with_marker(bg)

    def entry():
        return [h for h in store.history("box") if h["argv"][-1:] == [m]]

    assert poll_until(entry, 10), store.history("box")
    assert entry()[0]["outcome"]["reason"] == "killed", entry()


# ---------------------------------------------------------------- 7. concurrency


def test_two_execs_at_once(store):
    store.create("box")
    wait_for = (
        "touch /tmp/{me}; i=0; while [ ! -e /tmp/{other} ]; do i=$((i+1)); "
        "[ $i -gt 300 ] && exit 9; sleep 0.05; done; echo {me}"
    )
    procs = [
        store.popen("exec", "box", "--", "sh", "-c", wait_for.format(me=a, other=b), stdout=PIPE)
        for a, b in (("a", "b"), ("b", "a"))
    ]
    try:
        outs = [p.communicate(timeout=40)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == ["a\n", "b\n"]
    assert len(store.keeper_pids("box")) == 1


def test_many_concurrent_execs_start_one_keeper(store):
    store.create("box")
    procs = [
        store.popen("exec", "box", "--", "sh", "-c", f"echo {i}", stdout=PIPE, stderr=PIPE)
        for i in range(20)
    ]
    results = []
    try:
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=90)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [r[0] for r in results] == [0] * 20, [r[2] for r in results if r[0]]
    assert [r[1] for r in results] == [f"{i}\n" for i in range(20)]
    assert len(store.keeper_pids("box")) == 1
    assert store.state_of("box") == "running"
    assert len(store.history("box")) == 20


# ---------------------------------------------------------------- 8. idle stop


def test_idle_stop(store):
    store.create("box", "--idle-timeout", "2s")
    store.sh("box", "echo x > /root/f")
    kp = store.keeper_pid("box")
    assert store.state_of("box") == "running"
    assert poll_until(lambda: store.state_of("box") == "stopped", 20), "no idle stop"
    assert not wait_pidfds([kp], 10)
    assert not store.keeper_pids("box")
    # Starts again on demand, files kept.
    assert store.sh("box", "cat /root/f") == "x\n"


def test_running_commands_hold_off_the_idle_stop(store):
    store.create("box", "--idle-timeout", "2s")
    # A foreground command longer than the idle timeout runs to its end.
    r = store.exec("box", "sh", "-c", "sleep 3; echo done")
    assert (r.returncode, r.stdout) == (0, "done\n"), r.stderr
    r = store.hutch("exec", "box", "-d", "--", "sleep", "1000")
    assert r.returncode == 0, r.stderr
    kp = store.keeper_pid("box")
    time.sleep(4)
    assert store.state_of("box") == "running"
    assert store.keeper_pid("box") == kp
    assert store.hutch("stop", "box").returncode == 0
    assert store.state_of("box") == "stopped"
    assert not wait_pidfds([kp], 10)


def test_stop_is_done_when_it_returns(store):
    """`stop` returns once the keeper is gone: `ls` says stopped at once,
    and an exec right after it starts a new keeper without tripping on
    the old one's lock."""
    store.create("box")
    assert store.exec("box", "true").returncode == 0
    for i in range(20):
        kp = store.keeper_pid("box")
        r = store.hutch("stop", "box")
        assert r.returncode == 0, r.stderr
        if i % 2:
            assert store.state_of("box") == "stopped", f"round {i}"
            assert not store.keeper_pids("box")
            assert not cgroupctl.run_dirs(kp)
        r = store.exec("box", "sh", "-c", f"echo {i} >> /root/runs")
        assert r.returncode == 0, f"round {i}: {r.stderr}"
    assert store.sh("box", "wc -l < /root/runs") == "20\n"


def test_exec_as_the_keeper_stops_for_idleness(store):
    """Execs that arrive while the keeper stops itself for idleness are
    run (by a new keeper), each exactly once."""
    store.create("box", "--idle-timeout", "100ms")
    for i in range(40):
        r = store.exec("box", "sh", "-c", f"echo {i} >> /root/runs")
        assert r.returncode == 0, f"round {i}: {r.stderr}"
        time.sleep((i * 7 % 10) / 100)
    assert store.sh("box", "cat /root/runs") == "".join(f"{i}\n" for i in range(40))
    hist = store.history("box")
    assert len(hist) == 41 and all(h["outcome"]["reason"] == "exited" for h in hist)


# ---------------------------------------------------------------- 9. ls, logs, rm, gc


def test_ls_json_fields(store):
    t0 = int(time.time() * 1000)
    a = store.create("a")
    b = store.create("b")
    t1 = int(time.time() * 1000)
    store.sh("a", "head -c 2000000 /dev/zero > /root/big")
    ls = store.ls()
    assert list(ls) == ["a", "b"]
    for name, sid in (("a", a), ("b", b)):
        e = ls[name]
        assert set(e) == {"name", "id", "state", "backend", "created_ms", "last_used_ms",
                          "disk_bytes", "disk_limit_bytes", "degraded", "parent", "from",
                          "usage_bytes", "image", "ports"}
        assert e["name"] == name and e["id"] == sid and e["parent"] is None
        # Not made from a snapshot: nothing below its own layer.
        assert e["from"] is None and e["usage_bytes"] == e["disk_bytes"]
        assert e["backend"] == "ns"
        assert t0 - 1000 <= e["created_ms"] <= t1 + 1000, (e, t0, t1)
        assert e["last_used_ms"] >= e["created_ms"]
    assert ls["a"]["state"] == "running" and ls["b"]["state"] == "stopped"
    assert ls["a"]["disk_bytes"] >= 2000000 > ls["b"]["disk_bytes"], ls
    assert ls["a"]["last_used_ms"] > ls["b"]["last_used_ms"]
    text = store.hutch("ls").stdout.splitlines()
    assert text[0].split()[:2] == ["NAME", "STATE"]
    assert [ln.split()[:2] for ln in text[1:]] == [["a", "running"], ["b", "stopped"]]


def test_logs_history(store):
    store.create("box")
    store.exec("box", "true")
    store.exec("box", "sh", "-c", "exit 3")
    store.exec("box", "no-such-command-xyz")
    store.hutch("stop", "box")
    store.exec("box", "sh", "-c", "echo after")
    hist = store.history("box")
    assert [h["id"] for h in hist] == [1, 2, 3, 4]
    assert [h["outcome"]["exit_code"] for h in hist] == [0, 3, 127, 0]
    assert hist[1]["argv"] == ["sh", "-c", "exit 3"]
    assert all(h["detached"] is False and h["end_ms"] >= h["start_ms"] for h in hist)
    text = store.hutch("logs", "box").stdout.splitlines()
    assert text[0].split()[0] == "ID"
    rows = [ln.split() for ln in text[1:]]
    assert [(r[0], r[5]) for r in rows] == [("1", "0"), ("2", "3"), ("3", "127"), ("4", "0")], text
    assert '["no-such-command-xyz"]' in text[3]


def test_rm_of_a_running_sandbox(store):
    store.create("box")
    store.sh("box", "echo x > /root/f")
    # The keeper answers the client first and writes the history line
    # after: wait for it, so that the listing below is of a settled store.
    deadline = time.monotonic() + 30
    while len(store.history("box")) < 1:
        assert time.monotonic() < deadline, "the exec's history line never came"
        time.sleep(0.05)
    kp = store.keeper_pid("box")
    runs = cgroupctl.run_dirs(kp)
    before = store.listing()
    r = store.hutch("rm", "box")
    assert r.returncode == 125 and "running" in r.stderr and "--force" in r.stderr, r.stderr
    assert store.listing() == before
    assert store.state_of("box") == "running" and store.keeper_pid("box") == kp
    assert store.sh("box", "cat /root/f") == "x\n"

    r = store.hutch("rm", "--force", "box")
    assert r.returncode == 0, r.stderr
    assert not store.sandbox_dir("box").exists()
    assert not (store.state / "box").exists()
    assert not wait_pidfds([kp], 10)
    assert poll_until(lambda: not any(d.exists() for d in runs), 10), runs
    assert store.ls() == {}
    assert store.hutch("exec", "box", "--", "true").returncode == 125
    # Twin: a stopped sandbox goes without --force; the name is free again.
    store.create("box")
    assert store.hutch("rm", "box").returncode == 0
    assert store.ls() == {}
    store.create("box")
    assert store.sh("box", "ls -A /root; echo end") == "end\n"


def test_gc_after_the_keeper_is_killed(store):
    m = marker()
    store.create("box")
    store.sh("box", "echo kept > /root/f")
    r = store.hutch("exec", "box", "-d", "--", "sh", "-c", "while :; do sleep 1; done", m)
    assert r.returncode == 0
    assert poll_until(lambda: m in store.procs_inside("box"), 10)
    kp = store.keeper_pid("box")
    runs = cgroupctl.run_dirs(kp)
    assert bool(runs) == (store.runner.mode == "root"), runs
    os.kill(kp, signal.SIGKILL)  # this test's own keeper
    assert not wait_pidfds([kp], 10)
    # Until its parent (init, here a slow reaper) has reaped it, the pid
    # exists and its cgroups are rightly not collected.
    assert poll_until(lambda: not Path(f"/proc/{kp}").exists(), 30)
    # The sandbox dies with it; its cgroups stay behind, empty (unless any
    # other hutch start on the machine collected them already: it may).
    assert poll_until(lambda: not live_with_marker(m), 10), live_with_marker(m)
    assert poll_until(lambda: not any(cgroupctl.procs_below(d) for d in runs), 10)
    assert store.state_of("box") == "stopped"
    assert (store.state / "box").exists()
    r = store.hutch("gc")
    assert r.returncode == 0, r.stderr
    n = int(r.stdout.split()[1])
    assert n >= 1 and r.stdout.startswith("removed "), r.stdout
    assert not (store.state / "box").exists()
    # Nothing more to collect; the sandbox works and kept its files.
    assert store.hutch("gc").stdout == "removed 0 leftovers\n"
    assert store.sh("box", "cat /root/f") == "kept\n"
    assert m not in store.procs_inside("box")
    # The next start collected the dead keeper's cgroups (x-<id> too).
    assert not cgroupctl.run_dirs(kp)


# ---------------------------------------------------------------- 10. bad input


BAD = [
    (["exec", "nosuch", "--", "true"], "nosuch"),
    (["stop", "nosuch"], "nosuch"),
    (["rm", "nosuch"], "nosuch"),
    (["rm", "--force", "nosuch"], "nosuch"),
    (["logs", "nosuch"], "nosuch"),
    (["create", "Bad"], "Bad"),
    (["create", "-x"], "-x"),
    (["create", "a" * 64], "a" * 64),
    (["create", "a/b"], "a/b"),
    (["create", ".hidden"], ".hidden"),
    (["create", "box"], "already exists"),
    (["create", "new", "--workspace", "{ws}:copy"], "copy"),
    (["create", "new", "--disk", "1m"], "--disk"),
    (["create", "new", "--output-limit", "1k"], "--output-limit"),
    (["create", "new", "--json", "{dir}/x.json"], "--json"),
    (["create", "new", "--from", "nosuchsnap"], "nosuchsnap"),
    (["create", "new", "--idle-timeout", "soon"], "--idle-timeout"),
    (["create", "new", "--", "true"], "usage"),
    (["run", "--from", "x", "--", "true"], "--from"),
    (["run", "--idle-timeout", "1s", "--", "true"], "--idle-timeout"),
    (["exec", "box"], "usage"),
    (["exec", "box", "--"], "usage"),
    (["exec", "box", "-w", "relative", "--", "true"], "relative"),
    (["exec", "box", "--timeout", "soon", "--", "true"], "--timeout"),
    (["exec", "box", "-e", "NOEQUALS", "--", "true"], "NOEQUALS"),
    (["exec", "box", "--bogus", "--", "true"], "--bogus"),
    (["logs", "box", "--exec", "abc"], "abc"),
    (["logs", "box", "--exec", "999"], "there is no exec 999"),
    (["ls", "--bogus"], "usage"),
    (["gc", "extra"], "usage"),
]


@pytest.mark.parametrize("args,needle", BAD, ids=[" ".join(a)[:40] for a, _ in BAD])
def test_bad_input_changes_nothing(store, args, needle):
    ws = workspace(store, {"f": "x\n"})
    store.create("box")
    assert store.exec("box", "true").returncode == 0
    store.hutch("stop", "box")
    args = [a.format(ws=ws, dir=store.dir) for a in args]
    before = store.listing()
    r = store.hutch(*args)
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert needle in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines and lines[0].startswith(("hutch:", "usage:")), r.stderr
    assert r.stdout == ""
    assert store.listing() == before
    assert not store.keeper_pids()


def test_keeper_that_cannot_start_leaves_nothing(store):
    ws = workspace(store, {"f": "x\n"})
    store.create("box", "--workspace", ws)
    assert store.sh("box", "cat /workspace/f") == "x\n"
    store.hutch("stop", "box")
    subprocess.run(["rm", "-rf", str(ws)], check=True)
    before = store.listing()
    seen = set(store.keepers)
    r, reaped, alive = store.exec_reaped("box", "true")
    assert r.returncode == 125, r.stderr
    assert str(ws) in r.stderr and "box" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert store.listing() == before
    assert not store.keeper_pids()
    assert store.state_of("box") == "stopped"
    assert not (store.state / "box" / "keeper.sock").exists()
    assert store.keepers == seen  # no keeper stayed long enough to be seen
    assert reaped, "the keeper was not started (nothing was reaped)"
    assert not left_behind(reaped, alive)
    # Twin: with the folder back it starts.
    ws.mkdir()
    (ws / "f").write_text("back\n")
    store.runner.chown(ws)
    assert store.sh("box", "cat /workspace/f") == "back\n"


def test_layer_with_a_symlink_for_a_persistent_dir_is_refused(store):
    """SECURITY: /var replaced by a symlink in the sandbox's layer (which
    the sandbox cannot do, but a changed store could) would be followed
    when /var is bound; the start is refused, and cleaned up after."""
    store.create("box")
    store.sh("box", "echo v > /var/f")
    store.hutch("stop", "box")
    with data_of(store.home, store.state, "box") as data:
        upper = data / "upper-1" / "root"
        subprocess.run(["rm", "-rf", str(upper / "var")], check=True)
        (upper / "var").symlink_to("/etc")
        os.lchown(upper / "var", *(os.lstat(upper)[4:6]))
    before = store.listing(state=False)
    r, reaped, alive = store.exec_reaped("box", "ls", "/var/")
    assert r.returncode == 125, (r.stdout, r.stderr)
    assert "/var is no longer a directory" in r.stderr, r.stderr
    assert r.stdout == ""
    assert store.listing(state=False) == before
    # The keeper's errors go to its log (docs/persistent.md), written as
    # it exits, a moment after it answered the exec.
    log = store.state / "box" / "keeper.log"
    assert poll_until(lambda: "/var is no longer a directory" in log.read_text(), 10)
    assert not (store.state / "box" / "keeper.sock").exists()
    assert not store.keeper_pids() and store.state_of("box") == "stopped"
    assert reaped and not left_behind(reaped, alive)
    # Twin: with the change undone it starts (the old /var/f went with it).
    with data_of(store.home, store.state, "box") as data:
        (data / "upper-1" / "root" / "var").unlink()
    assert store.sh("box", "ls -A /var; echo end") == "end\n"


def test_missing_secret_at_start_is_125(root_store):
    s = root_store
    s.create("box", "--secret", f"TOKEN@{API}", "--allow-private", "127.0.0.0/8")
    before = s.listing(state=False)
    r = s.exec("box", "true", env={"TOKEN": ""})
    assert r.returncode == 125 and "TOKEN" in r.stderr, r.stderr
    # The keeper said why before it exits: it may still be going.
    assert poll_until(lambda: not s.keeper_pids(), 10), s.keeper_pids()
    assert s.state_of("box") == "stopped"
    assert not (s.state / "box" / "keeper.sock").exists()
    assert before == s.listing(state=False)
    # Twin: with the value it starts.
    r = s.exec("box", "sh", "-c", 'test -n "$TOKEN"', env={"TOKEN": "a-long-enough-value"})
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------- 11. network and secrets


@pytest.fixture(scope="module")
def upstreams():
    u = [Upstream("127.0.0.1"), Upstream("127.0.0.1")]
    yield u
    for x in u:
        x.close()


def create_allowing(store, port):
    """Sandbox "net", allowed to reach API:@port (on the host's loopback)."""
    store.create(
        "net", "--allow-host", f"{API}:{port}", "--resolve", f"{API}:127.0.0.1",
        "--allow-private", "127.0.0.0/8",
    )


def test_network_allow_in_a_persistent_sandbox(root_store, upstreams):
    s = root_store
    ok, other = upstreams
    create_allowing(s, ok.port)
    curl = "curl -sS --max-time 20 -o /dev/null -w '%{http_code}\\n' "
    r, o = s.exec_json("net", "sh", "-c", curl + f"http://{API}:{ok.port}/pa")
    assert (r.returncode, r.stdout) == (0, "200\n"), r.stderr
    assert o["denied"] == []
    assert any(q["path"] == "/pa" for q in ok.requests)
    # Another port of the same host, and another host: refused.
    r, o = s.exec_json(
        "net", "sh", "-c",
        f"curl -sS --max-time 20 http://{API}:{other.port}/pb; "
        f"curl -sS --max-time 20 http://nope.example.test:{ok.port}/pc",
    )
    assert r.returncode == 0, r.stderr
    assert "not in the allowlist" in r.stdout, r.stdout
    assert not any(q["path"] in ("/pb", "/pc") for q in ok.requests + other.requests)
    # No way around the proxy: a direct connection fails.
    direct = f"http://127.0.0.1:{ok.port}/direct"
    r = s.exec("net", "curl", "-sS", "--max-time", "5", "--noproxy", "*", direct)
    assert r.returncode != 0
    assert not any(q["path"] == "/direct" for q in ok.requests)
    # Again after a restart.
    s.hutch("stop", "net")
    r = s.exec("net", "sh", "-c", curl + f"http://{API}:{ok.port}/pd")
    assert (r.returncode, r.stdout) == (0, "200\n"), r.stderr
    # The audit log keeps every decision, across the restart.
    r = s.hutch("logs", "net", "--audit")
    assert r.returncode == 0, r.stderr
    decisions = [
        (d["host"], d["port"] if "port" in d else None, d["decision"])
        for d in map(json.loads, r.stdout.splitlines())
        if d.get("type") == "decision"
    ]
    hosts = [(h, dec) for h, _p, dec in decisions]
    assert hosts.count((API, "allow")) == 2, decisions
    assert (API, "deny") in hosts and ("nope.example.test", "deny") in hosts, decisions


def test_exec_outcome_lists_the_denied_hosts(root_store, upstreams):
    s = root_store
    ok, _other = upstreams
    create_allowing(s, ok.port)
    r, o = s.exec_json("net", "curl", "-sS", "--max-time", "20", f"http://nope.example.test:{ok.port}/pe")
    assert r.returncode == 0 and "not in the allowlist" in r.stdout, (r.stdout, r.stderr)
    assert [d["host"] for d in o["denied"]] == ["nope.example.test"], o


def test_secrets_in_a_persistent_sandbox(root_store):
    trustme = pytest.importorskip("trustme")
    from test_secrets import PLACEHOLDER_RE, REAL, TlsUpstream

    s = root_store
    ca = trustme.CA()
    up = TlsUpstream(ca)
    try:
        cafile = s.dir / "upstream-ca.pem"
        ca.cert_pem.write_to_path(str(cafile))
        s.create(
            "sec", "--secret", f"TOKEN@api.secret.test:{up.port}", "--resolve",
            "api.secret.test:127.0.0.1", "--allow-private", "127.0.0.0/8", "--upstream-ca", cafile,
        )
        # The record holds the source, never a value (there was none yet).
        record = (s.sandbox_dir("sec") / "sandbox.json").read_text()
        assert "TOKEN" in record and REAL not in record
        url = f"https://api.secret.test:{up.port}/sec"
        script = f'echo "$TOKEN"; curl -sS --max-time 20 -H "Authorization: Bearer $TOKEN" {url}'
        r = s.exec("sec", "sh", "-c", script, env={"TOKEN": REAL})
        assert r.returncode == 0, r.stderr
        placeholder, body = r.stdout.split("\n", 1)
        assert PLACEHOLDER_RE.match(placeholder) and REAL not in r.stdout
        got = [q for q in up.requests if q["path"] == "/sec"]
        assert dict(got[-1]["headers"])["Authorization"] == f"Bearer {REAL}"
        # The running sandbox keeps it: a later exec needs no value.
        r = s.exec("sec", "sh", "-c", script, env={"TOKEN": ""})
        assert r.returncode == 0 and r.stdout.split("\n", 1)[0] == placeholder, r.stderr
        assert len([q for q in up.requests if q["path"] == "/sec"]) == 2
        s.hutch("stop", "sec")
        # Nothing in the store or the state holds the real value.
        for top in (s.home, s.state):
            for dirpath, _dirs, files in os.walk(top):
                for f in files:
                    p = Path(dirpath, f)
                    if p.is_file() and not p.is_symlink():
                        assert not file_holds(p, REAL.encode()), p
    finally:
        up.close()
