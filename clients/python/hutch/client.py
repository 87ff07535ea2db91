# SPDX-License-Identifier: LGPL-2.1-or-later
"""The client of `hutch serve` (docs/api.md): standard library only.

Over the unix socket by default (the one `hutch serve` makes in the state
directory), or over TCP with a token. Every error answer becomes a typed
ApiError (errors.py); no server at all is ConnectionFailed."""

import base64
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from .errors import ApiError, ConnectionFailed, HutchError, error_from_body
from .kept import KeptConnection, TransportError
from .terminal import Terminal, open_terminal

API_MAJOR = 1
DEFAULT_TIMEOUT = 600.0
SERVE_READY_TIMEOUT = 30.0


def default_socket() -> str:
    """Where `hutch serve` listens by default: $HUTCH_STATE_DIR/api.sock,
    /run/hutch/api.sock for root, else $XDG_RUNTIME_DIR/hutch/api.sock
    (/tmp/hutch-UID/api.sock without it), as the store decides."""
    st = os.environ.get("HUTCH_STATE_DIR", "")
    if st.startswith("/"):
        return os.path.join(st, "api.sock")
    if os.geteuid() == 0:
        return "/run/hutch/api.sock"
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "hutch", "api.sock")
    return f"/tmp/hutch-{os.geteuid()}/api.sock"


# ---- the shapes ----


def _octal(mode: Union[None, int, str]) -> Optional[str]:
    """A mode as the API takes it: "0644"."""
    return f"{mode:04o}" if isinstance(mode, int) else mode


def _flag(v: bool) -> Optional[str]:
    """A boolean query parameter, left out when false."""
    return "true" if v else None


@dataclass
class Outcome:
    """How a command ended (docs/cli-run.md's outcome); `raw` has every
    field the server sent, newer ones included."""

    exit_code: int
    signal: Optional[int]
    reason: str
    wall_ms: int = 0
    cpu_ms: int = 0
    mem_peak_bytes: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    denied: List[Any] = field(default_factory=list)
    degraded: List[Any] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "Outcome":
        return cls(exit_code=o.get("exit_code", -1), signal=o.get("signal"),
                   reason=o.get("reason", ""), wall_ms=o.get("wall_ms", 0),
                   cpu_ms=o.get("cpu_ms", 0), mem_peak_bytes=o.get("mem_peak_bytes", 0),
                   stdout_truncated=bool(o.get("stdout_truncated")),
                   stderr_truncated=bool(o.get("stderr_truncated")),
                   denied=list(o.get("denied") or []), degraded=list(o.get("degraded") or []),
                   raw=o)

    @property
    def ok(self) -> bool:
        return self.reason == "exited" and self.exit_code == 0


@dataclass
class ExecResult:
    """An exec's outcome and its captured output (bytes)."""

    outcome: Outcome
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.outcome.ok

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


@dataclass
class OutputChunk:
    """One read of a streamed exec's stdout or stderr."""

    stream: str
    data: bytes


@dataclass
class FileInfo:
    name: str
    type: str
    size: int
    mode: str
    mtime_ms: int

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "FileInfo":
        return cls(o["name"], o["type"], o["size"], o["mode"], o["mtime_ms"])


