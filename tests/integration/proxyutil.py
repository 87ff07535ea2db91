# SPDX-License-Identifier: LGPL-2.1-or-later
"""Helpers that drive hutch-proxy directly on loopback, without a sandbox:
upstream servers, a fake DNS server, and a Proxy handle that starts the
real binary on listening sockets created here (as the supervisor does).

Every socket here is bound to 127.0.0.1 or ::1; nothing talks to any
other address. Tests wait on events (the ready pipe, process exit,
sockets), not on sleeps, except where time is the thing under test."""

import http.server
import json
import os
import select
import signal
import socket
import socketserver
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("HUTCH_BUILD_DIR", REPO / "build")).resolve()
PROXY_BIN = BUILD / "src" / "proxy" / "hutch-proxy"
TIMEOUT = 20


def proxy_binary():
    if PROXY_BIN.is_file() and os.access(PROXY_BIN, os.X_OK):
        return PROXY_BIN
    return None


def ipv6_loopback_works():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


# ---------------------------------------------------------------- upstreams


class _ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr, handler, family):
        self.address_family = family
        super().__init__(addr, handler)


def read_request_body(handler):
    """The body of the request @handler (a BaseHTTPRequestHandler) is
    serving: chunked (trailers skipped) or by Content-Length."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return body
            body += handler.rfile.read(size)
            handler.rfile.readline()
    n = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(n) if n else b""


class EchoHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request with a JSON echo of what arrived: method,
    path, headers (in order), body. Each response is one write (no Nagle
    stall between head and body)."""

    protocol_version = "HTTP/1.1"
    server_version = "upstream"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        with self.server.lock:
            self.server.connections += 1

    def _respond(self):
        body = read_request_body(self)
        if self.path.startswith("/git/"):
            return self._git(body)
        record = {
            "method": self.command,
            "path": self.path,
            "version": self.request_version,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": body.decode("latin-1"),
        }
        with self.server.lock:
            self.server.requests.append(record)
        out = json.dumps(record).encode()
        if self.path.startswith("/big/"):
            out = b"x" * int(self.path.split("/")[2])
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(out)}\r\nX-Upstream: yes\r\n"
            f"Keep-Alive: timeout=30\r\nConnection: keep-alive\r\n\r\n"
        ).encode()
        self.wfile.write(head + (b"" if self.command == "HEAD" else out))

    def _git(self, body):
        """git smart HTTP through `git http-backend` (CGI)."""
        path, _, query = self.path[len("/git") :].partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.server.git_root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(self.server.git_root),
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        r = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
        head, _, payload = r.stdout.partition(b"\r\n\r\n")
        status = "200 OK"
        headers = []
        for line in head.split(b"\r\n"):
            k, _, v = line.decode().partition(":")
            if k.lower() == "status":
                status = v.strip()
            elif k:
                headers.append(f"{k}: {v.strip()}")
        with self.server.lock:
            self.server.requests.append({"method": self.command, "path": self.path})
        out = f"HTTP/1.1 {status}\r\n" + "".join(h + "\r\n" for h in headers)
        out += f"Content-Length: {len(payload)}\r\n\r\n"
        self.wfile.write(out.encode() + payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _respond


class Upstream:
    """An HTTP/1.1 echo server on 127.0.0.1 (or ::1) in a thread."""

    def __init__(self, host="127.0.0.1", git_root=None):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.server = _ThreadingServer((host, 0), EchoHandler, family)
        self.server.lock = threading.Lock()
        self.server.requests = []
        self.server.connections = 0
        self.server.git_root = git_root
        self.host = host
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def requests(self):
        with self.server.lock:
            return list(self.server.requests)

    @property
    def connections(self):
        with self.server.lock:
            return self.server.connections

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class StreamServer:
    """A raw TCP server on loopback for tunnels: echoes what it gets, or
    (with @send_bytes) sends that many zero bytes and closes."""

    def __init__(self, host="127.0.0.1", send_bytes=None):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.send_bytes = send_bytes
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        with conn:
            if self.send_bytes is not None:
                chunk = b"\0" * (1 << 20)
                left = self.send_bytes
                while left > 0:
                    n = conn.send(chunk[: min(left, len(chunk))])
                    left -= n
                return
            while True:
                data = conn.recv(65536)
                if not data:
                    conn.shutdown(socket.SHUT_WR)
                    return
                conn.sendall(data)

    def close(self):
        self.sock.close()


class FakeDns:
    """A UDP DNS server on 127.0.0.1 answering A queries from @records
    ({name: "a.b.c.d"}); AAAA and unknown names get an empty NOERROR /
    NXDOMAIN. With @silent it never answers (timeout tests)."""

    def __init__(self, records=None, silent=False):
        self.records = {k.lower().rstrip("."): v for k, v in (records or {}).items()}
        self.silent = silent
        self.queries = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                data, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            try:
                reply = self._answer(data)
            except Exception:
                continue
            if reply and not self.silent:
                self.sock.sendto(reply, peer)

    def _answer(self, q):
        qid, flags, qd = struct.unpack("!HHH", q[:6])
        pos, labels = 12, []
        while q[pos]:
            labels.append(q[pos + 1 : pos + 1 + q[pos]].decode().lower())
            pos += 1 + q[pos]
        qtype, _qclass = struct.unpack("!HH", q[pos + 1 : pos + 5])
        question = q[12 : pos + 5]
        name = ".".join(labels)
        self.queries.append((name, qtype))
        addr = self.records.get(name)
        rcode = 0 if addr else 3
        answers = b""
        count = 0
        if addr and qtype == 1:
            answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(addr)
            count = 1
        header = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, count, 0, 0)
        return header + question + answers

    def close(self):
        self.sock.close()


