# SPDX-License-Identifier: LGPL-2.1-or-later
"""Published ports (issue 18, docs/network.md "Published ports"): `-p` on
run and create, `hutch port`, driven through the real binary as root and
as the unprivileged user.

A server inside the sandbox listens on the sandbox's own 127.0.0.1; the
host reaches it only through a published port, whose forwarder (a
process named hutch-port, a child of the keeper or of `hutch run`) lives
exactly as long as its sandbox. Every claim has its twin: without -p (or
after `port rm`) the same connection is refused, and publishing a port
opens nothing outbound from a --network none sandbox."""

import hashlib
import os
import re
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

import cgroupctl

from cgroupctl import poll_until
from conftest import proc_table, wait_pidfds
from test_persistent import Store, marker  # noqa: F401

# A server for one connection at a time inside the sandbox: echoes the
# sha256 of everything the client sent (after the client's half-close),
# then the bytes themselves. Written here since the host's python3 is
# what the sandbox sees.
ECHO_SERVER = r"""
import hashlib, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
print("listening", flush=True)
for _ in range(int(sys.argv[2])):
    c, _ = s.accept()
    data = bytearray()
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        data += b
    c.sendall(hashlib.sha256(data).hexdigest().encode() + b"\n" + bytes(data))
    c.close()
"""

HTTP_SERVER = ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"]


class PortStore(Store):
    """test_persistent's Store; the forwarders, forks of the keeper with
    its command line and environment, are not counted as keepers."""

    def keeper_pids(self, name=None):
        out = {}
        for pid, n in super().keeper_pids(name).items():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "hutch-port":
                    continue
            except OSError:
                continue
            out[pid] = n
        return out

    def finalize(self):
        super().finalize()
        assert not forwarders(), f"forwarders left: {forwarders()}"


