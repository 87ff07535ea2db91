# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch mcp: the MCP server over stdio (docs/mcp.md).

The main session is driven by the real TypeScript SDK (Client and
StdioClientTransport from @modelcontextprotocol/sdk, installed with npm into
the tests' own cache, as test_proxy.py does for undici): initialize, list
the tools and check their schemas, then exec, the file tools, a path escape,
snapshot, restore and diff. The protocol's corner cases and bad input are
driven raw over pipes from Python, checking that every stdout line is a
protocol message, that the server keeps serving and that the store does not
change.

Every test has its own HUTCH_HOME and HUTCH_STATE_DIR; the sandboxes are
removed with `hutch rm --force` afterwards."""

import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import node_package

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "mcp-client.mjs"
SDK = "@modelcontextprotocol/sdk"
TOOLS = {"exec", "read_file", "write_file", "list_files", "make_directory", "move_file", "diff",
         "snapshot", "restore"}
TOOLS |= {"list_processes", "read_output", "kill_process"}  # test_processes_mcp.py
TOOLS |= {"expose_port"}  # test_ports_mcp.py
TOOLS |= {"write_stdin"}  # test_exec_stdin.py
TOOLS |= {"publish_port", "unpublish_port", "list_ports"}  # test_mcp_ports.py
SESSION_TIMEOUT = 300


def find_sdk():
    """The SDK, from the tests' node cache (installed there on first use)."""
    return node_package(SDK, f"{SDK}@1", "dist/esm/client/stdio.js")


@pytest.fixture(scope="session")
def sdk():
    if not shutil.which("node"):
        pytest.fail("node is not installed (tools/deps.sh test installs nodejs)")
    pkg = find_sdk()
    if pkg is None:
        pytest.fail(f"cannot install {SDK} with npm into the tests' cache")
    return pkg


class McpEnv:
    """One store (HUTCH_HOME, HUTCH_STATE_DIR) and one workspace folder, for
    one privilege mode's Runner."""

    def __init__(self, runner):
        self.r = runner
        self.home = runner.make_dir(0o700, "mcp-home")
        self.state = runner.make_dir(0o700, "mcp-state")
        self.ws = runner.make_dir(0o755, "ws")
        self.extra = {"HUTCH_HOME": str(self.home), "HUTCH_STATE_DIR": str(self.state)}

    def env(self):
        return self.r.env(self.extra)

    def argv(self, *args):
        return self.r.argv(list(args), verb="mcp")

    def hutch(self, *args, timeout=60):
        return self.r.run(list(args), verb=None, env=self.extra, cwd=str(self.ws),
                          timeout=timeout)

    def sandboxes(self):
        r = self.hutch("ls", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def store_files(self):
        return sorted(str(p.relative_to(self.home)) for p in self.home.rglob("*"))

    def cleanup(self):
        try:
            for sb in self.sandboxes():
                self.hutch("rm", "--force", sb["name"])
        finally:
            for d in (self.home, self.state, self.ws):
                shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def menv(caller):
    e = McpEnv(caller)
    yield e
    e.cleanup()


@pytest.fixture
def smenv(sbx):
    """McpEnv in both privilege modes."""
    e = McpEnv(sbx)
    yield e
    e.cleanup()


def run_client(sdk_dir, env, steps, args=(), tmp_dir=None):
    spec = {"command": env.argv(*args), "cwd": str(env.ws), "env": env.env(), "steps": steps}
    spec_path = Path(tmp_dir or env.r.base_dir) / f"mcp-spec-{os.getpid()}-{time.monotonic_ns()}.json"
    spec_path.write_text(json.dumps(spec))
    try:
        r = subprocess.run(["node", str(CLIENT), str(sdk_dir), str(spec_path)],
                           capture_output=True, text=True, timeout=SESSION_TIMEOUT)
    finally:
        spec_path.unlink()
    assert r.returncode == 0, f"client failed: {r.stderr}"
    out = json.loads(r.stdout)
    assert "fatal" not in out, out
    assert len(out["steps"]) == len(steps), out
    return out


def call(tool, **arguments):
    return {"op": "call", "name": tool, "arguments": arguments}


def ok_result(step):
    """The CallToolResult of a step that worked, with its text checked
    against its structured content."""
    assert step["ok"], step
    res = step["result"]
    assert res.get("isError") is False, res
    assert res["content"][0]["type"] == "text"
    return res


def error_text(step):
    assert step["ok"], step
    res = step["result"]
    assert res.get("isError") is True, res
    assert "structuredContent" not in res
    return res["content"][0]["text"]


def check_tools(tools):
    by_name = {t["name"]: t for t in tools}
    assert set(by_name) == TOOLS
    for t in tools:
        schema = t["inputSchema"]
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema.get("required", [])) <= set(schema["properties"])
        assert t["outputSchema"]["type"] == "object"
        assert t["description"] and t["title"]
    ex = by_name["exec"]["inputSchema"]
    assert ex["required"] == ["command"]
    assert ex["properties"]["command"]["type"] == "string"
    assert ex["properties"]["cwd"]["type"] == "string"
    assert ex["properties"]["timeout"]["type"] == "number"
    assert "seconds" in ex["properties"]["timeout"]["description"].lower()
    assert ex["properties"]["env"]["type"] == "object"
    assert ex["properties"]["env"]["additionalProperties"] == {"type": "string"}
    assert by_name["read_file"]["inputSchema"]["required"] == ["path"]
    assert set(by_name["write_file"]["inputSchema"]["required"]) == {"path", "content"}
    assert by_name["list_files"]["inputSchema"].get("required", []) == []
    assert by_name["diff"]["inputSchema"]["properties"] == {}
    assert by_name["snapshot"]["inputSchema"]["required"] == ["name"]
    assert by_name["restore"]["inputSchema"]["required"] == ["name"]
    out = by_name["exec"]["outputSchema"]
    # A run's fields, or a detached one's id (test_processes_mcp.py).
    assert {"stdout", "stderr", "exit_code", "reason"} <= set(out["anyOf"][0]["required"])
    assert by_name["read_file"]["annotations"]["readOnlyHint"] is True
    assert by_name["exec"]["annotations"]["readOnlyHint"] is False


def test_sdk_session(sdk, smenv):
    """The whole tool set through the real SDK client, as root and as an
    unprivileged user."""
    e = smenv
    (e.ws / "host.txt").write_text("from the host\n")
    outside = e.r.make_dir(name="outside")
    secret = f"TOPSECRET-{os.getpid()}-{time.monotonic_ns()}"
    (outside / "secret.txt").write_text(secret + "\n")
    os.symlink(outside / "secret.txt", e.ws / "link")
    e.r.chown(e.ws)
    e.r.chown(outside)

    steps = [
        {"op": "listTools"},                                                    # 0
        call("exec", command="echo hi; echo err >&2; exit 3"),                  # 1
        call("write_file", path="notes.txt", content="v1\n"),                   # 2
        call("read_file", path="notes.txt"),                                    # 3
        call("read_file", path="/workspace/host.txt"),                          # 4
        call("list_files"),                                                     # 5
        call("read_file", path="../../etc/passwd"),                             # 6
        call("read_file", path="link"),                                         # 7
        call("read_file", path=str(outside / "secret.txt")),                    # 8
        call("snapshot", name="before"),                                        # 9
        call("write_file", path="notes.txt", content="v2\n"),                   # 10
        call("read_file", path="notes.txt"),                                    # 11
        call("restore", name="before"),                                         # 12
        call("read_file", path="notes.txt"),                                    # 13
        call("diff"),                                                           # 14
        call("exec", command="mkdir -p sub && cat host.txt"),                   # 15
        call("exec", command="pwd; echo $FOO", cwd="sub", env={"FOO": "bar"}),  # 16
        call("exec", command="sleep 30", timeout=0.5),                          # 17
        call("exec", command=42),                                               # 18
        call("nope"),                                                           # 19
        {"op": "ping"},                                                         # 20
    ]
    out = run_client(sdk, e, steps)
    s = out["steps"]
    assert out["serverVersion"]["name"] == "hutch"
    assert "tools" in out["capabilities"]
    assert "sandbox" in out["instructions"]
    check_tools(s[0]["result"]["tools"])

    res = ok_result(s[1])
    st = res["structuredContent"]
    assert st["stdout"] == "hi\n"
    assert st["stderr"] == "err\n"
    assert st["exit_code"] == 3
    assert st["reason"] == "exited"
    assert st["stdout_truncated"] is False and st["stderr_truncated"] is False
    # The text content is the same result, serialized.
    assert json.loads(res["content"][0]["text"]) == st

    assert ok_result(s[2])["structuredContent"]["size"] == 3
    res = ok_result(s[3])
    assert res["structuredContent"]["content"] == "v1\n"
    assert res["content"][0]["text"] == "v1\n"
    # The workspace is an overlay: the host folder is not written.
    assert not (e.ws / "notes.txt").exists()
    assert ok_result(s[4])["structuredContent"]["content"] == "from the host\n"
    entries = {x["name"]: x for x in ok_result(s[5])["structuredContent"]["entries"]}
    assert entries["notes.txt"]["type"] == "file" and entries["notes.txt"]["size"] == 3
    assert entries["host.txt"]["type"] == "file"
    assert entries["link"]["type"] == "symlink"

    assert "leaves the workspace" in error_text(s[6])
    # A symlink to a host file, and the host path itself, resolve inside
    # the sandbox, where that file does not exist.
    error_text(s[7])
    error_text(s[8])
    assert secret not in json.dumps(out)

    sandbox = e.sandboxes()[0]["name"]
    snap = ok_result(s[9])["structuredContent"]
    assert snap["name"] == "before" and snap["snapshot"] == f"{sandbox}.before"
    # Only a sandbox that cannot be frozen (no delegated cgroup) is stopped.
    assert snap["stopped"] is False or e.r.mode == "user"
    ok_result(s[10])
    assert ok_result(s[11])["structuredContent"]["content"] == "v2\n"
    ok_result(s[12])
    assert ok_result(s[13])["structuredContent"]["content"] == "v1\n"
    diff = ok_result(s[14])["structuredContent"]
    assert {"path": "notes.txt", "kind": "added", "type": "file"} in diff["changes"]
    assert diff["added"] >= 1

    assert ok_result(s[15])["structuredContent"]["stdout"] == "from the host\n"
    assert ok_result(s[16])["structuredContent"]["stdout"] == "/workspace/sub\nbar\n"
    st = ok_result(s[17])["structuredContent"]
    assert st["reason"] == "timeout"
    assert st["wall_ms"] < 25000

    assert "must be a string" in error_text(s[18])
    assert not s[19]["ok"] and s[19]["code"] == -32602
    assert "unknown tool" in s[19]["error"]
    assert s[20]["ok"]

    # One sandbox, named after the folder, with the snapshot.
    names = [sb["name"] for sb in e.sandboxes()]
    assert names == [sandbox]
    assert sandbox.startswith(f"mcp-{e.ws.name}-")
    r = e.hutch("snapshot", "ls", "--json")
    assert r.returncode == 0, r.stderr
    assert f"{sandbox}.before" in r.stdout


def test_sessions_share_the_sandbox_and_refuse_another_policy(sdk, menv):
    e = menv
    first = run_client(sdk, e, [call("write_file", path="kept.txt", content="kept\n")])
    ok_result(first["steps"][0])
    second = run_client(sdk, e, [call("read_file", path="kept.txt")])
    assert ok_result(second["steps"][0])["structuredContent"]["content"] == "kept\n"
    (sandbox,) = [sb["name"] for sb in e.sandboxes()]

    # Another policy for the same folder: refused, nothing changes.
    before = e.store_files()
    third = run_client(sdk, e, [call("read_file", path="kept.txt")], args=("--memory", "300m"))
    assert "another policy" in error_text(third["steps"][0])
    assert e.store_files() == before

    # --name serves another sandbox with that policy.
    fourth = run_client(sdk, e, [call("exec", command="test ! -e kept.txt && echo fresh")],
                        args=("--name", "other", "--memory", "300m"))
    assert ok_result(fourth["steps"][0])["structuredContent"]["stdout"] == "fresh\n"
    assert sorted(sb["name"] for sb in e.sandboxes()) == sorted(["other", sandbox])


# ---- raw JSON-RPC over pipes ----


class RawServer:
    def __init__(self, env, args=()):
        self.p = subprocess.Popen(env.argv(*args), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  cwd=str(env.ws), env=env.env())
        self.buf = b""
        self.next_id = 1

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def recv(self, timeout=120):
        """The next line of stdout, which must be one JSON message."""
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, "no response in time"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                assert chunk, f"server closed stdout; stderr: {self.p.stderr.read()!r}"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, method, params=None, **kw):
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        self.next_id += 1
        if params is not None:
            msg["params"] = params
        self.send(msg)
        resp = self.recv(**kw)
        assert resp.get("id") == msg["id"], resp
        return resp

    def initialize(self, version="2025-06-18"):
        r = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "raw", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def tool(self, name, arguments, **kw):
        r = self.request("tools/call", {"name": name, "arguments": arguments}, **kw)
        assert "result" in r, r
        return r["result"]

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=60)
        rest = self.p.stdout.read()
        err = self.p.stderr.read().decode(errors="replace")
        self.p.stdout.close()
        self.p.stderr.close()
        # Nothing but protocol messages on stdout, ever.
        assert self.buf + rest == b"", (self.buf, rest)
        return rc, err


