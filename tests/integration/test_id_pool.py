# SPDX-License-Identifier: LGPL-2.1-or-later
"""One host id range per root sandbox (issue 15, item 6; docs/persistent.md
"Id range"): as root, each persistent sandbox maps its ids 0..65535 to a
range of its own from the machine's id pool (2^31 up, 65536 ids a range),
recorded in its sandbox.json, released by rm and reused. The files of its
layers keep the store's fixed owner on the host (idmapped into the
sandbox's range), so snapshots and `create --from` work across ranges.

The attack the pool closes: with one range for all of root's sandboxes,
the root of sandbox A is the same host uid as the root of sandbox B, so a
file of B that reaches A (here: a directory descriptor B passes over a
unix socket in a folder bound into both) is A's own. Negative twin: the
same descriptor in B itself opens the file.

Each test uses a pool of its own ($HUTCH_TEST_ID_POOL, a test hook), so
that the lowest free range is known and other tests' sandboxes do not
meet ours; $HUTCH_TEST_ID_POOL_SIZE makes the pool small for exhaustion."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import IS_ROOT, subid_base
from test_persistent import Store

POOL_BASE = 1 << 31
RANGE = 65536

SERVER = r"""
import os, socket, sys
os.umask(0o077)
with open("/root/secret", "w") as f:
    f.write("secret of B\n")
os.chmod("/root/secret", 0o600)
dfd = os.open("/root", os.O_RDONLY | os.O_DIRECTORY)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    os.unlink("/shared/sock")
except FileNotFoundError:
    pass
s.bind("/shared/sock")
os.chmod("/shared/sock", 0o777)
s.listen(4)
s.settimeout(120)
print("ready", flush=True)
for _ in range(int(sys.argv[1])):
    c, _ = s.accept()
    socket.send_fds(c, [b"fd"], [dfd])
    c.recv(1)
    c.close()
"""

CLIENT = r"""
import os, socket
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect("/shared/sock")
_, fds, _, _ = socket.recv_fds(c, 16, 1)
try:
    fd = os.open("secret", os.O_RDONLY, dir_fd=fds[0])
    print("read:" + os.read(fd, 100).decode().strip())
except OSError as e:
    print("denied:%d" % e.errno)
try:
    fd = os.open("planted", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fds[0])
    print("wrote")
except OSError as e:
    print("no-write:%d" % e.errno)
