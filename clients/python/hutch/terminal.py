# SPDX-License-Identifier: LGPL-2.1-or-later
"""The exec WebSocket of `hutch serve` (docs/api.md, "The exec WebSocket"):
a command with its stdin open and, asked for, a terminal. A WebSocket
client (RFC 6455) of its own on the socket module, over the unix socket or
TCP: the handshake with its Sec-WebSocket-Accept check, masked client
frames, fragmented messages, ping/pong and the close handshake. Sync: the
caller reads with read() (a timeout) and writes with write()."""

import base64
import hashlib
import json
import os
import select
import socket
import struct
import time
from typing import Any, Dict, Optional, Tuple

from .errors import ApiError, ConnectionFailed, error_from_body

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
HEAD_MAX = 16 << 10
MESSAGE_MAX = 1 << 20


class Terminal:
    """A command behind an exec WebSocket. `id` once started; `exit_code`
    and `outcome` (the API's object) once it ended (`finished`)."""

    def __init__(self, sock: socket.socket, leftover: bytes):
        self._sock = sock
        self._buf = leftover
        self._frags = b""
        self._frag_op = 0
        self._closed = False
        self.id: Optional[int] = None
        self.exit_code: Optional[int] = None
        self.outcome: Optional[Dict[str, Any]] = None
        self.finished = False
        self._pending = []  # (stream, bytes) not yet read

    # -- to the command --

    def write(self, data) -> None:
        """Sends @data (str or bytes) to the command's stdin (its keys)."""
        self._send(2, data.encode() if isinstance(data, str) else bytes(data))

    def resize(self, cols: int, rows: int) -> None:
        self._send_json({"type": "resize", "cols": cols, "rows": rows})

    def signal(self, sig) -> None:
        self._send_json({"type": "signal", "signal": sig})

    def close_stdin(self) -> None:
        self._send_json({"type": "close_stdin"})

    def close(self) -> None:
        """Closes the WebSocket: a command still running is killed."""
        if not self._closed:
            self._closed = True
            try:
                self._send(8, struct.pack("!H", 1000))
            except OSError:
                pass
        self._sock.close()

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc):
        self.close()

    # -- from the command --

    def read(self, timeout: Optional[float] = None) -> Tuple[bytes, bytes]:
        """The output that came within @timeout seconds (None: until some
        came or the command ended): (stdout or the terminal, stderr)."""
        out, err = [], []
        while not out and not err and not self.finished:
            if not self._pump(timeout):
                break
            for stream, data in self._take():
                (err if stream == 2 else out).append(data)
        for stream, data in self._take():
            (err if stream == 2 else out).append(data)
        return b"".join(out), b"".join(err)

    def wait(self, timeout: Optional[float] = None) -> Tuple[bytes, bytes]:
        """Reads until the command ended (or @timeout seconds passed):
        all its output from now, (stdout, stderr)."""
        end = None if timeout is None else time.monotonic() + timeout
        out, err = [], []
        while not self.finished:
            left = None if end is None else max(0.0, end - time.monotonic())
            if left == 0.0 or not self._pump(left):
                break
            for stream, data in self._take():
                (err if stream == 2 else out).append(data)
        for stream, data in self._take():
            (err if stream == 2 else out).append(data)
        return b"".join(out), b"".join(err)

    # -- the protocol --

    def _take(self):
        p, self._pending = self._pending, []
        return p

    def _pump(self, timeout: Optional[float]) -> bool:
        """Reads once (waiting at most @timeout) and handles the frames;
        False when nothing came in time."""
        r, _, _ = select.select([self._sock], [], [], timeout)
        if not r:
            return False
        try:
            d = self._sock.recv(65536)
        except OSError as e:
            raise ConnectionFailed(f"exec WebSocket: {e}") from None
        if not d:
            if not self.finished:
                raise ConnectionFailed("exec WebSocket closed before the outcome")
            return False
        self._buf += d
        self._frames()
        return True

    def _frames(self) -> None:
        while True:
            b = self._buf
            if len(b) < 2:
                return
            n, off = b[1] & 0x7F, 2
            if b[1] & 0x80:
                raise ConnectionFailed("a masked frame from the server")
            if n == 126:
                if len(b) < 4:
                    return
                n, off = struct.unpack("!H", b[2:4])[0], 4
            elif n == 127:
                if len(b) < 10:
                    return
                n, off = struct.unpack("!Q", b[2:10])[0], 10
            if n > MESSAGE_MAX:
                raise ConnectionFailed("a frame over 1 MiB")
            if len(b) < off + n:
                return
            fin, op, payload = b[0] & 0x80, b[0] & 0x0F, b[off:off + n]
            self._buf = b[off + n:]
            if op >= 8:
                self._control(op, payload)
                continue
            if op != 0:
                self._frag_op = op
            self._frags += payload
            if fin:
                msg, self._frags = self._frags, b""
                self._message(self._frag_op, msg)

    def _control(self, op: int, payload: bytes) -> None:
        if op == 9:
            self._send(10, payload)
        elif op == 8:
            if not self._closed:
                self._closed = True
                try:
                    self._send(8, payload[:2])
                except OSError:
                    pass
            if not self.finished:
                raise ConnectionFailed("exec WebSocket closed before the outcome")

    def _message(self, op: int, msg: bytes) -> None:
        if op == 2:
            if msg:
                self._pending.append((msg[0], msg[1:]))
            return
        m = json.loads(msg.decode("utf-8"))
        if m.get("type") == "started":
            self.id = m["id"]
        elif m.get("type") == "outcome":
            self.exit_code, self.outcome, self.finished = m.get("exit_code"), m.get("outcome"), True
        elif m.get("type") == "error":
            self.finished = True
            raise ApiError(500, "exec_failed", m.get("message", "exec failed"), None)

    def _send_json(self, o) -> None:
        self._send(1, json.dumps(o).encode())

    def _send(self, op: int, payload: bytes) -> None:
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | op, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | op, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | op, 0x80 | 127, n)
        mask = os.urandom(4)
        body = bytes(c ^ mask[i & 3] for i, c in enumerate(payload))
        self._sock.sendall(head + mask + body)


def open_terminal(sock: socket.socket, path: str, request: Dict[str, Any],
                  token: Optional[str], timeout: float) -> Terminal:
    """The handshake on the connected @sock, then @request as the first
    message; waits for the command's start (its id)."""
    key = base64.b64encode(os.urandom(16)).decode()
    head = (f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n"
            f"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n")
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    sock.settimeout(timeout)
    sock.sendall((head + "\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(4096)
        if not d:
            raise ConnectionFailed("hutch serve closed the connection")
        buf += d
        if len(buf) > HEAD_MAX:
            raise ConnectionFailed("an answer head over 16 KiB")
    raw, rest = buf.split(b"\r\n\r\n", 1)
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if status != 101:
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            d = sock.recv(65536)
            if not d:
                break
            rest += d
        sock.close()
        raise error_from_body(status, rest[:length])
    accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
    if headers.get("sec-websocket-accept") != accept:
        sock.close()
        raise ConnectionFailed("exec WebSocket: a wrong Sec-WebSocket-Accept")
    sock.settimeout(None)
    t = Terminal(sock, rest)
    t._send_json(request)
    t._frames()
    while t.id is None and not t.finished:
        if not t._pump(timeout):
            t.close()
            raise ConnectionFailed("the command did not start in time")
    return t
