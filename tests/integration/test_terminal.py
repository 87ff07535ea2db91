# SPDX-License-Identifier: LGPL-2.1-or-later
"""Terminals (issue 18, docs/terminal.md): `hutch run -t`, `hutch exec -t`
and `-i`, driven through a real terminal: each test opens a pty pair
(Python's `os.openpty`), starts the hutch CLI on its slave as its
controlling terminal, as a shell would, and plays the terminal emulator on
the master (keys in, screen out, resizes). The harness keeps a descriptor
of the slave, "the caller's terminal", to read its modes (`stty -g`'s
termios) before and after, and to see whether anything was typed into it.

As root and as the unprivileged user (conftest's runners); persistent
sandboxes through conftest's `store` fixture, which removes them
and checks that no keeper or cgroup is left. The last part drives hutch
serve's exec WebSocket with Debian's python3-websockets (test_serve's
`server` fixture)."""

import base64
import hashlib
import json
import os
import re
import secrets
import select
import signal
import socket
import termios
import time

from conftest import live_with_marker, wait_pidfds
from ptyharness import (PROMPT, WAIT, on_terminal, run_ws, terminals,  # noqa: F401 (fixture)
                        ws_check_stdin, ws_check_tty, ws_collect, ws_connect)
from test_persistent import marker
from test_serve import as_euid, create, server  # noqa: F401 (fixture)

def shell(terminals, store, verb, *flags):
    """An interactive sh (`-it`), run by @verb ("run", or "exec NAME"),
    at its first prompt."""
    t = on_terminal(terminals, store, *verb.split(), "-it", *flags, "--", "sh", "-c",
                    f"PS1='{PROMPT.decode()}' exec bash --norc --noprofile -i")
    t.expect(re.escape(PROMPT))
    return t


def verbs(store):
    """`hutch run` and `hutch exec` on a new sandbox: both give terminals."""
    name = f"pty-{marker()}"
    store.create(name)
    return ["run", f"exec {name}"]


# ---- the terminal is the sandbox's own ----

# Prints the facts of the command's stdin: a terminal of which devpts.
TTY_FACTS = (
    "tty; "
    "if [ \"$(stat -Lc %d /proc/self/fd/0)\" = \"$(stat -c %d /dev/pts/ptmx)\" ]; "
    "then echo own-devpts; else echo other-devpts; fi"
)


def test_tty_is_a_pts_of_the_sandbox_own_devpts(terminals, store):
    for verb in verbs(store):
        t = on_terminal(terminals, store, *verb.split(), "-t", "--", "sh", "-c", TTY_FACTS)
        t.expect(rb"/dev/pts/\d+\r?\r\n")
        t.expect(rb"own-devpts")
        assert t.wait() == 0


def test_without_t_the_command_gets_no_terminal_of_its_own(terminals, store):
    # Twin: without -t the caller's stdio is passed as it is (a pty of the
    # host's devpts), which the command cannot make its controlling
    # terminal (a session of its own).
    for verb in verbs(store):
        t = on_terminal(terminals, store, *verb.split(), "--", "sh", "-c",
                        TTY_FACTS + "; (exec 3</dev/tty) 2>/dev/null || echo no-ctty")
        t.expect(rb"other-devpts")
        t.expect(rb"no-ctty")
        assert t.wait() == 0


# SECURITY: TIOCSTI types into a terminal's input queue; with the caller's
# terminal inside the sandbox, that is the caller's shell (bubblewrap's
# CVE-2017-5226). Prints "refused ERRNO" or "injected".
TIOCSTI = (
    "import fcntl, os, sys, termios\n"
    "a = sys.argv[1]\n"
    "fd = int(a) if a.isdigit() else os.open(a, os.O_RDWR | os.O_NOCTTY)\n"
    "try:\n"
    "    fcntl.ioctl(fd, termios.TIOCSTI, b'X')\n"
    "    print('injected')\n"
    "except OSError as e:\n"
    "    print('refused', e.errno)\n"
)


def test_tiocsti_never_reaches_the_callers_terminal(terminals, store):
    for verb in verbs(store):
        # With -t: /dev/tty is the sandbox's own pty, and TIOCSTI is denied.
        t = on_terminal(terminals, store, *verb.split(), "-t", "--", "python3", "-c", TIOCSTI,
                        "/dev/tty")
        t.expect(rb"refused 1\r")
        assert t.wait() == 0
        assert not t.pending_input(), "something was typed into the caller's terminal"
        # Without -t, on the caller's terminal itself (its stdin).
        t = on_terminal(terminals, store, *verb.split(), "--", "python3", "-c", TIOCSTI, "0")
        t.expect(rb"refused 1\r")
        assert t.wait() == 0
        assert not t.pending_input(), "something was typed into the caller's terminal"