@dataclass
class SandboxInfo:
    name: str
    id: str
    state: str
    created_ms: int
    last_used_ms: int
    disk_bytes: int
    parent: Optional[str]
    # Since API 1.4: the backend ("ns", "vm"), the policy's image (None:
    # the host's base), the published ports as GET .../ports lists them.
    backend: Optional[str] = None
    image: Optional[str] = None
    ports: List[Dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_json(cls, o: Dict[str, Any]) -> "SandboxInfo":
        return cls(o["name"], o["id"], o["state"], o.get("created_ms", 0),
                   o.get("last_used_ms", 0), o.get("disk_bytes", 0), o.get("parent"),
                   o.get("backend"), o.get("image"), list(o.get("ports") or []))


def _decode(data: Optional[str], encoding: Optional[str]) -> bytes:
    if data is None:
        return b""
    if encoding == "base64":
        return base64.b64decode(data)
    return data.encode("utf-8")


# ---- the connection ----


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self.path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class Client:
    """One `hutch serve`. Client() talks to the default unix socket;
    Client(socket=PATH), or Client(url="http://127.0.0.1:7777",
    token=TOKEN) for TCP. Client.connect(autostart=True) starts a server
    on the socket when none answers, and close() stops the one it started."""

    def __init__(self, socket: Optional[str] = None, url: Optional[str] = None,
                 token: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT):
        if socket and url:
            raise ValueError("give socket or url, not both")
        self.timeout = timeout
        self.token = token
        self.url = url
        self.socket = None if url else (socket or default_socket())
        if url:
            u = urllib.parse.urlsplit(url)
            if u.scheme != "http" or not u.hostname:
                raise ValueError(f"url must be http://HOST:PORT, not {url!r}")
            self._host, self._port = u.hostname, u.port or 80
        self._server: Optional[subprocess.Popen] = None
        # The kept connection (keep-alive) between calls, and who uses it.
        self._idle: Optional[KeptConnection] = None
        self._lock = threading.Lock()

    # -- lifetime --

    @classmethod
    def connect(cls, socket: Optional[str] = None, autostart: bool = True,
                hutch: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                **kw) -> "Client":
        """A client of the server on @socket; with @autostart, when none
        answers there, starts `hutch serve --socket PATH` (@hutch: the
        binary, default $HUTCH_BIN or `hutch` on PATH) and owns it."""
        c = cls(socket=socket, **kw)
        try:
            c.version()
            return c
        except ConnectionFailed:
            if not autostart:
                raise
        c._start_server(hutch, env)
        return c

    def _start_server(self, hutch: Optional[str], env: Optional[Dict[str, str]]):
        exe = hutch or os.environ.get("HUTCH_BIN") or shutil.which("hutch")
        if not exe:
            raise ConnectionFailed(f"no hutch serve at unix:{self.socket}, and no hutch "
                                   "binary to start one (set HUTCH_BIN or PATH)")
        p = subprocess.Popen([exe, "serve", "--socket", self.socket], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             start_new_session=True)
        # The server says "listening on unix:PATH" once it accepts.
        line = p.stdout.readline().decode(errors="replace")
        if not line.startswith("listening on "):
            p.kill()
            err = p.communicate(timeout=SERVE_READY_TIMEOUT)[1].decode(errors="replace")
            raise ConnectionFailed(f"hutch serve did not start: {err.strip() or line!r}")
        self._server = p

    def close(self):
        """Closes the kept connection, and stops the server this client
        started, if any (SIGTERM, then wait)."""
        self._drop_idle()
        p, self._server = self._server, None
        if p is None:
            return
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=SERVE_READY_TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in (p.stdout, p.stderr):
            if f:
                f.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc):
        self.close()

    # -- requests --

    def _where(self) -> str:
        return self.url if self.url else f"unix:{self.socket}"

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.url:
            return http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        return _UnixConnection(self.socket, timeout)

    def _prepare(self, path: str, query, body):
        headers = {}
        if query:
            path += "?" + urllib.parse.urlencode(
                {k: v for k, v in query.items() if v is not None}, quote_via=urllib.parse.quote)
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return path, body, headers

    def _failed(self, e: BaseException) -> ConnectionFailed:
        if isinstance(e, FileNotFoundError):
            return ConnectionFailed(f"no hutch serve at {self._where()}: the socket does not "
                                    "exist (start `hutch serve`)")
        if isinstance(e, ConnectionRefusedError):
            return ConnectionFailed(f"no hutch serve at {self._where()}: connection refused "
                                    "(a stale socket, or no server on that port)")
        return ConnectionFailed(f"hutch serve at {self._where()}: {e}")

    def _drop_idle(self):
        c, self._idle = self._idle, None
        if c is not None:
            c.close()

    def _open(self, method: str, path: str, query: Optional[Dict[str, Any]] = None,
              body: Union[None, bytes, Dict[str, Any]] = None,
              timeout: Optional[float] = None):
        """Sends a request on a connection of its own (streams: the
        response is read as it comes); the connection and its response,
        status checked."""
        path, body, headers = self._prepare(path, query, body)
        c = self._connection(self.timeout if timeout is None else timeout)
        try:
            c.request(method, path, body=body, headers=headers)
            r = c.getresponse()
        except FileNotFoundError:
            c.close()
            raise ConnectionFailed(f"no hutch serve at {self._where()}: the socket does not "
                                   "exist (start `hutch serve`)") from None
        except ConnectionRefusedError:
            c.close()
            raise ConnectionFailed(f"no hutch serve at {self._where()}: connection refused "
                                   "(a stale socket, or no server on that port)") from None
        except (OSError, http.client.HTTPException) as e:
            c.close()
            raise ConnectionFailed(f"hutch serve at {self._where()}: {e}") from None
        if r.status >= 400:
            data = r.read()
            c.close()
            raise error_from_body(r.status, data)
        return c, r

    def _kept(self) -> KeptConnection:
        """A new connection for whole answers (kept.py); the OSError of the
        connect as ConnectionFailed."""
        try:
            if self.url:
                return KeptConnection(host=self._host, port=self._port, timeout=self.timeout)
            return KeptConnection(path=self.socket, timeout=self.timeout)
        except OSError as e:
            raise self._failed(e) from None

    def _head(self, method: str, path: str, headers: Dict[str, str], data) -> bytes:
        """The request's head, for KeptConnection.request()."""
        if self.url:
            host = f"[{self._host}]:{self._port}" if ":" in self._host \
                else f"{self._host}:{self._port}"
        else:
            host = "localhost"
        head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n"
        for k, v in headers.items():
            head += f"{k}: {v}\r\n"
        if data:
            head += f"Content-Length: {len(data)}\r\n"
        elif method not in ("GET", "HEAD", "DELETE"):
            head += "Content-Length: 0\r\n"
        return (head + "\r\n").encode("latin-1")

    def _roundtrip(self, method: str, path: str, query, body):
        """One request and its whole response on the kept connection
        (HTTP/1.1 keep-alive, kept.py): (status, body). A kept connection
        the server closed while idle (its 60 s timeout) fails before any
        byte of the answer: then the request goes once more on a new one.
        A connection that failed in the middle of an answer is never used
        again, and that request is not sent again."""
        path, data, headers = self._prepare(path, query, body)
        if isinstance(data, str):
            data = data.encode()
        head = self._head(method, path, headers, data)
        if not self._lock.acquire(blocking=False):
            # Another thread is using the kept connection: one of its own.
            c = self._kept()
            try:
                status, _, payload, _ = c.request(head, data)
                return status, payload
            except TransportError as e:
                raise self._failed(e.cause or e) from None
            finally:
                c.close()
        try:
            for attempt in (0, 1):
                reused = self._idle is not None
                c = self._idle if reused else self._kept()
                self._idle = None
                try:
                    status, _, payload, close = c.request(head, data)
                except TransportError as e:
                    # Closed while idle, not a timeout: an answer may yet
                    # have been on its way.
                    if reused and attempt == 0 and not e.answered and \
                            isinstance(e.cause, (BrokenPipeError, ConnectionResetError)):
                        continue
                    raise self._failed(e.cause or e) from None
                if close:
                    c.close()
                else:
                    self._idle = c
                return status, payload
            raise AssertionError("unreachable")
        finally:
            self._lock.release()

    def _call(self, method: str, path: str, query=None, body=None, raw: bool = False):
        status, data = self._roundtrip(method, path, query, body)
        if status >= 400:
            raise error_from_body(status, data)
        if raw:
            return data
        if status == 204 or not data:
            return None
        return json.loads(data.decode())

    @staticmethod
    def _sb(name: str, tail: str = "") -> str:
        return "/v1/sandboxes/" + urllib.parse.quote(name, safe="") + tail

    # -- the server --

    def version(self) -> Dict[str, Any]:
        """{version, api_major, api_minor}."""
        return self._call("GET", "/v1/version")

    def routes(self) -> List[Dict[str, Any]]:
        return self._call("GET", "/v1/routes")["routes"]

    # -- sandboxes --

    def list(self) -> List[SandboxInfo]:
        return [SandboxInfo.from_json(s) for s in self._call("GET", "/v1/sandboxes")["sandboxes"]]

    def create(self, name: str, policy: Optional[Dict[str, Any]] = None,
               from_snapshot: Optional[str] = None) -> "Sandbox":
        """Creates sandbox @name (the policy is docs/policy.md's JSON)."""
        body: Dict[str, Any] = {"name": name}
        if policy is not None:
            body["policy"] = policy
        if from_snapshot is not None:
            body["from_snapshot"] = from_snapshot
        self._call("POST", "/v1/sandboxes", body=body)
        return Sandbox(self, name)

    def sandbox(self, name: str) -> "Sandbox":
        """A handle on an existing sandbox (nothing is asked of the server)."""
        return Sandbox(self, name)

    def get(self, name: str) -> SandboxInfo:
        return SandboxInfo.from_json(self._call("GET", self._sb(name)))

    def delete(self, name: str) -> None:
        self._call("DELETE", self._sb(name))

    def stop(self, name: str) -> None:
        self._call("POST", self._sb(name, "/stop"))

    # -- exec --

    @staticmethod
    def _exec_body(argv: Sequence[str], env, cwd, timeout_ms, stdin, output_limit, user=None):
        if isinstance(argv, str):
            raise TypeError("argv is a list of strings, not a string")
        body: Dict[str, Any] = {"argv": list(argv)}
        if env is not None:
            body["env"] = dict(env)
        if cwd is not None:
            body["cwd"] = cwd
        if timeout_ms is not None:
            body["timeout_ms"] = int(timeout_ms)
        if isinstance(stdin, str):
            body["stdin"] = stdin
        elif stdin is not None:
            body["stdin_base64"] = base64.b64encode(bytes(stdin)).decode()
        if output_limit is not None:
            body["output_limit"] = int(output_limit)
        if user is not None:
            body["user"] = str(user)
        return body

    def exec(self, name: str, argv: Sequence[str], env: Optional[Dict[str, str]] = None,
             cwd: Optional[str] = None, timeout_ms: Optional[int] = None,
             stdin: Union[None, str, bytes] = None,
             output_limit: Optional[int] = None, user: Optional[str] = None) -> ExecResult:
        """Runs @argv in the sandbox and waits: the outcome and the output.
        @user: NAME, UID, NAME:GROUP or UID:GID of the sandbox's /etc/passwd
        (default: the sandbox's user)."""
        body = self._exec_body(argv, env, cwd, timeout_ms, stdin, output_limit, user)
        a = self._call("POST", self._sb(name, "/exec"), body=body)
        return ExecResult(Outcome.from_json(a["outcome"]),
                          _decode(a.get("stdout"), a.get("stdout_encoding")),
                          _decode(a.get("stderr"), a.get("stderr_encoding")))

    def exec_detached(self, name: str, argv: Sequence[str], env=None, cwd=None,
                      timeout_ms=None, stdin_open: bool = False, user=None) -> int:
        """Starts @argv and returns its id without waiting; @stdin_open:
        its stdin stays open for write_stdin()."""
        body = self._exec_body(argv, env, cwd, timeout_ms, None, None, user)
        body["detach"] = True
        if stdin_open:
            body["stdin_open"] = True
        return self._call("POST", self._sb(name, "/exec"), body=body)["id"]

    def exec_stream(self, name: str, argv: Sequence[str], env=None, cwd=None,
                    timeout_ms=None, stdin=None,
                    user=None) -> Iterator[Union[OutputChunk, Outcome]]:
        """Runs @argv and yields its output as it comes (OutputChunk), then
        its Outcome. Leaving the loop early kills the command."""
        body = self._exec_body(argv, env, cwd, timeout_ms, stdin, None, user)
        c, r = self._open("POST", self._sb(name, "/exec/stream"), body=body, timeout=None)
        try:
            while True:
                line = r.readline()
                if not line:
                    raise ConnectionFailed("the exec stream ended without an outcome")
                ev = json.loads(line)
                if "stream" in ev:
                    yield OutputChunk(ev["stream"], _decode(ev.get("data"), ev.get("encoding")))
                elif "outcome" in ev:
                    yield Outcome.from_json(ev["outcome"])
                    return
                elif "error" in ev:
                    raise error_from_body(500, json.dumps(ev).encode())
        finally:
            c.close()

    # -- files --

    def read_file(self, name: str, path: str) -> bytes:
        return self._call("GET", self._sb(name, "/files"), {"path": path}, raw=True)

    def write_file(self, name: str, path: str, data: Union[str, bytes],
                   mode: Union[None, int, str] = None, parents: bool = False) -> None:
        """Writes @data atomically; a new file gets @mode (0o644 or "0644");
        @parents makes the missing folders."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._call("PUT", self._sb(name, "/files"),
                   {"path": path, "mode": _octal(mode), "parents": _flag(parents)}, body=data)

    def mkdir(self, name: str, path: str, mode: Union[None, int, str] = None,
              parents: bool = False) -> None:
        """Makes a folder; @parents: its missing parents too, and an
        existing folder is fine (mkdir -p)."""
        self._call("POST", self._sb(name, "/files/mkdir"),
                   {"path": path, "mode": _octal(mode), "parents": _flag(parents)})

    def move(self, name: str, src: str, dst: str, replace: bool = False,
             parents: bool = False) -> None:
        """Renames @src to @dst inside the sandbox; an existing @dst is a
        Conflict unless @replace."""
        self._call("POST", self._sb(name, "/files/move"),
                   body={"from": src, "to": dst, "replace": replace, "parents": parents})

    def terminal(self, name: str, argv: Sequence[str], tty: bool = False,
                 cols: Optional[int] = None, rows: Optional[int] = None,
                 env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                 timeout_ms: Optional[int] = None, user: Optional[str] = None) -> Terminal:
        """A command with its stdin open (@tty: a terminal made inside the
        sandbox, @cols x @rows) through the exec WebSocket; returns once it
        started (Terminal.id). Closing the Terminal kills it if it runs."""
        body = self._exec_body(argv, env, cwd, timeout_ms, None, None, user)
        if tty:
            body["tty"] = True
        if cols is not None:
            body["cols"] = int(cols)
        if rows is not None:
            body["rows"] = int(rows)
        try:
            if self.url:
                sock = socket.create_connection((self._host, self._port), timeout=self.timeout)
            else:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(self.timeout)
                sock.connect(self.socket)
        except FileNotFoundError:
            raise ConnectionFailed(f"no hutch serve at {self._where()}: the socket does not "
                                   "exist (start `hutch serve`)") from None
        except ConnectionRefusedError:
            raise ConnectionFailed(f"no hutch serve at {self._where()}: connection refused "
                                   "(a stale socket, or no server on that port)") from None
        except OSError as e:
            raise ConnectionFailed(f"hutch serve at {self._where()}: {e}") from None
        try:
            return open_terminal(sock, self._sb(name, "/exec/ws"), body, self.token, self.timeout)
        except BaseException:
            sock.close()
            raise

    def ports(self, name: str) -> List[Dict[str, Any]]:
        """The published ports, [{port, protocol, host_ip, host_port}]
        (host_port 0 while stopped: a free one is chosen at the start)."""
        return self._call("GET", self._sb(name, "/ports"))["ports"]

    def publish_port(self, name: str, port: int, host_port: Optional[int] = None,
                     host_ip: Optional[str] = None) -> Dict[str, Any]:
        """Publishes sandbox port @port on the host (@host_ip, default
        127.0.0.1; @host_port, default a free one), running or stopped,
        as `hutch port NAME add`: the entry as ports() lists it."""
        body: Dict[str, Any] = {"port": int(port)}
        if host_port is not None:
            body["host_port"] = int(host_port)
        if host_ip is not None:
            body["host_ip"] = str(host_ip)
        return self._call("POST", self._sb(name, "/ports"), body=body)

    def unpublish_port(self, name: str, port: int) -> None:
        """Stops publishing sandbox port @port (`hutch port NAME rm`)."""
        self._call("DELETE", self._sb(name, f"/ports/{int(port)}"))

    def preview_url(self, name: str, port: int) -> Optional[str]:
        """Serve's preview URL of sandbox port @port over this TCP server;
        None over the unix socket, which has no URL."""
        if not self.url:
            return None
        return self.url.rstrip("/") + self._sb(name, f"/ports/{int(port)}/")

    def download_tree(self, name: str, path: str = ".") -> bytes:
        """The tree below folder @path as a tar stream (symlinks kept as
        symlinks, modes and mtimes; at most 64 MiB): tarfile reads it."""
        return self._call("GET", self._sb(name, "/files/archive"), {"path": path}, raw=True)

    def upload_tree(self, name: str, path: str, tar: bytes, parents: bool = False) -> None:
        """Extracts the tar stream @tar into folder @path inside the
        sandbox (@parents: made with its missing parents). A path with
        '..', a link pointing out or a device node is refused (an
        ApiError naming the entry)."""
        self._call("PUT", self._sb(name, "/files/archive"),
                   {"path": path, "parents": _flag(parents)}, body=tar)

    def remove_file(self, name: str, path: str) -> None:
        self._call("DELETE", self._sb(name, "/files"), {"path": path})

    def list_files(self, name: str, path: str = ".", recursive: bool = False,
                   depth: Optional[int] = None) -> List[FileInfo]:
        """The folder's entries; @recursive: its whole tree (@depth levels,
        None for all), each name a path relative to @path."""
        q = {"path": path, "recursive": _flag(recursive),
             "depth": None if depth is None else str(depth)}
        a = self._call("GET", self._sb(name, "/files/list"), q)
        return [FileInfo.from_json(e) for e in a["entries"]]

    def stat(self, name: str, path: str) -> FileInfo:
        return FileInfo.from_json(self._call("GET", self._sb(name, "/files/stat"), {"path": path}))

    def exists(self, name: str, path: str) -> bool:
        try:
            self.stat(name, path)
            return True
        except ApiError as e:
            if e.code == "not_found":
                return False
            raise

    # -- snapshots, diff, apply, audit --

    def snapshot(self, name: str, snapshot: str) -> None:
        self._call("POST", self._sb(name, "/snapshots"), body={"snapshot": snapshot})

    def restore(self, name: str, snapshot: str) -> None:
        self._call("POST", self._sb(name, "/restore"), body={"snapshot": snapshot})

    def snapshots(self) -> List[str]:
        return [s["name"] for s in self._call("GET", "/v1/snapshots")["snapshots"]]

    def remove_snapshot(self, snapshot: str) -> None:
        self._call("DELETE", "/v1/snapshots/" + urllib.parse.quote(snapshot, safe=""))

    def diff(self, name: str) -> List[Dict[str, Any]]:
        return self._call("GET", self._sb(name, "/diff"))["changes"]

    def apply(self, name: str, paths: Optional[Sequence[str]] = None,
              force: bool = False) -> Any:
        body: Dict[str, Any] = {}
        if paths is not None:
            body["paths"] = list(paths)
        if force:
            body["force"] = True
        return self._call("POST", self._sb(name, "/apply"), body=body)["applied"]

    def audit(self, name: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        return self._call("GET", self._sb(name, "/audit"), {"limit": limit})["entries"]

    # -- the execs as processes (docs/processes.md) --

    def processes(self, name: str) -> List[Dict[str, Any]]:
        """The running execs: {id, argv, start_ms, pid, detached, running}."""
        return self._call("GET", self._sb(name, "/execs"))["execs"]

    def process(self, name: str, exec_id: int) -> Dict[str, Any]:
        """A running exec as processes() shows it, or {id, running: False,
        outcome} for one that ended."""
        return self._call("GET", self._sb(name, f"/execs/{int(exec_id)}"))

    def write_stdin(self, name: str, exec_id: int, data: Union[str, bytes] = b"",
                    close: bool = False) -> None:
        """Writes @data to the stdin of exec @exec_id (started with
        exec_detached(..., stdin_open=True)); @close: then its EOF."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._call("POST", self._sb(name, f"/execs/{int(exec_id)}/stdin"),
                   {"close": "1" if close else None}, body=bytes(data))

    def wait(self, name: str, exec_id: int) -> Outcome:
        """Waits for exec @exec_id to end and returns its Outcome."""
        a = self._call("GET", self._sb(name, f"/execs/{int(exec_id)}"), {"wait": 1})
        return Outcome.from_json(a["outcome"])

    def kill(self, name: str, exec_id: int, signal: Optional[str] = None,
             grace_ms: Optional[int] = None) -> None:
        """As `hutch kill`: without @signal, TERM and then KILL after
        @grace_ms (default 10000); with it, that signal only unless
        @grace_ms is given. Returns at once (wait() for the end)."""
        body: Dict[str, Any] = {}
        if signal is not None:
            body["signal"] = str(signal)
        if grace_ms is not None:
            body["grace_ms"] = int(grace_ms)
        self._call("POST", self._sb(name, f"/execs/{int(exec_id)}/signal"), body=body)

    def output(self, name: str, exec_id: int,
               follow: bool = False) -> Iterator[Union[OutputChunk, Outcome]]:
        """A detached exec's output (OutputChunk); with @follow as it is
        written, then its Outcome when it ended."""
        c, r = self._open("GET", self._sb(name, f"/execs/{int(exec_id)}/output"),
                          {"follow": 1 if follow else None}, timeout=None)
        try:
            while True:
                line = r.readline()
                if not line:
                    return
                ev = json.loads(line)
                if "stream" in ev:
                    yield OutputChunk(ev["stream"], _decode(ev.get("data"), ev.get("encoding")))
                elif "outcome" in ev:
                    yield Outcome.from_json(ev["outcome"])
                    return
        finally:
            c.close()