@pytest.fixture
def raw(menv):
    servers = []

    def start(*args):
        s = RawServer(menv, args)
        servers.append(s)
        return s

    yield start
    for s in servers:
        if s.p.poll() is None:
            s.p.kill()
            s.p.wait()


def error_code(resp):
    assert "error" in resp, resp
    return resp["error"]["code"]


@pytest.mark.parametrize("asked,answered", [
    ("2025-11-25", "2025-11-25"),
    ("2025-06-18", "2025-06-18"),
    ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2024-11-05"),
    ("2099-01-01", "2025-11-25"),
    ("not-a-version", "2025-11-25"),
])
def test_version_negotiation(raw, asked, answered):
    s = raw()
    r = s.initialize(asked)
    assert r["result"]["protocolVersion"] == answered
    assert r["result"]["serverInfo"]["name"] == "hutch"
    assert r["result"]["capabilities"] == {"tools": {"listChanged": False}}
    tools = s.request("tools/list")["result"]["tools"]
    assert {t["name"] for t in tools} == TOOLS
    # Structured output came with 2025-06-18, annotations with 2025-03-26.
    assert all(("outputSchema" in t) == (answered >= "2025-06-18") for t in tools)
    assert all(("annotations" in t) == (answered >= "2025-03-26") for t in tools)
    rc, _ = s.close()
    assert rc == 0