# ---- an interactive shell ----

def test_stty_size_follows_a_resize(terminals, store):
    for verb in verbs(store):
        t = shell(terminals, store, verb)
        t.send(b"stty size\r")
        t.expect(rb"\r24 80\r\n")
        t.resize(40, 132)
        t.send(b"stty size\r")
        t.expect(rb"\r40 132\r\n")
        t.send(b"exit\r")
        assert t.wait() == 0


# The foreground job Ctrl-C is for: it says "job-42" once SIGINT is at its
# default, so the kernel ends it (a handler that only sets a flag, as
# dash's and Python's do, can miss a SIGINT that lands just before a
# blocking call, and the job would sleep on).
JOB = (b"python3 -c 'import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); "
       b"print(\"job-%d\" % 42, flush=True); time.sleep(100)'\r")


def test_ctrl_c_interrupts_the_foreground_job_and_the_shell_lives(terminals, store):
    for verb in verbs(store):
        t = shell(terminals, store, verb)
        # The job runs (its own process group is the terminal's
        # foreground) once it says so.
        t.send(JOB)
        t.expect(rb"job-42\r\n")
        t.send(b"\x03")
        t.expect(re.escape(PROMPT))
        t.send(b"echo alive-$?\r")
        t.expect(rb"alive-130\r\n")
        t.send(b"exit 7\r")
        assert t.wait() == 7


def test_bash_has_job_control(terminals, store):
    for verb in verbs(store):
        t = shell(terminals, store, verb)
        t.send(b"set -o | grep -w monitor; sleep 50 &\r")
        t.expect(rb"monitor\s+on")
        t.expect(rb"\[1\] \d+")
        t.send(b"jobs; kill %1; wait; exit\r")
        t.expect(rb"\[1\]\+\s+Running\s+sleep 50")
        assert t.wait() == 0
        assert b"no job control" not in t.buf


def test_without_a_terminal_bash_has_no_job_control(store):
    # Twin: the same shell without -t warns, as the issue found it.
    name = f"pty-{marker()}"
    store.create(name)
    r = store.exec(name, "bash", "--norc", "-i", input="exit\n")
    assert "no job control" in r.stderr, r.stderr


def test_vi_opens_and_quits(terminals, store):
    for verb in verbs(store):
        t = on_terminal(terminals, store, *verb.split(), "-it", "--", "sh", "-c",
                        "busybox vi /tmp/note && cat /tmp/note")
        t.expect(rb"/tmp/note")
        t.send(b"ihello from vi")
        t.expect(rb"hello from vi")
        # Escape alone (vi waits to see whether a sequence follows): the
        # status line says command mode.
        t.send(b"\x1b")
        t.expect(rb"- /tmp/note \[Modified\]")
        t.send(b":wq\r")
        t.expect(rb"'/tmp/note' 1L, 14C")
        t.expect(rb"hello from vi\r\n")
        assert t.wait() == 0


# ---- the caller's terminal is restored ----

def test_modes_are_raw_meanwhile_and_restored_after_a_normal_exit(terminals, store):
    for verb in verbs(store):
        t = shell(terminals, store, verb)
        raw = t.modes()
        assert not raw[3] & termios.ECHO and not raw[3] & termios.ICANON
        assert raw != t.before
        t.send(b"exit\r")
        assert t.wait() == 0
        assert t.modes() == t.before


def test_modes_are_restored_when_the_sandbox_is_stopped(terminals, store):
    name = f"pty-{marker()}"
    store.create(name)
    t = shell(terminals, store, f"exec {name}")
    t.send(b"sleep 100\r")
    t.expect(rb"sleep 100\r\n")
    r = store.hutch("stop", name)
    assert r.returncode == 0, r.stderr
    assert t.wait() != 0
    assert t.modes() == t.before


def test_modes_are_restored_after_a_signal_to_hutch(terminals, store):
    # SIGTERM to hutch goes on to the command; hutch ends as it did.
    for verb in verbs(store):
        t = on_terminal(terminals, store, *verb.split(), "-it", "--", "sh", "-c",
                        "echo up; exec sleep 100")
        t.expect(rb"up\r\n")
        assert t.modes() != t.before
        os.kill(t.proc.pid, signal.SIGTERM)
        assert t.wait() == 128 + signal.SIGTERM
        assert t.modes() == t.before


