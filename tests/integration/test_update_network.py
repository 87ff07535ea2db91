# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch update NAME --allow-host/--deny-host/--resolve/--allow-private`
on a RUNNING namespace sandbox (issue 22): the keeper hands the new policy
to the sandbox's hutch-proxy, which confirms before the record is saved;
new connections use it at once, and open ones it refuses (a CONNECT
tunnel included) are closed with an audit line.

Upstreams are servers on the host's loopback (proxyutil), reached by
names mapped with --resolve; nothing is sent anywhere else.
"""

import json
import select
import subprocess

import pytest

from proxyutil import StreamServer
from test_update import API, OTHER, fetch, stored_policy


@pytest.fixture(scope="module")
def echo():
    e = StreamServer("127.0.0.1")
    yield e
    e.close()


def audit(s, name):
    r = s.hutch("logs", name, "--audit")
    assert r.returncode == 0, r.stderr
    return [d for d in map(json.loads, r.stdout.splitlines()) if d.get("type") == "decision"]


def start(s, port):
    s.create("net", "--allow-host", f"{API}:{port}", "--resolve", f"{API}:127.0.0.1",
             "--allow-private", "127.0.0.0/8")
    s.sh("net", "true")  # starts it; it stays up until stopped
    return s.keeper_pid("net")


def test_the_allowlist_widens_and_narrows_live(store, upstream):
    s = store
    keeper = start(s, upstream.port)
    # Negative twin: before the update, OTHER is refused.
    r = fetch(s, "net", OTHER, upstream.port, "w1")
    assert (r.returncode, r.stdout) == (0, "403"), r.stderr
    r = s.hutch("update", "net", "--allow-host", f"{OTHER}:{upstream.port}", "--resolve",
                f"{OTHER}:127.0.0.1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["allow_hosts", "resolve"], r.stdout
    assert f"{OTHER}:{upstream.port}" in stored_policy(s, "net")["allow_hosts"]
    # The same running sandbox (no restart) now reaches OTHER.
    r = fetch(s, "net", OTHER, upstream.port, "w2")
    assert (r.returncode, r.stdout) == (0, "200"), r.stderr
    assert any(q["path"] == "/w2" for q in upstream.requests)
    assert s.keeper_pid("net") == keeper
    # Narrowing: a deny rule, live; a new connection is refused, audited.
    r = s.hutch("update", "net", "--deny-host", OTHER)
    assert (r.returncode, r.stdout) == (0, "deny_hosts\n"), r.stderr
    r = fetch(s, "net", OTHER, upstream.port, "w3")
    assert (r.returncode, r.stdout) == (0, "403"), r.stderr
    assert not any(q["path"] == "/w3" for q in upstream.requests)
    assert s.keeper_pid("net") == keeper
    denied = [d for d in audit(s, "net") if d["host"] == OTHER and d["decision"] == "deny"]
    assert any("deny rule" in d.get("reason", "") for d in denied), denied
    # API was never touched.
    r = fetch(s, "net", API, upstream.port, "w4")
    assert (r.returncode, r.stdout) == (0, "200"), r.stderr
    # The record has the last policy; a restart keeps it.
    assert OTHER in stored_policy(s, "net")["deny_hosts"]
    s.hutch("stop", "net")
    r = fetch(s, "net", OTHER, upstream.port, "w5")
    assert (r.returncode, r.stdout) == (0, "403"), r.stderr


# Two CONNECT tunnels through the proxy, to API and OTHER (both the echo
# server); prints "ready" once both echo, then, as each one ends or still
# echoes after "check" on stdin, one line per tunnel.
TUNNELS = r"""
import os, socket, sys
proxy = os.environ["http_proxy"].split("//", 1)[1].rstrip("/")
host, port = proxy.rsplit(":", 1)
def tunnel(name):
    s = socket.create_connection((host.strip("[]"), int(port)), timeout=30)
    s.sendall(f"CONNECT {name}:{sys.argv[1]} HTTP/1.1\r\nHost: {name}:{sys.argv[1]}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    s.sendall(b"ping")
    assert s.recv(4) == b"ping"
    return s
a, o = tunnel(sys.argv[2]), tunnel(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()
for name, s in (("api", a), ("other", o)):
    try:
        s.sendall(b"pong")
        got = s.recv(4)
    except OSError:
        got = b""
    print(name, "open" if got == b"pong" else "closed", flush=True)
"""


def test_narrowing_closes_an_open_tunnel(store, upstream, echo):
    s = store
    start(s, upstream.port)
    r = s.hutch("update", "net", "--allow-host", f"{OTHER}:{echo.port}", "--allow-host",
                f"{API}:{echo.port}", "--resolve", f"{OTHER}:127.0.0.1")
    assert r.returncode == 0, r.stderr
    p = s.popen("exec", "net", "--", "python3", "-c", TUNNELS, str(echo.port), API, OTHER,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([p.stdout], [], [], 60)
        assert ready and p.stdout.readline() == "ready\n", p.stderr.read() if p.poll() else ""
        r = s.hutch("update", "net", "--deny-host", OTHER)
        assert r.returncode == 0, r.stderr
        out, err = p.communicate("check\n", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # The tunnel to the host now refused is gone; its negative twin, the
    # one to the host still allowed, carries on.
    assert out.split("\n")[:2] == ["api open", "other closed"], (out, err)
    cut = [d for d in audit(s, "net")
           if d["host"] == OTHER and d["decision"] == "deny"
           and "no longer allowed" in d.get("reason", "")]
    assert cut, audit(s, "net")


def test_live_changes_refused_name_the_field(store, upstream):
    s = store
    start(s, upstream.port)
    before = stored_policy(s, "net")
    # What cannot change live is refused with its name; nothing changes.
    r = s.hutch("update", "net", "--allow-host", f"{OTHER}:{upstream.port}", "--timeout", "9s")
    assert r.returncode == 125, r.stderr
    assert "cannot change limits.timeout of sandbox 'net' while it runs" in r.stderr, r.stderr
    assert stored_policy(s, "net") == before
    r = fetch(s, "net", OTHER, upstream.port, "x1")
    assert (r.returncode, r.stdout) == (0, "403"), r.stderr
    # A sandbox without the proxy cannot be given an allowlist live.
    s.create("off", "--network", "none")
    s.sh("off", "true")
    r = s.hutch("update", "off", "--network", "allow", "--allow-host", API)
    assert r.returncode == 125, r.stderr
    assert "cannot change network of sandbox 'off' while it runs" in r.stderr, r.stderr


# ---- a microVM sandbox: its keeper owns its hutch-proxy, the same way ----

from test_vm_persist import VmStore, vm_store_dir  # noqa: E402,F401 (a fixture)


@pytest.fixture
def vm_store(caller, vm_store_dir):  # noqa: F811
    s = VmStore(caller, vm_store_dir)
    yield s
    s.finalize()


def test_a_running_vm_takes_a_new_allowlist(vm_store, upstream):
    s = vm_store
    port = upstream.port
    ws = s.runner.make_dir(name="ws")
    s.runner.chown(ws)
    s.create_vm("vnet", ws, "--allow-host", f"{API}:{port}", "--resolve", f"{API}:127.0.0.1",
                "--resolve", f"{OTHER}:127.0.0.1", "--allow-private", "127.0.0.0/8")
    r = fetch(s, "vnet", OTHER, port, "v1")
    assert (r.returncode, r.stdout) == (0, "403"), r.stderr
    keeper = s.keeper_pid("vnet")
    r = s.hutch("update", "vnet", "--allow-host", f"{OTHER}:{port}")
    assert (r.returncode, r.stdout) == (0, "allow_hosts\n"), r.stderr
    r = fetch(s, "vnet", OTHER, port, "v2")
    assert (r.returncode, r.stdout) == (0, "200"), r.stderr
    assert any(q["path"] == "/v2" for q in upstream.requests)
    r = s.hutch("update", "vnet", "--deny-host", OTHER)
    assert r.returncode == 0, r.stderr
    r = fetch(s, "vnet", OTHER, port, "v3")
    assert (r.returncode, r.stdout) == (0, "403"), r.stderr
    assert not any(q["path"] == "/v3" for q in upstream.requests)
    assert s.keeper_pid("vnet") == keeper
    # A microVM's limits still need a stop, named.
    r = s.hutch("update", "vnet", "--pids", "99")
    assert r.returncode == 125, r.stderr
    assert "cannot change limits.pids of sandbox 'vnet' while it runs" in r.stderr, r.stderr
