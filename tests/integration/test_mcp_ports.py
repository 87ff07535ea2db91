# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch mcp's publish_port, unpublish_port and list_ports tools (issue 19,
docs/mcp.md): the same entries as the API's .../ports routes, through the
official MCP SDK's client (test_mcp's harness), as root and as the user.
Each claim has its negative twin: a published port answers and an
unpublished one has no listener; a loopback address is accepted and any
other refused; the agent's own ports keep the sandbox's policy the one its
flags name, a port opened to the network by someone else does not."""

import socket

from cgroupctl import poll_until
from test_mcp import McpEnv, call, error_text, ok_result, run_client, sdk, smenv  # noqa: F401
from test_ports import http_get, listening

HTTP_SERVER = ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"]


def start_server(e, name):
    assert e.hutch("create", name).returncode == 0
    r = e.hutch("exec", "-d", name, "--", *HTTP_SERVER)
    assert r.returncode == 0, r.stderr


def test_publish_reach_unpublish(sdk, smenv):  # noqa: F811
    e, name = smenv, "mcp-pub"
    start_server(e, name)
    out = run_client(sdk, e, [call("publish_port", port=8000), call("list_ports")],
                     args=("--name", name))
    entry = ok_result(out["steps"][0])["structuredContent"]
    hp = entry["host_port"]
    assert entry["port"] == 8000 and entry["protocol"] == "tcp", entry
    assert entry["host_ip"] == "127.0.0.1" and hp > 0, entry
    assert entry["url"] == f"http://127.0.0.1:{hp}/", entry
    listed = ok_result(out["steps"][1])["structuredContent"]
    assert listed == {"running": True, "ports": [entry]}, listed
    # The server inside answers through the host port.
    assert poll_until(lambda: http_get(hp) == "HTTP/1.0 200 OK", 20)
    # Saved in the policy, as `hutch port NAME add`.
    r = e.hutch("port", name)
    assert r.stdout == f"8000/tcp -> 127.0.0.1:{hp}\n", r.stdout

    out = run_client(sdk, e, [call("unpublish_port", port=8000), call("list_ports"),
                              call("unpublish_port", port=8000)], args=("--name", name))
    assert ok_result(out["steps"][0])["structuredContent"] == {"port": 8000}
    assert ok_result(out["steps"][1])["structuredContent"] == {"running": True, "ports": []}
    assert "8000" in error_text(out["steps"][2])
    # Nothing listens on the host port any more.
    assert not listening(hp)
    assert http_get(hp) is None
    r = e.hutch("port", name)
    assert r.returncode == 0 and r.stdout == "", r.stdout


def test_publish_on_a_stopped_sandbox_binds_at_its_start(sdk, smenv):  # noqa: F811
    e, name = smenv, "mcp-pubstop"
    assert e.hutch("create", name).returncode == 0
    out = run_client(sdk, e, [call("publish_port", port=8000, host_ip="::1"), call("list_ports")],
                     args=("--name", name))
    entry = ok_result(out["steps"][0])["structuredContent"]
    assert entry["host_ip"] == "::1" and entry["host_port"] == 0, entry
    assert entry["url"] is None, entry
    assert ok_result(out["steps"][1])["structuredContent"] == {"running": False,
                                                               "ports": [entry]}
    r = e.hutch("exec", "-d", name, "--", *HTTP_SERVER)
    assert r.returncode == 0, r.stderr
    out = run_client(sdk, e, [call("list_ports")], args=("--name", name))
    (bound,) = ok_result(out["steps"][0])["structuredContent"]["ports"]
    assert bound["host_port"] > 0 and bound["url"] == f"http://[::1]:{bound['host_port']}/"
    assert poll_until(lambda: http_get(bound["host_port"], host="::1") == "HTTP/1.0 200 OK", 20)


def test_host_port_in_use_is_refused(sdk, smenv):  # noqa: F811
    e, name = smenv, "mcp-busy"
    start_server(e, name)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        out = run_client(sdk, e, [call("publish_port", port=8000, host_port=busy),
                                  call("list_ports"), call("unpublish_port", port=81)],
                         args=("--name", name))
    msg = error_text(out["steps"][0])
    assert "host_port" in msg and f"127.0.0.1:{busy} is already in use" in msg, msg
    # Nothing saved.
    assert ok_result(out["steps"][1])["structuredContent"]["ports"] == []
    assert "81" in error_text(out["steps"][2])
    r = e.hutch("port", name)
    assert r.returncode == 0 and r.stdout == "", r.stdout


def test_bad_input_names_the_argument_and_touches_nothing(sdk, smenv):  # noqa: F811
    e = smenv
    bad = [
        (call("publish_port", port=0), "invalid port 0 (expected an integer from 1 to 65535)"),
        (call("publish_port", port=70000), "invalid port 70000"),
        (call("publish_port", port=1.5), "invalid port 1.5"),
        (call("publish_port", port="80"), "argument 'port' must be a number"),
        (call("publish_port"), "missing argument 'port'"),
        (call("publish_port", port=80, host_port=70000),
         "invalid host_port 70000 (expected an integer from 0 to 65535)"),
        (call("publish_port", port=80, host_port=-1), "invalid host_port -1"),
        (call("publish_port", port=80, host_ip="not an ip"), "invalid host_ip 'not an ip'"),
        (call("publish_port", port=80, host_ip="300.1.1.1"), "invalid host_ip '300.1.1.1'"),
        # SECURITY: the agent cannot open its sandbox to the network.
        (call("publish_port", port=80, host_ip="0.0.0.0"), "host_ip '0.0.0.0' is not a loopback"),
        (call("publish_port", port=80, host_ip="::"), "host_ip '::' is not a loopback"),
        (call("publish_port", port=80, host_ip="10.0.0.1"), "host_ip '10.0.0.1' is not a loopback"),
        (call("publish_port", port=80, host_ip="::ffff:127.0.0.1"), "is not a loopback"),
        (call("publish_port", port=80, color="red"), "unknown argument 'color'"),
        (call("unpublish_port", port=0), "unpublish_port: invalid port 0"),
        (call("unpublish_port"), "missing argument 'port'"),
        (call("list_ports", port=80), "list_ports: unknown argument 'port'"),
    ]
    out = run_client(sdk, e, [c for c, _ in bad])
    for step, (c, want) in zip(out["steps"], bad):
        assert want in error_text(step), (c, step)
    # Found before the store is touched: no sandbox was made.
    assert e.sandboxes() == []


def test_agent_ports_keep_the_policy_but_not_a_network_port(sdk, smenv):  # noqa: F811
    e = smenv
    flags = ("--memory", "300m")
    out = run_client(sdk, e, [call("publish_port", port=8000, host_port=0)], args=flags)
    ok_result(out["steps"][0])
    (sandbox,) = [sb["name"] for sb in e.sandboxes()]
    # The next session with the same flags serves it: the loopback port the
    # agent published is its own.
    out = run_client(sdk, e, [call("list_ports"), call("publish_port", port=8001,
                                                       host_ip="127.0.0.2")], args=flags)
    ports = ok_result(out["steps"][0])["structuredContent"]["ports"]
    assert [p["port"] for p in ports] == [8000], ports
    ok_result(out["steps"][1])
    # Negative twin: a port opened to the network outside the agent's tools
    # makes it another policy than the flags name.
    r = e.hutch("port", sandbox, "add", "0.0.0.0:0:81")
    assert r.returncode == 0, r.stderr
    out = run_client(sdk, e, [call("list_ports")], args=flags)
    assert "another policy" in error_text(out["steps"][0])
    # Taken away again, the sandbox is served.
    assert e.hutch("port", sandbox, "rm", "81").returncode == 0
    out = run_client(sdk, e, [call("list_ports")], args=flags)
    assert [p["port"] for p in ok_result(out["steps"][0])["structuredContent"]["ports"]] == \
        [8000, 8001]
