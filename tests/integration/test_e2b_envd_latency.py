# SPDX-License-Identifier: LGPL-2.1-or-later
"""envd's process Start on the wire, as issue 20 trimmed it (docs/e2b-envd.md
"The Connect protocol"): a command's end event, the end-of-stream frame and
the chunked body's last chunk leave in one write, so the client wakes once
for them, not once per frame; and what the stream carries is unchanged
(start, the command's output, end, end-of-stream, in that order).

Over a raw keep-alive HTTP/1.1 connection (the SDK's undici reads the same
bytes), as root and as the unprivileged test user (`sbx`)."""

import json
import socket

from test_e2b_control import wait_for
from test_e2b_envd import envelope, server  # noqa: F401 (fixture)
from test_e2b_envd import frames as frames_of

ROUNDS = 20


def start_request(sid, token, msg):
    body = envelope(json.dumps(msg).encode())
    head = (f"POST /process.Process/Start HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"E2b-Sandbox-Id: {sid}\r\nX-Access-Token: {token}\r\n"
            f"Content-Type: application/connect+json\r\nContent-Length: {len(body)}\r\n"
            f"Connection: keep-alive\r\n\r\n").encode()
    return head + body


class Reader:
    """The chunked Connect stream of one Start on @sock, read chunk by
    chunk; records the stream offsets each recv() returned."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.pos = 0  # the stream offset of buf[0]
        self.recvs = []  # the (from, to) stream offsets of each recv()

    def more(self):
        data = self.sock.recv(1 << 16)
        assert data, "the server closed the connection"
        end = self.pos + len(self.buf)
        self.recvs.append((end, end + len(data)))
        self.buf += data

    def take(self, n):
        while len(self.buf) < n:
            self.more()
        out, self.buf = self.buf[:n], self.buf[n:]
        self.pos += n
        return out

    def line(self):
        while b"\r\n" not in self.buf:
            self.more()
        return self.take(self.buf.index(b"\r\n") + 2)[:-2]

    def head(self):
        lines = []
        while True:
            ln = self.line()
            if not ln:
                return lines
            lines.append(ln.decode())

    def chunk(self):
        """(the stream offset of the chunk's size line, its data)."""
        at = self.pos
        n = int(self.line().split(b";")[0], 16)
        data = self.take(n)
        assert self.take(2) == b"\r\n"
        return at, data


def one_start(sock, sid, token, cmd, args):
    """Runs one Start on keep-alive @sock: (its frames, whether the frames
    after the start event came in one recv with the body's end)."""
    sock.sendall(start_request(sid, token, {"process": {"cmd": cmd, "args": args}}))
    rd = Reader(sock)
    head = rd.head()
    assert head[0] == "HTTP/1.1 200 OK", head
    seen, tail_from = [], None
    while True:
        at, data = rd.chunk()
        if not data:
            break
        got = frames_of(data)
        if any(f == 2 for f, _ in got) or any("end" in m.get("event", {}) for _, m in got):
            tail_from = at if tail_from is None else tail_from
        seen += got
    body_end = rd.pos
    assert rd.buf == b"", rd.buf  # nothing after the body: the next request's turn
    # Was everything from the end event's chunk to the body's end in one recv()?
    one = any(a <= tail_from and body_end <= b for a, b in rd.recvs)
    return seen, one


def test_command_end_and_end_of_stream_leave_in_one_write(server):
    sid, token = server.create()
    try:
        with socket.create_connection(("127.0.0.1", server.envd_port), timeout=60) as sock:
            for _ in range(ROUNDS):
                frames, one = one_start(sock, sid, token, "/bin/true", [])
                assert [f for f, _ in frames] == [0, 0, 2], frames
                assert frames[0][1]["event"]["start"]["pid"] > 0
                assert frames[1][1] == {"event": {"end": {"exited": True,
                                                          "status": "exit status 0"}}}, frames
                assert frames[2][1] == {}
                assert one, "the end event and the end-of-stream frame came in two writes"
    finally:
        assert server.kill(sid) == 204
    # A kill answers before the sandbox's files are removed (README).
    wait_for(lambda: server.sandboxes() == [], what="the killed sandbox's removal")


def test_stream_still_carries_output_and_a_failure_in_order(server):
    """The twin: a command with output and a non-zero exit gets start, its
    data, then end (with exitCode) and the end-of-stream, as before."""
    sid, token = server.create()
    try:
        with socket.create_connection(("127.0.0.1", server.envd_port), timeout=60) as sock:
            frames, _ = one_start(sock, sid, token, "/bin/sh",
                                  ["-c", "echo out; echo err >&2; exit 3"])
            events = [m.get("event", {}) for f, m in frames if f == 0]
            assert "start" in events[0], frames
            data = [e["data"] for e in events if "data" in e]
            assert {"stdout": "b3V0Cg=="} in data and {"stderr": "ZXJyCg=="} in data, frames
            assert events[-1]["end"] == {"exited": True, "status": "exit status 3",
                                         "exitCode": 3}, frames
            assert frames[-1] == (2, {}), frames
            # The same connection serves the next call (keep-alive).
            frames, _ = one_start(sock, sid, token, "/bin/true", [])
            assert frames[-1] == (2, {}), frames
    finally:
        assert server.kill(sid) == 204
    # A kill answers before the sandbox's files are removed (README).
    wait_for(lambda: server.sandboxes() == [], what="the killed sandbox's removal")


def read_start_frame(sock):
    """Reads a Start answer's head and its first chunk: the start event's pid."""
    rd = Reader(sock)
    assert rd.head()[0] == "HTTP/1.1 200 OK"
    _, data = rd.chunk()
    flags, msg = frames_of(data)[0]
    assert flags == 0, msg
    return rd, int(msg["event"]["start"]["pid"])


def close_stdin(server, sid, token, pid):
    """CloseStdin on a connection of its own: (HTTP status, the answer)."""
    with socket.create_connection(("127.0.0.1", server.envd_port), timeout=60) as c:
        body = json.dumps({"process": {"pid": pid}}).encode()
        c.sendall((f"POST /process.Process/CloseStdin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   f"E2b-Sandbox-Id: {sid}\r\nX-Access-Token: {token}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                   f"Connection: close\r\n\r\n").encode() + body)
        data = b""
        while chunk := c.recv(1 << 16):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


def test_broker_socket_replaces_a_stale_one(server, sbx):
    """A broker binds its socket first and removes a stale file in the way
    only then: a process whose socket name a dead socket file held is still
    reached (CloseStdin ends its cat), and a pid with only a stale file is
    not_found, never a refused connection taken for a live process."""
    sid, token = server.create()
    folder = server.home / "e2b" / "envd"
    try:
        with socket.create_connection(("127.0.0.1", server.envd_port), timeout=60) as sock:
            frames, _ = one_start(sock, sid, token, "/bin/true", [])
            first = int(frames[0][1]["event"]["start"]["pid"])
            stale = []
            for pid in range(first + 1, first + 4):
                path = folder / f"e2b-{sid}-{pid}.sock"
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.bind(str(path))
                s.close()  # the file stays: a dead broker's socket
                sbx.chown(path)
                stale.append(pid)
            sock.sendall(start_request(sid, token,
                                       {"process": {"cmd": "/bin/cat"}, "stdin": True}))
            rd, pid = read_start_frame(sock)
            assert pid in stale, (pid, stale)
            assert close_stdin(server, sid, token, pid) == (200, {})
            seen = []
            while True:
                _, data = rd.chunk()
                if not data:
                    break
                seen += frames_of(data)
            assert seen[-2][1]["event"]["end"]["status"] == "exit status 0", seen
            assert seen[-1] == (2, {}), seen
            # The twin: a stale file with no broker behind it is not_found.
            unused = [p for p in stale if p != pid][-1]
            st, ans = close_stdin(server, sid, token, unused)
            assert (st, ans["code"]) == (404, "not_found"), ans
    finally:
        assert server.kill(sid) == 204
    wait_for(lambda: server.sandboxes() == [], what="the killed sandbox's removal")