c.send(b"x")
"""


@pytest.fixture
def pool(root_runner):
    d = root_runner.make_dir(mode=0o700, name="idpool")
    return d


@pytest.fixture
def pstore(root_runner, pool):
    if not IS_ROOT:
        pytest.skip("the id pool is root's: needs root")
    s = PoolStore(root_runner, pool)
    yield s
    s.finalize()
    # Nothing of this store is held in the pool after rm.
    assert pool_entries(pool, s.home) == []


class PoolStore(Store):
    def __init__(self, runner, pool, size=None):
        super().__init__(runner)
        self.pool = pool
        self.size = size

    def env(self, extra=None):
        e = super().env(extra)
        e["HUTCH_TEST_ID_POOL"] = str(self.pool)
        if self.size:
            e["HUTCH_TEST_ID_POOL_SIZE"] = str(self.size)
        return e


def pool_entries(pool, home=None):
    """[(base, id, home)] of the pool file (of @home)."""
    p = Path(pool, "id-pool")
    if not p.exists():
        return []
    lines = p.read_text().splitlines()
    assert lines[0] == "hutch-id-pool 1", lines
    out = []
    for line in lines[1:]:
        base, sid, h = line.split(" ", 2)
        out.append((int(base), sid, h))
    if home is not None:
        out = [e for e in out if e[2] == os.path.realpath(home)]
    return out


def maps(st, name):
    out = st.sh(name, "cat /proc/self/uid_map; echo; cat /proc/self/gid_map")
    u, g = out.split("\n\n")
    return u.split(), g.split()


def record(st, name):
    return json.loads((st.sandbox_dir(name) / "sandbox.json").read_text())


def test_two_root_sandboxes_get_different_host_ranges(pstore):
    st = pstore
    a = st.create("a")
    b = st.create("b")
    ua, ga = maps(st, "a")
    ub, gb = maps(st, "b")
    assert ua == ["0", str(POOL_BASE), str(RANGE)]
    assert ga == ["0", str(POOL_BASE), str(RANGE)]
    assert ub == ["0", str(POOL_BASE + RANGE), str(RANGE)]
    assert gb == ["0", str(POOL_BASE + RANGE), str(RANGE)]
    # The host sees the same: the uid of a sandbox's process.
    keeper = st.keeper_pid("b")
    kids = [int(p) for p in Path(f"/proc/{keeper}/task/{keeper}/children").read_text().split()]
    uids = {Path(f"/proc/{k}/status").read_text().split("Uid:")[1].split()[0] for k in kids}
    assert str(POOL_BASE + RANGE) in uids, uids
    # Recorded in each sandbox's record and held in the pool.
    assert record(st, "a")["id_base"] == POOL_BASE
    assert record(st, "b")["id_base"] == POOL_BASE + RANGE
    assert sorted(pool_entries(st.pool, st.home)) == [
        (POOL_BASE, a, os.path.realpath(st.home)),
        (POOL_BASE + RANGE, b, os.path.realpath(st.home)),
    ]


def test_one_shot_run_leases_a_range_and_writes_nothing_to_the_pool(root_runner, pool):
    """`hutch run` as root maps onto the lowest free range of the pool,
    held by a lease for its lifetime only: no line of the pool file
    (test_run_id_pool.py has the rest)."""
    r = root_runner.run(["--", "cat", "/proc/self/uid_map"],
                        env={"HUTCH_TEST_ID_POOL": str(pool)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", str(POOL_BASE), str(RANGE)]
    assert pool_entries(pool) == []


def attack(st, shared, reader):
    """B serves a descriptor of its /root over /shared/sock; @reader
    (a sandbox) opens /root/secret through it. Returns the reader's
    lines."""
    server = st.popen("exec", "b", "--", "python3", "-c", SERVER, "1",
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = server.stdout.readline()
        assert line.strip() == "ready", (line, server.stderr.read() if server.poll() else "")
        out = st.sh(reader, f"python3 -c '{CLIENT}'")
        server.wait(timeout=60)
        assert server.returncode == 0, server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return out.split()


@pytest.fixture
def shared(root_runner):
    d = root_runner.make_dir(mode=0o755, name="shared")
    return d


def test_root_of_one_sandbox_cannot_open_the_files_of_another(pstore, shared):
    st = pstore
    st.create("a", "-v", f"{shared}:/shared")
    st.create("b", "-v", f"{shared}:/shared")
    out = attack(st, shared, "a")
    assert out[0].startswith("denied:"), out
    assert out[1].startswith("no-write:"), out
    assert "planted" not in st.sh("b", "ls /root")


def test_twin_the_same_sandbox_opens_its_own_files(pstore, shared):
    st = pstore
    st.create("a", "-v", f"{shared}:/shared")
    st.create("b", "-v", f"{shared}:/shared")
    out = attack(st, shared, "b")
    assert out == ["read:secret", "of", "B", "wrote"], out


def snapshot_owners(st, snap):
    """{path inside the layer: (uid, gid)} of a snapshot's files on the host."""
    out = {}
    top = st.home / "snapshots" / snap
    for dirpath, dirs, files in os.walk(top):
        for n in files + dirs:
            p = Path(dirpath, n)
            s = os.lstat(p)
            out[str(p.relative_to(top))] = (s.st_uid, s.st_gid)
    return out


