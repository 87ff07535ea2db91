# SPDX-License-Identifier: LGPL-2.1-or-later
"""Terminals of a microVM sandbox (issue 18, docs/vm.md "Published ports
and terminals"): `hutch exec -it` on a VM sandbox, driven through a real
terminal (test_terminal's harness), and hutch serve's exec WebSocket
(stdin; a pty with resize and Ctrl-C) with Debian's python3-websockets. The
command's pty is the guest's own (the agent opens it from the sandbox's
devpts); the window size follows the caller's. One VM per runner (TCG is
slow), as root and as the unprivileged user."""

import json
import re

from test_serve import Api as ServeApi
from test_serve import Server
from test_terminal import (PROMPT, on_terminal, run_ws, terminals, ws_collect,  # noqa: F401
                           ws_connect)
from test_vm_persist import (any_store, assert_vm_gone, started_vm,  # noqa: F401
                             vm_store_dir)

SHELL = f"PS1='{PROMPT.decode()}' exec bash --norc --noprofile -i"


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
    async def with_stdin():
        async with ws_connect(server, "box") as ws:
            await ws.send(json.dumps({"argv": ["sh", "-c", "cat; echo done >&2; exit 4"]}))
            started = json.loads(await ws.recv())
            assert started["type"] == "started" and started["id"] > 0
            await ws.send(b"line one\n")
            await ws.send(b"\x00\xffbinary\n")
            await ws.send(json.dumps({"type": "close_stdin"}))
            return await ws_collect(ws)

    streams, outcome, code = run_ws(with_stdin())
    assert streams[1] == b"line one\n\x00\xffbinary\n"
    assert streams[2] == b"done\n"
    assert outcome["exit_code"] == 4 and outcome["outcome"]["reason"] == "exited"
    assert code == 1000

    async def expect(ws, pattern, seen):
        while not re.search(pattern, seen[0]):
            m = await ws.recv()
            assert isinstance(m, bytes) and m[0] == 1, m
            seen[0] += m[1:]
        found = re.search(pattern, seen[0])
        seen[0] = seen[0][found.end():]

    async def with_tty():
        seen = [b""]
        async with ws_connect(server, "box") as ws:
            await ws.send(json.dumps({"argv": ["sh", "-c", SHELL], "env": {"TERM": "xterm"},
                                      "tty": True, "cols": 90, "rows": 33}))
            assert json.loads(await ws.recv())["type"] == "started"
            await expect(ws, re.escape(PROMPT), seen)
            await ws.send(b"tty; stty size\r")
            await expect(ws, rb"/dev/pts/\d+\r\n33 90\r\n", seen)
            await ws.send(json.dumps({"type": "resize", "cols": 120, "rows": 40}))
            await ws.send(b"stty size\r")
            await expect(ws, rb"\r40 120\r\n", seen)
            await ws.send(b"sh -c 'echo job-$((6*7)); exec sleep 100'\r")
            await expect(ws, rb"job-42\r\n", seen)
            await ws.send(b"\x03")
            await expect(ws, re.escape(PROMPT), seen)
            await ws.send(b"echo alive-$?\r")
            await expect(ws, rb"alive-130\r\n", seen)
            await ws.send(b"exit 9\r")
            return await ws_collect(ws)

    streams, outcome, code = run_ws(with_tty())
    assert b"no job control" not in streams[1]
    assert outcome["exit_code"] == 9 and code == 1000


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