def test_modes_are_restored_when_hutch_is_killed(terminals, store):
    for verb in verbs(store):
        t = shell(terminals, store, verb)
        assert t.modes() != t.before
        # SIGKILL: hutch cannot restore them; its relay (PR_SET_PDEATHSIG)
        # does, and ends.
        os.kill(t.proc.pid, signal.SIGKILL)
        t.proc.wait()
        deadline = time.monotonic() + WAIT
        while t.modes() != t.before and time.monotonic() < deadline:
            select.select([], [], [], 0.02)
        assert t.modes() == t.before


# ---- bad input ----

def test_t_without_a_terminal_is_refused(store):
    name = f"pty-{marker()}"
    store.create(name)
    for args in (["run", "-t", "--", "true"], ["run", "-it", "--", "true"],
                 ["exec", name, "-t", "--", "true"], ["exec", "-it", name, "--", "true"]):
        r = store.hutch(*args)
        assert r.returncode == 125, (args, r.stderr)
        assert r.stderr.strip() == ("hutch: the input device is not a TTY "
                                    "(-t needs a terminal on stdin)"), r.stderr
        assert r.stdout == ""
    # Nothing ran: the sandbox's history is empty.
    assert store.history(name) == []


def test_t_with_detach_or_an_output_limit_is_refused(terminals, store):
    name = f"pty-{marker()}"
    store.create(name)
    t = on_terminal(terminals, store, "exec", name, "-t", "-d", "--", "true")
    t.expect(rb"hutch: -t and -d do not go together")
    assert t.wait() == 125
    t = on_terminal(terminals, store, "run", "-t", "--output-limit", "1m", "--", "true")
    t.expect(rb"hutch: -t and --output-limit do not go together")
    assert t.wait() == 125
    assert store.history(name) == []


def test_no_relay_outlives_its_exec(terminals, store):
    name = f"pty-{marker()}"
    store.create(name)
    t = on_terminal(terminals, store, "exec", name, "-it", "--", "sh", "-c", "echo up; exec cat")
    t.expect(rb"up\r\n")
    relays = [int(p) for p in
              open(f"/proc/{t.proc.pid}/task/{t.proc.pid}/children").read().split()]
    assert relays, "hutch exec -t has its relay process"
    t.send(b"\x04")
    assert t.wait() == 0
    assert not wait_pidfds(relays, WAIT)


# ---- the exec WebSocket of hutch serve (docs/api.md) ----
#
# Driven by Debian's python3-websockets, a client nobody here wrote, as
# root and as the user (test_serve's `server` fixture: its own store and
# server, both removed after).


def test_websocket_exec_with_stdin(server):
    name = f"w-{secrets.token_hex(3)}"
    create(server.api, name)
    ws_check_stdin(server, name)


def test_websocket_terminal(server):
    name = f"w-{secrets.token_hex(3)}"
    create(server.api, name)
    # Ctrl-C reaches the foreground job through the pty.
    ws_check_tty(server, name, JOB)


def test_websocket_signal_and_close_kill(server):
    name = f"w-{secrets.token_hex(3)}"
    create(server.api, name)
    marker = f"{secrets.randbelow(10**6)}"

    async def signalled():
        async with ws_connect(server, name) as ws:
            await ws.send(json.dumps({"argv": ["sh", "-c", "echo up; exec sleep 1000"]}))
            assert json.loads(await ws.recv())["type"] == "started"
            assert await ws.recv() == b"\x01up\n"
            await ws.send(json.dumps({"type": "signal", "signal": "TERM"}))
            return await ws_collect(ws)

    _, outcome, code = run_ws(signalled())
    assert outcome["outcome"]["signal"] == 15 and outcome["exit_code"] == 143, outcome
    assert code == 1000

    async def closed():
        async with ws_connect(server, name) as ws:
            await ws.send(json.dumps(
                {"argv": ["sh", "-c", f"echo up; exec sleep 1000.{marker}"], "tty": True}))
            assert json.loads(await ws.recv())["type"] == "started"
            assert (await ws.recv()).startswith(b"\x01up")
            pids = live_with_marker(f"sleep 1000.{marker}")
            assert pids, "the command is not running"
            return pids

    pids = run_ws(closed())
    # The client closed before the outcome: the command goes.
    assert wait_pidfds(list(pids), WAIT) == set(), "the command outlived its WebSocket"
    assert server.api.exec(name, ["echo", "after"])["stdout"] == "after\n"