def test_lifecycle(raw):
    s = raw()
    # Only ping and initialize before initialize.
    assert error_code(s.request("tools/list")) == -32600
    assert s.request("ping")["result"] == {}
    assert "result" in s.initialize()
    assert error_code(s.request("initialize", {"protocolVersion": "2025-06-18",
                                               "capabilities": {},
                                               "clientInfo": {"name": "x"}})) == -32600
    # Notifications, known or not, and responses get no answer: the next
    # line is the ping's.
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 99}})
    s.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
    s.send({"jsonrpc": "2.0", "id": 77, "result": {}})
    s.send_raw(b"\n\r\n")
    r = s.request("ping")
    assert r["result"] == {}
    rc, err = s.close()
    assert rc == 0
    assert "serving sandbox" in err


# Each is sent raw after initialize; the expected JSON-RPC error code.
BAD_MESSAGES = [
    (b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700),
    (b"not json at all", -32700),
    (b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}', -32700),
    (b"42", -32600),
    (b'"ping"', -32600),
    (b'{"jsonrpc":"1.0","id":5,"method":"ping"}', -32600),
    (b'{"id":5,"method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":5,"method":7}', -32600),
    (b'{"jsonrpc":"2.0","id":5}', -32600),
    (b"[]", -32600),
    (b'[{"jsonrpc":"2.0","id":5,"method":"ping"}]', -32600),
    (b'{"jsonrpc":"2.0","id":5,"method":"resources/list"}', -32601),
    (b'{"jsonrpc":"2.0","id":5,"method":"nope"}', -32601),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":"x"}', -32602),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"c"}}', -32602),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}', -32602),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":42}}', -32602),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}}', -32602),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/call",'
     b'"params":{"name":"exec","arguments":["echo"]}}', -32602),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/call",'
     b'"params":{"name":"exec\\u0000x","arguments":{}}}', -32602),
]