# ---------------------------------------------------------------- the proxy


class Proxy:
    """hutch-proxy on listening sockets created here, as the supervisor
    creates them inside the sandbox. The audit log goes to a file;
    --ready-fd tells when it serves; stop() sends SIGTERM and returns the
    exit code."""

    def __init__(self, args, ipv6=False, audit=True, extra_fds=(), env=None):
        binary = proxy_binary()
        assert binary, f"hutch-proxy is not built in {BUILD} (set HUTCH_BUILD_DIR)"
        self.listeners = []
        lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lst.bind(("127.0.0.1", 0))
        lst.listen(128)
        self.listeners.append(lst)
        self.port = lst.getsockname()[1]
        self.port6 = None
        if ipv6:
            l6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            l6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            l6.bind(("::1", 0))
            l6.listen(128)
            self.listeners.append(l6)
            self.port6 = l6.getsockname()[1]
        # Names nobody mapped with --resolve go to a local DNS server that
        # knows nothing, never to the host's resolvers.
        self.dns = None
        args = [str(a) for a in args]
        if "--nameserver" not in args:
            self.dns = FakeDns({})
            args += ["--nameserver", f"127.0.0.1:{self.dns.port}"]
        self.tmp = tempfile.TemporaryDirectory(prefix="hutch-proxy-test-")
        self.audit_path = Path(self.tmp.name) / "audit.jsonl"
        ready_r, ready_w = os.pipe()
        cmd = [str(binary)]
        for s in self.listeners:
            cmd += ["--listen-fd", str(s.fileno())]
        cmd += ["--ready-fd", str(ready_w), "--sandbox-id", "test-sbx"]
        if audit:
            cmd += ["--audit-log", str(self.audit_path)]
        cmd += args
        self.proc = subprocess.Popen(
            cmd,
            pass_fds=[s.fileno() for s in self.listeners] + [ready_w, *extra_fds],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        os.close(ready_w)
        with os.fdopen(ready_r, "rb") as f:
            ready = f.read()
        if ready != b"ready\n":
            out, err = self.proc.communicate(timeout=TIMEOUT)
            self.close_listeners()
            raise RuntimeError(f"hutch-proxy did not start: rc={self.proc.returncode} {err!r}")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def close_listeners(self):
        for s in self.listeners:
            s.close()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=TIMEOUT)
        finally:
            self.close_listeners()
        self.stderr = self.proc.stderr.read().decode(errors="replace")
        self.stdout = self.proc.stdout.read().decode(errors="replace")
        return self.proc.returncode

    def audit(self):
        """The audit log's records so far, as dicts."""
        try:
            text = self.audit_path.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def decisions(self):
        return [r for r in self.audit() if r.get("type") == "decision"]

    def wait_decisions(self, n, timeout=TIMEOUT):
        """Waits until at least @n decision lines were written (they are
        written when an exchange ends, which may be just after the client
        saw its answer)."""
        deadline = time.monotonic() + timeout
        while True:
            d = self.decisions()
            if len(d) >= n or time.monotonic() > deadline:
                return d
            time.sleep(0.01)

    def close(self):
        try:
            self.stop()
        except Exception:
            self.proc.kill()
            self.proc.wait()
        if self.dns:
            self.dns.close()
        self.tmp.cleanup()


# ---------------------------------------------------------------- clients


class ResponseReader:
    """Reads HTTP responses one after the other from @sock, keeping the
    bytes of the next one (pipelining)."""

    def __init__(self, sock, timeout=TIMEOUT):
        self.sock = sock
        self.buf = b""
        sock.settimeout(timeout)

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            return False
        self.buf += data
        return True

    def response(self):
        """Returns (status, headers dict with lowercase keys, body bytes);
        the body by Content-Length, else until EOF."""
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                raise ConnectionError(f"closed before a full head: {self.buf!r}")
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if "content-length" in headers:
            n = int(headers["content-length"])
            while len(self.buf) < n and self._fill():
                pass
            body, self.buf = self.buf[:n], self.buf[n:]
            return status, headers, body
        while self._fill():
            pass
        body, self.buf = self.buf, b""
        return status, headers, body


def read_response(sock, timeout=TIMEOUT):
    """Reads one HTTP response from @sock (see ResponseReader)."""
    return ResponseReader(sock, timeout).response()


def raw_request(port, data, host="127.0.0.1", timeout=TIMEOUT):
    """Sends @data to the proxy on a fresh connection and returns
    (status, headers, body)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect((host, port))
        s.sendall(data)
        return read_response(s, timeout)


def connection_closed(sock, timeout=TIMEOUT):
    """True if the peer closes @sock (EOF or reset) within @timeout,
    draining whatever it sends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            return False
        try:
            if not sock.recv(65536):
                return True
        except ConnectionResetError:
            return True
    return False
