# SPDX-License-Identifier: LGPL-2.1-or-later
"""PATCH /v1/sandboxes/{name} (issue 22, docs/api.md "Changing a
sandbox's policy"): `hutch update` through the HTTP API and the C API
(hutch_update(), hutch_get_policy()). The body's policy is a merge patch
over the stored one; stopped, any change but workspace/backend/image;
running, limits and the network policy live, anything else 409 naming
the field.

The server is the real `hutch serve`, as root and as the unprivileged test
user (test_serve.py's fixture); upstreams are HTTP servers on the host's
loopback reached by names mapped with `resolve`."""

import json

import pytest

from test_serve import create, server  # noqa: F401 (fixture)

API = "api.example.test"
OTHER = "other.example.test"


def curl(api, name, host, port, path):
    """The HTTP status curl got inside for http://HOST:PORT/PATH."""
    ans = api.exec(name, ["curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w",
                          "%{http_code}", f"http://{host}:{port}/{path}"])
    assert ans["outcome"]["exit_code"] == 0, ans
    return ans["stdout"]


def patch(api, name, policy):
    return api.call("PATCH", f"/v1/sandboxes/{name}", {"policy": policy})


def net_policy(port):
    return {"allow_hosts": [f"{API}:{port}"], "resolve": [f"{API}:127.0.0.1", f"{OTHER}:127.0.0.1"],
            "allow_private": ["127.0.0.0/8"]}


def test_patch_a_stopped_sandbox(server):
    api = server.api
    create(api, "box", policy={"hostname": "one"})
    r = patch(api, "box", {"hostname": "two", "limits": {"timeout": "9m"}})
    assert r.status == 200, r
    assert r.json["changed"] == ["hostname", "limits.timeout"], r.json
    assert r.json["policy"]["hostname"] == "two"
    assert r.json["policy"]["limits"]["timeout"] == "9m", r.json
    ans = api.exec("box", ["hostname"])
    assert ans["stdout"] == "two\n", ans
    # null puts a field back to its default; the same again changes nothing.
    api.ok("POST", "/v1/sandboxes/box/stop", status=204)
    r = patch(api, "box", {"hostname": None})
    assert r.status == 200 and r.json["changed"] == ["hostname"], r
    assert r.json["policy"].get("hostname", "hutch") == "hutch"  # the default
    r = patch(api, "box", {"hostname": None})
    assert r.status == 200 and r.json["changed"] == [], r


def test_patch_a_running_sandbox_network_live(server, upstream):
    api = server.api
    create(api, "net", policy=net_policy(upstream.port))
    # Negative twin: OTHER is refused before the change.
    assert curl(api, "net", OTHER, upstream.port, "p1") == "403"
    r = patch(api, "net", {"allow_hosts": [f"{API}:{upstream.port}", f"{OTHER}:{upstream.port}"]})
    assert r.status == 200, r
    assert r.json["changed"] == ["allow_hosts"], r.json
    # Live: the running sandbox reaches OTHER now.
    assert api.ok("GET", "/v1/sandboxes/net").json["state"] == "running"
    assert curl(api, "net", OTHER, upstream.port, "p2") == "200"
    assert any(q["path"] == "/p2" for q in upstream.requests)
    # A merge patch replaces the list: narrowing is the shorter list.
    r = patch(api, "net", {"allow_hosts": [f"{API}:{upstream.port}"]})
    assert r.status == 200 and r.json["changed"] == ["allow_hosts"], r
    assert curl(api, "net", OTHER, upstream.port, "p3") == "403"
    assert not any(q["path"] == "/p3" for q in upstream.requests)
    assert curl(api, "net", API, upstream.port, "p4") == "200"
    # The private ranges change live too: without them, API's loopback
    # address is refused (with the flag that would allow it).
    r = patch(api, "net", {"allow_private": None})
    assert r.status == 200 and r.json["changed"] == ["allow_private"], r
    ans = api.exec("net", ["curl", "-sS", "--max-time", "20",
                           f"http://{API}:{upstream.port}/p5"])
    assert "private address" in ans["stdout"], ans
    assert not any(q["path"] == "/p5" for q in upstream.requests)


def test_patch_refusals_name_the_field(server, upstream):
    api = server.api
    create(api, "net", policy=net_policy(upstream.port))
    api.exec("net", ["true"])  # running
    before = api.ok("PATCH", "/v1/sandboxes/net", {"policy": {}}).json["policy"]
    # Running: a field that cannot change live is 409 busy, named.
    r = patch(api, "net", {"hostname": "x", "allow_hosts": [f"{OTHER}:{upstream.port}"]})
    assert r.status == 409 and r.error["code"] == "busy", r
    assert "cannot change hostname of sandbox 'net' while it runs" in r.error["message"], r.error
    assert api.ok("PATCH", "/v1/sandboxes/net", {"policy": {}}).json["policy"] == before
    assert curl(api, "net", OTHER, upstream.port, "q1") == "403"
    # Bad input is 400 with the field's pointer.
    r = patch(api, "net", {"limits": {"timeout": "soon"}})
    assert r.status == 400 and r.error["field"].startswith("/policy/limits"), r.error
    r = patch(api, "net", {"no_such_field": 1})
    assert r.status == 400 and r.error["field"] == "/policy/no_such_field", r.error
    r = api.call("PATCH", "/v1/sandboxes/net", {"hostname": "x"})
    assert r.status == 400, r
    # Never the workspace or the backend.
    api.ok("POST", "/v1/sandboxes/net/stop", status=204)
    r = patch(api, "net", {"backend": "vm"})
    assert r.status == 400 and "backend" in r.error["message"], r.error
    r = patch(api, "nosuch", {})
    assert r.status == 404, r


# ---- the C API: hutch_get_policy() and hutch_update() of a running
# sandbox's allowlist (through tests/integration/capi-probe.c) ----

from test_capi import Api, installed  # noqa: E402,F401 (installed: a fixture)


@pytest.fixture
def capi(sbx, installed):  # noqa: F811
    a = Api(sbx, installed)
    yield a
    a.cleanup()


def test_c_api_get_policy_and_live_update(capi, upstream):
    a = capi
    port = upstream.port
    policy = net_policy(port)
    a.create("box", "--json", json.dumps(policy))
    p = a.ok("get_policy", "box")
    assert p["allow_hosts"] == [f"{API}:{port}"], p
    curl = ["curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}"]
    r, _o = a.exec("box", *curl, f"http://{OTHER}:{port}/c1")
    assert r.stdout == "403", r.stdout
    # Running: the whole new policy, with OTHER allowed too, goes live.
    policy["allow_hosts"].append(f"{OTHER}:{port}")
    a.ok("update", "box", "--json", json.dumps(policy))
    assert f"{OTHER}:{port}" in a.ok("get_policy", "box")["allow_hosts"]
    r, _o = a.exec("box", *curl, f"http://{OTHER}:{port}/c2")
    assert r.stdout == "200", r.stdout
    e = a.err("get_policy", "nosuch")
    assert "nosuch" in e["message"], e
