# SPDX-License-Identifier: LGPL-2.1-or-later
"""A published port's half-close on the microVM backend is symmetric
(issue 18, docs/vm.md "Published ports and terminals", agent protocol
1.4): each direction of a connection ends on its own. A guest server that
shuts down its write side and keeps reading gets every byte the host's
client sends after that, and the client sees the end of the server's
stream first; the connection ends once both sides ended. The twin: the
host client's own half-close still reaches the guest server, which
answers after it. One VM per runner (TCG is slow)."""

import socket

from cgroupctl import poll_until
from test_capi import workspace
from test_ports import free_port
from test_vm_persist import (VM_TIMEOUT, any_store, assert_vm_gone,  # noqa: F401
                             qemu_of, vm_store_dir)

# 8003: says hello, half-closes (SHUT_WR), reads to the end and writes
# how much it got to /tmp/got-N (N: the connection's number). 8004: reads
# to the end (the client's half-close), then answers the length. /tmp/up
# once both listen.
GUEST_SERVERS = r"""
import socket, threading
def listener(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    return s
def read_all(c):
    n = 0
    while True:
        d = c.recv(65536)
        if not d:
            return n
        n += len(d)
def half_closer(s):
    k = 0
    while True:
        c, _ = s.accept()
        k += 1
        c.sendall(b"hello\n")
        c.shutdown(socket.SHUT_WR)
        n = read_all(c)
        c.close()
        with open("/tmp/got-%d.tmp" % k, "w") as f:
            f.write(str(n))
        import os
        os.rename("/tmp/got-%d.tmp" % k, "/tmp/got-%d" % k)
def counter(s):
    while True:
        c, _ = s.accept()
        c.sendall(b"%d\n" % read_all(c))
        c.close()
socks = [listener(p) for p in (8003, 8004)]
threading.Thread(target=half_closer, args=(socks[0],)).start()
threading.Thread(target=counter, args=(socks[1],)).start()
open("/tmp/up", "w").close()
"""


def read_to_end(s):
    got = b""
    while True:
        d = s.recv(1 << 16)
        if not d:
            return got
        got += d


def test_vm_port_half_close_is_symmetric(any_store):
    store = any_store
    hp, hp_count = free_port(), free_port()
    store.create_vm("box", workspace(store), "-p", f"127.0.0.1:{hp}:8003", "-p",
                    f"127.0.0.1:{hp_count}:8004")
    r = store.hutch("exec", "box", "-d", "--", "python3", "-c", GUEST_SERVERS)
    assert r.returncode == 0, r.stderr
    keeper = store.keeper_pid("box")
    qemu = qemu_of(keeper)
    assert poll_until(lambda: store.exec("box", "test", "-e", "/tmp/up").returncode == 0,
                      VM_TIMEOUT)

    def got(k):
        r = store.exec("box", "cat", f"/tmp/got-{k}")
        return r.stdout if r.returncode == 0 else None

    # The guest side half-closes first: the client sees its stream end,
    # then sends more than a channel's window, which the guest server
    # still reads whole.
    data = bytes(range(256)) * 2048  # 512 KiB
    for k in (1, 2):
        with socket.create_connection(("127.0.0.1", hp), timeout=VM_TIMEOUT) as s:
            assert read_to_end(s) == b"hello\n"
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        assert poll_until(lambda: got(k) is not None, VM_TIMEOUT)
        assert got(k) == str(len(data)), got(k)

    # The twin: the client half-closes first; the server answers after.
    with socket.create_connection(("127.0.0.1", hp_count), timeout=VM_TIMEOUT) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        assert read_to_end(s) == b"%d\n" % len(data)

    assert store.hutch("rm", "--force", "box").returncode == 0
    assert_vm_gone(store, "box", keeper, qemu)
