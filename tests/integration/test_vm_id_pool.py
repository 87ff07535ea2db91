# SPDX-License-Identifier: LGPL-2.1-or-later
"""As root, a persistent microVM sandbox's QEMU runs in a user namespace
of the sandbox's own range of the id pool (issue 15; docs/vm.md "Id
ranges", src/lib/store/id-pool.h), as a namespace sandbox's init does:
two VM sandboxes' QEMUs are host strangers (disjoint uid and gid maps,
different uids), and the files their guests write into their layers keep
the store's fixed owner on the host (the layers are idmapped from the
fixed range onto the sandbox's), so the range never leaks into the store.

Negative twin: a one-shot `hutch run --backend vm` keeps the fixed range
(documented: nothing it makes outlives it) and takes nothing of the pool.

Each test uses a pool of its own ($HUTCH_TEST_ID_POOL, a test hook), so
the ranges handed out are known. TCG, slow: few boots."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import IS_ROOT, subid_base
from diskutil import data_of
from test_id_pool import POOL_BASE, RANGE, pool, pool_entries, record  # noqa: F401
from test_vm import sleeping_vm, vm_env  # noqa: F401 (a fixture)
from test_vm_persist import VmStore, qemu_of, uid_of, workspace

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="the id pool is root's: needs root")


@pytest.fixture(scope="module")
def vm_pool_dir():
    root = Path(tempfile.mkdtemp(prefix="hutch-vmpool-test-", dir="/dev/shm"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


class PoolVmStore(VmStore):
    def __init__(self, runner, top, pool):
        super().__init__(runner, top)
        self.pool = pool

    def env(self, extra=None):
        e = super().env(extra)
        e["HUTCH_TEST_ID_POOL"] = str(self.pool)
        return e


@pytest.fixture
def store(root_runner, vm_pool_dir, pool):
    s = PoolVmStore(root_runner, vm_pool_dir, pool)
    yield s
    s.finalize()
    assert pool_entries(pool, s.home) == []


def qemu_maps(qemu):
    """The host ids and count of QEMU's uid and gid maps (its namespace
    numbers them from the guest ids, VM_GUEST_ID_BASE, on)."""
    u = Path(f"/proc/{qemu}/uid_map").read_text().split()
    g = Path(f"/proc/{qemu}/gid_map").read_text().split()
    return u[1:], g[1:]


def running_qemu(store, name):
    qemu = qemu_of(store.keeper_pid(name))
    assert len(qemu) == 1, qemu
    return qemu[0]


def test_two_vm_sandboxes_have_disjoint_host_ranges(store):
    fixed = subid_base("/etc/subuid")
    fixed_g = subid_base("/etc/subgid")
    for name in ("a", "b"):
        store.create_vm(name, workspace(store))
        assert store.sh(name, f"echo {name} > /root/mine; id -u") == "0\n"
    qa, qb = running_qemu(store, "a"), running_qemu(store, "b")
    # Each QEMU's namespace maps its sandbox's range of the pool, seen from
    # the host; nothing of one is the other's.
    assert qemu_maps(qa) == ([str(POOL_BASE), str(RANGE)],) * 2
    assert qemu_maps(qb) == ([str(POOL_BASE + RANGE), str(RANGE)],) * 2
    assert POOL_BASE <= uid_of(qa) < POOL_BASE + RANGE
    assert POOL_BASE + RANGE <= uid_of(qb) < POOL_BASE + 2 * RANGE
    assert record(store, "a")["id_base"] == POOL_BASE
    assert record(store, "b")["id_base"] == POOL_BASE + RANGE
    # What the guests wrote: in their layers, owned by the store's fixed
    # range (sandbox uid 0 is host uid FIXED), whatever the range.
    for name in ("a", "b"):
        with data_of(store.home, store.state, name) as data:
            st = next(data.glob("upper-*/root/root/mine")).stat()
        assert (st.st_uid, st.st_gid) == (fixed, fixed_g), (name, st.st_uid, st.st_gid)
    # A restart keeps the range (the record holds it) and the files.
    assert store.hutch("stop", "a").returncode == 0
    assert store.sh("a", "cat /root/mine; stat -c %u:%g /root/mine") == "a\n0:0\n"
    assert qemu_maps(running_qemu(store, "a"))[0] == [str(POOL_BASE), str(RANGE)]


def test_a_one_shot_vm_run_leases_a_range_of_its_own(root_runner, vm_env, pool):
    """As root, a one-shot `hutch run --backend vm`'s QEMU runs as a range
    of the pool leased for the run (test_run_id_pool.py has the namespace
    backend's): not the store's fixed range, no line of the pool file, and
    free again after the run."""
    env = {**vm_env, "HUTCH_TEST_ID_POOL": str(pool)}
    p, qemu = sleeping_vm(root_runner, env, [], "true")
    try:
        assert qemu_maps(qemu) == ([str(POOL_BASE), str(RANGE)], [str(POOL_BASE), str(RANGE)])
        assert str(subid_base("/etc/subuid")) != str(POOL_BASE)
        # While it runs, a namespace run gets the next range.
        r = root_runner.run(["--", "cat", "/proc/self/uid_map"], env={"HUTCH_TEST_ID_POOL": str(pool)})
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["0", str(POOL_BASE + RANGE), str(RANGE)]
    finally:
        p.kill()
        p.wait()
    assert pool_entries(pool) == []
    # Twin: killed, its range is free again.
    r = root_runner.run(["--", "cat", "/proc/self/uid_map"], env={"HUTCH_TEST_ID_POOL": str(pool)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", str(POOL_BASE), str(RANGE)]
