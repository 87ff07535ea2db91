# SPDX-License-Identifier: LGPL-2.1-or-later
"""Terminals of a microVM sandbox (issue 18, docs/vm.md "Published ports
and terminals"): `hutch exec -it` on a VM sandbox, driven through a real
terminal (ptyharness.py, as test_terminal), and hutch serve's exec WebSocket
(stdin; a pty with resize and Ctrl-C) with Debian's python3-websockets. The
command's pty is the guest's own (the agent opens it from the sandbox's
devpts); the window size follows the caller's. One VM per runner (TCG is
slow), as root and as the unprivileged user."""

import re

from ptyharness import (PROMPT, SHELL, on_terminal, terminals,  # noqa: F401 (fixture)
                        ws_check_stdin, ws_check_tty)
from test_serve import Api as ServeApi
from test_serve import Server
from test_vm_persist import (any_store, assert_vm_gone, started_vm,  # noqa: F401
                             vm_store_dir)


def check_terminal(terminals, store):
    t = on_terminal(terminals, store, "exec", "-it", "box", "--", "sh", "-c", SHELL)
    first = t.expect(rb"(?s)(.*?)" + re.escape(PROMPT), timeout=120)
    assert b"no job control" not in first.group(1), first.group(1)
    # The guest's own pty, of the window size the caller's terminal has.
    t.send(b"tty; stty size\r")
    t.expect(rb"/dev/pts/\d+\r\n24 80\r\n")
    t.resize(40, 120)
    t.send(b"stty size\r")
    t.expect(rb"\r\n40 120\r\n")
    # Ctrl-C reaches the foreground job through the guest's pty; the shell
    # lives on.
    t.send(b"sh -c 'echo job-$((6*7)); exec sleep 100'\r")
    t.expect(rb"job-42\r\n")
    t.send(b"\x03")
    t.expect(re.escape(PROMPT))
    t.send(b"echo alive-$?\r")
    t.expect(rb"alive-130\r\n")
    t.send(b"exit 9\r")
    assert t.wait(120) == 9
    # The caller's terminal is as it was.
    assert t.modes() == t.before
    # A command that is not there: 127, and why, on the terminal.
    t = on_terminal(terminals, store, "exec", "-it", "box", "--", "/no/such/command")
    t.expect(rb"hutch: /no/such/command: command not found")
    assert t.wait(120) == 127


def check_websocket(server):
    ws_check_stdin(server, "box")
    ws_check_tty(server, "box", b"sh -c 'echo job-$((6*7)); exec sleep 100'\r")


def test_vm_terminal_and_websocket_exec(terminals, any_store):
    store = any_store
    keeper, qemu = started_vm(store, "box", "true")
    check_terminal(terminals, store)
    # -t without a terminal on stdin: refused as with the namespace
    # backend, nothing run.
    r = store.hutch("exec", "box", "-t", "--", "true")
    assert r.returncode == 125, r.stderr
    assert r.stderr.strip() == ("hutch: the input device is not a TTY "
                                "(-t needs a terminal on stdin)"), r.stderr

    srv = Server(store.runner)
    srv.env = store.env()
    proc, path, _ = srv.start()
    try:
        srv.api = ServeApi(path, srv.uid)
        check_websocket(srv)
    finally:
        srv.stop(proc)
    assert store.hutch("rm", "--force", "box").returncode == 0
    assert_vm_gone(store, "box", keeper, qemu)
