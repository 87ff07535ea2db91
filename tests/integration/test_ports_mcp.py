# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch mcp's expose_port tool (issue 18, docs/mcp.md): the URL of a
server inside the sandbox, reached from the host, through the official
MCP SDK's client (test_mcp's harness), as root and as the user."""

import socket

from cgroupctl import poll_until
from test_mcp import McpEnv, call, error_text, ok_result, run_client, sdk, smenv  # noqa: F401

HTTP_SERVER = ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"]


def status_of(url):
    """The status line of GET @url ("http://127.0.0.1:N/"), or None."""
    hostport = url.split("/")[2]
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=10) as c:
            c.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return c.recv(4096).split(b"\r\n", 1)[0].decode() or None
    except OSError:
        return None


def test_expose_port_publishes_a_loopback_port(sdk, smenv):  # noqa: F811
    name = "mcp-expose"
    assert smenv.hutch("create", name).returncode == 0
    r = smenv.hutch("exec", "-d", name, "--", *HTTP_SERVER)
    assert r.returncode == 0, r.stderr
    out = run_client(sdk, smenv, [call("expose_port", port=8000), call("expose_port", port=8000),
                                  call("expose_port", port=0), call("expose_port", port=1.5)],
                     args=("--name", name))
    first = ok_result(out["steps"][0])["structuredContent"]
    assert first["port"] == 8000 and first["via"] == "published", first
    assert first["url"].startswith("http://127.0.0.1:"), first
    # Asked again: the same mapping, not a second one.
    assert ok_result(out["steps"][1])["structuredContent"] == first
    for step in out["steps"][2:]:
        assert "expected an integer from 1 to 65535" in error_text(step)
    assert poll_until(lambda: status_of(first["url"]) == "HTTP/1.0 200 OK", 20)
    r = smenv.hutch("port", name)
    assert r.stdout == f"8000/tcp -> {first['url'][7:-1]}\n", r.stdout
    # Not saved in the policy: a stop takes it away, and the sandbox still
    # has the policy 'hutch mcp' was started with.
    assert smenv.hutch("stop", name).returncode == 0
    assert status_of(first["url"]) is None
    r = smenv.hutch("port", name)
    assert r.returncode == 0 and r.stdout == "", r.stdout


def test_expose_port_answers_the_preview_url(sdk, smenv):  # noqa: F811
    name = "mcp-preview"
    out = run_client(sdk, smenv, [call("expose_port", port=3000)],
                     args=("--name", name, "--preview-url", "http://127.0.0.1:8080/"))
    res = ok_result(out["steps"][0])["structuredContent"]
    assert res == {"port": 3000, "via": "preview",
                   "url": f"http://127.0.0.1:8080/v1/sandboxes/{name}/ports/3000/"}, res
    # No host port was published for it.
    r = smenv.hutch("port", name)
    assert r.returncode == 0 and r.stdout == "", r.stdout
    r = smenv.r.run(["mcp", "--preview-url", "ftp://x"], verb=None, env=smenv.extra)
    assert r.returncode == 125 and "invalid --preview-url" in r.stderr, r.stderr
