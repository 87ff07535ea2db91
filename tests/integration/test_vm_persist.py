# SPDX-License-Identifier: LGPL-2.1-or-later
"""Persistent microVM sandboxes (`hutch create --backend vm`, docs/vm.md
"Persistent VM sandboxes"), under QEMU with TCG, driven through the real
binary as the caller (root here, as in test_vm.py).

The sandboxes of this module share one store and state directory on tmpfs
(the VM templates live there: one template of the shape all the tests use
is built once, a cold boot); each test removes its own sandboxes and checks
that nothing of them is left."""

import errno
import fcntl
import hashlib
import json
import os
import shutil
import socket
import tempfile
import termios
import threading
import time
from pathlib import Path
from subprocess import DEVNULL, PIPE

import pytest

import cgroupctl
from cgroupctl import poll_until
from diskutil import data_of
from test_capi import Api as CapiApi
from test_capi import (check_file_errors, check_file_round_trip,
                       check_paths_never_reach_the_host, host_secret, installed,  # noqa: F401
                       workspace)
from test_persistent import Store
from test_serve import Api as ServeApi
from test_serve import Server
from test_secrets import API as SECRET_API
from test_secrets import PLACEHOLDER_RE, REAL, TlsUpstream, ca_file, trustme
from test_vm import API

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


def root_uid(store, name):
    """The host uid of sandbox @name's root: as root, the first id of its
    range of the id pool (its record's id_base), else the runner's."""
    rec = json.loads((store.sandbox_dir(name) / "sandbox.json").read_text())
    return rec.get("id_base") or int(store.runner.expected_uid_map().split()[1])


def started_vm(store, name, script, ws=None):
    """A vm sandbox with a workspace (@ws, else a new one), running after
    @script: its keeper and its one QEMU."""
    store.create_vm(name, ws or workspace(store))
    store.sh(name, script)
    keeper = store.keeper_pid(name)
    qemu = qemu_of(keeper)
    assert len(qemu) == 1, qemu
    return keeper, qemu


