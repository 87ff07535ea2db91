# SPDX-License-Identifier: LGPL-2.1-or-later
"""HTTP/1.1 over one kept socket, for the client's calls that answer a
whole body (docs/clients.md "The kept connection"), as the TypeScript
client's kept.js. http.client sends a request's head and body in two
writes (two wake-ups of the server), makes a buffered file object per
answer and parses its head with the email package; this writes each
request in one write, reads the answer with recv() into one buffer and
parses it itself: Content-Length, chunked, or up to the close."""

import socket
from typing import Dict, Optional, Tuple

HEAD_MAX = 64 << 10
RECV_SIZE = 64 << 10


class TransportError(Exception):
    """The connection a call failed on, with whether any byte of its
    answer had come (then the request must not be sent again); @cause is
    the OSError behind it, if any."""

    def __init__(self, message: str, answered: bool, cause: Optional[BaseException] = None):
        super().__init__(message)
        self.answered = answered
        self.cause = cause


class KeptConnection:
    """One HTTP/1.1 connection to a unix socket (@path) or TCP (@host,
    @port): one request at a time. Connecting raises the OSError
    (FileNotFoundError, ConnectionRefusedError, ...)."""

    def __init__(self, path: Optional[str] = None, host: Optional[str] = None,
                 port: int = 0, timeout: Optional[float] = None):
        if path is not None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(timeout)
                s.connect(path)
            except BaseException:
                s.close()
                raise
        else:
            s = socket.create_connection((host, port), timeout=timeout)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = s
        self.buf = bytearray()
        self.closed = False

    def close(self):
        self.closed = True
        self.sock.close()

    def _fill(self, answered: bool) -> bool:
        """Reads what came into the buffer; False at the end of the
        stream."""
        try:
            data = self.sock.recv(RECV_SIZE)
        except OSError as e:
            raise TransportError(str(e), answered or bool(self.buf), e) from None
        if not data:
            return False
        self.buf += data
        return True

    def request(self, head: bytes, body: Optional[bytes]) -> Tuple[int, Dict[str, str], bytes, bool]:
        """Sends @head (ending in the blank line) and @body in one write;
        (status, headers with lowercase names, body, whether the server
        closes the connection after it). Raises TransportError (the
        connection is then closed)."""
        try:
            return self._request(head, body)
        except BaseException:
            self.close()
            raise

    def _request(self, head, body):
        if self.buf:
            # Bytes nobody asked for: the server gave up on the idle
            # connection with an answer of its own.
            raise TransportError("the connection had an answer nobody asked for", False,
                                 ConnectionResetError("the server closed the connection"))
        try:
            self.sock.sendall(head + body if body else head)
        except OSError as e:
            raise TransportError(str(e), False, e) from None
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self.buf) > HEAD_MAX:
                raise TransportError("the answer's head is too long", True)
            if not self._fill(False):
                raise TransportError("the connection closed", bool(self.buf),
                                     ConnectionResetError("the connection closed"))
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        del self.buf[:end + 4]
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise TransportError(f"not an HTTP/1.x answer: {lines[0][:80]!r}", True)
        status = int(code)
        headers: Dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise TransportError(f"a bad header line: {line[:80]!r}", True)
            headers[name.strip().lower()] = value.strip()
        conn = headers.get("connection", "").lower()
        close = conn == "close" or (version == "HTTP/1.0" and conn != "keep-alive")
        if status in (204, 304) or 100 <= status < 200:
            data = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            data = self._chunked()
        elif "content-length" in headers:
            n = headers["content-length"]
            if not n.isdigit():
                raise TransportError(f"a bad Content-Length: {n[:20]!r}", True)
            data = self._exactly(int(n))
        else:
            while self._fill(True):
                pass
            data, close = bytes(self.buf), True
            self.buf.clear()
        return status, headers, data, close

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill(True):
                raise TransportError("the connection closed in the answer's body", True)
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return line
            if len(self.buf) > HEAD_MAX or not self._fill(True):
                raise TransportError("a bad chunk in the answer", True)

    def _chunked(self) -> bytes:
        out = bytearray()
        while True:
            size = self._line().split(b";", 1)[0].strip()
            try:
                n = int(size, 16)
            except ValueError:
                raise TransportError(f"a bad chunk size: {size[:20]!r}", True) from None
            if n == 0:
                # The trailer, up to its blank line.
                while self._line():
                    pass
                return bytes(out)
            out += self._exactly(n)
            if self._line():
                raise TransportError("a chunk without its CRLF", True)