class Sandbox:
    """One sandbox of a Client: the Client's calls without the name."""

    def __init__(self, client: Client, name: str):
        self.client = client
        self.name = name

    def __repr__(self):
        return f"Sandbox({self.name!r})"

    def info(self) -> SandboxInfo:
        return self.client.get(self.name)

    def exec(self, argv: Sequence[str], **kw) -> ExecResult:
        return self.client.exec(self.name, argv, **kw)

    def exec_stream(self, argv: Sequence[str], **kw):
        return self.client.exec_stream(self.name, argv, **kw)

    def exec_detached(self, argv: Sequence[str], **kw) -> int:
        return self.client.exec_detached(self.name, argv, **kw)

    def read_file(self, path: str) -> bytes:
        return self.client.read_file(self.name, path)

    def write_file(self, path: str, data, mode=None, parents: bool = False) -> None:
        self.client.write_file(self.name, path, data, mode, parents)

    def mkdir(self, path: str, mode=None, parents: bool = False) -> None:
        self.client.mkdir(self.name, path, mode, parents)

    def move(self, src: str, dst: str, replace: bool = False, parents: bool = False) -> None:
        self.client.move(self.name, src, dst, replace, parents)

    def terminal(self, argv: Sequence[str], **kw) -> Terminal:
        return self.client.terminal(self.name, argv, **kw)

    def ports(self) -> List[Dict[str, Any]]:
        return self.client.ports(self.name)

    def preview_url(self, port: int) -> Optional[str]:
        return self.client.preview_url(self.name, port)

    def publish_port(self, port: int, host_port: Optional[int] = None,
                     host_ip: Optional[str] = None) -> Dict[str, Any]:
        return self.client.publish_port(self.name, port, host_port, host_ip)

    def unpublish_port(self, port: int) -> None:
        self.client.unpublish_port(self.name, port)

    def download_tree(self, path: str = ".") -> bytes:
        return self.client.download_tree(self.name, path)

    def upload_tree(self, path: str, tar: bytes, parents: bool = False) -> None:
        self.client.upload_tree(self.name, path, tar, parents)

    def remove_file(self, path: str) -> None:
        self.client.remove_file(self.name, path)

    def list_files(self, path: str = ".", recursive: bool = False,
                   depth: Optional[int] = None) -> List[FileInfo]:
        return self.client.list_files(self.name, path, recursive, depth)

    def stat(self, path: str) -> FileInfo:
        return self.client.stat(self.name, path)

    def exists(self, path: str) -> bool:
        return self.client.exists(self.name, path)

    def snapshot(self, snapshot: str) -> None:
        self.client.snapshot(self.name, snapshot)

    def restore(self, snapshot: str) -> None:
        self.client.restore(self.name, snapshot)

    def diff(self):
        return self.client.diff(self.name)

    def apply(self, paths=None, force: bool = False):
        return self.client.apply(self.name, paths, force)

    def audit(self, limit: Optional[int] = None):
        return self.client.audit(self.name, limit)

    def processes(self):
        return self.client.processes(self.name)

    def process(self, exec_id: int):
        return self.client.process(self.name, exec_id)

    def wait(self, exec_id: int) -> Outcome:
        return self.client.wait(self.name, exec_id)

    def write_stdin(self, exec_id: int, data: Union[str, bytes] = b"",
                    close: bool = False) -> None:
        self.client.write_stdin(self.name, exec_id, data, close)

    def kill(self, exec_id: int, signal: Optional[str] = None,
             grace_ms: Optional[int] = None) -> None:
        self.client.kill(self.name, exec_id, signal, grace_ms)

    def output(self, exec_id: int, follow: bool = False):
        return self.client.output(self.name, exec_id, follow)

    def stop(self) -> None:
        self.client.stop(self.name)

    def delete(self) -> None:
        self.client.delete(self.name)