def keeper_request(sock_path, msg, fds=()):
    """One request on the keeper's control socket; its first answer,
    within 30 s."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(30)
        s.connect(str(sock_path))
        socket.send_fds(s, [json.dumps(msg).encode()], list(fds))
        return json.loads(s.recv(65536))


def meet(me, other):
    """Shell: says @me is here (/tmp/meet-@me in the guest), then waits for
    @other; exits 9 if @other has not come after 400 rounds (20 s at the
    very least). Two commands that meet run at the same time: a keeper
    that runs one at a time makes the first exit 9."""
    return (f"touch /tmp/meet-{me}; n=0; while [ ! -e /tmp/meet-{other} ]; do n=$((n+1)); "
            f"[ $n -gt 400 ] && exit 9; sleep 0.05; done")


def execs_at_once(store, name, scripts, text=True):
    """`exec NAME -- sh -c SCRIPT` for each of @scripts, all started before
    any is waited for: [(exit status, stdout, stderr)], in order."""
    procs = [store.popen("exec", name, "--", "sh", "-c", script, stdout=PIPE, stderr=PIPE,
                         text=text)
             for script in scripts]
    try:
        results = [p.communicate(timeout=VM_TIMEOUT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, results)]


def history_entry(store, name, eid):
    """The history entry of exec @eid of @name, once it is there."""
    def entry():
        return next((h for h in store.history(name) if h["id"] == eid), None)

    return poll_until(entry, 60)


def assert_vm_gone(store, name, keeper, qemu):
    """Nothing of @name's VM of keeper @keeper is left: the keeper, its
    QEMU @qemu, its host cgroups, its mounts, its socket, its run
    directory."""
    assert poll_until(lambda: not Path(f"/proc/{keeper}").exists(), 10), keeper
    assert all(not Path(f"/proc/{q}").exists() for q in qemu), qemu
    assert not vm_cgroups(keeper), vm_cgroups(keeper)
    data = store.sandbox_dir(name) / "data"
    for mi in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            text = mi.read_text()
        except OSError:
            continue
        assert str(data) not in text and str(store.state / name) not in text, mi
    assert not (store.state / name / "keeper.sock").exists()
    assert list(store.state.glob(f"vm-run-{keeper}-*")) == []


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
    with data_of(store.home, store.state, "box") as data:
        mine = next(data.glob("upper-*/ws/new.txt"))
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
    with data_of(store.home, store.state, "fromns") as data:
        own = next(data.glob("upper-*/root/root/g")).stat()
    assert (layer.stat().st_uid, layer.stat().st_gid) == (own.st_uid, own.st_gid)


def test_execs_at_the_same_time_run_at_the_same_time(store):
    """Each waits for the other inside the guest: they only both end
    well if they run at once (a keeper that runs one at a time makes the
    first exit 9). Exit codes and outputs, each its own."""
    store.create_vm("box", workspace(store))
    store.sh("box", "true")
    results = execs_at_once(store, "box", [f"{meet(i, 1 - i)}; sleep 1; echo {i}; exit {i + 3}"
                                           for i in range(2)])
    assert [(rc, out) for rc, out, _ in results] == [(3, "0\n"), (4, "1\n")], results
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
    """What a VM sandbox still refuses: a -v of a single file (9p shares
    directories), at its start, exit 125 with the reason; nothing runs."""
    f = store.runner.make_dir(mode=0o755, name="onefile") / "f"
    f.write_text("x\n")
    store.runner.chown(f)
    store.create_vm("box", workspace(store), "-v", f"{f}:/mnt/f:ro")
    r = store.exec("box", "true")
    assert r.returncode == 125, r.stderr
    assert "--backend vm can bind directories only (-v of a file)" in r.stderr, r.stderr
    assert poll_until(lambda: not store.keeper_pids("box"), 10), store.keeper_pids("box")
    assert store.state_of("box") == "stopped"


def test_rm_force_of_a_running_vm_leaves_nothing(store):
    keeper, qemu = started_vm(store, "box", "echo x > /root/f")
    # QEMU runs as the sandbox's root (the namespace backend's id mapping).
    assert uid_of(qemu[0]) == root_uid(store, "box")
    assert vm_cgroups(keeper)
    data = store.sandbox_dir("box") / "data"
    p = store.popen("exec", "box", "--", "sleep", "60", stdout=DEVNULL, stderr=DEVNULL)
    time.sleep(1)
    r = store.hutch("rm", "--force", "box")
    assert r.returncode == 0, r.stderr
    p.wait(timeout=VM_TIMEOUT)
    assert p.returncode != 0
    assert_vm_gone(store, "box", keeper, qemu)
    assert not data.exists()
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
    assert (st.st_mode & 0o777, st.st_uid) == (0o600, root_uid(store, "net"))
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


# ---- several commands at once in one VM (agent protocol 1.1) ----


def test_detached_exec_runs_beside_others(any_store):
    """`exec -d` returns at once with the exec's id; the detached command
    and a foreground one meet inside the guest (so they run at the same
    time); its output is the exec's log, its outcome in the history."""
    store = any_store
    keeper, qemu = started_vm(store, "box", "true")
    script = f"echo out; echo err >&2; {meet('detached', 'fg')}; sleep 2; echo done"
    r = store.hutch("exec", "box", "-d", "--", "sh", "-c", script, timeout=60)
    assert r.returncode == 0, r.stderr
    eid = r.stdout.strip()
    assert eid.isdigit(), r.stdout
    r = store.exec("box", "sh", "-c", f"{meet('fg', 'detached')}; echo x", timeout=60)
    assert (r.returncode, r.stdout) == (0, "x\n"), r.stderr

    def log():
        r = store.hutch("logs", "box", "--exec", eid, timeout=60)
        return r.returncode == 0 and "done\n" in r.stdout and r

    r = poll_until(log, 60)
    # stdout to stdout, stderr to stderr (docs/processes.md).
    assert r and (r.stdout, r.stderr) == ("out\ndone\n", "err\n"), r
    h = history_entry(store, "box", int(eid))
    assert h and h["detached"] is True, h
    assert (h["outcome"]["reason"], h["outcome"]["exit_code"]) == ("exited", 0), h
    assert [x["detached"] for x in store.history("box") if x["id"] != int(eid)] == [False] * 2
    assert "(detached)" in store.hutch("logs", "box").stdout
    assert qemu_of(keeper) == qemu


