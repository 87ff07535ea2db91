# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch stop` that meets a keeper stopping itself for idleness: the
keeper exits with the stop request unread, which resets the connection
(ECONNRESET) instead of closing it. That is a stopped sandbox, not an
error (it failed as "the sandbox's keeper did not answer" in about one
stop of three when the stop came just as --idle-timeout ran out, and in
test_persistent's teardown under load)."""

import time


def test_stop_as_the_keeper_stops_for_idleness(store):
    store.create("box", "--idle-timeout", "100ms")
    failed = []
    for i in range(30):
        r = store.exec("box", "true")
        assert r.returncode == 0, f"round {i}: {r.stderr}"
        # Around the idle timeout, so that some stops meet a keeper on
        # its way out.
        time.sleep((90 + i % 25) / 1000)
        r = store.hutch("stop", "box")
        if r.returncode != 0:
            failed.append(f"round {i}: {r.stderr.strip()}")
    assert not failed, failed
    # Stopped means stopped: no keeper left, and the next exec starts one.
    assert store.ls()["box"]["state"] == "stopped"
    assert store.exec("box", "true").returncode == 0


def test_rm_force_as_the_keeper_stops_for_idleness(store):
    for i in range(15):
        store.create(f"b{i}", "--idle-timeout", "100ms")
        assert store.exec(f"b{i}", "true").returncode == 0
        time.sleep((90 + i % 25) / 1000)
        r = store.hutch("rm", "--force", f"b{i}")
        assert r.returncode == 0, f"round {i}: {r.stderr}"
    assert store.ls() == {}
