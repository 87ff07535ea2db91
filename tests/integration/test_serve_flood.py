# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch serve --listen` before authentication (issue 15 item 3,
docs/api.md "Limits").

evhttp reads a whole request body before the server sees the request, so
the server checks each request head itself, in a front before evhttp,
before any body byte is read: an unauthenticated request is answered 401
(JSON) and its connection closed, with nothing of its body in memory. The
flood that grew the server to 942 MB (60 connections each sending 15 MiB
of a claimed 16 MiB body to POST /v1/sandboxes, without a token) must keep
it under 64 MiB while an authenticated client is still served. Framing
errors the front finds (headers too large, a body over the limit, chunked
bodies, a malformed head, an unknown method) are answered with the API's
JSON error too, on TCP and on the unix socket. Concurrent TCP connections
are capped (--max-connections; more wait in the kernel's listen queue).
As root and as the unprivileged user, each server with its own store;
the flood's sockets are the test's own, on 127.0.0.1."""

import http.client
import json
import os
import secrets
import select
import socket
import time

import pytest

from test_serve import HTTP_TIMEOUT, Server, as_euid

MIB = 1 << 20
FLOOD_CONNECTIONS = 60
FLOOD_CLAIM = 16 * MIB
FLOOD_SEND = 15 * MIB
RSS_LIMIT = 64 * MIB
CHUNK = 64 << 10


def start_tcp(request, *extra):
    """A server with --listen on 127.0.0.1, a token and @extra arguments;
    yields (server, proc, tcp "host:port", token, unix socket path)."""
    runner = request.getfixturevalue(f"{request.param}_runner")
    srv = Server(runner)
    try:
        tdir = runner.make_dir(mode=0o700, name="token")
        token = secrets.token_urlsafe(32)
        tfile = tdir / "token"
        tfile.write_text(token + "\n")
        os.chmod(tfile, 0o600)
        runner.chown(tdir)
        proc, unix, addr = srv.start(
            "--listen", "127.0.0.1:0", "--token-file", str(tfile), *extra, expect_tcp=True
        )
        yield srv, proc, addr, token, unix
    finally:
        srv.cleanup()


@pytest.fixture(params=["root", "user"])
def tcp_server(request):
    yield from start_tcp(request)


@pytest.fixture(params=["root", "user"])
def tcp_server_cap2(request):
    yield from start_tcp(request, "--max-connections", "2")


def hostport(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def status_kb(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def serve_pid(proc):
    """The pid of hutch-serve: `hutch serve` (and setpriv before it) exec it."""
    cmd = open(f"/proc/{proc.pid}/cmdline", "rb").read()
    assert b"hutch-serve" in cmd.split(b"\0")[0], cmd
    return proc.pid


def get_version(addr, token, timeout=HTTP_TIMEOUT):
    c = http.client.HTTPConnection(*hostport(addr), timeout=timeout)
    try:
        c.request("GET", "/v1/version", headers={"Authorization": f"Bearer {token}"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def read_answer(s, timeout=HTTP_TIMEOUT):
    """Reads from the socket @s until the server closes it: (status,
    headers (lowercase names), body)."""
    s.settimeout(timeout)
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            break
        if not b:
            break
        data += b
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 "), data[:200]
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), headers, body


def raw(addr_or_path, head):
    """Sends the bytes @head on a new connection (TCP "host:port" or a unix
    socket path) and returns the answer; no body is ever sent."""
    if ":" in addr_or_path and not addr_or_path.startswith("/"):
        s = socket.create_connection(hostport(addr_or_path), timeout=HTTP_TIMEOUT)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr_or_path)
    with s:
        s.sendall(head)
        return read_answer(s)


def json_error(answer, status, code):
    st, headers, body = answer
    assert st == status, answer
    assert headers.get("content-type") == "application/json", answer
    err = json.loads(body)["error"]
    assert err["code"] == code, answer
    assert set(err) == {"code", "message", "field"}, answer
    return err


def flood_head(token=None):
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
        f"Content-Type: application/json\r\nContent-Length: {FLOOD_CLAIM}\r\n\r\n"
    ).encode()


def test_flood_before_auth_keeps_memory_bounded(tcp_server):
    srv, proc, addr, token, _ = tcp_server
    pid = serve_pid(proc)
    chunk = b"x" * CHUNK
    socks = {}
    answered_midway = None
    try:
        for _ in range(FLOOD_CONNECTIONS):
            s = socket.create_connection(hostport(addr), timeout=HTTP_TIMEOUT)
            s.setblocking(False)
            socks[s] = 0
        head = flood_head()
        for s in list(socks):
            try:
                s.send(head)
            except OSError:
                s.close()
                del socks[s]
        total = 0
        while socks:
            _, writable, _ = select.select([], list(socks), [], HTTP_TIMEOUT)
            assert writable, "the server stopped reading and closed nothing"
            for s in writable:
                try:
                    n = s.send(chunk[: min(CHUNK, FLOOD_SEND - socks[s])])
                except (BrokenPipeError, ConnectionResetError):
                    n = -1
                except BlockingIOError:
                    n = 0
                if n < 0 or socks[s] + n >= FLOOD_SEND:
                    s.close()
                    del socks[s]
                    continue
                socks[s] += n
                total += n
            # Stop early when the server holds what it should not.
            rss = status_kb(pid, "VmRSS")
            assert rss < RSS_LIMIT, f"hutch serve holds {rss >> 20} MiB after {total >> 20} MiB sent"
            if answered_midway is None and (total >= FLOOD_CONNECTIONS * MIB or len(socks) < 30):
                answered_midway = get_version(addr, token)
    finally:
        for s in socks:
            s.close()
    hwm = status_kb(pid, "VmHWM")
    assert hwm < RSS_LIMIT, f"hutch serve peaked at {hwm >> 20} MiB"
    if answered_midway is None:
        answered_midway = get_version(addr, token)
    assert answered_midway[0] == 200, answered_midway
    # And after it.
    assert get_version(addr, token)[0] == 200


def test_unauthenticated_gets_401_before_its_body(tcp_server):
    """The head alone is answered 401 and the connection closed: the
    server never waited for the 16 MiB it announced."""
    _, _, addr, token, _ = tcp_server
    err = json_error(raw(addr, flood_head()), 401, "unauthorized")
    assert err["message"] == "a bearer token is required"
    err = json_error(raw(addr, flood_head(token + "x")), 401, "unauthorized")
    assert err["message"] == "wrong bearer token"
    st, headers, _ = raw(addr, b"GET /v1/version HTTP/1.1\r\nHost: x\r\n\r\n")
    assert st == 401 and headers.get("www-authenticate") == "Bearer"
    # The twin: with the token, the same head waits for its body.
    with socket.create_connection(hostport(addr), timeout=HTTP_TIMEOUT) as s:
        body = json.dumps({"name": "Bad Name"}).encode()
        s.sendall(flood_head(token).replace(str(FLOOD_CLAIM).encode(), str(len(body)).encode()))
        s.sendall(body)
        json_error(read_answer_once(s), 400, "invalid_argument")
    assert get_version(addr, token)[0] == 200


def read_answer_once(s):
    """One answer on a kept-alive connection: its head, then its
    Content-Length bytes."""
    s.settimeout(HTTP_TIMEOUT)
    data = b""
    while b"\r\n\r\n" not in data:
        b = s.recv(65536)
        assert b, data
        data += b
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers["content-length"])
    while len(body) < n:
        b = s.recv(65536)
        assert b, body
        body += b
    return int(lines[0].split()[1]), headers, body


def framing_cases(token):
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return [
        (f"GET /v1/version HTTP/1.1\r\n{auth}X-Big: {'a' * (17 << 10)}\r\n\r\n", 431, "too_large"),
        (f"PUT /v1/sandboxes/x/files?path=a HTTP/1.1\r\n{auth}Content-Length: {17 * MIB}\r\n\r\n",
         413, "too_large"),
        (f"POST /v1/sandboxes HTTP/1.1\r\n{auth}Transfer-Encoding: chunked\r\n\r\n",
         411, "length_required"),
        (f"POST /v1/sandboxes HTTP/1.1\r\n{auth}Expect: something\r\n\r\n",
         417, "expectation_failed"),
        (f"GARBAGE\r\n{auth}\r\n", 400, "invalid_argument"),
        (f"GET /v1/version HTTP/1.1\r\n{auth} folded: line\r\n\r\n", 400, "invalid_argument"),
        (f"GET /v1/version HTTP/1.1\r\n{auth}Content-Length: 1\r\nContent-Length: 2\r\n\r\n",
         400, "invalid_argument"),
        (f"FROB /v1/version HTTP/1.1\r\n{auth}\r\n", 405, "method_not_allowed"),
        (f"GET /v1/version HTTP/2.0\r\n{auth}\r\n", 400, "invalid_argument"),
    ]


def test_framing_errors_are_json(tcp_server):
    """What evhttp answered with a small HTML page is the API's JSON error,
    on TCP (with the token: the limits are told to an authenticated
    client) and on the unix socket alike."""
    srv, _, addr, token, unix = tcp_server
    for head, status, code in framing_cases(token):
        json_error(raw(addr, head.encode()), status, code)
    with as_euid(srv.uid):
        for head, status, code in framing_cases(None):
            json_error(raw(unix, head.encode()), status, code)
    # The twin: a good request is served.
    assert get_version(addr, token)[0] == 200


def test_unauthenticated_framing_error_says_401(tcp_server):
    """Without the token, a head that is well-formed but over a limit is
    refused for the token: nothing else is told."""
    _, _, addr, _, _ = tcp_server
    head = f"PUT /v1/sandboxes/x/files?path=a HTTP/1.1\r\nContent-Length: {17 * MIB}\r\n\r\n"
    json_error(raw(addr, head.encode()), 401, "unauthorized")


def read_one_answer(s, timeout=HTTP_TIMEOUT):
    """Reads one answer (head and Content-Length body) from the keep-alive
    socket @s and returns its status."""
    s.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        b = s.recv(65536)
        assert b, data
        data += b
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.decode("latin-1").split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
    while len(body) < length:
        b = s.recv(65536)
        assert b, body
        body += b
    return int(head.split()[1])


def test_connections_beyond_the_cap_wait(tcp_server_cap2):
    """With --max-connections 2, two connections that passed a head (a
    client with the token, keeping its connection) hold both places: a
    third is not served until one of them closes."""
    _, _, addr, token, _ = tcp_server_cap2
    held = [socket.create_connection(hostport(addr), timeout=HTTP_TIMEOUT) for _ in range(2)]
    third = None
    try:
        for s in held:
            s.sendall(f"GET /v1/version HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {token}\r\n\r\n".encode())
            assert read_one_answer(s) == 200
        third = socket.create_connection(hostport(addr), timeout=HTTP_TIMEOUT)
        third.sendall(
            f"GET /v1/version HTTP/1.1\r\nAuthorization: Bearer {token}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        # Not served while both places are taken (a bounded wait: what
        # is checked is that nothing comes).
        ready, _, _ = select.select([third], [], [], 2.0)
        assert not ready, "a connection beyond --max-connections was served"
        held.pop().close()
        st, _, body = read_answer(third)
        assert st == 200 and json.loads(body)["api_major"] == 1
    finally:
        for s in held:
            s.close()
        if third:
            third.close()


def test_headless_connections_make_room(tcp_server_cap2):
    """Connections that have not sent a whole head (they may hold no token)
    do not lock a client with the token out: at the cap the oldest of them
    is answered 503 and closed, and the new client is served."""
    _, _, addr, token, _ = tcp_server_cap2
    held = [socket.create_connection(hostport(addr), timeout=HTTP_TIMEOUT) for _ in range(2)]
    third = None
    try:
        for s in held:
            s.sendall(b"GET /v1/version HTTP/1.1\r\nHost: x\r\n")
        third = socket.create_connection(hostport(addr), timeout=HTTP_TIMEOUT)
        third.sendall(
            f"GET /v1/version HTTP/1.1\r\nAuthorization: Bearer {token}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        st, _, body = read_answer(third)
        assert st == 200 and json.loads(body)["api_major"] == 1
        json_error(read_answer(held[0]), 503, "unavailable")
    finally:
        for s in held:
            s.close()
        if third:
            third.close()


def test_a_trickled_head_is_cut_at_its_deadline(tcp_server):
    """A head that trickles in a byte at a time (each byte restarting the
    idle timeout) is answered 408 once the head deadline (10 s from the
    accept) passes, and closed: no slot can be held for long by a client
    without a token."""
    _, _, addr, _, _ = tcp_server
    s = socket.create_connection(hostport(addr), timeout=HTTP_TIMEOUT)
    with s:
        head = b"GET /v1/version HTTP/1.1\r\nX-Slow: " + b"a" * 200
        deadline = time.monotonic() + 40
        for i in range(len(head)):
            ready, _, _ = select.select([s], [], [], 0.5)
            if ready:
                break
            try:
                s.sendall(head[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            assert time.monotonic() < deadline, "the trickled head was never cut"
        json_error(read_answer(s), 408, "request_timeout")


def test_max_connections_is_checked(tcp_server):
    srv, _, _, _, _ = tcp_server
    for bad in ("0", "-1", "x", "65537"):
        r = srv.run_fail("--listen", "127.0.0.1:0", "--token-file", "/dev/null",
                         "--max-connections", bad)
        assert r.returncode == 125 and "--max-connections" in r.stderr, r.stderr
    r = srv.run_fail("--max-connections", "5")
    assert r.returncode == 125 and "only used with --listen" in r.stderr, r.stderr