def test_detached_server_is_reachable_from_the_next_exec(store):
    """A server that `exec -d` started in the guest (on the guest's
    loopback) answers the clients of the execs after it, one by one."""
    keeper, qemu = started_vm(store, "box", "true")
    server = (
        "import os, socket\n"
        "s = socket.socket()\n"
        "s.bind(('127.0.0.1', 0))\n"
        "s.listen()\n"
        "open('/tmp/port.new', 'w').write(str(s.getsockname()[1]))\n"
        "os.rename('/tmp/port.new', '/tmp/port')\n"
        "for _ in range(2):\n"
        "    c, peer = s.accept()\n"
        "    c.sendall(b'pong:' + c.recv(64) + b':' + peer[0].encode())\n"
        "    c.close()\n"
    )
    client = (
        "import socket, sys, time\n"
        "for _ in range(600):\n"
        "    try:\n"
        "        port = int(open('/tmp/port').read())\n"
        "        break\n"
        "    except OSError:\n"
        "        time.sleep(0.05)\n"
        "c = socket.create_connection(('127.0.0.1', port), timeout=30)\n"
        "c.sendall(sys.argv[1].encode())\n"
        "c.shutdown(socket.SHUT_WR)\n"
        "print(c.recv(64).decode())\n"
    )
    r = store.hutch("exec", "box", "-d", "--", "python3", "-c", server, timeout=60)
    assert r.returncode == 0, r.stderr
    eid = int(r.stdout.strip())
    for i in range(2):
        r = store.exec("box", "python3", "-c", client, f"ping{i}", timeout=60)
        assert (r.returncode, r.stdout) == (0, f"pong:ping{i}:127.0.0.1\n"), r.stderr
    h = history_entry(store, "box", eid)
    assert h and h["detached"] is True and h["outcome"]["exit_code"] == 0, h
    assert qemu_of(keeper) == qemu


def pipe_fill(fd):
    """(bytes waiting in pipe @fd, its capacity)."""
    waiting = int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4), "little")
    return waiting, fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)


