# SPDX-License-Identifier: LGPL-2.1-or-later
"""The keeper's pause on a persistent microVM sandbox (issue 20;
docs/e2b.md "Pause": E2B's pause freezes the sandbox, for a microVM its
QEMU's cgroup), under QEMU with TCG, driven through the keeper's
`pause`/`unpause` requests (what `hutch serve --e2b` sends) and the real
`hutch exec`.

Claims, in one VM (a cold boot under TCG is slow):
  - a counter started with `exec -d` keeps its state across pause and
    unpause: the same pid inside, and its count goes on from where it was;
  - while paused QEMU uses no CPU (its utime+stime stand still), while it
    did before (the twin), and an exec is refused naming the pause; after
    the unpause an exec runs again (the twin);
  - a command's --timeout does not count the paused time: `sleep 60` with
    --timeout 15s paused for longer than that still runs right after the
    unpause, then ends by its timeout."""

import json
import time
from subprocess import PIPE

from cgroupctl import poll_until
from test_capi import workspace
from test_e2b_pause_memory import ticks_move
from test_vm_persist import (VM_TIMEOUT, keeper_request, qemu_of, started_vm,  # noqa: F401
                             store, vm_store_dir)

COUNTER = ("echo $$ > /tmp/pid; i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; "
           "mv /tmp/count.new /tmp/count; sleep 0.2; done")


def read(store, path):
    r = store.exec("box", "cat", path, timeout=VM_TIMEOUT)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def count(store):
    return int(read(store, "/tmp/count"))


def test_pause_keeps_a_vm_counter_and_refuses_exec(store):
    keeper, qemu = started_vm(store, "box", "true", ws=workspace(store))
    r = store.hutch("exec", "box", "-d", "--", "sh", "-c", COUNTER, timeout=VM_TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert poll_until(lambda: store.exec("box", "test", "-s", "/tmp/count").returncode == 0
                      and count(store) > 3, VM_TIMEOUT)
    pid = read(store, "/tmp/pid")
    # The twin of the CPU claim: the VM runs before the pause.
    assert any(ticks_move(q, 5.0) for q in qemu), qemu

    # A --timeout 15s command, started before the pause, paused past it.
    slow = store.popen("exec", "box", "--timeout", "15s", "--json", str(store.dir / "slow.json"),
                       "--", "sh", "-c", "echo $$ > /tmp/slow; exec sleep 60", stdout=PIPE,
                       stderr=PIPE)
    try:
        paused_past_the_timeout(store, qemu, slow)
    finally:
        if slow.poll() is None:
            slow.communicate(timeout=VM_TIMEOUT)
    # The same counter, from where it was, counting on.
    assert read(store, "/tmp/pid") == pid
    before = count(store)
    assert poll_until(lambda: count(store) > before + 3, VM_TIMEOUT)
    # The --timeout command ended by its timeout (not by itself: sleep 60).
    outcome = json.loads((store.dir / "slow.json").read_text())
    assert outcome["reason"] == "timeout", outcome
    assert slow.returncode == 137, slow.returncode
    assert qemu_of(keeper) == qemu


def paused_past_the_timeout(store, qemu, slow):
    sock = store.state / "box" / "keeper.sock"
    assert poll_until(lambda: store.exec("box", "test", "-s", "/tmp/slow").returncode == 0,
                      VM_TIMEOUT)
    slow_pid = read(store, "/tmp/slow")
    assert keeper_request(sock, {"op": "pause"}) == {"op": "ok"}
    try:
        # Frozen: QEMU uses no CPU, and an exec is refused naming it.
        assert not any(ticks_move(q, 2.0) for q in qemu), qemu
        r = store.exec("box", "true", timeout=VM_TIMEOUT)
        assert r.returncode != 0 and "paused" in r.stderr, (r.returncode, r.stderr)
        time.sleep(16)  # the pause has to outlast the 15 s --timeout
    finally:
        assert keeper_request(sock, {"op": "unpause"}) == {"op": "ok"}
    # Still running right after the resume (the guest's clock of it did
    # not run: a timeout due in the pause would have killed it at once).
    r = store.exec("box", "kill", "-0", slow_pid, timeout=VM_TIMEOUT)
    assert r.returncode == 0 and slow.poll() is None, (r.returncode, r.stderr)
