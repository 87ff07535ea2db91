# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch run --backend vm` (issue 8): the namespace backend's
backend-independent containment and limit cases, on a microVM under QEMU
with TCG (these machines' /dev/kvm is kvm_pvm, which cannot boot a stock
kernel). Few cases on purpose: TCG is slow.

Every run uses a store and state directory of this session's own (the
templates' guest RAM lives on tmpfs), removed at the end.

Not run here, with the reason:
- the containment probes (uid map, seccomp, capabilities, /proc/sys):
  test_vm_wall.py, the guest's own wall (docs/vm.md); landlock is not
  applied in the guest;
- persistent sandboxes (`hutch create --backend vm`): test_vm_persist.py;
"""

import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import SUBID_COUNT, is_pool_map
from test_filesystem import secret_paths

TCG = ["--backend", "vm", "--vm-accel", "tcg"]
# A first run builds the template of its shape (one cold boot under TCG).
VM_TIMEOUT = 240
API = "api.example.test"


@pytest.fixture(scope="module")
def vm_env():
    """HUTCH_HOME and HUTCH_STATE_DIR of this module's own, on tmpfs."""
    root = Path(tempfile.mkdtemp(prefix="hutch-vm-test-", dir="/dev/shm"))
    os.chmod(root, 0o755)
    env = {"HUTCH_HOME": str(root / "home"), "HUTCH_STATE_DIR": str(root / "state")}
    yield env
    shutil.rmtree(root, ignore_errors=True)


def vm_run(caller, vm_env, flags, cmd, env=None, **kw):
    """hutch run --backend vm ... -- CMD; returns (CompletedProcess, outcome)."""
    out = caller.make_dir(name="out") / "outcome.json"
    r = caller.run(
        [*TCG, *flags, "--json", str(out), "--", *cmd],
        env={**vm_env, **(env or {})},
        timeout=VM_TIMEOUT,
        **kw,
    )
    outcome = json.loads(out.read_text()) if out.exists() and out.stat().st_size else None
    return r, outcome