def rss_bytes(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS line for {pid}")


def test_a_client_that_does_not_read_its_output_stalls_nothing(store):
    """`yes` into a pipe that nobody reads: its output stops at the pipe
    (credit per channel: nothing piles up in the keeper), and the other
    execs, their output and a timeout go on meanwhile; the same VM goes
    on after its client is killed."""
    keeper, qemu = started_vm(store, "box", "echo before > /tmp/mark")
    p = store.popen("exec", "box", "--", "yes", stdout=PIPE, stderr=DEVNULL)
    try:
        fd = p.stdout.fileno()
        # Full, but for less than a page that one more write would need.
        assert poll_until(lambda: pipe_fill(fd)[0] >= pipe_fill(fd)[1] - 4096, 60), pipe_fill(fd)
        ans = keeper_request(store.state / "box" / "keeper.sock", {"op": "ping"})
        assert (ans["op"], ans["running"], ans["pid"]) == ("ok", 1, keeper), ans
        for i in range(3):
            r = store.exec("box", "echo", f"x{i}", timeout=60)
            assert (r.returncode, r.stdout) == (0, f"x{i}\n"), r.stderr
        start = time.monotonic()
        r, o = store.exec_json("box", "sleep", "60", flags=["--timeout", "2s"], timeout=60)
        took = time.monotonic() - start
        assert r.returncode == 137 and o["reason"] == "timeout", (o, r.stderr)
        assert took < 30, took
        assert p.poll() is None, "the client of yes ended"
        assert rss_bytes(keeper) < 64 << 20, rss_bytes(keeper)
    finally:
        p.kill()
        p.wait()
    assert qemu_of(keeper) == qemu
    assert store.keeper_pid("box") == keeper

    def yes_entry():
        return [h for h in store.history("box") if h["argv"] == ["yes"]]

    assert poll_until(yes_entry, 30), store.history("box")
    assert yes_entry()[0]["outcome"]["reason"] == "killed", yes_entry()
    assert store.sh("box", "cat /tmp/mark") == "before\n"
    assert qemu_of(keeper) == qemu


def test_timeout_of_a_command_that_never_reads_its_stdin(store):
    """32 MiB for the stdin of a command that never reads it: the timeout
    still ends the command (not the VM) on time, and the keeper lets go of
    the exec's stdin (the writer gets EPIPE)."""
    keeper, qemu = started_vm(store, "box", "echo before > /tmp/mark")
    out = store.dir / "outcome-stdin.json"
    p = store.popen("exec", "box", "--timeout", "2s", "--json", out, "--", "sleep", "60",
                    stdin=PIPE, stdout=DEVNULL, stderr=PIPE, text=False)
    chunk = os.urandom(1 << 20)
    fed = []

    def feed():
        try:
            for _ in range(32):
                p.stdin.write(chunk)
            p.stdin.flush()
            fed.append("all")
        except (BrokenPipeError, ValueError):
            fed.append("epipe")

    writer = threading.Thread(target=feed, daemon=True)
    start = time.monotonic()
    writer.start()
    try:
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    took = time.monotonic() - start
    writer.join(30)
    if not writer.is_alive():
        try:
            p.stdin.close()
        except BrokenPipeError:
            pass
    assert p.returncode == 137, p.stderr.read()
    o = json.loads(out.read_text())
    assert (o["reason"], o["exit_code"]) == ("timeout", 137), o
    assert took < 30, took
    assert not writer.is_alive(), "the exec's stdin is still open"
    assert fed == ["epipe"], fed
    # The same VM goes on: the guest read the kill behind the stdin.
    assert qemu_of(keeper) == qemu, (qemu_of(keeper), qemu)
    assert store.keeper_pid("box") == keeper
    assert store.sh("box", "cat /tmp/mark") == "before\n"


def test_large_output_arrives_whole(store):
    """Two execs at once (they meet in the guest), each 48 MiB of random
    bytes on stdout and their SHA-256 (computed in the guest) on stderr:
    each client gets its own bytes, whole and in order."""
    store.create_vm("box", workspace(store))
    store.sh("box", "true")
    size = 48 << 20

    def script(i):
        return (f"{meet(i, 1 - i)}; mkfifo /tmp/f{i}; sha256sum < /tmp/f{i} >&2 & "
                f"head -c {size} /dev/urandom | tee /tmp/f{i}; wait $!")

    results = execs_at_once(store, "box", [script(i) for i in range(2)], text=False)
    assert [rc for rc, _, _ in results] == [0, 0], [(rc, err[-300:]) for rc, _, err in results]
    sums = []
    for _, out, err in results:
        assert len(out) == size, len(out)
        sums.append(err.split()[0].decode())
        assert hashlib.sha256(out).hexdigest() == sums[-1], err
    assert sums[0] != sums[1]


def test_both_streams_at_once_arrive_whole(store):
    """One command writes the same 24 MiB to stdout and to stderr at once:
    the two streams share one window, and each arrives whole (a stream read
    in the same round as the one that filled the window must not be taken
    for ended)."""
    store.create_vm("box", workspace(store))
    size = 8 << 20
    p = store.popen("exec", "box", "--", "sh", "-c",
                    f"head -c {size} /dev/urandom | tee /dev/stderr",
                    stdout=PIPE, stderr=PIPE, text=False)
    err = []
    reader = threading.Thread(target=lambda: err.append(p.stderr.read()))
    reader.start()
    try:
        # stdout read slowly, in small pieces: the window keeps filling.
        chunks, deadline = [], time.monotonic() + VM_TIMEOUT
        while time.monotonic() < deadline:
            chunk = os.read(p.stdout.fileno(), 4096)
            if not chunk:
                break
            chunks.append(chunk)
            time.sleep(0.0005)
        out = b"".join(chunks)
        p.wait(timeout=VM_TIMEOUT)
        reader.join(timeout=VM_TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err[0][-300:] if err else None
    assert (len(out), len(err[0])) == (size, size)
    assert out == err[0]


def test_file_operations(any_store, installed, host_secret):
    """The C API's file operations (test_capi's checks of the namespace
    backend, the same errors) and hutch serve's /files routes on a VM
    sandbox: done in the guest, as the command's uid, beside a running
    exec, never following a symlink."""
    store = any_store
    ws = workspace(store)
    keeper, qemu = started_vm(store, "box", "true", ws)
    api = CapiApi(store.runner, installed)
    api.home, api.state = store.home, store.state

    # A file operation while a command runs: it waits for the file.
    p = store.popen("exec", "box", "--", "sh", "-c",
                    "n=0; while [ ! -e /root/go ]; do n=$((n+1)); [ $n -gt 400 ] && exit 9; "
                    "sleep 0.05; done; cat /root/go", stdout=PIPE, stderr=PIPE)
    try:
        api.ok("write", "box", "/root/go", "644", input="went\n")
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert (p.returncode, out) == (0, "went\n"), err

    check_file_round_trip(api, "box", ws)
    check_file_errors(api, "box")
    check_paths_never_reach_the_host(api, "box", *host_secret)

    # Written through the API: in the sandbox's layer on the host, owned
    # as what a command writes (the sandbox's root).
    api.ok("write", "box", "/root/owned", "600", input="mine\n")
    store.sh("box", "echo cmd > /root/bycmd")
    with data_of(store.home, store.state, "box") as layer:
        owned = next(layer.glob("upper-*/root/root/owned")).stat()
        bycmd = next(layer.glob("upper-*/root/root/bycmd")).stat()
    assert (owned.st_uid, owned.st_gid) == (bycmd.st_uid, bycmd.st_gid)
    assert owned.st_uid == int(store.runner.expected_uid_map().split()[1])
    assert store.sh("box", "stat -c '%u:%g %a' /root/owned") == "0:0 600\n"

    # A symlink the command made: refused as the last component and in
    # the way, never followed (nothing lands in the guest's /tmp).
    store.sh("box", "ln -s /etc/shadow /root/l; ln -s /tmp /root/t")
    assert api.err("read", "box", "/root/l")["error"] == errno.ELOOP
    assert api.err("read", "box", "/root/t/mark")["error"] == errno.ELOOP
    assert api.err("list", "box", "/root/t")["error"] == errno.ELOOP
    assert api.err("write", "box", "/root/t/x", "644", input="x")["error"] == errno.ELOOP
    assert api.err("read", "box", "../" * 8 + "etc/passwd")["error"] == errno.EXDEV
    assert api.ok("stat", "box", "/root/l")["type"] == "symlink"
    assert store.sh("box", "ls -A /tmp | grep -cx x; true") == "0\n"
    # What the command sees of /etc/shadow, and no more.
    r = api.probe("read", "box", "/etc/shadow", text=False)
    assert r.returncode == 1 or r.stdout == b"", r.stdout[:100]

    # hutch serve: the same operations through its /files routes.
    srv = Server(store.runner)
    srv.env = store.env()
    proc, path, _ = srv.start()
    try:
        sapi = ServeApi(path, srv.uid)
        url = "/v1/sandboxes/box/files"
        r = sapi.ok("PUT", f"{url}?path=/root/served.txt&mode=0640", b"served\n")
        assert r.json == {"path": "/root/served.txt", "size": 7}
        assert sapi.ok("GET", f"{url}?path=/root/served.txt").data == b"served\n"
        st = sapi.ok("GET", f"{url}/stat?path=/root/served.txt").json
        assert (st["type"], st["size"], st["mode"]) == ("file", 7, "0640"), st
        names = [e["name"] for e in sapi.ok("GET", f"{url}/list?path=/root").json["entries"]]
        assert "served.txt" in names and "owned" in names, names
        assert store.sh("box", "cat /root/served.txt") == "served\n"
        r = sapi.call("GET", f"{url}?path=/root/l")
        assert r.status != 200 and b"root:" not in r.data, r
        sapi.ok("DELETE", f"{url}?path=/root/served.txt", status=204)
        r = sapi.call("GET", f"{url}/stat?path=/root/served.txt")
        assert r.status == 404 and r.error["code"] == "not_found", r
        # API 1.2 in the guest: parents, mkdir, move, the recursive list,
        # and the symlink /root/t is not gone through.
        sapi.ok("PUT", f"{url}?path=/root/p/q/f.txt&parents=true", b"f")
        sapi.ok("POST", f"{url}/mkdir?path=/root/p/r&parents=true")
        sapi.ok("POST", f"{url}/move", {"from": "/root/p/q/f.txt", "to": "/root/p/r/g.txt"})
        tree = sapi.ok("GET", f"{url}/list?path=/root/p&recursive=true").json["entries"]
        assert [e["name"] for e in tree] == ["q", "r", "r/g.txt"], tree
        r = sapi.call("POST", f"{url}/mkdir?path=/root/t/made&parents=true")
        assert r.status == 400 and r.error["code"] == "invalid_path", r
        assert store.sh("box", "ls -A /tmp | grep -cx made; true") == "0\n"
    finally:
        srv.stop(proc)
    assert qemu_of(keeper) == qemu


def test_stop_and_rm_with_a_detached_exec_running(store):
    """`stop` and `rm --force` of a VM sandbox with a detached command
    running: they return, the command is killed (its outcome in the
    history), and nothing of the VM is left."""
    started_vm(store, "box", "true")
    for verb in (["stop"], ["rm", "--force"]):
        r = store.hutch("exec", "box", "-d", "--", "sh", "-c", "echo up; exec sleep 600",
                        timeout=60)
        assert r.returncode == 0, r.stderr
        eid = int(r.stdout.strip())
        keeper = store.keeper_pid("box")
        qemu = qemu_of(keeper)
        assert len(qemu) == 1, qemu

        def up(eid=eid):
            r = store.hutch("logs", "box", "--exec", eid, timeout=60)
            return r.returncode == 0 and "up\n" in r.stdout

        assert poll_until(up, 60), "the detached command did not start"
        r = store.hutch(*verb, "box", timeout=60)
        assert r.returncode == 0, r.stderr
        assert_vm_gone(store, "box", keeper, qemu)
        if verb == ["stop"]:
            assert store.state_of("box") == "stopped"
            h = history_entry(store, "box", eid)
            assert h and h["detached"] is True and h["outcome"]["reason"] == "killed", h
        else:
            assert "box" not in store.ls()
            assert not store.sandbox_dir("box").exists()
