# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch serve --e2b` at its connection cap (docs/e2b.md "Limits"): with
all 256 slots taken, a new client makes the idle keep-alive connections
(answered, waiting for their next request) close, and is served; a
connection in the middle of a request is not evicted (the negative twin:
it finishes its request afterwards and is answered). Raw HTTP/1.1 on
loopback sockets, as the current caller."""

import json
import socket

from test_e2b_control import E2bServer, KEY, e2b_sdk  # noqa: F401 (fixture)

CAP = 256


def addr(url):
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def read_answer(sock):
    """One HTTP answer (head and Content-Length body): (status, body), or
    None at EOF before it."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = sock.recv(65536)
        if not b:
            return None
        buf += b
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    length = 0
    for line in lines[1:]:
        k, v = line.split(":", 1)
        if k.strip().lower() == "content-length":
            length = int(v)
    while len(rest) < length:
        b = sock.recv(65536)
        if not b:
            return None
        rest += b
    return int(lines[0].split()[1]), rest


def health(sock):
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    return read_answer(sock)


def test_idle_connections_evicted_at_the_cap(caller, e2b_sdk):  # noqa: F811
    srv = E2bServer(caller, e2b_sdk)
    socks = []
    try:
        api, envd = addr(srv.api_url), addr(srv.envd_url)
        # one connection in the middle of a request: its head is in, its
        # body is not
        busy = socket.create_connection(api, timeout=120)
        busy.sendall(b"POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: " + KEY.encode() +
                     b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n")
        socks.append(busy)
        # the other slots: keep-alive connections, answered, now idle
        for _ in range(CAP - 1):
            s = socket.create_connection(envd, timeout=120)
            socks.append(s)
            assert health(s)[0] == 502  # no sandbox named: answered, kept
        # a new client is served: the idle ones made room (well before
        # E2B_IDLE_TIMEOUT_S, 60 s, would have closed them anyway)
        new = socket.create_connection(envd, timeout=30)
        socks.append(new)
        assert health(new)[0] == 502
        # the idle ones were closed (EOF), not left half-served
        evicted = 0
        for s in socks[1:-1]:
            s.settimeout(120)
            if s.recv(1) == b"":
                evicted += 1
        assert evicted >= 1
        # negative twin: the busy one was not evicted; it ends its request
        busy.sendall(b"[]")
        status, body = read_answer(busy)
        assert status == 400 and b"object" in json.loads(body)["message"].encode(), body
        srv.stop()
    finally:
        for s in socks:
            s.close()
        srv.cleanup()
