# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch run -t --backend vm` (issue 18, docs/vm.md "Published ports and
terminals"): a one-shot microVM run with a terminal, driven through a real
terminal (test_terminal's harness) as root and as the unprivileged user.
The command's pty is the guest's own (the agent opens it from the
sandbox's devpts); hutch bridges it to the caller's relay through a host
pty, as the keeper does for `exec -t`. The twins: without -t the command
has no terminal, and -t without a terminal on stdin is refused (125)."""

import re

from test_terminal import PROMPT, on_terminal, terminals  # noqa: F401 (fixture)
from test_vm import qemu_processes_with
from test_vm_persist import any_store, vm_store_dir  # noqa: F401 (fixtures)

TCG = ["--backend", "vm", "--vm-accel", "tcg"]
VM_TIMEOUT = 240
SHELL = f"PS1='{PROMPT.decode()}' exec bash --norc --noprofile -i"


def assert_no_qemu(store):
    assert qemu_processes_with(str(store.state)) == []


def test_vm_run_t_gives_the_guest_pty(terminals, any_store):
    store = any_store
    t = on_terminal(terminals, store, "run", *TCG, "-it", "--", "sh", "-c", SHELL)
    first = t.expect(rb"(?s)(.*?)" + re.escape(PROMPT), timeout=VM_TIMEOUT)
    assert b"no job control" not in first.group(1), first.group(1)
    # A pty of the guest, of the window size the caller's terminal has; it
    # follows a resize.
    t.send(b"tty; stty size\r")
    t.expect(rb"/dev/pts/\d+\r\n24 80\r\n", timeout=VM_TIMEOUT)
    t.resize(40, 120)
    t.send(b"stty size\r")
    t.expect(rb"\r40 120\r\n", timeout=VM_TIMEOUT)
    # Ctrl-C reaches the foreground job through the guest's pty; the shell
    # (and hutch) live on.
    t.send(b"sh -c 'echo job-$((6*7)); exec sleep 100'\r")
    t.expect(rb"job-42\r\n", timeout=VM_TIMEOUT)
    t.send(b"\x03")
    t.expect(re.escape(PROMPT), timeout=VM_TIMEOUT)
    t.send(b"echo alive-$?\r")
    t.expect(rb"alive-130\r\n", timeout=VM_TIMEOUT)
    # The exit code is the command's, and the caller's terminal is as it
    # was.
    t.send(b"exit 9\r")
    assert t.wait(VM_TIMEOUT) == 9
    assert t.modes() == t.before
    assert_no_qemu(store)


def test_vm_run_without_t_has_no_terminal(terminals, any_store):
    store = any_store
    # The twin: on the same terminal, without -t the command's stdin is
    # not a terminal.
    t = on_terminal(terminals, store, "run", *TCG, "--", "sh", "-c", "tty; echo code-$?")
    t.expect(rb"not a tty\r\ncode-1\r\n", timeout=VM_TIMEOUT)
    assert t.wait(VM_TIMEOUT) == 0
    assert t.modes() == t.before
    # -t without a terminal on stdin: refused before any VM starts.
    r = store.hutch("run", *TCG, "-t", "--", "true")
    assert r.returncode == 125, r.stderr
    assert r.stderr.strip() == ("hutch: the input device is not a TTY "
                                "(-t needs a terminal on stdin)"), r.stderr
    assert_no_qemu(store)


def test_vm_run_t_output_and_signal(terminals, any_store):
    store = any_store
    # Without -i the command's output still reaches the terminal, ending
    # with the command (its last bytes included). The caller's terminal is
    # not raw then: its own ONLCR adds a CR to the guest pty's CR LF, as
    # with the namespace backend.
    t = on_terminal(terminals, store, "run", *TCG, "-t", "--", "sh", "-c",
                    "seq 1 2000 | tail -n 1; printf last-line; exit 3")
    t.expect(rb"2000\r+\nlast-line", timeout=VM_TIMEOUT)
    assert t.wait(VM_TIMEOUT) == 3
    assert t.modes() == t.before
    # A signal to hutch reaches the command; the terminal is restored.
    t = on_terminal(terminals, store, "run", *TCG, "-it", "--", "sh", "-c",
                    "trap 'echo got-term; exit 5' TERM; echo ready; "
                    "while :; do sleep 1; done")
    t.expect(rb"ready\r\n", timeout=VM_TIMEOUT)
    t.proc.terminate()
    t.expect(rb"got-term", timeout=VM_TIMEOUT)
    assert t.wait(VM_TIMEOUT) == 5
    assert t.modes() == t.before
    assert_no_qemu(store)