STORE_CLASS = PortStore  # conftest's store fixture


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """Whether anything in the host's network namespace listens on TCP
    @port (any address), from /proc/net/tcp and tcp6."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def forwarders(parent=None):
    """{pid: ppid} of the live hutch-port processes (of @parent)."""
    out = {}
    for pid, (ppid, state, _uid, _cmd) in proc_table().items():
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm == "hutch-port" and state != "Z" and (parent is None or ppid == parent):
            out[pid] = ppid
    return out


def http_get(port, host="127.0.0.1", path="/"):
    """The status line of GET @path through host @host:@port, or None when
    the connection is refused or reset."""
    try:
        with socket.create_connection((host, port), timeout=10) as c:
            c.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
            data = b""
            while b"\r\n" not in data:
                b = c.recv(4096)
                if not b:
                    break
                data += b
            return data.split(b"\r\n", 1)[0].decode() or None
    except OSError:
        return None


def refused(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=10):
            return False
    except ConnectionRefusedError:
        return True


def echo_through(port, payload, host="127.0.0.1"):
    """Sends @payload, half-closes, and returns (sha256 line, echoed bytes)."""
    with socket.create_connection((host, port), timeout=30) as c:

        def send():
            try:
                c.sendall(payload)
                c.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the peer went away first: the reader sees it

        sender = threading.Thread(target=send)
        sender.start()
        data = bytearray()
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            data += b
        sender.join()
    line, _, rest = bytes(data).partition(b"\n")
    return line.decode(), rest


def mapping(store, name, port):
    """The host port `hutch port NAME PORT` prints for 127.0.0.1."""
    r = store.hutch("port", name, port)
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"127\.0\.0\.1:(\d+)\n", r.stdout)
    assert m, r.stdout
    return int(m.group(1))


def start_http(store, name):
    r = store.hutch("exec", "-d", name, "--", *HTTP_SERVER)
    assert r.returncode == 0, r.stderr


def test_detached_server_is_reached_only_through_its_published_port(store):
    store.create("web", "-p", "8000")
    start_http(store, "web")
    hp = mapping(store, "web", 8000)
    assert poll_until(lambda: http_get(hp) == "HTTP/1.0 200 OK", 20), http_get(hp)
    r = store.hutch("port", "web")
    assert r.returncode == 0 and r.stdout == f"8000/tcp -> 127.0.0.1:{hp}\n", r.stdout
    # The twin: the sandbox's 127.0.0.1:8000 is not the host's, and a port
    # that was not published is not listed.
    if not listening(8000):
        assert refused(8000)
    r = store.hutch("port", "web", "8001")
    assert r.returncode == 1 and "no public port '8001/tcp'" in r.stderr, r.stderr
    kp = store.keeper_pid("web")
    fw = forwarders(kp)
    assert len(fw) == 1, fw
    assert listening(hp)


def test_forwarder_moves_big_payloads_and_half_closes(store):
    hp = free_port()
    store.create("echo", "-p", f"127.0.0.1:{hp}:9000")
    r = store.hutch("exec", "-d", "echo", "--", "python3", "-c", ECHO_SERVER, "9000", "3")
    assert r.returncode == 0, r.stderr
    payload = os.urandom(8 << 20)

    def ready():
        try:
            return echo_through(hp, b"ping")[0] == hashlib.sha256(b"ping").hexdigest()
        except OSError:
            return False

    assert poll_until(ready, 20)
    digest, back = echo_through(hp, payload)
    assert digest == hashlib.sha256(payload).hexdigest()
    assert back == payload
    digest, back = echo_through(hp, b"")
    assert digest == hashlib.sha256(b"").hexdigest() and back == b""


def test_network_none_stays_closed_with_a_published_port(store):
    """Inbound only: the sandbox still has nothing but its loopback, the
    host's listener is not reachable from inside, and no address outside
    is routable."""
    hp = free_port()
    store.create("shut", "-p", f"127.0.0.1:{hp}:8000")
    start_http(store, "shut")
    assert poll_until(lambda: http_get(hp) == "HTTP/1.0 200 OK", 20)
    probe = (
        "import socket, sys\n"
        "out = []\n"
        "for host, port in ((sys.argv[1], int(sys.argv[2])), ('192.0.2.1', 80)):\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=5).close(); out.append('open')\n"
        "    except OSError as e:\n"
        "        out.append(type(e).__name__)\n"
        "print(' '.join(out))\n"
    )
    r = store.exec("shut", "python3", "-c", probe, "127.0.0.1", str(hp))
    assert r.returncode == 0, r.stderr
    host_side, outside = r.stdout.split()
    # 127.0.0.1:HP inside is the sandbox's own loopback: nothing there.
    assert host_side == "ConnectionRefusedError", r.stdout
    # No route: ENETUNREACH at once, nothing leaves.
    assert outside == "OSError", r.stdout
    ifaces = store.sh("shut", "cat /proc/net/dev")
    names = {line.split(":")[0].strip() for line in ifaces.splitlines()[2:]}
    assert names == {"lo"}, names


def test_port_add_and_rm_on_a_running_sandbox(store):
    store.create("dyn")
    start_http(store, "dyn")
    r = store.hutch("port", "dyn")
    assert r.returncode == 0 and r.stdout == "", r.stdout
    r = store.hutch("port", "dyn", "add", "8000")
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"8000/tcp -> 127\.0\.0\.1:(\d+)\n", r.stdout)
    assert m, r.stdout
    hp = int(m.group(1))
    assert poll_until(lambda: http_get(hp) == "HTTP/1.0 200 OK", 20)
    assert mapping(store, "dyn", 8000) == hp
    kp = store.keeper_pid("dyn")
    fw = forwarders(kp)
    assert len(fw) == 1, fw
    # rm: the forwarder and its listener go now.
    r = store.hutch("port", "dyn", "rm", "8000")
    assert r.returncode == 0, r.stderr
    assert not wait_pidfds(list(fw), 10)
    assert not listening(hp)
    assert refused(hp)
    assert store.hutch("port", "dyn").stdout == ""
    r = store.hutch("port", "dyn", "rm", "8000")
    assert r.returncode == 125 and "is not published" in r.stderr, r.stderr
    # add is saved in the policy: it comes back with the next start.
    hp2 = free_port()
    assert store.hutch("port", "dyn", "add", f"127.0.0.1:{hp2}:8000").returncode == 0
    assert store.hutch("stop", "dyn").returncode == 0
    assert not listening(hp2)
    r = store.hutch("port", "dyn")
    assert r.returncode == 0 and r.stdout == "", r.stdout
    start_http(store, "dyn")
    assert mapping(store, "dyn", 8000) == hp2
    assert poll_until(lambda: http_get(hp2) == "HTTP/1.0 200 OK", 20)


def test_port_add_on_a_stopped_sandbox_is_saved(store):
    store.create("cold")
    hp = free_port()
    r = store.hutch("port", "cold", "add", f"{hp}:8000")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"8000/tcp -> 127.0.0.1:{hp}\n", r.stdout
    assert not listening(hp)
    start_http(store, "cold")
    assert poll_until(lambda: http_get(hp) == "HTTP/1.0 200 OK", 20)
    r = store.hutch("port", "cold", "add", f"{hp}:8001")
    assert r.returncode == 125 and "asks for the host port" in r.stderr, r.stderr


def test_forwarders_end_with_stop_rm_and_a_killed_keeper(store):
    hp = free_port()
    store.create("gone", "-p", f"127.0.0.1:{hp}:8000", "-p", "8001")
    start_http(store, "gone")
    assert poll_until(lambda: http_get(hp) == "HTTP/1.0 200 OK", 20)
    fw = forwarders(store.keeper_pid("gone"))
    assert len(fw) == 2, fw
    assert store.hutch("stop", "gone").returncode == 0
    assert not wait_pidfds(list(fw), 10)
    assert not listening(hp) and refused(hp)

    # kill -9 of the keeper: the forwarders die with it (PDEATHSIG).
    start_http(store, "gone")
    assert poll_until(lambda: http_get(hp) == "HTTP/1.0 200 OK", 20)
    kp = store.keeper_pid("gone")
    fw = forwarders(kp)
    assert len(fw) == 2, fw
    os.kill(kp, signal.SIGKILL)
    assert not wait_pidfds([kp, *fw], 10)
    assert not listening(hp) and refused(hp)
    # The sandbox dies with its keeper; the keeper's cgroups, which it
    # could not remove, go at the next start (gc_stale_runs), which takes
    # them once the keeper's pid is gone (its parent, init, reaps it
    # slowly here) and they are empty: wait for both, or the start below
    # may come first and leave them to the store's end-of-test check.
    assert poll_until(lambda: not Path(f"/proc/{kp}").exists(), 30)
    assert poll_until(lambda: not any(cgroupctl.procs_below(d) for d in cgroupctl.run_dirs(kp)), 20)

    # rm --force of a running one.
    start_http(store, "gone")
    assert poll_until(lambda: http_get(hp) == "HTTP/1.0 200 OK", 20)
    fw = forwarders(store.keeper_pid("gone"))
    assert store.hutch("rm", "--force", "gone").returncode == 0
    store.names.remove("gone")
    assert not wait_pidfds(list(fw), 10)
    assert not listening(hp)


def test_run_publishes_for_the_length_of_the_command(sbx):
    hp = free_port()
    p = sbx.popen(
        ["-p", f"127.0.0.1:{hp}:9000", "--", "python3", "-c", ECHO_SERVER, "9000", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert p.stdout.readline() == "listening\n"
        run_fw = forwarders(p.pid)
        assert len(run_fw) == 1, run_fw
        digest, back = echo_through(hp, b"hello through run")
        assert back == b"hello through run"
        assert p.wait(timeout=60) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
    assert not wait_pidfds(list(run_fw), 10)
    assert not listening(hp) and refused(hp)


def test_ipv6_loopback_is_published_in_brackets(store):
    if not Path("/proc/net/if_inet6").exists() or "00000000000000000000000000000001" not in Path(
        "/proc/net/if_inet6"
    ).read_text():
        pytest.fail("the host has no ::1 (IPv6 loopback) to publish on")
    store.create("six", "-p", "[::1]::8000")
    start_http(store, "six")
    r = store.hutch("port", "six")
    m = re.fullmatch(r"8000/tcp -> \[::1\]:(\d+)\n", r.stdout)
    assert m, r.stdout
    hp = int(m.group(1))
    assert poll_until(lambda: http_get(hp, host="::1") == "HTTP/1.0 200 OK", 20)
    # The twin: only ::1 listens, not 127.0.0.1.
    assert refused(hp)


def test_bad_specs_are_refused_before_anything_runs(sbx):
    for spec, msg in (
        ("70000", "the sandbox port must be a number from 1 to 65535"),
        ("0", "the sandbox port must be a number from 1 to 65535"),
        ("8080:99999", "the sandbox port must be a number from 1 to 65535"),
        ("99999:80", "the host port must be a number from 0 to 65535"),
        ("localhost:80:80", "not an IPv4 address"),
        ("::1:80:80", "not an IPv4 address"),
        ("80/udp", "only TCP ports"),
        ("abc", "invalid port spec 'abc'"),
    ):
        before = forwarders()
        r = sbx.run(["-p", spec, "--", "true"])
        assert r.returncode == 125, (spec, r.stderr)
        assert msg in r.stderr, (spec, r.stderr)
        assert forwarders() == before


def test_host_port_in_use_is_named_and_leaves_nothing(sbx):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        hp = busy.getsockname()[1]
        m = marker()
        r = sbx.run(["-p", f"{hp}:80", "--", "sh", "-c", f"echo {m}"])
        assert r.returncode == 125, r.stderr
        assert f"127.0.0.1:{hp} is already in use" in r.stderr, r.stderr
        assert m not in r.stdout  # the command never ran
    assert not forwarders()


def test_host_port_in_use_at_a_keeper_start_is_named(store):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        hp = busy.getsockname()[1]
        store.create("busy", "-p", f"{hp}:80")
        r = store.exec("busy", "true")
        assert r.returncode == 125, r.stderr
        assert f"127.0.0.1:{hp} is already in use" in r.stderr, r.stderr
        assert store.state_of("busy") == "stopped"
        # port add on a running sandbox: refused, nothing saved.
        store.create("busy2")
        assert store.exec("busy2", "true").returncode == 0
        r = store.hutch("port", "busy2", "add", f"{hp}:80")
        assert r.returncode == 125 and f"127.0.0.1:{hp} is already in use" in r.stderr, r.stderr
        assert store.hutch("port", "busy2").stdout == ""
        assert store.hutch("stop", "busy2").returncode == 0
        assert store.hutch("port", "busy2", "add", f"{hp}:80").returncode == 0


def test_an_address_the_machine_lacks_is_refused(sbx):
    r = sbx.run(["-p", "192.0.2.77::80", "--", "true"])
    assert r.returncode == 125, r.stderr
    assert "cannot publish on 192.0.2.77: it is not an address of this machine" in r.stderr


def test_publishing_beyond_loopback_warns(sbx):
    hp = free_port()
    r = sbx.run(["-p", f"0.0.0.0:{hp}:80", "--", "true"])
    assert r.returncode == 0, r.stderr
    assert "publishing on 0.0.0.0 exposes port 80 of the sandbox to the network" in r.stderr
    # The twin: loopback says nothing.
    r = sbx.run(["-p", f"127.0.0.1:{hp}:80", "--", "true"])
    assert r.returncode == 0 and "exposes" not in r.stderr, r.stderr


def test_published_port_works_with_allow_host(store):
    """With --network allow the proxy's wall is unchanged and the published
    port still reaches the server (inbound needs no allowlist entry)."""
    hp = free_port()
    store.create("allowed", "--allow-host", "api.example.test", "-p", f"127.0.0.1:{hp}:8000")
    start_http(store, "allowed")
    assert poll_until(lambda: http_get(hp) == "HTTP/1.0 200 OK", 20)
    # The twin: the sandbox's only way out is still the proxy.
    probe = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('192.0.2.1', 80), timeout=5); print('open')\n"
        "except OSError as e:\n"
        "    print(type(e).__name__)\n"
    )
    r = store.exec("allowed", "python3", "-c", probe)
    assert r.returncode == 0 and r.stdout.strip() == "OSError", (r.stdout, r.stderr)


def test_update_publishes_on_a_stopped_sandbox(store):
    hp = free_port()
    store.create("upd")
    r = store.hutch("update", "upd", "-p", f"{hp}:8000")
    assert r.returncode == 0, r.stderr
    start_http(store, "upd")
    assert mapping(store, "upd", 8000) == hp
    assert poll_until(lambda: http_get(hp) == "HTTP/1.0 200 OK", 20)
    # While it runs, update refuses to change the ports (port add does it).
    r = store.hutch("update", "upd", "-p", "8001")
    assert r.returncode == 125 and "ports" in r.stderr, r.stderr


# Accepts and holds every connection, answering nothing; closes one when
# it reads from it.
HOLD_SERVER = r"""
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(1024)
def hold(c):
    c.recv(1)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=hold, args=(c,), daemon=True).start()
