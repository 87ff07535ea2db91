# SPDX-License-Identifier: LGPL-2.1-or-later
"""A background command whose client went away (docs/e2b-envd.md
"process.Process"), with the real `e2b` SDK (e2b-background.mjs) against
`hutch serve --e2b`, as root and as the unprivileged test user.

Claims, each with its twin:
  - the command goes on after its client's process ended (E2B's
    semantics): a new client finds it in `list`, re-attaches by pid and
    reads output it printed meanwhile; `kill` ends it (then not listed);
  - it no longer holds one of the server's 256 connection slots: with
    255 other connections in the middle of a request (which are never
    evicted), one more client is still answered. On a server where the
    dropped command kept its slot, that client waits (for a slot that
    frees only when a request's 60 s receive timeout passes)."""

import os
import socket
import time
from pathlib import Path

from test_e2b_envd import API_KEY, e2b_modules, run_driver, server  # noqa: F401 (fixtures)

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "e2b-background.mjs"
CAP = 256


def drive(server, modules, tmp_path, *args):
    return run_driver(server, modules, tmp_path, DRIVER, *args)


def children(pid):
    """The server's child processes (its connections' forks)."""
    kids = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        text = Path(f"/proc/{pid}/task/{task}/children").read_text()
        kids |= {int(x) for x in text.split()}
    return kids


def wait_children(pid, n, timeout=60):
    """Waits until the server has @n children (its forks of closed
    connections end on their own); returns them."""
    end = time.monotonic() + timeout
    while True:
        kids = children(pid)
        if len(kids) == n or time.monotonic() > end:
            return kids
        time.sleep(0.05)


def addr(url):
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def test_background_command_outlives_its_client(server, e2b_modules, tmp_path):
    started = drive(server, e2b_modules, tmp_path, "start")
    assert started["ticked"], started
    # The client's process is gone; what it left is the command's fork.
    assert len(wait_children(server.proc.pid, 1)) == 1
    held = []
    try:
        # 255 connections in the middle of a request (a body announced,
        # not sent): never evicted.
        for _ in range(CAP - 1):
            s = socket.create_connection(addr(server.api), timeout=30)
            s.sendall(b"POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: " + API_KEY.encode() +
                      b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            held.append(s)
        # Each is being served by a fork of its own...
        assert len(wait_children(server.proc.pid, CAP)) == CAP
        # ...and one more client is answered: the command's fork holds
        # no slot.
        s = socket.create_connection(addr(server.api), timeout=30)
        held.append(s)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(30)
        try:
            head = s.recv(4096)
        except socket.timeout:
            head = b"(no answer within 30 s)"
        assert head.startswith(b"HTTP/1.1 "), head
    finally:
        for s in held:
            s.close()
    out = drive(server, e2b_modules, tmp_path, "resume", started["sandbox"], str(started["pid"]))
    assert out == {"listed": True, "readOn": True, "kill": True, "listedAfter": False}, out
    assert server.sandboxes() == []