def test_files_keep_the_store_owner_and_create_from_crosses_ranges(pstore):
    st = pstore
    fixed = subid_base("/etc/subuid")
    fixed_g = subid_base("/etc/subgid")
    st.create("a")
    st.sh("a", "mkdir -p /root/t && echo hi > /root/t/f && chown 1000:1000 /root/t/f && "
               "echo zero > /root/t/z && chmod 600 /root/t/z /root/t/f")
    st.create("b")
    st.sh("b", "echo b > /root/bf")
    assert st.hutch("stop", "a").returncode == 0
    r = st.hutch("snapshot", "a", "s1")
    assert r.returncode == 0, r.stderr
    owners = snapshot_owners(st, "s1")
    f = [k for k in owners if k.endswith("root/t/f")]
    z = [k for k in owners if k.endswith("root/t/z")]
    assert f and z, sorted(owners)
    # On the host: the store's fixed range, never the sandbox's own.
    assert owners[f[0]] == (fixed + 1000, fixed_g + 1000)
    assert owners[z[0]] == (fixed, fixed_g)
    # b took the second range; c, made from a's snapshot, the third.
    st.create("c", "--from", "s1")
    assert record(st, "c")["id_base"] == POOL_BASE + 2 * RANGE
    out = st.sh("c", "stat -c '%u:%g %a' /root/t/f /root/t/z; cat /root/t/f /root/t/z; "
                     "echo more >> /root/t/z; chown 42:42 /root/t/f; stat -c %u /root/t/f")
    assert out.split() == ["1000:1000", "600", "0:0", "600", "hi", "zero", "42"]
    # a, restarted in its own range, still sees its files as its own.
    assert st.sh("a", "stat -c '%u:%g' /root/t/f /root/t/z").split() == ["1000:1000", "0:0"]


def test_a_range_is_released_by_rm_and_reused(pstore):
    st = pstore
    st.create("a")
    b = st.create("b")
    st.sh("a", "true")
    r = st.hutch("rm", "--force", "a")
    assert r.returncode == 0, r.stderr
    assert [e[1] for e in pool_entries(st.pool, st.home)] == [b]
    c = st.create("c")
    assert record(st, "c")["id_base"] == POOL_BASE
    assert maps(st, "c")[0] == ["0", str(POOL_BASE), str(RANGE)]
    assert (POOL_BASE, c, os.path.realpath(st.home)) in pool_entries(st.pool)


def test_exhausted_pool_is_125_and_leaves_nothing(root_runner, pool):
    if not IS_ROOT:
        pytest.skip("the id pool is root's: needs root")
    st = PoolStore(root_runner, pool, size=2)
    try:
        st.create("a")
        st.create("b")
        before = st.listing()
        pool_before = Path(pool, "id-pool").read_text()
        r = st.hutch("create", "c")
        assert r.returncode == 125, (r.returncode, r.stderr)
        assert "no free id range" in r.stderr and "all 2 ranges" in r.stderr, r.stderr
        assert st.listing() == before
        assert Path(pool, "id-pool").read_text() == pool_before
        assert "c" not in st.ls()
        # Freed by rm, the range serves the next create.
        assert st.hutch("rm", "a").returncode == 0
        st.create("c")
        assert record(st, "c")["id_base"] == POOL_BASE
    finally:
        st.finalize()
    assert pool_entries(pool, st.home) == []


def test_gc_releases_ranges_of_sandboxes_that_are_gone(pstore):
    st = pstore
    a = st.create("a")
    p = Path(st.pool, "id-pool")
    home = os.path.realpath(st.home)
    # A range left by an rm that was interrupted, and one of a store that
    # is gone (released by the next claim).
    p.write_text(p.read_text() + f"{POOL_BASE + 5 * RANGE} 0123456789abcdef {home}\n"
                 + f"{POOL_BASE + 6 * RANGE} 0123456789abcdef /nonexistent-hutch-store\n")
    r = st.hutch("gc")
    assert r.returncode == 0, r.stderr
    assert [e[1] for e in pool_entries(st.pool, home)] == [a]
    st.create("b")
    assert [e[2] for e in pool_entries(st.pool)] == [home, home]


def test_a_sandbox_made_before_the_pool_gets_a_range_when_it_starts(pstore):
    st = pstore
    sid = st.create("a")
    # As a record of an older hutch has it: no range held.
    rec = record(st, "a")
    rec["id_base"] = 0
    (st.sandbox_dir("a") / "sandbox.json").write_text(json.dumps(rec))
    p = Path(st.pool, "id-pool")
    p.write_text("hutch-id-pool 1\n")
    assert maps(st, "a")[0] == ["0", str(POOL_BASE), str(RANGE)]
    assert record(st, "a")["id_base"] == POOL_BASE
    assert [e[1] for e in pool_entries(st.pool)] == [sid]


