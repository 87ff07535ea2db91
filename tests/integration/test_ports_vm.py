# SPDX-License-Identifier: LGPL-2.1-or-later
"""Published ports of a microVM sandbox (issue 18, docs/vm.md "Published
ports and terminals"): `hutch create --backend vm -p`, a forward over the
guest agent's port to 127.0.0.1:PORT in the guest, with no NIC (the
sandbox's network is "none"). A server started with `exec -d` is reached
through the host port and through hutch serve's preview route; only the
published ports are reachable from the host; a host port in use fails the
start with nothing left; nothing listens after stop. Under TCG a VM is
slow to start: one VM per runner, doing much."""

import http.client
import os
import socket
from subprocess import DEVNULL

from cgroupctl import poll_until
from test_capi import workspace
from test_ports import free_port, listening
from test_serve import Api as ServeApi
from test_serve import Server
from test_vm_persist import (VM_TIMEOUT, any_store, assert_vm_gone,  # noqa: F401
                             qemu_of, vm_store_dir)

# Two HTTP servers (8000 and 8001, each saying its port) and a byte echo
# that answers at its peer's half-close (8002), in one python3: TCG makes
# each start slow. /tmp/up once all three listen.
GUEST_SERVERS = r"""
import socket, threading
def listener(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    return s
def http(s, port):
    while True:
        c, _ = s.accept()
        req = b""
        while b"\r\n\r\n" not in req:
            d = c.recv(4096)
            if not d:
                break
            req += d
        body = b"port %d\n" % port
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        c.close()
def echo(s):
    while True:
        c, _ = s.accept()
        data = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            data += d
        c.sendall(data)
        c.close()
socks = [listener(p) for p in (8000, 8001, 8002)]
threading.Thread(target=http, args=(socks[0], 8000)).start()
threading.Thread(target=http, args=(socks[1], 8001)).start()
threading.Thread(target=echo, args=(socks[2],)).start()
open("/tmp/up", "w").close()
"""


def get(port, path="/"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=VM_TIMEOUT)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def echo_through(port, data):
    with socket.create_connection(("127.0.0.1", port), timeout=VM_TIMEOUT) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            d = s.recv(1 << 16)
            if not d:
                return got
            got += d