# Tool arguments that are refused with an isError result naming the
# problem (and never reach the store).
BAD_ARGUMENTS = [
    ("exec", {}, "missing argument 'command'"),
    ("exec", {"command": 42}, "'command' must be a string"),
    ("exec", {"command": "true", "extra": 1}, "unknown argument 'extra'"),
    ("exec", {"command": ""}, "empty"),
    ("exec", {"command": "true", "timeout": "5"}, "'timeout' must be a number"),
    ("exec", {"command": "true", "timeout": -1}, "above 0"),
    ("exec", {"command": "true", "timeout": 1e9}, "at most 86400"),
    ("exec", {"command": "true", "env": ["A=1"]}, "'env' must be an object"),
    ("exec", {"command": "true", "env": {"1A": "x"}}, "invalid variable name '1A'"),
    ("exec", {"command": "true", "env": {"A": 1}}, "env.A must be a string"),
    ("exec", {"command": "true", "cwd": "../.."}, "leaves the workspace"),
    ("exec", {"command": "a\u0000b"}, "without NUL"),
    ("read_file", {}, "missing argument 'path'"),
    ("read_file", {"path": ""}, "empty"),
    ("read_file", {"path": "../x"}, "leaves the workspace"),
    ("read_file", {"path": "a/../../x"}, "leaves the workspace"),
    ("read_file", {"path": "/../etc/passwd"}, "leaves the sandbox's root"),
    ("read_file", {"path": "a\u0000b"}, "without NUL"),
    ("read_file", {"path": "x" * 5000}, "longer than 4095"),
    ("write_file", {"path": "x"}, "missing argument 'content'"),
    ("write_file", {"path": "x", "content": None}, "'content' must be a string"),
    ("write_file", {"path": "../x", "content": ""}, "leaves the workspace"),
    ("list_files", {"path": 3}, "'path' must be a string"),
    ("list_files", {"path": "../.."}, "leaves the workspace"),
    ("diff", {"x": 1}, "it takes none"),
    ("snapshot", {}, "missing argument 'name'"),
    ("snapshot", {"name": "Bad Name"}, "invalid snapshot name"),
    ("snapshot", {"name": "../x"}, "invalid snapshot name"),
    ("snapshot", {"name": "x" * 80}, "invalid snapshot name"),
    ("restore", {"name": ".hidden"}, "invalid snapshot name"),
]


