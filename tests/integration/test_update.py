# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch update NAME [POLICY FLAGS]` (issue 22): a stopped sandbox's
policy changes, saved in its record; a running one's does not, and the
refusal names the field; the workspace and the backend never change.

Upstreams are HTTP servers on the host's loopback (proxyutil.Upstream),
reached by names mapped with --resolve; nothing is sent anywhere else.
"""

import json
import random
from pathlib import Path

import pytest

import cgroupctl
from conftest import live_with_marker

API = "api.example.test"
OTHER = "other.example.test"


def stored_policy(s, name):
    return json.loads((s.sandbox_dir(name) / "sandbox.json").read_text())["policy"]


def fetch(s, name, host, port, path):
    """The HTTP status curl got for http://HOST:PORT/PATH through the proxy."""
    return s.exec(name, "curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w",
                  "%{http_code}", f"http://{host}:{port}/{path}")


def create(s, port):
    s.create("net", "--allow-host", f"{API}:{port}", "--resolve", f"{API}:127.0.0.1",
             "--allow-private", "127.0.0.0/8")


def test_a_stopped_sandbox_gets_the_new_allowlist(store, upstream):
    s = store
    create(s, upstream.port)
    # Negative twin: before the update, OTHER is refused.
    r = fetch(s, "net", OTHER, upstream.port, "u1")
    assert (r.returncode, r.stdout) == (0, "403"), r.stderr
    s.hutch("stop", "net")
    r = s.hutch("update", "net", "--allow-host", f"{OTHER}:{upstream.port}", "--resolve",
                f"{OTHER}:127.0.0.1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["allow_hosts", "resolve"], r.stdout
    p = stored_policy(s, "net")
    assert f"{OTHER}:{upstream.port}" in p["allow_hosts"] and f"{API}:{upstream.port}" in p["allow_hosts"]
    r = fetch(s, "net", OTHER, upstream.port, "u2")
    assert (r.returncode, r.stdout) == (0, "200"), r.stderr
    assert any(q["path"] == "/u2" for q in upstream.requests)


def test_limits_change_when_stopped(store, upstream):
    s = store
    create(s, upstream.port)
    r = s.hutch("update", "net", "--pids", "77", "--memory", "300m")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["limits.memory", "limits.pids"], r.stdout
    limits = stored_policy(s, "net")["limits"]
    assert limits["pids"] == 77, limits
    # Nothing to change: nothing said, nothing written.
    before = (s.sandbox_dir("net") / "sandbox.json").stat().st_mtime_ns
    r = s.hutch("update", "net", "--pids", "77")
    assert (r.returncode, r.stdout) == (0, ""), r.stderr
    assert (s.sandbox_dir("net") / "sandbox.json").stat().st_mtime_ns == before


def test_a_running_sandbox_refuses_naming_the_field(store, upstream):
    s = store
    create(s, upstream.port)
    s.sh("net", "true")  # starts it; it stays up until stopped or idle
    before = stored_policy(s, "net")
    # The allowlist changes live (test_update_network.py); the rest not.
    r = s.hutch("update", "net", "--hostname", "two")
    assert r.returncode == 125, r.stderr
    assert "cannot change hostname of sandbox 'net' while it runs" in r.stderr, r.stderr
    r = s.hutch("update", "net", "--timeout", "9s")
    assert r.returncode == 125 and "limits.timeout" in r.stderr, r.stderr
    assert stored_policy(s, "net") == before
    r = fetch(s, "net", OTHER, upstream.port, "u3")
    assert (r.returncode, r.stdout) == (0, "403"), r.stderr
    # Nothing to change is no refusal.
    r = s.hutch("update", "net")
    assert (r.returncode, r.stdout) == (0, ""), r.stderr
    # Stopped, the same update goes through.
    s.hutch("stop", "net")
    r = s.hutch("update", "net", "--timeout", "9s")
    assert (r.returncode, r.stdout) == (0, "limits.timeout\n"), r.stderr


def sandbox_limit(pid, controller, file):
    """@file of the cgroup holding @pid's sandbox (the parent of its exec
    leaf, where hutch puts the limits), read on the host, or None."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if controller in ctrls.split(","):
            mount = cgroupctl.v1_mount(controller)
            if mount:
                f = Path(mount["mount_point"]) / path.lstrip("/")
                for d in (f, *f.parents):
                    if (d / file).exists() and d.name != "exec":
                        return (d / file).read_text().strip()
    return None


def test_a_running_sandbox_takes_new_limits_live(store):
    """memory, memory_swap, cpus and pids change on the running sandbox's
    cgroup, read back from the kernel; a limit the sandbox started without
    cannot be added live, nor one lifted (the twins), and the record keeps
    the old policy then."""
    s = store
    # As a user without a delegated cgroup here, the limits are rlimits.
    s.create("lim", "--memory", "256m", "--pids", "100", "--allow-degraded")
    marker = f"{60 + random.randint(1, 999) / 1000:.3f}"
    p = s.popen("exec", "lim", "--", "sleep", marker)
    try:
        pid = cgroupctl.poll_until(
            lambda: next((q for q, i in live_with_marker(f"sleep {marker}").items()
                          if i[3].startswith("sleep")), None), 20)
        assert pid, "the command did not start"
        held = sandbox_limit(pid, "pids", "pids.max")
        r = s.hutch("update", "lim", "--memory", "300m", "--pids", "120")
        if held is None and s.runner.mode == "user":
            # No cgroup for this caller here: refused, never ignored.
            assert r.returncode == 125 and "not all held by a cgroup" in r.stderr, r.stderr
            return
        assert held == "100"
        assert (r.returncode, r.stdout) == (0, "limits.memory\nlimits.pids\n"), r.stderr
        assert sandbox_limit(pid, "pids", "pids.max") == "120"
        assert sandbox_limit(pid, "memory", "memory.limit_in_bytes") == str(300 << 20)
        assert stored_policy(s, "lim")["limits"]["pids"] == 120
        before = stored_policy(s, "lim")
        r = s.hutch("update", "lim", "--memory", "300m", "--pids", "120", "--cpus", "1")
        assert r.returncode == 125 and "without a cpu limit" in r.stderr, r.stderr
        assert stored_policy(s, "lim") == before
        assert sandbox_limit(pid, "pids", "pids.max") == "120"
    finally:
        p.kill()
        p.wait()


def test_the_workspace_and_backend_never_change(store, upstream):
    s = store
    create(s, upstream.port)
    ws = s.runner.make_dir(name="ws")
    before = stored_policy(s, "net")
    r = s.hutch("update", "net", "--workspace", str(ws))
    assert r.returncode == 125 and "the workspace of sandbox 'net' cannot change" in r.stderr, r.stderr
    r = s.hutch("update", "net", "--backend", "vm")
    assert r.returncode == 125, r.stderr
    assert stored_policy(s, "net") == before


def test_bad_input(store):
    s = store
    r = s.hutch("update", "nosuch", "--pids", "5")
    assert r.returncode == 125 and "nosuch" in r.stderr, r.stderr
    s.create("box")
    for flags, msg in [
        (["--from", "x"], "--from is a flag of 'hutch create'"),
        (["--json", "x"], "flags of 'hutch exec'"),
        (["--pids", "lots"], "--pids"),
        (["stray"], "unexpected argument 'stray'"),
    ]:
        r = s.hutch("update", "box", *flags)
        assert r.returncode == 125 and msg in r.stderr, (flags, r.stderr)
    r = s.hutch("update", "--help")
    assert r.returncode == 0 and "usage: hutch update" in r.stdout


# ---- the C API: hutch_update() (through tests/integration/capi-probe.c) ----

from test_capi import Api, installed  # noqa: E402,F401 (installed: a fixture)


@pytest.fixture
def api(sbx, installed):  # noqa: F811
    a = Api(sbx, installed)
    yield a
    a.cleanup()


def capi_policy(a, name):
    return json.loads((a.home / "sandboxes" / name / "sandbox.json").read_text())["policy"]


def test_c_api_update(api):
    a = api
    a.create("box", "--json", '{"hostname": "one"}')
    a.ok("update", "box", "--json", '{"hostname": "two"}')
    assert capi_policy(a, "box")["hostname"] == "two"
    r, _o = a.exec("box", "hostname")
    assert r.stdout == "two\n", r.stdout
    # Running: refused, named, nothing written.
    e = a.err("update", "box", "--json", '{"hostname": "three"}')
    assert e["error"] == 16 and "cannot change hostname" in e["message"], e  # EBUSY
    assert capi_policy(a, "box")["hostname"] == "two"
    # The same policy is no change, running or not.
    a.ok("update", "box", "--json", '{"hostname": "two"}')
    e = a.err("update", "nosuch", "--json", "{}")
    assert "nosuch" in e["message"], e