def test_a_damaged_pool_is_refused(pstore):
    st = pstore
    Path(st.pool, "id-pool").write_text("hutch-id-pool 1\nnot a line\n")
    r = st.hutch("create", "a")
    assert r.returncode == 125, r.stderr
    assert "id pool" in r.stderr, r.stderr
    assert "a" not in st.ls()
    Path(st.pool, "id-pool").unlink()


def test_user_sandboxes_take_nothing_of_the_pool(user_runner, pool):
    st = PoolStore(user_runner, pool)
    try:
        st.create("u")
        st.sh("u", "true")
        assert pool_entries(pool) == []
        assert record(st, "u").get("id_base", 0) == 0
    finally:
        st.finalize()


# ---- a user's sub-ids through the library (hutch serve) ----

SUB_SETUP = r"""
set -e
mkdir -p /workspace/d42
echo "secret of 42" > /workspace/d42/f
chmod 600 /workspace/d42/f
chmod 700 /workspace/d42
chown -R 42:42 /workspace/d42
"""


@pytest.fixture
def user_subids(user_runner):
    if not IS_ROOT:
        pytest.skip("needs root: gives the test user a range of sub-ids")
    from subids import SubIds

    s = SubIds("hutchtest", user_runner.uid)
    yield s
    s.close()


def test_serve_diff_and_apply_reach_files_of_a_users_sub_ids(user_runner, user_subids):
    """The library's diff and apply (hutch serve, hutch mcp, the C API)
    enter the store's user namespace as the CLI does: a file of sub-id 42,
    0600 in a 0700 folder, is read by diff (JSON and patch) and applied."""
    from test_serve import Api, Server

    srv = Server(user_runner)
    try:
        ws = user_runner.make_dir(name="ws")
        (ws / "kept").write_text("host\n")
        user_runner.chown(ws)
        r = srv.hutch("create", "box", "--workspace", str(ws))
        assert r.returncode == 0, r.stderr
        r = srv.hutch("exec", "box", "--", "sh", "-c", SUB_SETUP)
        assert r.returncode == 0, r.stderr
        proc, path, _ = srv.start()
        api = Api(path, srv.uid)
        changes = api.ok("GET", "/v1/sandboxes/box/diff").json["changes"]
        assert ("d42/f", "added") in [(c["path"], c["kind"]) for c in changes], changes
        patch = api.ok("GET", "/v1/sandboxes/box/diff/patch?path=d42").data.decode()
        assert "+secret of 42" in patch, patch
        assert api.ok("POST", "/v1/sandboxes/box/apply", {"paths": ["d42"]}).json["applied"] >= 1
        assert (ws / "d42" / "f").read_text() == "secret of 42\n"
        assert (ws / "d42" / "f").stat().st_uid == user_runner.uid
    finally:
        srv.cleanup()


def test_a_killed_writers_temp_files_go_with_the_next_write(pstore):
    # write_file_atomic() writes ".id-pool.tmp-PID" and renames it over the
    # pool file; a writer killed in between left it for good (30 of them
    # had piled up in /var/lib/hutch on the machine the tests run on). The
    # next write, under the pool's lock, removes them; nothing else of the
    # folder goes.
    st = pstore
    st.pool.mkdir(parents=True, exist_ok=True)
    stale = [st.pool / ".id-pool.tmp-999999", st.pool / ".id-pool.tmp-1"]
    for f in stale:
        f.write_text("hutch-id-pool 1\n")
    other = st.pool / "keep.txt"
    other.write_text("x")
    st.create("a")
    st.sh("a", "true")
    assert pool_entries(st.pool, st.home), "the create wrote the pool"
    assert [f for f in stale if f.exists()] == []
    assert other.read_text() == "x"
    assert not [p for p in st.pool.iterdir() if p.name.startswith(".id-pool.tmp-")]
