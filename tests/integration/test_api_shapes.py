# SPDX-License-Identifier: LGPL-2.1-or-later
"""API 1.1 (issue 19): one shape per thing across the HTTP API and MCP
(docs/api.md "Versions", docs/mcp.md).

- exec's `env` is an object {"KEY": "VALUE"}, as the policy's and MCP's;
  the 1.0 array of "KEY=VALUE" is still accepted; anything else is a 400
  naming the member and the new shape.
- a mode is an octal string ("0644"): MCP's list_files agrees with the
  API's stat.
- a signal is a number, or null when there was none: MCP's exec agrees
  with the outcome.

The servers are the real `hutch serve` and `hutch mcp`, as root and as the
unprivileged test user, with the fixtures of test_serve.py and
test_mcp.py."""

import re

import pytest

from test_mcp import McpEnv, RawServer
from test_serve import create, make_workspace, server  # noqa: F401 (fixture)


def test_version_is_1_4(server):
    v = server.api.ok("GET", "/v1/version").json
    assert (v["api_major"], v["api_minor"]) == (1, 7)


def test_exec_env_object(server):
    api = server.api
    ws = make_workspace(server)
    create(api, "shapes", policy={"workspace": {"path": str(ws), "mode": "overlay"}})
    ans = api.exec("shapes", ["sh", "-c", 'printf "%s|%s|%s" "$GREETING" "$EMPTY" "${EMPTY+set}"'],
                   env={"GREETING": "hi there", "EMPTY": ""})
    assert ans["outcome"]["exit_code"] == 0, ans
    assert ans["stdout"] == "hi there||set"
    # The 1.0 shape still works, with the same meaning.
    ans = api.exec("shapes", ["sh", "-c", 'printf "%s" "$GREETING"'], env=["GREETING=old"])
    assert ans["stdout"] == "old"
    # An empty object sets nothing (negative twin of the first call).
    ans = api.exec("shapes", ["sh", "-c", 'printf "%s" "${GREETING-unset}"'], env={})
    assert ans["stdout"] == "unset"


@pytest.mark.parametrize("env,field,words", [
    ({"1BAD": "x"}, "/env/1BAD", "KEY"),
    ({"A=B": "x"}, "/env/A=B", "KEY"),
    ({"": "x"}, "/env/", "KEY"),
    ({"a/b~c": "x"}, "/env/a~1b~0c", "KEY"),
    ({"A": 1}, "/env", "object of strings"),
    ({"A": None}, "/env", "object of strings"),
    ("A=B", "/env", "object of strings"),
    (7, "/env", "object of strings"),
    (["NOEQUALS"], "/env/0", "KEY"),
    ([1], "/env/0", "object of strings"),
])
def test_exec_env_refused(server, env, field, words):
    api = server.api
    create(api, "shapes")
    for route in ("exec", "exec/stream"):
        r = api.call("POST", f"/v1/sandboxes/shapes/{route}", {"argv": ["true"], "env": env})
        assert r.status == 400, r
        assert r.error["code"] == "invalid_argument"
        assert r.error["field"] == field, r.error
        assert words in r.error["message"], r.error


@pytest.fixture
def mcp(caller):
    e = McpEnv(caller)
    servers = []

    def start():
        s = RawServer(e)
        servers.append(s)
        s.initialize()
        return s

    yield e, start
    for s in servers:
        if s.p.poll() is None:
            s.p.kill()
            s.p.wait()
    e.cleanup()


def test_mcp_mode_is_an_octal_string(mcp):
    e, start = mcp
    (e.ws / "plain.txt").write_text("x")
    (e.ws / "plain.txt").chmod(0o640)
    (e.ws / "tool").write_text("#!/bin/sh\n")
    (e.ws / "tool").chmod(0o755)
    e.r.chown(e.ws)
    s = start()
    res = s.tool("list_files", {})
    assert not res.get("isError"), res
    modes = {x["name"]: x["mode"] for x in res["structuredContent"]["entries"]}
    assert modes["plain.txt"] == "0640"
    assert modes["tool"] == "0755"
    assert all(isinstance(m, str) and re.fullmatch(r"0[0-7]{3}", m) for m in modes.values())
    s.close()


def test_mcp_signal_null_or_number(mcp):
    _, start = mcp
    s = start()
    ok = s.tool("exec", {"command": "exit 3"})["structuredContent"]
    assert ok["exit_code"] == 3 and ok["signal"] is None and ok["reason"] == "exited"
    assert ok["outcome"]["signal"] is None
    killed = s.tool("exec", {"command": "kill -9 $$"})["structuredContent"]
    assert killed["signal"] == 9 and killed["reason"] == "signaled", killed
    assert killed["outcome"]["signal"] == 9
    s.close()