def qemu_processes_with(marker):
    """Pids of live processes whose command line or environment holds
    @marker (QEMU in a user namespace names the state's directories
    /proc/self/fd/N: hutch's environment, which it inherits, still names
    them)."""
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            text = (p / "cmdline").read_bytes() + (p / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in text:
            pids.append(int(p.name))
    return pids


def sleeping_vm(caller, vm_env, flags, script):
    """`hutch run --backend vm FLAGS -- sh -c 'SCRIPT; echo ready; sleep
    60'` started; returns (Popen, QEMU's pid) once it is ready."""
    p = caller.popen(
        [*TCG, *flags, "--", "sh", "-c", f"{script}; echo ready; sleep 60"],
        env=vm_env,
        stdout=subprocess.PIPE,
    )
    try:
        assert p.stdout.readline() == "ready\n"
        qemu = [
            q
            for q in qemu_processes_with(vm_env["HUTCH_STATE_DIR"])
            if "qemu-system" in os.readlink(f"/proc/{q}/exe")
        ]
        assert len(qemu) == 1, qemu
    except BaseException:
        p.kill()
        p.wait()
        raise
    return p, qemu[0]


def ids_of(pid):
    """The real, effective, saved and file-system uids and gids of @pid."""
    ids = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid"):
            ids[key] = [int(x) for x in value.split()]
    return ids


def test_exit_code_output_and_stdin(caller, vm_env):
    r, o = vm_run(
        caller,
        vm_env,
        [],
        ["sh", "-c", "read x; echo out-$x; echo err >&2; uname -r; exit 7"],
        input="piped\n",
    )
    assert r.returncode == 7, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "out-piped"
    # The guest runs a kernel of its own: Debian's, whatever the host's is.
    assert lines[1] == sorted(os.listdir("/lib/modules"))[-1]
    assert "err" in r.stderr
    assert o["reason"] == "exited" and o["exit_code"] == 7
    assert o["cpu_ms"] > 0 and o["mem_peak_bytes"] > 0


def test_large_output_and_the_output_limit(caller, vm_env):
    # Many frames' worth through the host's relay, whole.
    r, o = vm_run(caller, vm_env, [], ["sh", "-c", "seq 1 200000"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "200000" and len(r.stdout) == 1288895
    assert o["stdout_truncated"] is False
    r, o = vm_run(caller, vm_env, ["--output-limit", "1k"], ["sh", "-c", "seq 1 200000"])
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) == 1024
    assert o["stdout_truncated"] is True


def test_large_stdin_to_a_command_that_reads_it_late(caller, vm_env):
    """More stdin than the agent queues (16 MiB) and than the port
    buffers, for a command that reads none of it for a while: the host
    waits for the port (it once took a full port for a dead VM) and the
    agent stops reading it while its queue is full (it once dropped the
    rest): every byte arrives, in order. The twin (a command that reads at
    once) is test_exit_code_output_and_stdin."""
    data = os.urandom(1 << 20) * 24
    r, _ = vm_run(
        caller, vm_env, [], ["sh", "-c", "sleep 2; sha256sum"], input=data, text=False
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()


def test_command_not_found_is_127(caller, vm_env):
    r, o = vm_run(caller, vm_env, [], ["no-such-command-hutch"])
    assert r.returncode == 127
    assert "command not found" in r.stderr
    assert o["reason"] == "exited"


def test_runs_unprivileged_without_capabilities(caller, vm_env):
    script = (
        "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; "
        "mount -t tmpfs x /tmp 2>/dev/null; echo mount=$?; "
        # The agent (PID 1) and its port are out of reach.
        "ls /proc/1/root/ >/dev/null 2>&1; echo root=$?; "
        "echo x 2>/dev/null > /proc/1/fd/3; echo fd=$?; "
        "ls /dev | grep -c vport"
    )
    r, _ = vm_run(caller, vm_env, [], ["sh", "-c", script])
    lines = r.stdout.splitlines()
    status = dict(line.split(":\t") for line in lines[:3])
    assert status["CapEff"] == "0000000000000000"
    assert status["CapBnd"] == "0000000000000000"
    assert status["NoNewPrivs"] == "1"
    assert lines[3] != "mount=0"  # without CAP_SYS_ADMIN: no mount
    assert lines[4:] == ["root=2", "fd=2", "0"]


def test_host_secrets_in_etc_are_hidden(caller, vm_env):
    """/etc is the host's (a 9p share that QEMU, as root hutch, can read
    whole): shadow, sudoers, SSH host keys, ssl/private must be hidden as
    in the namespace backend. The twin: /etc/passwd is there."""
    paths = [*secret_paths(), "/etc/passwd"]
    script = (
        'for p in "$@"; do if c=$(cat "$p" 2>/dev/null); then echo "$p ${#c}"; '
        'else echo "$p E"; fi; done; ls -A /etc/ssl/private 2>/dev/null | wc -l'
    )
    r, _ = vm_run(caller, vm_env, [], ["sh", "-c", script, "sh", *paths])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    seen = dict(line.rsplit(" ", 1) for line in lines[:-1])
    for p in secret_paths():
        assert seen[p] in ("0", "E"), f"{p} is readable with content in the VM: {seen[p]}"
    assert int(seen["/etc/passwd"]) > 0 and seen["/etc/passwd"] != "E"
    assert lines[-1] == "0", "/etc/ssl/private is not empty in the VM"


@pytest.mark.parametrize("mode", ["mount", "copy", "overlay"])
def test_workspace_modes(caller, vm_env, mode):
    ws = caller.make_dir(name="ws")
    (ws / "f").write_text("orig\n")
    caller.chown(ws)
    r, o = vm_run(
        caller,
        vm_env,
        ["--workspace", f"{ws}:{mode}"],
        ["sh", "-c", "cat f && echo changed > f && echo new > g && cat f g && pwd"],
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["orig", "changed", "new", "/workspace"]
    if mode == "mount":
        # The real folder: the changes are on the host.
        assert (ws / "f").read_text() == "changed\n"
        assert (ws / "g").read_text() == "new\n"
    else:
        # Copy and overlay: the host folder is untouched.
        assert (ws / "f").read_text() == "orig\n"
        assert not (ws / "g").exists()


def test_no_set_id_file_reaches_the_host(caller, vm_env):
    """SECURITY: a mounted workspace is written by QEMU's 9p server, and
    what it creates there is the caller's, root's when hutch runs as root:
    a guest's chmod u+s (or a file created with the bit) would leave a
    set-user-id root program on the host for
    anyone who can reach the folder. QEMU runs under a filter that refuses
    the set-id bits. The twin: chmod 755 works."""
    ws = caller.make_dir(name="ws")
    caller.chown(ws)
    script = (
        "cp /bin/sh s; chmod 4755 s; echo suid=$?; chmod 2755 s; echo sgid=$?; "
        "install -m 4755 /bin/sh t 2>/dev/null; echo install=$?; "
        "chmod 700 s; echo plain=$?"
    )
    r, _ = vm_run(caller, vm_env, ["--workspace", f"{ws}:mount"], ["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    got = dict(line.split("=") for line in r.stdout.split())
    assert got["suid"] != "0" and got["sgid"] != "0" and got["install"] != "0", got
    assert got["plain"] == "0", got
    for f in ws.iterdir():
        assert not os.stat(f).st_mode & 0o6000, f"{f}: {oct(os.stat(f).st_mode)}"
    assert oct(os.stat(ws / "s").st_mode & 0o7777) == "0o700"


def test_qemu_is_the_sandboxs_root_not_host_root(caller, vm_env):
    """SECURITY: QEMU serves the guest's 9p requests on host folders; as
    root hutch it runs as the root of the sandbox's user namespace (the
    base of its id range on the host), as in a persistent sandbox, never
    as host root. As a user it is that user."""
    p, qemu = sleeping_vm(caller, vm_env, [], "true")
    try:
        if caller.uid == 0:
            # As root, a range of the id pool leased for the run (issue 15).
            base = gbase = int(Path(f"/proc/{qemu}/uid_map").read_text().split()[1])
            assert is_pool_map(f"0 {base} {SUBID_COUNT}"), base
        else:
            base, gbase = caller.uid, caller.gid
        assert ids_of(qemu) == {"Uid": [base] * 4, "Gid": [gbase] * 4}
    finally:
        p.kill()
        p.wait()


def as_qemu(qemu, dir_fd_no, action):
    """Runs @action(dirfd) in a child with QEMU's identity: its user
    namespace, its uid and gid there (not 0: VM_GUEST_ID_BASE, the first
    of its map), and its descriptor @dir_fd_no (a directory it shares with
    the guest), as a compromised QEMU could act. Returns the child's exit
    code (action's value, or 99 on an error)."""
    uid = int(Path(f"/proc/{qemu}/uid_map").read_text().split()[0])
    gid = int(Path(f"/proc/{qemu}/gid_map").read_text().split()[0])
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(f"/proc/{qemu}/fd/{dir_fd_no}", os.O_PATH | os.O_DIRECTORY)
            ns = os.open(f"/proc/{qemu}/ns/user", os.O_RDONLY)
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(ns, 0x10000000) != 0:  # CLONE_NEWUSER
                os._exit(98)
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            os._exit(action(fd))
        except BaseException:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_qemu_cannot_give_a_workspace_file_away(caller, vm_env):
    """SECURITY: QEMU serves the guest's 9p requests on host folders; as
    host root, a compromised QEMU (or a guest it obeys: 9p chown) could
    chown a file of a mounted workspace to any host uid. As the sandbox's
    root, in a user namespace of that one id, through the workspace
    idmapped to it, its chown to uid 12345 fails and the host file stays
    the caller's. The twins: what it creates there, and what the guest
    creates, belong to the caller on the host."""
    ws = caller.make_dir(name="ws")
    caller.chown(ws)
    p, qemu = sleeping_vm(caller, vm_env, ["--workspace", f"{ws}:mount"], "echo x > f")
    try:
        args = Path(f"/proc/{qemu}/cmdline").read_bytes().decode().split("\0")
        # The workspace is the one share QEMU reaches through a descriptor.
        shares = [a for a in args if a.startswith("local,") and "path=/proc/self/fd/" in a]
        assert len(shares) == 1, args
        n = int(shares[0].split("path=/proc/self/fd/")[1].split(",")[0].split("/")[0])

        def chown(fd):
            try:
                os.chown("f", 12345, 12345, dir_fd=fd, follow_symlinks=False)
            except OSError:
                return 1
            return 0

        def create(fd):
            os.mkdir("made-by-qemu", dir_fd=fd)
            return 0

        assert as_qemu(qemu, n, chown) == 1
        assert as_qemu(qemu, n, create) == 0
    finally:
        p.kill()
        p.wait()
    for name in ("f", "made-by-qemu"):
        st = os.stat(ws / name)
        assert (st.st_uid, st.st_gid) == (caller.uid, caller.gid), name


def test_copied_workspace_reads_files_of_other_users(caller, vm_env):
    """QEMU reads what it only reads (a copied workspace) through the
    sandbox's whole id range, as the namespace backend maps it: another
    user's private file is copied into the VM as root hutch copied it when
    QEMU was host root."""
    ws = caller.make_dir(name="ws")
    (ws / "private").write_text("mine\n")
    os.chmod(ws / "private", 0o600)
    owner = 1000 if caller.uid == 0 else caller.uid
    os.chown(ws / "private", owner, owner)
    r, _ = vm_run(caller, vm_env, ["--workspace", f"{ws}:copy"], ["cat", "private"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "mine\n"


@pytest.mark.parametrize("mode", ["mount", "copy"])
def test_read_only_workspace_refuses_writes(caller, vm_env, mode):
    ws = caller.make_dir(name="ws")
    (ws / "f").write_text("orig\n")
    caller.chown(ws)
    r, _ = vm_run(
        caller,
        vm_env,
        ["--read-only", "--workspace", f"{ws}:{mode}"],
        ["sh", "-c", "cat f; (echo x > f) 2>&1; (echo y > $HOME/h) 2>&1; echo ok > /tmp/t && cat /tmp/t"],
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "orig"
    # The workspace and $HOME are read-only; /tmp stays writable.
    assert "Read-only file system" in lines[1] and "Read-only file system" in lines[2]
    assert lines[3] == "ok"
    assert (ws / "f").read_text() == "orig\n"


def test_network_none_has_no_route(caller, vm_env):
    r, _ = vm_run(
        caller,
        vm_env,
        [],
        [
            "sh",
            "-c",
            "tail -n +2 /proc/net/route | wc -l; "
            "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
            "curl -sS --max-time 5 http://10.0.2.2:9/ 2>&1; echo curl=$?",
        ],
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines[0] == "0"  # no route at all
    assert lines[1] == "lo" and "eth0" not in lines  # no NIC
    assert "curl=7" in r.stdout  # "couldn't connect": nowhere to send it


def test_allow_host_reaches_the_allowed_upstream_only(caller, vm_env, upstream):
    flags = [
        "--allow-host",
        f"{API}:{upstream.port}",
        "--resolve",
        f"{API}:127.0.0.1",
        "--allow-private",
        "127.0.0.0/8",
    ]
    script = (
        f"curl -sS -o /dev/null -w '%{{http_code}}\\n' http://{API}:{upstream.port}/vm-allowed; "
        f"curl -sS http://other.example.test:{upstream.port}/vm-denied; echo; "
        f"curl -sS --noproxy '*' --max-time 5 http://10.0.2.2:{upstream.port}/vm-direct 2>&1; "
        "echo direct=$?"
    )
    r, o = vm_run(caller, vm_env, flags, ["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "200"
    assert "not in the allowlist" in r.stdout
    paths = [q["path"] for q in upstream.requests]
    assert "/vm-allowed" in paths
    assert "/vm-denied" not in paths and "/vm-direct" not in paths
    # slirp's restrict=on: the host's address is not reachable directly.
    assert "direct=0" not in r.stdout
    assert [d["host"] for d in o["denied"]] == ["other.example.test"]


def test_timeout_kills_the_vm(caller, vm_env):
    start = time.monotonic()
    r, o = vm_run(caller, vm_env, ["--timeout", "2s"], ["sh", "-c", "sleep 100 & sleep 100"])
    assert time.monotonic() - start < 60
    assert r.returncode == 137, r.stderr
    assert o["reason"] == "timeout" and o["signal"] == 9
    assert not qemu_processes_with(vm_env["HUTCH_STATE_DIR"])


def test_signal_is_passed_to_the_command(caller, vm_env):
    out = caller.make_dir(name="out") / "outcome.json"
    p = caller.popen(
        [*TCG, "--json", str(out), "--", "sh", "-c", "echo ready; sleep 60"],
        env=vm_env,
        stdout=subprocess.PIPE,
    )
    try:
        assert p.stdout.readline() == "ready\n"
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=VM_TIMEOUT) == 128 + signal.SIGTERM
    finally:
        p.kill()
        p.wait()
    o = json.loads(out.read_text())
    assert o["reason"] == "killed" and o["signal"] == signal.SIGTERM


ALLOC = "l=[]\nfor i in range({n}):\n    l.append(bytearray(1 << 20))\nprint(len(l))\n"


def test_memory_limit_is_oom(caller, vm_env):
    r, o = vm_run(caller, vm_env, ["--memory", "64m"], ["python3", "-c", ALLOC.format(n=200)])
    assert r.returncode == 137, r.stderr
    assert o["reason"] == "oom"
    assert o["mem_peak_bytes"] <= 64 << 20


def test_memory_within_the_limit_twin(caller, vm_env):
    r, o = vm_run(caller, vm_env, ["--memory", "64m"], ["python3", "-c", ALLOC.format(n=16)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "16"
    assert o["reason"] == "exited"


def test_pids_limit(caller, vm_env):
    r, o = vm_run(
        caller, vm_env, ["--pids", "8"], ["sh", "-c", "for i in $(seq 20); do sleep 30 & done; wait"]
    )
    assert r.returncode != 0
    assert o["reason"] == "pids", r.stderr


def test_cpus_is_the_vcpu_count(caller, vm_env):
    r, o = vm_run(caller, vm_env, ["--cpus", "1.5"], ["nproc"])
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == min(2, os.cpu_count())
    assert o["degraded"] == []


def test_unprivileged_caller(user_runner, vm_env):
    """QEMU runs as the invoking user; files it writes are the user's."""
    ws = user_runner.make_dir(name="ws")
    # The user's own store and templates (the root-owned ones are refused).
    own = Path(vm_env["HUTCH_HOME"]).parent / "user"
    own.mkdir(mode=0o700)
    os.chown(own, user_runner.uid, user_runner.gid)
    env = {"HUTCH_HOME": str(own / "home"), "HUTCH_STATE_DIR": str(own / "state")}
    r, _ = vm_run(user_runner, env, ["--workspace", f"{ws}:mount"],
                  ["sh", "-c", "id -u > out; read a b c < /proc/self/uid_map; echo $b >> out"])
    assert r.returncode == 0, r.stderr
    # The root of a user namespace in the guest mapped onto the user's id
    # (test_vm_wall.py), as the namespace backend maps it.
    assert (ws / "out").read_text().split() == ["0", str(user_runner.uid)]
    assert (ws / "out").stat().st_uid == user_runner.uid


@pytest.fixture
def readable_secret():
    """A file any uid may read by its permissions (0644 in a 0755
    directory) outside everything a VM is made of: only a confinement of
    QEMU's keeps it from QEMU."""
    d = Path(tempfile.mkdtemp(prefix="hutch-qemu-secret-", dir="/var/tmp"))
    os.chmod(d, 0o755)
    secret = d / "secret"
    secret.write_text("the caller's key\n")
    os.chmod(secret, 0o644)
    yield secret
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("who", ["caller", "user_runner"])
def test_qemu_reaches_no_host_file_nor_process_beyond_the_vm(request, who, vm_env,
                                                            readable_secret):
    """SECURITY: QEMU (here a wrapper that runs as QEMU would, confined as
    it is, before it execs the real one: a compromised QEMU) cannot read a
    host file that is not part of the VM, though its uid may, nor the /proc
    entries of a process of its uid, nor debug or signal one (the caller's,
    another VM's QEMU); it can read the
    workspace (the twin: the probe does fail where it should, see the
    direct runs below)."""
    runner = request.getfixturevalue(who)
    ws = runner.make_dir(name="ws")
    (ws / "inside.txt").write_text("shared\n")
    runner.chown(ws / "inside.txt")
    probe = ws / "qemu-probe"
    probe.write_text(
        "#!/bin/sh\n"
        f"if cat ${{PROBE_SECRET:-{readable_secret}}} >/dev/null 2>&1; then\n"
        "        echo 'probe: the secret is readable' >&2; exit 1\nfi\n"
        # A process of its own uid (its child), which it could debug.
        "sleep 30 & child=$!\n"
        "if cat ${PROBE_PROC:-/proc/$child/environ} >/dev/null 2>&1; then\n"
        "        kill -9 $child; echo \"probe: another process's /proc is readable\" >&2; exit 4\n"
        "fi\n"
        "if kill -0 ${PROBE_PARENT:-$PPID} 2>/dev/null; then\n"
        "        kill -9 $child; echo 'probe: it can signal its parent' >&2; exit 5\nfi\n"
        "if python3 -c 'import ctypes, sys; "
        "sys.exit(ctypes.CDLL(None).ptrace(16, int(sys.argv[1]), 0, 0) != 0)' $child; then\n"
        "        kill -9 $child; echo 'probe: ptrace works' >&2; exit 3\nfi\n"
        "kill -9 $child\n"
        f"if ! cat {ws}/inside.txt >/dev/null 2>&1; then\n"
        "        echo 'probe: the workspace is not readable' >&2; exit 2\nfi\n"
        f"exec {shutil.which('qemu-system-x86_64')} \"$@\"\n")
    os.chmod(probe, 0o755)
    runner.chown(probe)
    # Unconfined, the probe reads the secret (readable by its permissions)
    # and debugs its child, and says so.
    # (Its parent a shell of its uid, which it may signal.)
    unconfined = ["setpriv", f"--reuid={runner.uid}", f"--regid={runner.gid}",
                  "--clear-groups", "sh", "-c", '"$0" -version; exit $?', str(probe)]
    direct = subprocess.run(unconfined, capture_output=True, text=True, timeout=60)
    assert direct.returncode == 1 and "the secret is readable" in direct.stderr, direct
    direct = subprocess.run(unconfined, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PROBE_SECRET": "/nonexistent"})
    assert direct.returncode == 4 and "/proc is readable" in direct.stderr, direct
    direct = subprocess.run(unconfined, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PROBE_SECRET": "/nonexistent",
                                 "PROBE_PROC": "/nonexistent"})
    assert direct.returncode == 5 and "signal its parent" in direct.stderr, direct
    direct = subprocess.run(unconfined, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PROBE_SECRET": "/nonexistent",
                                 "PROBE_PROC": "/nonexistent", "PROBE_PARENT": "999999999"})
    assert direct.returncode == 3 and "ptrace works" in direct.stderr, direct
    env = dict(vm_env)
    if who == "user_runner":
        own = Path(vm_env["HUTCH_HOME"]).parent / "user-probe"
        own.mkdir(mode=0o700, exist_ok=True)
        os.chown(own, runner.uid, runner.gid)
        env = {"HUTCH_HOME": str(own / "home"), "HUTCH_STATE_DIR": str(own / "state")}
    r, _ = vm_run(runner, env, ["--workspace", f"{ws}:mount"], ["cat", "inside.txt"],
                  env={"HUTCH_QEMU": str(probe)})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "shared\n"


def test_doctor_reports_the_microvm_parts(caller):
    r = caller.run_raw(["doctor", "--json"])
    assert r.returncode == 0, r.stderr
    vm = json.loads(r.stdout)["microvm"]
    assert vm["status"] == "ok"
    assert "qemu-system-x86_64" in vm["detail"] and "vmlinuz-" in vm["detail"]
    assert "hutch-agent" in vm["detail"]
    # Its twin: without QEMU, "missing" with the package to install.
    r = caller.run_raw(["doctor", "--json"], env={"PATH": "/nonexistent"})
    vm = json.loads(r.stdout)["microvm"]
    assert vm["status"] == "missing"
    assert "apt-get install qemu-system-x86" in vm["detail"]


# ---- bad input: exit 125 with one line saying why, nothing left running ----


def test_missing_qemu_names_the_package(caller, vm_env):
    r, _ = vm_run(caller, vm_env, [], ["true"], env={"PATH": "/nonexistent"})
    assert r.returncode == 125
    assert "apt-get install qemu-system-x86" in r.stderr


def test_missing_kernel_names_the_package(caller, vm_env):
    empty = caller.make_dir(name="boot")
    r, _ = vm_run(caller, vm_env, [], ["true"], env={"HUTCH_VM_BOOT_DIR": str(empty)})
    assert r.returncode == 125
    assert "apt-get install linux-image-amd64" in r.stderr


def test_kernel_that_is_not_one(caller, vm_env):
    r, _ = vm_run(caller, vm_env, ["--vm-kernel", "/usr/bin/true"], ["true"])
    assert r.returncode == 125
    assert "PVH ELF Note" in r.stderr  # QEMU's own words, from its log


def test_guest_not_up_in_time_leaves_nothing_running(caller, vm_env):
    env = {"HUTCH_VM_COLD": "1", "HUTCH_VM_BOOT_TIMEOUT_MS": "300"}
    r, _ = vm_run(caller, vm_env, [], ["true"], env=env)
    assert r.returncode == 125
    assert "did not come up within 300 ms" in r.stderr
    assert not qemu_processes_with(vm_env["HUTCH_STATE_DIR"])
    assert not list(Path(vm_env["HUTCH_STATE_DIR"]).glob("vm-run-*"))


def test_kvm_is_never_a_silent_fallback(caller, vm_env):
    r = caller.run(["--backend", "vm", "--", "true"], env=vm_env, timeout=VM_TIMEOUT)
    if os.path.exists("/sys/module/kvm_pvm"):
        assert r.returncode == 125
        assert "kvm_pvm" in r.stderr and "--vm-accel tcg" in r.stderr
    elif not os.access("/dev/kvm", os.R_OK | os.W_OK):
        assert r.returncode == 125
        assert "/dev/kvm" in r.stderr
    else:
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--backend", "lxc"], "unsupported backend 'lxc'"),
        (["--backend", "vm", "--vm-accel", "hvf"], "unsupported VM accelerator 'hvf'"),
        (["--backend", "vm", "--vm-kernel", "/nonexistent/vmlinuz"], "/nonexistent/vmlinuz"),
    ],
)
def test_bad_flags(caller, flags, message):
    r = caller.run([*flags, "--", "true"])
    assert r.returncode == 125
    assert message in r.stderr


def test_secret_is_brokered_and_never_enters_the_guest(caller, vm_env):
    """The same hutch-proxy as the namespace backend: the guest holds a
    placeholder, trusts the proxy's CA, and the upstream gets the real
    value; the value itself appears nowhere the guest can read."""
    from test_secrets import API as SECRET_API
    from test_secrets import PLACEHOLDER_RE, REAL, TlsUpstream, ca_file

    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    up = TlsUpstream(ca)
    try:
        flags = [
            "--secret",
            f"TOKEN@{SECRET_API}:{up.port}",
            "--resolve",
            f"{SECRET_API}:127.0.0.1",
            "--allow-private",
            "127.0.0.0/8",
            "--upstream-ca",
            str(ca_file(caller, ca)),
        ]
        script = (
            'echo "$TOKEN"; '
            f'curl -fsS -H "Authorization: Bearer $TOKEN" https://{SECRET_API}:{up.port}/vm-secret '
            ">/dev/null && echo fetched; "
            f"grep -rl {REAL} /run /etc/ssl /proc/self/environ 2>/dev/null | wc -l"
        )
        r, o = vm_run(caller, vm_env, flags, ["sh", "-c", script], env={"TOKEN": REAL})
    finally:
        up.close()
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert PLACEHOLDER_RE.match(lines[0]) and lines[0] != REAL
    assert lines[1] == "fetched", r.stderr
    assert lines[2] == "0"
    assert REAL not in r.stdout + r.stderr
    sent = [q for q in up.requests if q["path"] == "/vm-secret"]
    assert sent and ["Authorization", f"Bearer {REAL}"] in sent[0]["headers"]


def test_create_keeps_the_backend(caller, vm_env):
    """`hutch create --backend vm` stores the backend and the accelerator
    (test_vm_persist.py runs such sandboxes)."""
    r = caller.run(["vm-box", *TCG], verb="create", env=vm_env)
    assert r.returncode == 0, r.stderr
    try:
        r = caller.run(["--json"], verb="ls", env=vm_env)
        assert r.returncode == 0, r.stderr
        assert [(e["name"], e["backend"]) for e in json.loads(r.stdout)] == [("vm-box", "vm")]
        record = json.loads(
            (Path(vm_env["HUTCH_HOME"]) / "sandboxes" / "vm-box" / "sandbox.json").read_text())
        policy = record["policy"]
        assert policy["backend"] == "vm" and policy["vm_accel"] == "tcg", policy
    finally:
        caller.run(["--force", "vm-box"], verb="rm", env=vm_env)
