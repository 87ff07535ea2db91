# SPDX-License-Identifier: LGPL-2.1-or-later
"""A VM terminal's window size follows the caller's on the event, not by
re-reading it every 200 ms (issue 18, docs/vm.md "Published ports and
terminals"): the host pty's resize is the kernel's SIGWINCH to a small
helper (hutch-winch) whose controlling terminal that pty is, and the
keeper (`exec -it`) or `hutch run -it` sends RESIZE when it says so. So
the keeper and `hutch run` sleep while a terminal sits idle (the twin of
the resize reaching the guest without a key typed), and the helper goes
with its exec. As root and as the unprivileged user; one VM per runner
(TCG is slow)."""

import re
import time
from pathlib import Path

from cgroupctl import poll_until
from test_terminal import on_terminal, terminals  # noqa: F401 (fixture)
from test_vm_persist import any_store, assert_vm_gone, started_vm, vm_store_dir  # noqa: F401

TCG = ["--backend", "vm", "--vm-accel", "tcg"]
VM_TIMEOUT = 240
# Says the window size at each SIGWINCH the guest's pty sends it.
WATCHER = "trap 'stty size' WINCH; echo ready; while :; do sleep 1; done"
# How long a process is watched for wake-ups while nothing happens: the
# old 200 ms re-reading woke it 10 times in this.
IDLE_S = 2.0


def wakeups(pid):
    """The context switches of @pid so far (each wake-up is one)."""
    n = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
            n += int(line.split()[1])
    return n


def idle_wakeups(pid):
    before = wakeups(pid)
    time.sleep(IDLE_S)  # a window to count in, not a wait for something
    return wakeups(pid) - before


def children_named(pid, comm):
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == pid and name == comm:
            out.append(int(p.name))
    return out


def check_resize_on_the_event(t, pid):
    t.expect(rb"ready\r\n", timeout=VM_TIMEOUT)
    # Nothing happens: the process that bridges the terminal sleeps.
    n = idle_wakeups(pid)
    assert n <= 3, f"{n} wake-ups in {IDLE_S} s of an idle terminal"
    # A resize reaches the guest without a key typed.
    t.resize(31, 101)
    t.expect(rb"31 101\r\n", timeout=VM_TIMEOUT)
    t.resize(42, 77)
    t.expect(rb"42 77\r\n", timeout=VM_TIMEOUT)
    t.send(b"\x03")
    assert t.wait(VM_TIMEOUT) == 130
    assert t.modes() == t.before


def test_vm_exec_t_resize_is_an_event(terminals, any_store):
    store = any_store
    keeper, qemu = started_vm(store, "box", "true")
    t = on_terminal(terminals, store, "exec", "-it", "box", "--", "sh", "-c", WATCHER)
    t.expect(rb"ready\r\n", timeout=VM_TIMEOUT)
    assert len(children_named(keeper, "hutch-winch")) == 1
    t.buf = b"ready\r\n" + t.buf
    check_resize_on_the_event(t, keeper)
    # The helper went with its exec.
    assert poll_until(lambda: children_named(keeper, "hutch-winch") == [], 30)
    assert store.hutch("rm", "--force", "box").returncode == 0
    assert_vm_gone(store, "box", keeper, qemu)


def test_vm_run_t_resize_is_an_event(terminals, any_store):
    store = any_store
    t = on_terminal(terminals, store, "run", *TCG, "-it", "--", "sh", "-c", WATCHER)
    t.expect(re.escape(b"ready\r\n"), timeout=VM_TIMEOUT)
    assert len(children_named(t.proc.pid, "hutch-winch")) == 1
    t.buf = b"ready\r\n" + t.buf
    check_resize_on_the_event(t, t.proc.pid)
