# SPDX-License-Identifier: LGPL-2.1-or-later
"""The terminal harness of test_terminal.py and test_terminal_vm.py: a pty
pair on which the hutch CLI runs as a terminal emulator's shell would
start it (Terminal, the `terminals` fixture, on_terminal), and a client of
hutch serve's exec WebSocket (Debian's python3-websockets: ws_connect,
ws_collect, run_ws) with the two WebSocket checks both backends pass:
stdin to a command, and a pty with resize and Ctrl-C."""

import asyncio
import fcntl
import json
import os
import re
import select
import socket
import struct
import subprocess
import termios
import time

import pytest
import websockets

from conftest import kill_quietly
from test_serve import as_euid

PROMPT = b"hutch-pty$ "
WAIT = 30
# An interactive bash at PROMPT, for `sh -c`.
SHELL = f"PS1='{PROMPT.decode()}' exec bash --norc --noprofile -i"


class Terminal:
    """hutch started on the slave of a new pty, as a terminal emulator's
    shell would start it: a session of its own with the slave as its
    controlling terminal (so SIGWINCH reaches it on a resize)."""

    def __init__(self, argv, env, cwd, rows=24, cols=80):
        self.master, self.slave = os.openpty()
        self.resize(rows, cols)
        self.before = termios.tcgetattr(self.slave)
        self.buf = b""
        self.proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=self.slave,
            stdout=self.slave,
            stderr=self.slave,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )

    def resize(self, rows, cols):
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, data):
        os.write(self.master, data)

    def _read(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:
            return None
        self.buf += data
        return bool(data)

    def expect(self, pattern, timeout=WAIT):
        """Reads until @pattern (a bytes regex) matches what the screen got
        since the last match; returns the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                self.buf = self.buf[m.end():]
                return m
            left = deadline - time.monotonic()
            if left <= 0 or self._read(left) is None:
                raise AssertionError(f"{pattern!r} never came; the screen got {self.buf!r}")

    def wait(self, timeout=WAIT):
        """hutch's exit status; what it wrote is read meanwhile."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.05)
        if self.proc.poll() is None:
            self.close()
            raise AssertionError(f"hutch did not exit; the screen got {self.buf!r}")
        while self._read(0):
            pass
        return self.proc.returncode

    def modes(self):
        return termios.tcgetattr(self.slave)

    def pending_input(self):
        """Whether something waits to be read on the caller's terminal."""
        r, _, _ = select.select([self.slave], [], [], 0)
        return bool(r)

    def close(self):
        if self.proc.poll() is None:
            kill_quietly(self.proc.pid)
            self.proc.wait()
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest.fixture
def terminals():
    opened = []

    def start(runner, args, env=None):
        t = Terminal(runner.argv([str(a) for a in args], verb=None),
                     runner.env({"TERM": "xterm", **(env or {})}), str(runner.base_dir))
        opened.append(t)
        return t

    yield start
    for t in opened:
        t.close()


def on_terminal(terminals, store, *args):
    """`hutch ARGS...` on a new terminal, with the store's environment."""
    return terminals(store.runner, args, store.env())


def ws_connect(server, name):
    """A connected websockets client on @name's exec WebSocket."""
    api = server.api
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with as_euid(api.uid):
        s.connect(api.sock_path)
    path = f"/v1/sandboxes/{name}/exec/ws"
    api.hits.add(("GET", path))
    return websockets.connect(f"ws://localhost{path}", sock=s, open_timeout=WAIT,
                              close_timeout=WAIT, max_size=None)


async def ws_collect(ws, streams=None):
    """Reads until the close: (output bytes per stream, the outcome message,
    the close code)."""
    streams = streams if streams is not None else {1: b"", 2: b""}
    outcome = None
    try:
        async for m in ws:
            if isinstance(m, bytes):
                streams[m[0]] = streams.get(m[0], b"") + m[1:]
            else:
                msg = json.loads(m)
                if msg["type"] == "outcome":
                    outcome = msg
    except websockets.ConnectionClosed:
        pass
    return streams, outcome, ws.close_code


def run_ws(coro):
    return asyncio.run(asyncio.wait_for(coro, 2 * WAIT))


def ws_check_stdin(server, name):
    """A command of sandbox @name reads its stdin from the WebSocket (text
    and binary frames, then close_stdin); its stdout, stderr and outcome
    come back."""
    async def go():
        async with ws_connect(server, name) as ws:
            await ws.send(json.dumps({"argv": ["sh", "-c", "cat; echo done >&2; exit 4"]}))
            started = json.loads(await ws.recv())
            assert started["type"] == "started" and started["id"] > 0
            await ws.send(b"line one\n")
            await ws.send(b"\x00\xffbinary\n")
            await ws.send(json.dumps({"type": "close_stdin"}))
            return await ws_collect(ws)

    streams, outcome, code = run_ws(go())
    assert streams[1] == b"line one\n\x00\xffbinary\n"
    assert streams[2] == b"done\n"
    assert outcome["exit_code"] == 4 and outcome["outcome"]["reason"] == "exited"
    assert code == 1000


async def ws_expect(ws, pattern, seen):
    """Reads stdout frames until @pattern matches what came since the last
    match (seen[0])."""
    while not re.search(pattern, seen[0]):
        m = await ws.recv()
        assert isinstance(m, bytes) and m[0] == 1, m
        seen[0] += m[1:]
    found = re.search(pattern, seen[0])
    seen[0] = seen[0][found.end():]


def ws_check_tty(server, name, job):
    """An interactive bash on a pty of sandbox @name over the WebSocket: its
    window size as asked, then resized; Ctrl-C ends @job (a command line
    that prints job-42, then waits) and the shell lives on; its exit
    status is the outcome's, and bash has job control."""
    async def go():
        seen = [b""]
        async with ws_connect(server, name) as ws:
            await ws.send(json.dumps({"argv": ["sh", "-c", SHELL], "env": {"TERM": "xterm"},
                                      "tty": True, "cols": 90, "rows": 33}))
            assert json.loads(await ws.recv())["type"] == "started"
            await ws_expect(ws, re.escape(PROMPT), seen)
            await ws.send(b"tty; stty size\r")
            await ws_expect(ws, rb"/dev/pts/\d+\r\n33 90\r\n", seen)
            await ws.send(json.dumps({"type": "resize", "cols": 120, "rows": 40}))
            await ws.send(b"stty size\r")
            await ws_expect(ws, rb"\r40 120\r\n", seen)
            await ws.send(job)
            await ws_expect(ws, rb"job-42\r\n", seen)
            await ws.send(b"\x03")
            await ws_expect(ws, re.escape(PROMPT), seen)
            await ws.send(b"echo alive-$?\r")
            await ws_expect(ws, rb"alive-130\r\n", seen)
            await ws.send(b"exit 9\r")
            return await ws_collect(ws)

    streams, outcome, code = run_ws(go())
    assert b"no job control" not in streams[1]
    assert outcome["exit_code"] == 9 and code == 1000