"""


def test_a_port_takes_at_most_256_connections(store):
    hp = free_port()
    store.create("cap", "-p", f"127.0.0.1:{hp}:9000")
    r = store.hutch("exec", "-d", "cap", "--", "python3", "-c", HOLD_SERVER, "9000")
    assert r.returncode == 0, r.stderr

    def open_one():
        c = socket.create_connection(("127.0.0.1", hp), timeout=10)
        c.setblocking(False)
        return c

    def closed(c):
        """Whether the forwarder closed @c (EOF or reset), waiting for it."""
        c.settimeout(10)
        try:
            return c.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    # The server is up once a connection stays open.
    def probe():
        c = open_one()
        c.settimeout(0.3)
        try:
            gone = c.recv(1) == b""
        except socket.timeout:
            gone = False
        except ConnectionResetError:
            gone = True
        c.close()
        return not gone

    assert poll_until(probe, 20)
    conns = [open_one() for _ in range(256)]
    try:
        extra = open_one()
        assert closed(extra), "the 257th connection was kept"
        extra.close()
        # The twin: the first 256 are all still open; one closed makes room.
        for c in conns[:5]:
            c.settimeout(0.2)
            with pytest.raises(socket.timeout):
                c.recv(1)
        # A connection ends when both sides closed: the server closes its
        # end once it reads a byte.
        last = conns.pop()
        last.setblocking(True)
        last.sendall(b"q")
        assert closed(last)
        last.close()

        def room():
            c = open_one()
            c.settimeout(0.5)
            try:
                kept = c.recv(1) != b""
            except socket.timeout:
                kept = True
            except ConnectionResetError:
                kept = False
            if kept:
                conns.append(c)
            else:
                c.close()
            return kept

        assert poll_until(room, 10)
    finally:
        for c in conns:
            c.close()


def test_a_killed_run_takes_its_forwarder(sbx):
    hp = free_port()
    p = sbx.popen(
        ["-p", f"127.0.0.1:{hp}:9000", "--", "python3", "-c", ECHO_SERVER, "9000", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert p.stdout.readline() == "listening\n"
        fw = forwarders(p.pid)
        assert len(fw) == 1 and listening(hp), fw
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        assert not wait_pidfds(list(fw), 10)
        assert not listening(hp) and refused(hp)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
