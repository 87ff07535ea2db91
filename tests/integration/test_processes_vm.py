# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch ps`, `kill`, `wait` and `logs --follow` against the VM backend
(docs/processes.md): the same behaviour as test_processes.py's, through the
guest agent. Under TCG each VM is slow to start: a few tests, each doing
much in one VM, as the caller (root) and as the unprivileged user."""

import json
from subprocess import PIPE

from cgroupctl import poll_until
from test_vm_persist import (VM_TIMEOUT, any_store, assert_vm_gone, qemu_of,  # noqa: F401
                             started_vm, vm_store_dir)


def detach(store, name, script):
    r = store.hutch("exec", name, "-d", "--", "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip())


def ps(store, name):
    r = store.hutch("ps", name, "--json")
    assert r.returncode == 0, r.stderr
    return {e["id"]: e for e in json.loads(r.stdout)}


def wait_json(store, name, xid):
    r = store.hutch("wait", name, xid, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def made(store, name, path):
    return poll_until(lambda: store.exec(name, "test", "-e", path).returncode == 0, VM_TIMEOUT)


def test_vm_ps_follow_kill_and_wait(any_store):
    store = any_store
    keeper, qemu = started_vm(store, "box", "true")
    # A server that ignores TERM, and says so on both streams.
    server = ("trap '' TERM; echo listening; echo warming >&2; touch /tmp/up; "
              "while [ ! -e /tmp/go ]; do sleep 0.1; done; echo more; while :; do sleep 1; done")
    xid = detach(store, "box", server)
    assert made(store, "box", "/tmp/up")
    rows = ps(store, "box")
    assert set(rows) == {xid}, rows
    assert rows[xid]["detached"] is True and rows[xid]["argv"][:2] == ["sh", "-c"], rows
    assert rows[xid]["pid"] > 1, rows

    p = store.popen("logs", "box", "--exec", xid, "--follow", stdout=PIPE, stderr=PIPE)
    try:
        assert p.stdout.readline() == "listening\n"
        assert store.exec("box", "touch", "/tmp/go").returncode == 0
        # Written after the follower started: it comes as it is written.
        assert p.stdout.readline() == "more\n"
        assert p.poll() is None
        # TERM is ignored: the grace's SIGKILL ends it, and the follower.
        r = store.hutch("kill", "box", xid, "-t", "1")
        assert r.returncode == 0, r.stderr
        out, err = p.communicate(timeout=VM_TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert (p.returncode, out, err) == (0, "", "warming\n"), (p.returncode, out, err)
    o = wait_json(store, "box", xid)
    assert (o["reason"], o["signal"], o["exit_code"]) == ("killed", 9, 137), o
    assert ps(store, "box") == {}

    # The twin: a command that heeds TERM ends by it.
    xid2 = detach(store, "box", "touch /tmp/up2; while :; do sleep 1; done")
    assert made(store, "box", "/tmp/up2")
    assert store.hutch("kill", "box", xid2).returncode == 0
    o = wait_json(store, "box", xid2)
    assert (o["reason"], o["signal"], o["exit_code"]) == ("killed", 15, 143), o
    r = store.hutch("kill", "box", xid2)
    assert r.returncode == 125 and f"exec {xid2} has already ended (exit 143)" in r.stderr

    assert store.hutch("rm", "--force", "box").returncode == 0
    assert_vm_gone(store, "box", keeper, qemu)
    assert not list(store.dir.rglob(f"exec-{xid}.*"))