def tcp_listeners(pids):
    """{(addr, port)} of the IPv4 TCP sockets listening that @pids hold."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    out = set()
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            x = line.split()
            if x[3] == "0A" and x[9] in inodes:
                addr, port = x[1].split(":")
                ip = ".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0))
                out.add((ip, int(port, 16)))
    return out


def test_vm_published_port_and_preview(any_store):
    store = any_store
    hp, hp_echo = free_port(), free_port()
    store.create_vm("box", workspace(store), "-p", f"127.0.0.1:{hp}:8000", "-p",
                    f"127.0.0.1:{hp_echo}:8002")
    r = store.hutch("exec", "box", "-d", "--", "python3", "-c", GUEST_SERVERS)
    assert r.returncode == 0, r.stderr
    keeper = store.keeper_pid("box")
    qemu = qemu_of(keeper)
    assert len(qemu) == 1, qemu
    assert poll_until(lambda: store.exec("box", "test", "-e", "/tmp/up").returncode == 0,
                      VM_TIMEOUT)

    # The published port reaches the guest's 127.0.0.1:8000, with no NIC.
    assert get(hp, "/x") == (200, b"port 8000\n")
    assert store.sh("box", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '") == "lo\n"
    # Bytes both ways, more than a window, and the half-close passed on.
    data = bytes(range(256)) * 4096
    assert echo_through(hp_echo, data) == data
    r = store.hutch("port", "box")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(
        [f"8000/tcp -> 127.0.0.1:{hp}", f"8002/tcp -> 127.0.0.1:{hp_echo}"]), r.stdout

    # The twin: only the published ports listen on the host, in the keeper;
    # QEMU has no listener (no hostfwd), and the guest's 8001 has no way in.
    assert tcp_listeners([keeper]) == {("127.0.0.1", hp), ("127.0.0.1", hp_echo)}
    assert tcp_listeners(qemu) == set()
    # `hutch port add` on the running sandbox: a listener at once, to the
    # guest's 8001; `rm` closes it.
    hp_added = free_port()
    r = store.hutch("port", "box", "add", f"127.0.0.1:{hp_added}:8001")
    assert r.returncode == 0, r.stderr
    assert get(hp_added) == (200, b"port 8001\n")
    r = store.hutch("port", "box", "rm", "8001")
    assert r.returncode == 0, r.stderr
    assert not listening(hp_added)

    # A host port in use fails the start of another sandbox: exit 125
    # naming it, no VM left.
    store.create_vm("taken", workspace(store), "-p", f"127.0.0.1:{hp}:8000")
    r = store.exec("taken", "true")
    assert r.returncode == 125 and f"127.0.0.1:{hp} is already in use" in r.stderr, r.stderr
    assert store.keeper_pids("taken") == {}

    # hutch serve: the ports route, and the preview route to any port of
    # the guest (no host port needed), or 502 where nothing listens.
    srv = Server(store.runner)
    srv.env = store.env()
    proc, path, _ = srv.start()
    try:
        api = ServeApi(path, srv.uid)
        ports = api.ok("GET", "/v1/sandboxes/box/ports").json
        assert ports["running"] is True, ports
        assert sorted((p["port"], p["host_port"]) for p in ports["ports"]) == [
            (8000, hp), (8002, hp_echo)], ports
        r = api.call("GET", "/v1/sandboxes/box/ports/8001/y")
        assert (r.status, r.data) == (200, b"port 8001\n"), r
        r = api.call("GET", "/v1/sandboxes/box/ports/8009/")
        assert r.status == 502 and "nothing listens there" in r.error["message"], r
    finally:
        srv.stop(proc)

    # No forwarder outlives the sandbox: nothing listens after stop.
    assert store.hutch("stop", "box").returncode == 0
    assert not listening(hp) and not listening(hp_echo)
    try:
        socket.create_connection(("127.0.0.1", hp), timeout=5).close()
        raise AssertionError("the published port still answers after stop")
    except ConnectionRefusedError:
        pass
    assert store.hutch("rm", "--force", "box").returncode == 0
    assert_vm_gone(store, "box", keeper, qemu)


# Answers one request on 8000 (the request line echoed), then exits.
ONE_REQUEST = r"""
import socket
s = socket.socket()
s.bind(("127.0.0.1", 8000))
s.listen(1)
c, _ = s.accept()
req = b""
while b"\r\n\r\n" not in req:
    req += c.recv(4096)
body = req.split(b"\r\n")[0] + b"\n"
c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
c.close()
"""


def test_vm_one_shot_run_publishes_a_port(caller):
    """`hutch run --backend vm -p`: the listener is there before the VM
    starts, reaches the command's server, and goes with the run; a host
    port in use is exit 125 before any VM."""
    hp = free_port()
    p = caller.popen(["--backend", "vm", "--vm-accel", "tcg", "-p", f"127.0.0.1:{hp}:8000",
                      "--", "python3", "-c", ONE_REQUEST], stdout=DEVNULL, stderr=DEVNULL)
    try:
        assert poll_until(lambda: listening(hp) or p.poll() is not None, VM_TIMEOUT)

        def answered():
            try:
                return get(hp, "/once")
            except (ConnectionError, http.client.HTTPException, OSError):
                return None

        assert poll_until(answered, VM_TIMEOUT) == (200, b"GET /once HTTP/1.1\n")
        assert p.wait(VM_TIMEOUT) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert not listening(hp)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = caller.run(["--backend", "vm", "--vm-accel", "tcg", "-p", f"127.0.0.1:{port}:80",
                        "--", "true"])
        assert r.returncode == 125 and f"127.0.0.1:{port} is already in use" in r.stderr, r.stderr
