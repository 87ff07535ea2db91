# SPDX-License-Identifier: LGPL-2.1-or-later
"""A lost id pool file is rebuilt from the store's sandbox records (issue
15; src/lib/store/id-pool.h, docs/persistent.md "The id pool as root").

The attack: the pool file (/var/lib/hutch/id-pool) is wiped while a root
sandbox runs; the next `hutch create` would take the lowest free range,
which is the running sandbox's own, and the two sandboxes' roots would be
one host uid. Every claim now puts back the ranges its store's records
hold before it hands one out. Negative twin: a range whose sandbox was
removed is free again in the rebuilt pool (nothing is held that no record
names)."""

import os
from pathlib import Path

from test_id_pool import POOL_BASE, RANGE, maps, pool, pool_entries, pstore, record  # noqa: F401


def host_uids(st, name):
    """The host uids of the processes the keeper of @name runs."""
    keeper = st.keeper_pid(name)
    kids = [int(p) for p in Path(f"/proc/{keeper}/task/{keeper}/children").read_text().split()]
    return {int(Path(f"/proc/{k}/status").read_text().split("Uid:")[1].split()[0]) for k in kids}


def test_a_wiped_pool_never_hands_out_a_running_sandboxs_range(pstore):
    st = pstore
    a = st.create("a")
    assert maps(st, "a")[0] == ["0", str(POOL_BASE), str(RANGE)]
    assert POOL_BASE in host_uids(st, "a")
    # The pool's folder wiped while a runs.
    Path(st.pool, "id-pool").unlink()
    b = st.create("b")
    ua, ub = maps(st, "a")[0], maps(st, "b")[0]
    assert ua == ["0", str(POOL_BASE), str(RANGE)]
    assert ub == ["0", str(POOL_BASE + RANGE), str(RANGE)], (ua, ub)
    assert record(st, "b")["id_base"] == POOL_BASE + RANGE
    # The host sees two strangers: no uid of one is the other's.
    assert all(POOL_BASE + RANGE <= u < POOL_BASE + 2 * RANGE for u in host_uids(st, "b"))
    assert all(POOL_BASE <= u < POOL_BASE + RANGE for u in host_uids(st, "a"))
    # The rebuilt pool holds both again.
    home = os.path.realpath(st.home)
    assert sorted(pool_entries(st.pool, home)) == [(POOL_BASE, a, home),
                                                   (POOL_BASE + RANGE, b, home)]


def test_twin_a_removed_sandboxs_range_is_free_in_the_rebuilt_pool(pstore):
    st = pstore
    st.create("a")
    b = st.create("b")
    st.sh("b", "true")
    assert st.hutch("rm", "--force", "a").returncode == 0
    Path(st.pool, "id-pool").unlink()
    c = st.create("c")
    # a's range is free (no record names it), b's is b's.
    assert record(st, "c")["id_base"] == POOL_BASE
    assert maps(st, "c")[0] == ["0", str(POOL_BASE), str(RANGE)]
    assert maps(st, "b")[0] == ["0", str(POOL_BASE + RANGE), str(RANGE)]
    home = os.path.realpath(st.home)
    assert sorted(pool_entries(st.pool, home)) == [(POOL_BASE, c, home),
                                                   (POOL_BASE + RANGE, b, home)]