def run(argv: Sequence[str], workspace: Optional[str] = ".",
        allow_hosts: Optional[Sequence[str]] = None, timeout: Optional[float] = 60,
        env: Optional[Dict[str, str]] = None, stdin: Union[None, str, bytes] = None,
        policy: Optional[Dict[str, Any]] = None, socket: Optional[str] = None,
        hutch: Optional[str] = None) -> ExecResult:
    """Runs @argv once in a new sandbox and removes it: @workspace (a host
    folder, None for none) is mounted as an overlay at /workspace (the
    host's files do not change), @allow_hosts the network allowlist,
    @timeout in seconds (None: the policy's). Talks to the `hutch serve`
    on @socket, starting one for the call when none is running."""
    pol = dict(policy or {})
    if workspace is not None:
        pol.setdefault("workspace", {"path": os.path.abspath(workspace), "mode": "overlay"})
    if allow_hosts:
        pol["allow_hosts"] = list(allow_hosts)
    name = "run-" + secrets.token_hex(6)
    with Client.connect(socket=socket, hutch=hutch) as c:
        sb = c.create(name, policy=pol)
        try:
            return sb.exec(argv, env=env, stdin=stdin,
                           timeout_ms=None if timeout is None else int(timeout * 1000))
        finally:
            try:
                sb.delete()
            except HutchError:
                pass
