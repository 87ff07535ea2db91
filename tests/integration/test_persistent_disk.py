# SPDX-License-Identifier: LGPL-2.1-or-later
"""The disk limit of persistent sandboxes (issue 15 item 4,
docs/persistent.md "Disk limit").

As root every sandbox's writable state (its own layer, the overlay work
dirs, detached execs' logs) lives in an ext4 image of the limit's size
(`--disk`, default 10g), mounted on a loop device in the keeper's own mount
namespace: writing past it is ENOSPC inside, the store stays usable
(snapshots running and stopped, create --from, export and import), and no
loop device or mount outlives the keeper (stop, rm, SIGKILL). As an
unprivileged user the kernel lets no one mount the image: an explicit
--disk is refused (125) unless --allow-degraded, the default is not
enforced and says so. The same holds for the sandboxes `hutch serve` and
`hutch mcp` create.

Loop devices are found through /sys/block/loop*/loop/backing_file, and
only those backed by this test's own store are ever looked at."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from cgroupctl import poll_until
from test_mcp import McpEnv, RawServer
from test_persistent import Store, root_store  # noqa: F401 (fixture)
from test_serve import Api, Server

MIB = 1 << 20
GIB = 1 << 30
ENOSPC_TEXT = "No space left on device"


@pytest.fixture
def user_store(user_runner):
    s = Store(user_runner)
    yield s
    s.finalize()


def loops_of(home):
    """The loop devices whose backing file is in the store @home."""
    out = []
    for d in Path("/sys/block").glob("loop*"):
        try:
            backing = (d / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if backing.startswith(str(home) + "/"):
            out.append((d.name, backing))
    return out


def mounts_of(home):
    """Lines of our mountinfo that mention the store @home."""
    return [ln for ln in Path("/proc/self/mountinfo").read_text().splitlines()
            if str(home) in ln]


def nothing_attached(home):
    return not loops_of(home) and not mounts_of(home)


def image_of(store, name):
    return store.home / "sandboxes" / name / "disk.img"


def keeper_pid(store, name):
    """The pid of sandbox @name's keeper (its command line names it)."""
    for p in Path("/proc").glob("[0-9]*"):
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
            env = (p / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (b"__keeper" in argv and name.encode() in argv
                and f"HUTCH_HOME={store.home}".encode() in env):
            return int(p.name)
    return None


def fill(store, name, path):
    """Writes 100 MiB at @path inside, twice (fallocate, then dd): both
    must fail with ENOSPC. Returns dd's stderr."""
    r = store.exec(name, "fallocate", "-l", "100M", path)
    assert r.returncode != 0 and ENOSPC_TEXT in r.stderr, (r.returncode, r.stderr)
    store.exec(name, "rm", "-f", path)
    r = store.exec(name, "dd", "if=/dev/zero", f"of={path}", "bs=1M", "count=100")
    assert r.returncode != 0 and ENOSPC_TEXT in r.stderr, (r.returncode, r.stderr)
    return r.stderr


# ---- as root: enforced ----


def test_writing_past_the_disk_limit_is_enospc_and_the_store_stays_intact(root_store, tmp_path):
    s = root_store
    ws = s.runner.make_dir(name="ws")
    (ws / "hello.txt").write_text("from the host\n")
    s.create("d", "--disk", "64m", "--workspace", str(ws))
    s.sh("d", "echo kept > /root/keep; mkdir -p /root/sub && echo deep > /root/sub/f")
    assert s.ls()["d"]["disk_limit_bytes"] == 64 * MIB
    assert s.ls()["d"]["degraded"] == []

    # $HOME and the workspace's upper layer are both in the image.
    fill(s, "d", "/root/big")
    fill(s, "d", "/workspace/big")
    # The sandbox works on after it: the full file goes, and there is room.
    s.sh("d", "rm -f /root/big /workspace/big; echo after > /root/after")
    out = s.sh("d", "cat /root/keep /root/sub/f /root/after /workspace/hello.txt")
    assert out == "kept\ndeep\nafter\nfrom the host\n"

    # Snapshots: running (a frozen copy), then stopped (a copy of the
    # image's layer); forks and an export/import round trip see the files.
    r = s.hutch("snapshot", "d", "d-run")
    assert r.returncode == 0, r.stderr
    assert s.hutch("stop", "d").returncode == 0
    r = s.hutch("snapshot", "d", "d-stop")
    assert r.returncode == 0, r.stderr
    out = s.sh("d", "cat /root/keep /root/after")
    assert out == "kept\nafter\n"
    for snap in ("d-run", "d-stop"):
        fork = f"f-{snap}"
        s.create(fork, "--from", snap)
        assert s.sh(fork, "cat /root/keep /root/sub/f") == "kept\ndeep\n"
        assert s.ls()[fork]["disk_limit_bytes"] == 64 * MIB
    archive = tmp_path / "d.tar.zst"
    r = s.hutch("snapshot", "export", "d-stop", "-o", archive)
    assert r.returncode == 0, r.stderr
    r = s.hutch("snapshot", "import", archive, "--name", "d-imported")
    assert r.returncode == 0, r.stderr
    s.create("imp", "--from", "d-imported")
    assert s.sh("imp", "cat /root/keep /root/after") == "kept\nafter\n"

    # diff sees the stopped sandbox's workspace layer through its image.
    s.sh("d", "echo changed > /workspace/hello.txt")
    assert s.hutch("stop", "d").returncode == 0
    r = s.hutch("diff", "d", "--stat")
    assert r.returncode == 0 and "hello.txt" in r.stdout, (r.stdout, r.stderr)


def test_detached_exec_logs_count_against_the_limit(root_store):
    s = root_store
    s.create("d", "--disk", "32m")
    r = s.exec("d", "sh", "-c", "head -c 100M /dev/zero", flags=["-d"])
    assert r.returncode == 0, r.stderr
    xid = int(r.stdout.strip())
    assert poll_until(lambda: any(h["id"] == xid for h in s.history("d")), 60)
    r = s.runner.run_raw(["logs", "d", "--exec", str(xid)], env=s.env(), text=False)
    assert r.returncode == 0, r.stderr
    assert 0 < len(r.stdout) < 32 * MIB
    # The image on the host never takes more than the limit.
    assert image_of(s, "d").stat().st_blocks * 512 <= 33 * MIB
    # The sandbox still runs commands (their output goes to the caller).
    assert s.sh("d", "echo alive") == "alive\n"


def test_the_default_disk_limit_is_10g(root_store):
    s = root_store
    s.create("d")
    r = s.exec("d", "fallocate", "-l", "11G", "/root/big")
    s.sh("d", "rm -f /root/big")
    assert r.returncode != 0 and ENOSPC_TEXT in r.stderr, (r.returncode, r.stderr)
    assert s.ls()["d"]["disk_limit_bytes"] == 10 * GIB
    # What the sandbox's $HOME says of its file system: the image's size,
    # not the host's.
    blocks, bsize = s.sh("d", "stat -f -c '%b %S' /root").split()
    assert 9 * GIB < int(blocks) * int(bsize) <= 10 * GIB


def test_a_disk_limit_out_of_range_is_refused(root_store):
    for size in ("1m", "32t"):
        r = root_store.hutch("create", "d", "--disk", size)
        assert r.returncode == 125 and "between 16m and 16t" in r.stderr, r.stderr
    assert root_store.ls() == {}


def test_no_loop_device_or_mount_outlives_the_sandbox(root_store):
    s = root_store
    s.create("d", "--disk", "32m")
    assert nothing_attached(s.home)
    s.sh("d", "echo x > /root/f")
    # Running: the image is on a loop device, mounted only in the keeper's
    # namespace, never in the host's.
    assert [b for _, b in loops_of(s.home)] == [str(image_of(s, "d"))]
    assert mounts_of(s.home) == []
    # stop returns once the loop device is gone.
    assert s.hutch("stop", "d").returncode == 0
    assert nothing_attached(s.home)
    # A command that looks at the stopped sandbox's files mounts it for
    # the time of the look.
    assert s.hutch("snapshot", "d", "snap").returncode == 0
    assert s.hutch("ls").returncode == 0
    assert poll_until(lambda: nothing_attached(s.home), 10), loops_of(s.home)

    # A keeper killed with SIGKILL takes the mount with it; the next exec
    # mounts the image again.
    s.sh("d", "true")
    pid = keeper_pid(s, "d")
    assert pid, "no keeper found"
    os.kill(pid, signal.SIGKILL)
    assert poll_until(lambda: nothing_attached(s.home), 10), loops_of(s.home)
    # Until its parent has reaped it the pid exists, and the next start
    # rightly does not collect its cgroups (test_persistent.py
    # test_gc_after_the_keeper_is_killed): wait for that first.
    assert poll_until(lambda: not os.path.exists(f"/proc/{pid}"), 30)
    assert s.sh("d", "cat /root/f") == "x\n"

    # rm of a running sandbox leaves nothing.
    r = s.hutch("rm", "--force", "d")
    assert r.returncode == 0, r.stderr
    s.names.remove("d")
    assert nothing_attached(s.home)
    assert not (s.home / "sandboxes" / "d").exists()


# ---- as an unprivileged user: not enforceable ----


def test_user_explicit_disk_is_refused_without_allow_degraded(user_store):
    s = user_store
    r = s.hutch("create", "d", "--disk", "64m")
    assert r.returncode == 125, (r.returncode, r.stderr)
    assert "--disk cannot be enforced here" in r.stderr
    assert "unprivileged user cannot mount" in r.stderr
    assert s.ls() == {}

    s.names.append("d")
    r = s.hutch("create", "d", "--disk", "64m", "--allow-degraded")
    assert r.returncode == 0, r.stderr
    assert "has no disk limit" in r.stderr
    e = s.ls()["d"]
    assert e["degraded"] == ["disk"] and e["disk_limit_bytes"] == 0
    _, outcome = s.exec_json("d", "true")
    assert "disk" in outcome["degraded"], outcome


def test_user_default_limit_warns_once(user_store):
    s = user_store
    s.names.append("d")
    r = s.hutch("create", "d")
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(warnings) == 1 and "has no disk limit" in warnings[0], r.stderr
    assert "hutch doctor" in warnings[0]
    assert s.ls()["d"]["degraded"] == ["disk"]


def test_doctor_says_why(root_runner, user_runner):
    for runner, status in ((root_runner, "ok"), (user_runner, "missing")):
        r = runner.run_raw(["doctor", "--json"])
        check = json.loads(r.stdout)["disk_limit"]
        assert check["status"] == status, check
        if status == "missing":
            assert "unprivileged user cannot mount" in check["detail"]


# ---- hutch serve and hutch mcp ----


@pytest.fixture
def root_server(root_runner):
    srv = Server(root_runner)
    try:
        proc, path, _ = srv.start()
        srv.api = Api(path, srv.uid)
        yield srv
    finally:
        srv.cleanup()


@pytest.fixture
def user_server(user_runner):
    srv = Server(user_runner)
    try:
        proc, path, _ = srv.start()
        srv.api = Api(path, srv.uid)
        yield srv
    finally:
        srv.cleanup()


def test_serve_creates_sandboxes_with_the_limit(root_server):
    api = root_server.api
    api.ok("POST", "/v1/sandboxes",
           {"name": "small", "policy": {"limits": {"disk": "64m"}}}, status=201)
    ans = api.exec("small", ["fallocate", "-l", "100M", "/root/big"])
    assert ans["outcome"]["exit_code"] != 0 and ENOSPC_TEXT in ans["stderr"], ans
    assert api.exec("small", ["sh", "-c", "echo ok"])["stdout"] == "ok\n"
    # Without one: the default.
    api.ok("POST", "/v1/sandboxes", {"name": "dflt"}, status=201)
    ans = api.exec("dflt", ["fallocate", "-l", "11G", "/root/big"])
    assert ans["outcome"]["exit_code"] != 0 and ENOSPC_TEXT in ans["stderr"], ans


def test_serve_refuses_an_unenforceable_disk_limit(user_server):
    api = user_server.api
    r = api.call("POST", "/v1/sandboxes",
                 {"name": "small", "policy": {"limits": {"disk": "64m"}}})
    assert r.status >= 400 and "--disk cannot be enforced here" in r.error["message"], r
    assert api.ok("GET", "/v1/sandboxes").json["sandboxes"] == []


@pytest.fixture
def root_menv(root_runner):
    e = McpEnv(root_runner)
    yield e
    e.cleanup()


def test_mcp_sandbox_has_the_limit(root_menv):
    s = RawServer(root_menv, ("--name", "agent", "--disk", "64m"))
    try:
        s.initialize()
        res = s.tool("exec", {"command": "fallocate -l 100M /root/big; echo rc=$?"})
        st = json.loads(res["content"][0]["text"])
        assert ENOSPC_TEXT in st["stderr"] and "rc=1" in st["stdout"], st
        res = s.tool("exec", {"command": "rm -f /root/big; echo ok"})
        assert json.loads(res["content"][0]["text"])["stdout"] == "ok\n"
        # Snapshot and restore (a stopped sandbox's image mounted for it).
        assert s.tool("snapshot", {"name": "s1"})["isError"] is False
        s.tool("exec", {"command": "echo later > /root/later"})
        assert s.tool("restore", {"name": "s1"})["isError"] is False
        res = s.tool("exec", {"command": "ls /root/later; echo rc=$?"})
        assert "rc=2" in json.loads(res["content"][0]["text"])["stdout"], res
        rc, _ = s.close()
        assert rc == 0
    finally:
        if s.p.poll() is None:
            s.p.kill()
            s.p.wait()
    sbs = {sb["name"]: sb for sb in root_menv.sandboxes()}
    assert sbs["agent"]["disk_limit_bytes"] == 64 * MIB


@pytest.fixture
def user_menv(user_runner):
    e = McpEnv(user_runner)
    yield e
    e.cleanup()


def test_mcp_user_sandbox_says_it_has_no_limit(user_menv):
    s = RawServer(user_menv, ("--name", "agent"))
    try:
        s.initialize()
        res = s.tool("exec", {"command": "echo ok"})
        assert json.loads(res["content"][0]["text"])["stdout"] == "ok\n"
        rc, err = s.close()
        assert rc == 0
    finally:
        if s.p.poll() is None:
            s.p.kill()
            s.p.wait()
    assert "sandbox 'agent' has no disk limit" in err, err
    assert {sb["name"]: sb for sb in user_menv.sandboxes()}["agent"]["degraded"] == ["disk"]
