# SPDX-License-Identifier: LGPL-2.1-or-later
"""Persistent microVM sandboxes (`hutch create --backend vm`, docs/vm.md
"Persistent VM sandboxes"), under QEMU with TCG, driven through the real
binary as the caller (root here, as in test_vm.py).

The sandboxes of this module share one store and state directory on tmpfs
(the VM templates live there: one template of the shape all the tests use
is built once, a cold boot); each test removes its own sandboxes and checks
that nothing of them is left."""

import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from subprocess import DEVNULL, PIPE

import pytest

import cgroupctl
from cgroupctl import poll_until
from test_capi import workspace
from test_persistent import Store
from test_secrets import API as SECRET_API
from test_secrets import PLACEHOLDER_RE, REAL, TlsUpstream, ca_file, trustme
from test_vm import API, upstream  # noqa: F401 (a fixture)

TCG = ["--backend", "vm", "--vm-accel", "tcg"]
VM_TIMEOUT = 240


@pytest.fixture(scope="module")
def vm_store_dir():
    root = Path(tempfile.mkdtemp(prefix="hutch-vmp-test-", dir="/dev/shm"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


class VmStore(Store):
    """test_persistent's Store with the module's store on tmpfs, and the
    VM's leftovers checked at the end: its QEMU, its host cgroup, its
    mounts and its sockets."""

    def __init__(self, runner, top):
        super().__init__(runner)
        top = top / runner.mode
        top.mkdir(mode=0o755, exist_ok=True)
        self.home = top / "home"
        self.state = top / "state"
        for d in (self.home, self.state):
            d.mkdir(mode=0o700, exist_ok=True)
            runner.chown(d)

    def hutch(self, *args, env=None, **kw):
        kw.setdefault("timeout", VM_TIMEOUT)
        return super().hutch(*args, env=env, **kw)

    def create_vm(self, name, ws, *flags):
        return self.create(name, *TCG, "--workspace", ws, *flags)

    def finalize(self):
        keepers = set(self.keepers)
        super().finalize()
        for pid in keepers:
            assert not vm_cgroups(pid), f"cgroups of keeper {pid} left: {vm_cgroups(pid)}"


@pytest.fixture
def store(caller, vm_store_dir):
    s = VmStore(caller, vm_store_dir)
    yield s
    s.finalize()


@pytest.fixture(params=["caller", "user_runner"])
def any_store(request, vm_store_dir):
    """The caller's store, and the unprivileged user's (its one-id map)."""
    s = VmStore(request.getfixturevalue(request.param), vm_store_dir)
    yield s
    s.finalize()


def vm_cgroups(keeper_pid):
    """The host cgroups of the VM of keeper @keeper_pid ("vm-<pid>-<hex>")."""
    return [d for d in cgroupctl.cgroup_dirs() if d.name.startswith(f"vm-{keeper_pid}-")]


def children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            st = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(st.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry))
    return out


def children_running(pid, match):
    """The children of @pid whose executable's path satisfies @match."""
    out = []
    for child in children(pid):
        try:
            exe = os.readlink(f"/proc/{child}/exe")
        except OSError:
            continue
        if match(exe):
            out.append(child)
    return out


def qemu_of(keeper_pid):
    """The QEMU processes the keeper started."""
    return children_running(keeper_pid, lambda exe: "qemu-system" in exe)


def proxy_of(keeper_pid):
    """The hutch-proxy processes the keeper started."""
    return children_running(keeper_pid, lambda exe: os.path.basename(exe) == "hutch-proxy")


def uid_of(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def started_vm(store, name, script):
    """A vm sandbox with a workspace, running after @script: its keeper
    and its one QEMU."""
    store.create_vm(name, workspace(store))
    store.sh(name, script)
    keeper = store.keeper_pid(name)
    qemu = qemu_of(keeper)
    assert len(qemu) == 1, qemu
    return keeper, qemu


def keeper_request(sock_path, msg, fds=()):
    """One request on the keeper's control socket; its first answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(str(sock_path))
        socket.send_fds(s, [json.dumps(msg).encode()], list(fds))
        return json.loads(s.recv(65536))


def test_persistence_across_execs_and_stop(any_store):
    store = any_store
    ws = workspace(store)
    store.create_vm("box", ws)
    assert store.ls()["box"]["backend"] == "vm"
    out = store.sh("box", "id -u; echo one > /root/f; echo two > /workspace/new.txt; "
                   "cat /workspace/a.txt")
    assert out == "0\nhello\n", out
    assert store.sh("box", "cat /root/f /workspace/new.txt") == "one\ntwo\n"
    assert store.state_of("box") == "running"
    r = store.hutch("stop", "box")
    assert r.returncode == 0, r.stderr
    assert store.state_of("box") == "stopped"
    # The keeper starts the VM again; the files are the sandbox's layer.
    assert store.sh("box", "cat /root/f /workspace/new.txt") == "one\ntwo\n"
    # The host folder is the overlay's lower layer: untouched until apply.
    assert sorted(os.listdir(ws)) == ["a.txt"]
    r = store.hutch("diff", "box", "--json")
    assert r.returncode == 0, r.stderr
    assert "new.txt" in r.stdout and "a.txt" not in r.stdout, r.stdout
    # The layer's file belongs to the sandbox's root on the host, as the
    # namespace backend's do.
    mine = next(store.sandbox_dir("box").glob("data/upper-*/ws/new.txt"))
    assert mine.stat().st_uid == int(store.runner.expected_uid_map().split()[1])
    r = store.hutch("apply", "box")
    assert r.returncode == 0, r.stderr
    assert (ws / "new.txt").read_text() == "two\n"


def test_snapshot_serves_both_backends(store):
    ws = workspace(store)
    store.create_vm("src", ws)
    store.sh("src", "mkdir -p /root/d && echo kept > /root/d/f && echo w > /workspace/w.txt")
    assert store.hutch("stop", "src").returncode == 0
    r = store.hutch("snapshot", "src", "snap")
    assert r.returncode == 0, r.stderr
    # A VM from the snapshot (its policy) sees the files...
    store.create("fromvm", "--from", "snap")
    assert store.ls()["fromvm"]["backend"] == "vm"
    vm_view = store.sh("fromvm", "cat /root/d/f /workspace/w.txt; stat -c %u:%g:%a /root/d/f")
    # ...and so does a namespace-backend sandbox from the same snapshot
    # (policy flags given: they are the whole policy, backend ns), with the
    # same owner: what the VM wrote is owned as the namespace backend's.
    store.create("fromns", "--from", "snap", "--workspace", ws)
    assert store.ls()["fromns"]["backend"] == "ns"
    ns_view = store.sh("fromns", "cat /root/d/f /workspace/w.txt; stat -c %u:%g:%a /root/d/f")
    assert vm_view == ns_view == "kept\nw\n0:0:644\n", (vm_view, ns_view)
    # On the host, the snapshot's layer and what the namespace sandbox
    # writes next to it belong to the same host ids.
    layer = next((store.home / "snapshots" / "snap").glob("**/root/d/f"))
    store.sh("fromns", "echo ns > /root/g")
    own = next((store.home / "sandboxes" / "fromns").glob("data/upper-*/root/root/g"))
    assert (layer.stat().st_uid, layer.stat().st_gid) == (own.stat().st_uid, own.stat().st_gid)


def test_execs_at_the_same_time_wait_their_turn(store):
    store.create_vm("box", workspace(store))
    store.sh("box", "true")
    procs = [store.popen("exec", "box", "--", "sh", "-c", f"sleep 1; echo {i}; exit {i + 3}",
                         stdout=PIPE, stderr=PIPE)
             for i in range(2)]
    results = [p.communicate(timeout=VM_TIMEOUT) for p in procs]
    assert [p.returncode for p in procs] == [3, 4], results
    assert [out for out, _ in results] == ["0\n", "1\n"], results
    hist = store.history("box")
    assert sorted(h["outcome"]["exit_code"] for h in hist[-2:]) == [3, 4], hist


def test_timeout_kills_the_command_not_the_vm(store):
    keeper, qemu = started_vm(store, "box", "echo before > /root/f")
    r, o = store.exec_json("box", "sleep", "60", flags=["--timeout", "2s"])
    assert r.returncode == 137, r.stderr
    assert o["reason"] == "timeout" and o["signal"] == 9, o
    # The same VM goes on.
    assert store.sh("box", "cat /root/f") == "before\n"
    assert qemu_of(keeper) == qemu


def test_timeout_is_enforced_when_the_guest_does_not_answer(store):
    """SECURITY: the timeout is a kill frame to the agent; a guest that
    does not answer it (here: frozen through the keeper's own freeze, as
    `hutch snapshot` of a running sandbox does) must not keep the command
    past its timeout: after a grace period the keeper stops the VM. The
    twin is test_timeout_kills_the_command_not_the_vm (an answering guest:
    the VM stays)."""
    keeper, qemu = started_vm(store, "box", "echo before > /root/f")
    out = store.dir / "outcome-frozen.json"
    p = store.popen("exec", "box", "--timeout", "2s", "--json", out, "--", "sleep", "60",
                    stdout=DEVNULL, stderr=PIPE)
    time.sleep(1)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(str(store.state / "box" / "keeper.sock"))
        sock.send(json.dumps({"op": "freeze"}).encode())
        assert json.loads(sock.recv(65536))["op"] == "ok"
        start = time.monotonic()
        p.wait(timeout=60)
        took = time.monotonic() - start
    finally:
        sock.close()
    assert p.returncode == 137, p.stderr.read()
    o = json.loads(out.read_text())
    assert o["reason"] == "timeout", o
    assert took < 30, took
    assert poll_until(lambda: all(not Path(f"/proc/{q}").exists() for q in qemu), 10)
    # The files stayed; the next exec starts the sandbox again.
    assert store.sh("box", "cat /root/f") == "before\n"


def test_a_command_that_cannot_start_says_why(store):
    """127 or 126 with the reason on the client's stderr, as in the
    namespace backend; the same VM then runs the next command."""
    keeper, qemu = started_vm(store, "box", "true")
    r = store.exec("box", "no-such-command-hutch")
    assert r.returncode == 127, r.stderr
    assert r.stderr.startswith("hutch: ") and "no-such-command-hutch" in r.stderr, r.stderr
    assert store.sh("box", "echo again") == "again\n"
    assert qemu_of(keeper) == qemu


def test_refusals(store):
    ws = workspace(store)
    store.create_vm("box", ws)
    r = store.exec("box", "sleep", "1", flags=["-d"])
    assert r.returncode == 125
    assert "detached execs are not supported on --backend vm yet" in r.stderr, r.stderr
    # File operations (C API, hutch serve): refused by the keeper.
    sock = store.state / "box" / "keeper.sock"
    with open(os.devnull, "rb") as null:
        ans = keeper_request(sock, {"op": "file", "action": "stat", "path": "/root",
                                    "mode": 0, "max": 0}, [null.fileno()])
    assert ans["op"] == "error" and "not supported on --backend vm" in ans["message"], ans
    # The sandbox still works.
    assert store.sh("box", "echo ok") == "ok\n"


def test_rm_force_of_a_running_vm_leaves_nothing(store):
    keeper, qemu = started_vm(store, "box", "echo x > /root/f")
    # QEMU runs as the sandbox's root (the namespace backend's id mapping).
    expected = store.runner.expected_uid_map().split()[1]
    assert uid_of(qemu[0]) == int(expected)
    assert vm_cgroups(keeper)
    data = store.sandbox_dir("box") / "data"
    p = store.popen("exec", "box", "--", "sleep", "60", stdout=DEVNULL, stderr=DEVNULL)
    time.sleep(1)
    r = store.hutch("rm", "--force", "box")
    assert r.returncode == 0, r.stderr
    p.wait(timeout=VM_TIMEOUT)
    assert p.returncode != 0
    assert poll_until(lambda: not Path(f"/proc/{keeper}").exists(), 10)
    assert all(not Path(f"/proc/{q}").exists() for q in qemu)
    assert not vm_cgroups(keeper)
    for mi in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            text = mi.read_text()
        except OSError:
            continue
        assert str(data) not in text and str(store.state / "box") not in text, mi
    assert not (store.state / "box" / "keeper.sock").exists()
    assert list((store.state).glob("vm-run-*")) == []
    assert "box" not in store.ls()


def test_qemu_dies_with_a_killed_keeper(store):
    """SECURITY: QEMU becomes the sandbox's root (a new host uid as root
    hutch), which clears its death signal unless it is set again; a QEMU
    outliving its keeper would keep the layers mounted and the command
    running, and the next keeper would mount the same upper layer twice.
    The twin: after the kill, the sandbox starts again and kept its file."""
    keeper, qemu = started_vm(store, "box", "echo kept > /root/f")
    os.kill(keeper, 9)
    assert poll_until(lambda: not Path(f"/proc/{keeper}").exists(), 10)
    assert poll_until(lambda: all(not Path(f"/proc/{q}").exists() for q in qemu), 10), (
        f"QEMU {qemu} outlived its keeper {keeper}"
    )
    left = list(store.state.glob(f"vm-run-{keeper}-*"))
    assert len(left) == 1, left  # the killed keeper's run directory
    assert store.sh("box", "cat /root/f") == "kept\n"
    # The next start sweeps what the killed keeper left: its run
    # directory and its host cgroups.
    assert not left[0].exists()
    assert store.hutch("rm", "--force", "box").returncode == 0
    assert poll_until(lambda: not vm_cgroups(keeper), 10)


def test_qemu_cannot_write_the_image_cache(store):
    """SECURITY: every later VM boots the cached kernel and initramfs; the
    cache QEMU reaches (as root hutch: an idmapped mount it owns) is
    mounted read-only. The twin: its run directory (console log) is
    writable."""
    keeper, qemu = started_vm(store, "box", "true")
    argv = Path(f"/proc/{qemu[0]}/cmdline").read_bytes().split(b"\0")
    kernel = argv[argv.index(b"-kernel") + 1].decode()
    assert kernel.startswith("/proc/self/fd/"), kernel
    cache_fd = kernel.split("/")[4]
    con = next(a.decode() for a in argv if b"console.log" in a)
    run_fd = con.split("/proc/self/fd/", 1)[1].split("/")[0]
    assert os.statvfs(f"/proc/{qemu[0]}/fd/{cache_fd}").f_flag & os.ST_RDONLY
    assert not os.statvfs(f"/proc/{qemu[0]}/fd/{run_fd}").f_flag & os.ST_RDONLY
    assert store.hutch("rm", "--force", "box").returncode == 0


def test_many_binds_fit_in_one_message(store):
    """The helper that builds a VM sandbox's tree gets every tree in one
    message and answers with every share (here 6 persistent directories,
    the workspace and 12 binds: more than the 16 descriptors a message
    carried once, when such a sandbox could not start)."""
    binds = []
    for i in range(12):
        d = store.runner.make_dir(mode=0o755, name=f"bind{i}")
        (d / "f").write_text(f"b{i}\n")
        store.runner.chown(d / "f")
        binds += ["-v", f"{d}:/mnt/b{i}:ro"]
    store.create_vm("box", workspace(store), *binds)
    out = store.sh("box", "cat /mnt/b*/f | sort -V | tr '\\n' ' '")
    assert out == " ".join(f"b{i}" for i in range(12)) + " ", out
    assert store.hutch("rm", "--force", "box").returncode == 0


def test_network_allow_across_execs_and_a_restart(any_store, upstream):
    """--allow-host in a persistent VM: QEMU and its guestfwd helper run as
    the sandbox's root and reach the proxy's socket through QEMU's own
    mount namespace; the proxy comes back with the VM after stop."""
    store = any_store
    port = upstream.port
    store.create_vm("net", workspace(store), "--allow-host", f"{API}:{port}", "--resolve",
                    f"{API}:127.0.0.1", "--allow-private", "127.0.0.0/8")
    def script(i):
        return (f"curl -sS -o /dev/null -w '%{{http_code}}\\n' http://{API}:{port}/p-allowed-{i}; "
                f"curl -sS http://other.example.test:{port}/p-denied-{i}; echo")

    for i in range(2):
        out = store.sh("net", script(i))
        assert out.splitlines()[0] == "200", out
        assert "not in the allowlist" in out, out
    keeper = store.keeper_pid("net")
    assert len(proxy_of(keeper)) == 1
    # The socket: in the run directory, the sandbox's root's alone.
    socks = list(store.state.glob("vm-run-*/proxy.sock"))
    assert len(socks) == 1, socks
    st = socks[0].stat()
    assert (st.st_mode & 0o777, st.st_uid) == (
        0o600, int(store.runner.expected_uid_map().split()[1]))
    r = store.hutch("stop", "net")
    assert r.returncode == 0, r.stderr
    assert poll_until(lambda: not Path(f"/proc/{keeper}").exists(), 10)
    out = store.sh("net", script(2))
    assert out.splitlines()[0] == "200" and "not in the allowlist" in out, out
    paths = [q["path"] for q in upstream.requests]
    assert all(f"/p-allowed-{i}" in paths for i in range(3)), paths
    assert not any(p.startswith("/p-denied-") for p in paths), paths
    keeper = store.keeper_pid("net")
    qemu, proxy = qemu_of(keeper), proxy_of(keeper)
    assert len(qemu) == 1 and len(proxy) == 1, (qemu, proxy)
    # This keeper's run directory: the one with the proxy's socket (a
    # killed keeper of another test may have left one of its own).
    run_dirs = [p.parent for p in store.state.glob("vm-run-*/proxy.sock")]
    assert len(run_dirs) == 1, run_dirs
    r = store.hutch("rm", "--force", "net")
    assert r.returncode == 0, r.stderr
    assert poll_until(lambda: not Path(f"/proc/{keeper}").exists(), 10)
    assert all(not Path(f"/proc/{p}").exists() for p in qemu + proxy)
    assert not run_dirs[0].exists()


def test_secret_is_brokered_and_never_enters_the_guest(any_store):
    """--secret in a persistent VM: the guest holds the placeholder and
    trusts the proxy's CA (shared through the run directory's descriptor);
    the upstream gets the real value."""
    store = any_store
    ca = trustme.CA()
    up = TlsUpstream(ca)
    try:
        store.create_vm("sec", workspace(store), "--secret", f"TOKEN@{SECRET_API}:{up.port}",
                        "--resolve", f"{SECRET_API}:127.0.0.1", "--allow-private", "127.0.0.0/8",
                        "--upstream-ca", ca_file(store.runner, ca))
        script = ('echo "$TOKEN"; '
                  f'curl -fsS -H "Authorization: Bearer $TOKEN" '
                  f"https://{SECRET_API}:{up.port}/vm-persist-secret >/dev/null && echo fetched; "
                  f"grep -rl {REAL} /run /etc/ssl /proc/self/environ 2>/dev/null | wc -l")
        r = store.exec("sec", "sh", "-c", script, env={"TOKEN": REAL})
    finally:
        up.close()
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert PLACEHOLDER_RE.match(lines[0]) and lines[0] != REAL, r.stdout
    assert lines[1:] == ["fetched", "0"], (r.stdout, r.stderr)
    assert REAL not in r.stdout + r.stderr
    sent = [q for q in up.requests if q["path"] == "/vm-persist-secret"]
    assert sent and ["Authorization", f"Bearer {REAL}"] in sent[0]["headers"]
