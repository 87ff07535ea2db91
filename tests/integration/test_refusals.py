# SPDX-License-Identifier: LGPL-2.1-or-later
"""Network refusals said where they happen (issue 22): after `hutch run`
and `hutch exec`, one line on stderr per host hutch-proxy refused, with the
reason and the flag that would allow it; --quiet drops them; the proxy's
403 body says the same.

Upstreams are HTTP servers on the host's loopback (proxyutil.Upstream),
reached by names mapped with --resolve; refused names are refused before
any address is looked up, so nothing is sent anywhere else.
"""

import json

import pytest

from test_persistent import Store

API = "api.example.test"


def allow_flags(port, private=True):
    flags = ["--allow-host", f"{API}:{port}", "--resolve", f"{API}:127.0.0.1"]
    if private:
        flags += ["--allow-private", "127.0.0.0/8"]
    return flags


def refusals(stderr):
    return [line for line in stderr.splitlines() if line.startswith("hutch: refused ")]


def run_json(sbx, flags, cmd):
    out = sbx.make_dir(name="out") / "outcome.json"
    r = sbx.run([*flags, "--json", str(out), "--", *cmd])
    return r, json.loads(out.read_text())


def curl(url):
    return ["curl", "-sS", "--max-time", "20", url]


def test_a_host_not_allowed_is_named_with_its_flag(sbx, upstream):
    url = f"http://other.example.test:{upstream.port}/r1"
    r, o = run_json(sbx, allow_flags(upstream.port), curl(url))
    assert r.returncode == 0, r.stderr
    hint = f"--allow-host other.example.test:{upstream.port}"
    assert refusals(r.stderr) == [
        f"hutch: refused other.example.test:{upstream.port} (not in the allowlist; {hint})"
    ], r.stderr
    # The 403 body says the same: the reason and the flag.
    assert "not in the allowlist" in r.stdout and f"allow it with {hint}" in r.stdout, r.stdout
    assert [d["host"] for d in o["denied"]] == ["other.example.test"]
    assert not any(q["path"] == "/r1" for q in upstream.requests)


def test_nothing_refused_prints_nothing(sbx, upstream):
    r, o = run_json(sbx, allow_flags(upstream.port), curl(f"http://{API}:{upstream.port}/r2"))
    assert r.returncode == 0, r.stderr
    assert o["denied"] == []
    assert refusals(r.stderr) == [] and "refused" not in r.stderr, r.stderr


def test_quiet_drops_the_lines_not_the_outcome(sbx, upstream):
    url = f"http://other.example.test:{upstream.port}/r3"
    r, o = run_json(sbx, ["--quiet", *allow_flags(upstream.port)], curl(url))
    assert r.returncode == 0, r.stderr
    assert "refused" not in r.stderr, r.stderr
    assert [d["host"] for d in o["denied"]] == ["other.example.test"]
    r, _o = run_json(sbx, ["-q", *allow_flags(upstream.port)], curl(url))
    assert r.returncode == 0 and "refused" not in r.stderr, r.stderr


def test_default_ports_need_no_port_in_the_flag(sbx, upstream):
    r, _o = run_json(sbx, allow_flags(upstream.port), curl("https://files.example.test/r4"))
    assert r.returncode != 0  # curl: the proxy refused the CONNECT
    assert refusals(r.stderr) == [
        "hutch: refused files.example.test:443 "
        "(not in the allowlist; --allow-host files.example.test)"
    ], r.stderr


def test_repeated_refusals_are_counted(sbx, upstream):
    url = f"http://other.example.test:{upstream.port}/r5"
    r, _o = run_json(sbx, allow_flags(upstream.port), ["sh", "-c", f"curl -sS {url}; curl -sS {url}"])
    assert r.returncode == 0, r.stderr
    lines = refusals(r.stderr)
    assert len(lines) == 1 and f"other.example.test:{upstream.port} 2 times (" in lines[0], lines


def test_a_private_address_names_allow_private(sbx, upstream):
    r, _o = run_json(sbx, allow_flags(upstream.port, private=False),
                     curl(f"http://{API}:{upstream.port}/r6"))
    assert r.returncode == 0, r.stderr
    assert refusals(r.stderr) == [
        f"hutch: refused {API}:{upstream.port} "
        "(a private address, 127.0.0.1; --allow-private 127.0.0.1/32)"
    ], r.stderr
    assert "--allow-private" in r.stdout  # the 403 body
    assert not any(q["path"] == "/r6" for q in upstream.requests)


def test_a_deny_rule_is_named(sbx, upstream):
    flags = [*allow_flags(upstream.port), "--deny-host", f"{API}:{upstream.port}"]
    r, _o = run_json(sbx, flags, curl(f"http://{API}:{upstream.port}/r7"))
    assert r.returncode == 0, r.stderr
    assert refusals(r.stderr) == [
        f"hutch: refused {API}:{upstream.port} (matches --deny-host {API}:{upstream.port})"
    ], r.stderr
    assert not any(q["path"] == "/r7" for q in upstream.requests)


@pytest.fixture(params=["root", "user"])
def net_store(request, upstream):
    s = Store(request.getfixturevalue(f"{request.param}_runner"))
    s.create("net", *allow_flags(upstream.port))
    yield s
    s.finalize()


def test_exec_says_what_was_refused(net_store, upstream):
    s = net_store
    url = f"http://nope.example.test:{upstream.port}/r8"
    r = s.exec("net", *curl(url))
    assert r.returncode == 0, r.stderr
    assert refusals(r.stderr) == [
        f"hutch: refused nope.example.test:{upstream.port} "
        f"(not in the allowlist; --allow-host nope.example.test:{upstream.port})"
    ], r.stderr
    # Negative twins: --quiet, and an exec that nothing was refused to.
    r = s.exec("net", *curl(url), flags=("--quiet",))
    assert r.returncode == 0 and "refused" not in r.stderr, r.stderr
    r = s.exec("net", *curl(f"http://{API}:{upstream.port}/r9"))
    assert r.returncode == 0 and "refused" not in r.stderr, r.stderr
    assert any(q["path"] == "/r9" for q in upstream.requests)
