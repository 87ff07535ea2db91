# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every root sandbox its own host id range, one-shot runs too (issue 15;
src/lib/store/id-pool.h "Running leases", docs/persistent.md "Id range").

As root, `hutch run` maps its ids onto a range of the machine's id pool
that it leases for its lifetime (an open file description lock on a byte
of the pool's lock file, which the kernel drops when hutch ends, however
it ends), so two runs at once are two strangers on the host: different
owners, signals, per-uid accounting. The attack this closes: with one
fixed range for every run, the root of one run is the same host uid as
the root of another. Negative twins: the range of a run that ended (or
whose hutch was killed with SIGKILL) is free again and handed out first;
the files a run writes through its workspace are the caller's on the
host whatever its range (idmapped).

A persistent sandbox's keeper holds such a lease on its own range while
it runs, so a lost pool file no longer hands the range of another store's
running sandbox out (the rebuild only knows the claiming store's
records): tested with two HUTCH_HOMEs.

Each test uses a pool of its own ($HUTCH_TEST_ID_POOL, a test hook)."""

import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import IS_ROOT, subid_base
from test_id_pool import POOL_BASE, RANGE, PoolStore, maps, pool, pool_entries, record  # noqa: F401

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="the id pool is root's: needs root")

HOLD = "cat /proc/self/uid_map; cat /proc/self/gid_map; echo held; read x; exit 0"


def env(pool):
    return {"HUTCH_TEST_ID_POOL": str(pool)}


class Held:
    """A `hutch run` that prints its maps and waits for its stdin."""

    def __init__(self, runner, pool, *flags):
        self.p = runner.popen([*flags, "--", "sh", "-c", HOLD], env=env(pool),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        lines = []
        while True:
            line = self.p.stdout.readline()
            assert line, (lines, self.p.stderr.read() if self.p.poll() is not None else "")
            if line.strip() == "held":
                break
            lines.append(line.split())
        self.uid_map, self.gid_map = lines

    def end(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=60)
        return self.p.returncode

    def kill(self):
        os.kill(self.p.pid, signal.SIGKILL)
        self.p.wait(timeout=60)
        self.p.stdin.close()


@pytest.fixture
def held(root_runner, pool):
    runs = []

    def start(*flags):
        h = Held(root_runner, pool, *flags)
        runs.append(h)
        return h

    yield start
    for h in runs:
        if h.p.poll() is None:
            h.kill()
        h.p.stdout.close()
        h.p.stderr.close()


def run_map(runner, pool):
    r = runner.run(["--", "cat", "/proc/self/uid_map"], env=env(pool))
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_two_runs_at_once_get_disjoint_ranges(root_runner, pool, held):
    a = held()
    b = held()
    assert a.uid_map == ["0", str(POOL_BASE), str(RANGE)], a.uid_map
    assert a.gid_map == ["0", str(POOL_BASE), str(RANGE)], a.gid_map
    assert b.uid_map == ["0", str(POOL_BASE + RANGE), str(RANGE)], b.uid_map
    assert b.gid_map == ["0", str(POOL_BASE + RANGE), str(RANGE)], b.gid_map
    # Not the store's fixed range, and nothing written to the pool file.
    assert int(a.uid_map[1]) != subid_base("/etc/subuid")
    assert pool_entries(pool) == []
    assert a.end() == 0 and b.end() == 0


def test_the_range_of_a_run_that_ended_is_free_again(root_runner, pool, held):
    a = held()
    b = held()
    assert a.end() == 0
    # a's range is the lowest free one again; b's is still b's.
    assert run_map(root_runner, pool) == ["0", str(POOL_BASE), str(RANGE)]
    c = held()
    assert c.uid_map == ["0", str(POOL_BASE), str(RANGE)]
    assert b.uid_map == ["0", str(POOL_BASE + RANGE), str(RANGE)]
    assert b.end() == 0 and c.end() == 0


def test_the_range_of_a_killed_hutch_is_reclaimed(root_runner, pool, held):
    a = held()
    assert a.uid_map == ["0", str(POOL_BASE), str(RANGE)]
    a.kill()
    # No leftover lease: the next run gets the same range.
    assert run_map(root_runner, pool) == ["0", str(POOL_BASE), str(RANGE)]


def test_workspace_files_are_the_callers_whatever_the_range(root_runner, pool, held):
    other = held()  # so that the run below is on the second range
    ws = root_runner.make_dir(name="ws")
    (ws / "seed").write_text("seed\n")
    out = root_runner.make_dir(name="out")
    r = root_runner.run(["--workspace", f"{ws}:mount", "-v", f"{out}:/out", "--", "sh", "-c",
                         "cat /proc/self/uid_map; stat -c %u:%g /workspace/seed; "
                         "echo new > /workspace/new; mkdir /out/d; echo x > /out/d/f"],
                        env=env(pool))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["0", str(POOL_BASE + RANGE), str(RANGE)]
    assert lines[1] == "0:0"  # the caller's files are the sandbox root's
    for p in (ws / "new", out / "d", out / "d" / "f"):
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (0, 0), (p, st.st_uid, st.st_gid)
    for mode in ("copy", "overlay"):
        r = root_runner.run(["--workspace", f"{ws}:{mode}", "--", "sh", "-c",
                             "cat /proc/self/uid_map; stat -c %u:%g /workspace/seed; "
                             "echo y >> /workspace/seed && echo z > /workspace/z && echo ok"],
                            env=env(pool))
        assert r.returncode == 0, (mode, r.stderr)
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["0", str(POOL_BASE + RANGE), str(RANGE)], mode
        assert lines[1:] == ["0:0", "ok"], (mode, lines)
        # Twin: the host's folder is never written in these modes.
        assert (ws / "seed").read_text() == "seed\n"
        assert not (ws / "z").exists()
    assert other.end() == 0


def two_stores(runner, pool):
    return PoolStore(runner, pool), PoolStore(runner, pool)


@pytest.fixture
def stores(root_runner, pool):
    a, b = two_stores(root_runner, pool)
    yield a, b
    b.finalize()
    a.finalize()


def test_a_lost_pool_never_hands_out_another_stores_running_range(stores, pool, root_runner):
    sa, sb = stores
    sa.create("a")
    assert maps(sa, "a")[0] == ["0", str(POOL_BASE), str(RANGE)]
    Path(pool, "id-pool").unlink()
    # Store B knows nothing of a: a's keeper's lease keeps its range.
    sb.create("b")
    assert record(sb, "b")["id_base"] == POOL_BASE + RANGE
    assert maps(sb, "b")[0] == ["0", str(POOL_BASE + RANGE), str(RANGE)]
    assert maps(sa, "a")[0] == ["0", str(POOL_BASE), str(RANGE)]
    # Nor does a one-shot run get it.
    assert run_map(root_runner, pool) == ["0", str(POOL_BASE + 2 * RANGE), str(RANGE)]


def test_twin_a_stopped_sandboxs_range_goes_and_it_gets_a_new_one(stores, pool, root_runner):
    sa, sb = stores
    sa.create("a")
    assert maps(sa, "a")[0] == ["0", str(POOL_BASE), str(RANGE)]
    assert sa.hutch("stop", "a").returncode == 0
    Path(pool, "id-pool").unlink()
    # Stopped, a holds no lease: B's new sandbox gets the lowest range...
    sb.create("b")
    assert maps(sb, "b")[0] == ["0", str(POOL_BASE), str(RANGE)]
    # ...and a, started again, a new one (its files are idmapped).
    assert maps(sa, "a")[0] == ["0", str(POOL_BASE + RANGE), str(RANGE)]
    assert record(sa, "a")["id_base"] == POOL_BASE + RANGE
    assert sa.sh("a", "echo ok > /root/f; cat /root/f").strip() == "ok"
