# SPDX-License-Identifier: LGPL-2.1-or-later
"""The network wall of `hutch run` (issue 4): --allow-host and friends,
through the real hutch-proxy that hutch starts outside the sandbox.

Upstreams are HTTP servers on the host's loopback (proxyutil.Upstream);
the sandbox reaches them only through the proxy, by names mapped with
--resolve and the loopback range allowed with --allow-private. Nothing is
sent to any other address.
"""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from test_proxy import NODE_FETCH, find_undici

API = "api.example.test"


def allow_flags(port, name=API, private=True):
    flags = ["--allow-host", f"{name}:{port}", "--resolve", f"{name}:127.0.0.1"]
    if private:
        flags += ["--allow-private", "127.0.0.0/8"]
    return flags


def run_json(sbx, flags, cmd, **kw):
    out = sbx.make_dir(name="out") / "outcome.json"
    r = sbx.run([*flags, "--json", str(out), "--", *cmd], **kw)
    outcome = json.loads(out.read_text()) if out.exists() and out.stat().st_size else None
    return r, outcome


def test_allowed_host_with_curl(sbx, upstream):
    r, o = run_json(
        sbx,
        allow_flags(upstream.port),
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", f"http://{API}:{upstream.port}/a"],
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "200"
    assert o["denied"] == []
    assert any(q["path"] == "/a" for q in upstream.requests)


def test_denied_host_gets_403_with_the_reason(sbx, upstream):
    r, o = run_json(
        sbx,
        allow_flags(upstream.port),
        ["curl", "-sS", f"http://other.example.test:{upstream.port}/b"],
    )
    assert r.returncode == 0, r.stderr
    assert "other.example.test" in r.stdout and "not in the allowlist" in r.stdout
    assert [d["host"] for d in o["denied"]] == ["other.example.test"]
    assert o["denied"][0]["count"] == 1
    assert not any(q["path"] == "/b" for q in upstream.requests)


def test_deny_host_wins_over_allow(sbx, upstream):
    flags = [
        "--allow-host",
        f"*.example.test:{upstream.port}",
        "--resolve",
        f"{API}:127.0.0.1",
        "--allow-private",
        "127.0.0.0/8",
        "--deny-host",
        f"{API}:{upstream.port}",
    ]
    r, o = run_json(sbx, flags, ["curl", "-sS", f"http://{API}:{upstream.port}/c"])
    assert r.returncode == 0, r.stderr
    assert "denied" in r.stdout
    assert o["denied"] and o["denied"][0]["host"] == API


def test_python_urllib_uses_the_proxy(sbx, upstream):
    code = (
        "import urllib.request, sys\n"
        f"print(urllib.request.urlopen('http://{API}:{upstream.port}/py').read().decode())\n"
    )
    r, o = run_json(sbx, allow_flags(upstream.port), ["python3", "-c", code])
    assert r.returncode == 0, r.stderr
    assert any(q["path"] == "/py" for q in upstream.requests)


def test_git_over_http_through_the_proxy(sbx, upstream):
    r, o = run_json(
        sbx,
        allow_flags(upstream.port),
        ["git", "ls-remote", f"http://{API}:{upstream.port}/repo.git"],
    )
    # The echo upstream is not a git server: what matters is that git's
    # request went through the proxy to the allowed upstream.
    assert any("/repo.git/info/refs" in q["path"] for q in upstream.requests), r.stderr
    assert o["denied"] == []


def test_node_fetch_through_the_proxy(sbx, upstream):
    undici = find_undici()
    if undici is None:
        pytest.skip("undici could not be installed with npm (node 20's fetch needs it for proxies)")
    target = f"http://{API}:{upstream.port}/node"
    denied = f"http://evil.example.test:{upstream.port}/node"
    # A copy the caller can read, whoever the caller is.
    copy = sbx.make_dir(name="undici") / "undici"
    shutil.copytree(undici, copy)
    sbx.chown(copy)
    flags = allow_flags(upstream.port) + ["-v", f"{copy}:/opt/undici:ro"]
    r, o = run_json(
        sbx,
        flags,
        ["sh", "-c", 'node -e "$0" /opt/undici "$HTTPS_PROXY" "$1" "$2"', NODE_FETCH, target, denied],
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["status"] == 200
    assert [d["host"] for d in o["denied"]] == ["evil.example.test"]


def test_name_resolving_to_loopback_is_refused_without_allow_private(sbx, upstream):
    r, o = run_json(
        sbx,
        allow_flags(upstream.port, private=False),
        ["curl", "-sS", f"http://{API}:{upstream.port}/private"],
    )
    assert r.returncode == 0, r.stderr
    assert "127.0.0.1" in r.stdout and "private" in r.stdout.lower()
    assert o["denied"] and o["denied"][0]["host"] == API
    assert not any(q["path"] == "/private" for q in upstream.requests)


def test_metadata_address_is_refused(sbx, upstream):
    flags = [
        "--allow-host",
        f"meta.example.test:{upstream.port}",
        "--resolve",
        "meta.example.test:169.254.169.254",
    ]
    r, o = run_json(sbx, flags, ["curl", "-sS", f"http://meta.example.test:{upstream.port}/"])
    assert r.returncode == 0, r.stderr
    assert "169.254.169.254" in r.stdout
    assert o["denied"] and o["denied"][0]["host"] == "meta.example.test"


def test_no_way_around_the_proxy(sbx, upstream):
    """Direct connections to the host's loopback server, and DNS, do not
    work in allow mode either: the sandbox's netns has only lo."""
    script = (
        f"curl -sS --max-time 3 --noproxy '*' http://127.0.0.1:{upstream.port}/direct; "
        "echo direct=$?; timeout 5 getent hosts example.com; echo dns=$?"
    )
    r, o = run_json(sbx, allow_flags(upstream.port), ["sh", "-c", script])
    assert "direct=7" in r.stdout, r.stdout + r.stderr
    assert "dns=2" in r.stdout, r.stdout
    assert not any(q["path"] == "/direct" for q in upstream.requests)


def test_proxy_env_inside(sbx, upstream):
    r = sbx.run([*allow_flags(upstream.port), "--", "env"])
    env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        assert env[k] == "http://127.0.0.1:3128"
    assert env["NO_PROXY"] == env["no_proxy"] == "localhost,127.0.0.1,::1"
    assert env["NODE_USE_ENV_PROXY"] == "1"
    # Negative twin: network none sets no proxy variable.
    r = sbx.run(["--", "env"])
    assert "HTTP_PROXY" not in r.stdout


def test_audit_log_lines(sbx, upstream):
    log = sbx.make_dir(name="audit") / "audit.jsonl"
    script = (
        f"curl -sS -o /dev/null http://{API}:{upstream.port}/ok; "
        f"curl -sS -o /dev/null http://nope.example.test:{upstream.port}/no"
    )
    r, o = run_json(sbx, [*allow_flags(upstream.port), "--audit-log", str(log)], ["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    decisions = [x for x in lines if x["type"] == "decision"]
    assert [(d["host"], d["decision"]) for d in decisions] == [
        (API, "allow"),
        ("nope.example.test", "deny"),
    ]
    assert decisions[0]["address"] == "127.0.0.1" and decisions[0]["bytes_down"] > 0
    assert decisions[0]["sandbox"] == decisions[1]["sandbox"]


def test_proxy_death_fails_closed(caller, upstream):
    """If hutch-proxy dies, the sandbox's network is gone: the listening
    sockets lived only in the proxy."""
    if caller.switches_user:
        pytest.skip("finding the proxy by pid as the test user is covered as root")
    ready = caller.base_dir / "ready"
    script = (
        f"curl -sS -o /dev/null -w '%{{http_code}}\\n' http://{API}:{upstream.port}/first; "
        "echo > /workspace/ready; read x < /workspace/go; "
        f"curl -sS --max-time 5 -o /dev/null http://{API}:{upstream.port}/second; echo rc=$?"
    )
    ws = caller.base_dir / f"ws-{time.monotonic_ns()}"
    ws.mkdir()
    os.mkfifo(ws / "go")
    ready = ws / "ready"
    p = caller.popen(
        [*allow_flags(upstream.port), "--workspace", str(ws), "--", "sh", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists()
        children = Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
        proxies = [c for c in children if Path(f"/proc/{c}/comm").read_text().strip() == "hutch-proxy"]
        assert len(proxies) == 1, children
        os.kill(int(proxies[0]), signal.SIGKILL)
        with open(ws / "go", "w") as f:
            f.write("go\n")
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert out.splitlines()[0] == "200"
    assert "rc=7" in out, out + err
    assert not any(q["path"] == "/second" for q in upstream.requests)


@pytest.mark.parametrize(
    "flags,needle",
    [
        (["--allow-host", "*."], "*."),
        (["--allow-host", "a..b"], "a..b"),
        (["--allow-host", "*foo.com"], "*foo.com"),
        (["--allow-host", "example.com:0"], "example.com:0"),
        (["--allow-host", "example.com:70000"], "example.com:70000"),
        (["--allow-host", ""], "--allow-host"),
        (["--deny-host", "foo.*.com"], "foo.*.com"),
        (["--allow-private", "10.0.0.0/33"], "10.0.0.0/33"),
        (["--resolve", "noaddress"], "noaddress"),
        (["--network", "none", "--allow-host", "example.com"], "--network none"),
        (["--network", "host"], "host"),
    ],
)
def test_bad_network_input(hutch, flags, needle):
    r = hutch(["run", *flags, "--", "true"])
    assert r.returncode == 125, r.stderr
    assert needle in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_policy_file_network_fields(sbx, upstream):
    policy = sbx.make_dir(name="pol") / "net.json"
    policy.write_text(
        json.dumps(
            {
                "allow_hosts": [f"{API}:{upstream.port}"],
                "resolve": [f"{API}:127.0.0.1"],
                "allow_private": ["127.0.0.0/8"],
            }
        )
    )
    sbx.chown(policy)
    r, o = run_json(sbx, ["--policy", str(policy)], ["curl", "-sS", f"http://{API}:{upstream.port}/pol"])
    assert r.returncode == 0, r.stderr
    assert any(q["path"] == "/pol" for q in upstream.requests)