def test_bad_input_keeps_serving_and_changes_nothing(raw, menv):
    before = menv.store_files()
    s = raw()
    s.initialize()
    for data, code in BAD_MESSAGES:
        s.send_raw(data + b"\n")
        r = s.recv()
        assert error_code(r) == code, (data, r)
        assert isinstance(r["error"]["message"], str) and r["error"]["message"]
        # Still serving.
        assert s.request("ping")["result"] == {}, data
    for tool, args, want in BAD_ARGUMENTS:
        res = s.tool(tool, args)
        assert res["isError"] is True, (tool, args, res)
        assert want in res["content"][0]["text"], (tool, args, res)
    # A message beyond the 16 MiB bound: a parse error, then the next one.
    s.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' +
               b"a" * (17 << 20) + b'"}}\n')
    assert error_code(s.recv()) == -32700
    assert s.request("ping")["result"] == {}
    rc, _ = s.close()
    assert rc == 0
    # Nothing reached the store: no sandbox was made.
    assert menv.store_files() == before
    assert menv.sandboxes() == []


def test_batches_only_in_2025_03_26(raw):
    s = raw()
    s.initialize("2025-03-26")
    s.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/whatever"},
            {"jsonrpc": "2.0", "id": 2, "method": "nope"},
            {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}}])
    r = s.recv()
    assert isinstance(r, list) and len(r) == 3
    assert r[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert r[1]["id"] == 2 and r[1]["error"]["code"] == -32601
    assert r[2]["id"] == 3 and r[2]["error"]["code"] == -32600
    rc, _ = s.close()
    assert rc == 0


def test_exec_output_bounds_and_old_versions(raw, menv):
    s = raw()
    s.initialize("2024-11-05")
    # 3 MB on stdout: cut after 1 MiB, and the command was not blocked.
    res = s.tool("exec", {"command": "head -c 3000000 /dev/zero | tr '\\0' a; echo done >&2"})
    assert res["isError"] is False
    # 2024-11-05 has no structured content: the text carries it all.
    assert "structuredContent" not in res
    st = json.loads(res["content"][0]["text"])
    assert st["stdout"] == "a" * (1 << 20)
    assert st["stdout_truncated"] is True
    assert st["stderr"] == "done\n" and st["stderr_truncated"] is False
    assert st["exit_code"] == 0
    # Bytes that are not UTF-8 arrive as U+FFFD; a background process that
    # keeps the pipes open does not hold up the result.
    res = s.tool("exec", {"command": "printf 'a\\377b'; sleep 60 & echo started"})
    st = json.loads(res["content"][0]["text"])
    assert st["stdout"] == "a\ufffdbstarted\n"
    assert st["wall_ms"] < 30000
    # A file that is not UTF-8 is refused with a hint.
    s.tool("exec", {"command": "printf '\\377' > bin.dat"})
    res = s.tool("read_file", {"path": "bin.dat"})
    assert res["isError"] is True and "not UTF-8" in res["content"][0]["text"]
    rc, _ = s.close()
    assert rc == 0


@pytest.mark.parametrize("flags,want", [
    (["positional"], "takes flags only"),
    (["--name", "Bad Name"], "invalid sandbox name"),
    (["--name"], "needs a value"),
    (["--idle-timeout", "5m"], "--idle-timeout"),
    (["--memory", "12q"], "12q"),
    (["--workspace", "/nonexistent-hutch-mcp"], "does not exist"),
    (["--output-limit", "1m"], "--output-limit"),
    (["--bogus"], "unknown option"),
])
def test_bad_flags_exit_125_before_serving(menv, flags, want):
    before = menv.store_files()
    r = menv.r.run(flags, verb="mcp", env=menv.extra, cwd=str(menv.ws),
                   input='{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    assert r.returncode == 125
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and want in lines[0], r.stderr
    assert menv.store_files() == before