def raw_ws(server, name, key="dGhlIHNhbXBsZSBub25jZQ==", version="13", extra=b""):
    """A handshake by hand, then @extra; returns (the answer's head, the
    socket)."""
    api = server.api
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(WAIT)
    with as_euid(api.uid):
        s.connect(api.sock_path)
    s.sendall(
        f"GET /v1/sandboxes/{name}/exec/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
        f"Upgrade: websocket\r\nSec-WebSocket-Key: {key}\r\n"
        f"Sec-WebSocket-Version: {version}\r\n\r\n".encode() + extra)
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    head, _, rest = got.partition(b"\r\n\r\n")
    return head, rest, s


def client_frame(op, payload, fin=True, mask=b"\x11\x22\x33\x44", masked=True):
    n = len(payload)
    b = bytes([(0x80 if fin else 0) | op])
    m = 0x80 if masked else 0
    if n < 126:
        b += bytes([m | n])
    elif n <= 0xFFFF:
        b += bytes([m | 126]) + n.to_bytes(2, "big")
    else:
        b += bytes([m | 127]) + n.to_bytes(8, "big")
    if not masked:
        return b + payload
    return b + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))


def close_code_of(s, rest):
    """Reads frames from the server until its close frame: its code."""
    data = rest
    while True:
        while len(data) >= 2:
            n = data[1] & 0x7F
            h = 2 if n < 126 else 4 if n == 126 else 10
            if n >= 126:
                n = int.from_bytes(data[2:h], "big")
            if len(data) < h + n:
                break
            op, payload, data = data[0] & 0x0F, data[h:h + n], data[h + n:]
            if op == 8:
                return int.from_bytes(payload[:2], "big")
        chunk = s.recv(65536)
        if not chunk:
            return None
        data += chunk


def test_websocket_bad_input(server):
    api = server.api
    name = f"w-{secrets.token_hex(3)}"
    create(api, name)
    accept = base64.b64encode(hashlib.sha1(
        b"dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()).decode()

    # The handshake: RFC 6455's example key gives its example answer.
    head, rest, s = raw_ws(server, name)
    assert head.startswith(b"HTTP/1.1 101 "), head
    assert f"Sec-WebSocket-Accept: {accept}".encode() in head
    # Twin: an unmasked frame from a client closes with 1002.
    s.sendall(client_frame(1, b'{"argv":["true"]}', masked=False))
    assert close_code_of(s, rest) == 1002
    s.close()
    # Refused before the upgrade: no such sandbox, a bad key, version 8.
    head, _, s = raw_ws(server, "no-such-box")
    assert head.startswith(b"HTTP/1.1 404 "), head
    s.close()
    head, _, s = raw_ws(server, name, key="short")
    assert head.startswith(b"HTTP/1.1 400 "), head
    s.close()
    head, _, s = raw_ws(server, name, version="8")
    assert head.startswith(b"HTTP/1.1 426 ") and b"Sec-WebSocket-Version: 13" in head, head
    s.close()
    cases = [
        # (frames after the handshake, the close code)
        (client_frame(2, b"stdin first"), 1003),
        (client_frame(1, b'{"argv":[]}'), 1008),
        (client_frame(1, b'{"argv":["true"],"bogus":1}'), 1008),
        (client_frame(1, b'{"argv":["true"],"cols":80}'), 1008),
        (client_frame(1, b"\xc3\x28"), 1007),
        (b"\x81\xfe\x00\x05", 1002),  # a length not in its shortest form
        (client_frame(9, b"p", fin=False), 1002),
        (client_frame(2, b"", fin=False) + bytes([0x80, 0xFF]) + (2**20 + 1).to_bytes(8, "big"),
         1009),
    ]
    for frames, want in cases:
        head, rest, s = raw_ws(server, name, extra=frames)
        assert head.startswith(b"HTTP/1.1 101 "), head
        assert close_code_of(s, rest) == want, (frames[:40], want)
        s.close()
    # Pings are answered; the sandbox still serves.
    head, rest, s = raw_ws(server, name, extra=client_frame(9, b"hi") + client_frame(8, b"\x03\xe8"))
    data = rest
    while len(data) < 4:
        data += s.recv(64)
    assert data[:4] == b"\x8a\x02hi", data
    s.close()
    assert api.exec(name, ["echo", "after"])["stdout"] == "after\n"
