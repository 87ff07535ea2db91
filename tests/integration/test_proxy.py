# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-proxy, driven directly on loopback (no sandbox): real clients
(curl, git, python urllib, node) through the real binary to local
upstreams, the adversarial table of docs/network.md, the audit log, and
the process interface the supervisor relies on.

Test names map to .test domains with --resolve; every connection goes to
127.0.0.1 or ::1."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import proxyutil  # noqa: E402
from conftest import node_package  # noqa: E402
from proxyutil import (  # noqa: E402
    FakeDns,
    Proxy,
    StreamServer,
    Upstream,
    connection_closed,
    raw_request,
    read_response,
)

pytestmark = pytest.mark.skipif(
    proxyutil.proxy_binary() is None and os.environ.get("HUTCH_TEST_MUST_WORK") != "1",
    reason=f"hutch-proxy is not built in {proxyutil.BUILD}",
)

# No proxy settings of the caller may leak into the clients we run.
CLEAN_ENV = {
    k: v
    for k, v in os.environ.items()
    if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
}


@pytest.fixture
def make_proxy():
    started = []

    def start(*args, **kw):
        p = Proxy(list(args), **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        p.close()


@pytest.fixture
def api_proxy(make_proxy, upstream):
    """api.example.test (and a wildcard) allowed on the upstream's port,
    mapped to 127.0.0.1, which --allow-private permits."""
    port = upstream.port
    return make_proxy(
        "--allow", f"api.example.test:{port}",
        "--allow", f"*.wild.test:{port}",
        "--allow", f"*.example.test:{port}",
        "--deny", "bad.example.test",
        "--resolve", "api.example.test:127.0.0.1",
        "--resolve", "a.wild.test:127.0.0.1",
        "--resolve", "a.b.wild.test:127.0.0.1",
        "--resolve", "bad.example.test:127.0.0.1",
        "--resolve", "wild.test:127.0.0.1",
        "--resolve", "evilwild.test:127.0.0.1",
        "--resolve", "evilapi.example.test:127.0.0.1",
        "--allow-private", "127.0.0.0/8",
        "--header-timeout", "2s",
    )


def get(proxy, target, extra=b"", host=None):
    """One absolute-URI GET through @proxy, on its own connection."""
    req = f"GET {target} HTTP/1.1\r\n".encode()
    if host is not None:
        req += f"Host: {host}\r\n".encode()
    req += extra + b"Connection: close\r\n\r\n"
    return raw_request(proxy.port, req)


def connect(proxy, authority, host_header=True):
    """A CONNECT through @proxy; returns (status, headers, body, socket).
    On 200 the socket is the tunnel."""
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=proxyutil.TIMEOUT)
    req = f"CONNECT {authority} HTTP/1.1\r\n"
    if host_header:
        req += f"Host: {authority}\r\n"
    s.sendall((req + "\r\n").encode())
    s.settimeout(proxyutil.TIMEOUT)
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = s.recv(4096)
        if not data:
            break
        buf += data
    head, _, body = buf.partition(b"\r\n\r\n")
    status = int(head.split()[1]) if head else 0
    if status != 200:
        try:
            while True:
                data = s.recv(4096)
                if not data:
                    break
                body += data
        except OSError:
            pass
    return status, head, body, s


def curl(*args, timeout=30):
    return subprocess.run(
        ["curl", "-sS", "--max-time", "20", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=CLEAN_ENV,
    )


# ------------------------------------------------------------------ clients


def test_curl_allowed_get_and_audit(api_proxy, upstream):
    url = f"http://api.example.test:{upstream.port}/hello?x=1"
    r = curl("-x", api_proxy.url, "-H", "Proxy-Authorization: Basic c2VjcmV0", url)
    assert r.returncode == 0, r.stderr
    echo = json.loads(r.stdout)
    assert echo["method"] == "GET"
    assert echo["path"] == "/hello?x=1"  # origin form upstream
    headers = {k.lower(): v for k, v in echo["headers"]}
    assert headers["host"] == f"api.example.test:{upstream.port}"
    # hop-by-hop fields do not travel on
    assert "proxy-authorization" not in headers
    assert "proxy-connection" not in headers

    (d,) = api_proxy.wait_decisions(1)
    assert d["decision"] == "allow"
    assert d["method"] == "GET"
    assert d["host"] == "api.example.test"
    assert d["port"] == upstream.port
    assert d["address"] == "127.0.0.1"
    assert d["rule"] == f"api.example.test:{upstream.port}"
    assert d["status"] == 200
    assert d["sandbox"] == "test-sbx"
    assert d["bytes_up"] > 0 and d["bytes_down"] > len(r.stdout)
    assert d["time"].endswith("Z") and "T" in d["time"]
    assert isinstance(d["duration_ms"], int)


def test_curl_keep_alive_reuses_upstream(api_proxy, upstream):
    before = upstream.connections
    base = f"http://api.example.test:{upstream.port}"
    r = curl("-x", api_proxy.url, f"{base}/one", f"{base}/two", f"{base}/three")
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["path"] for x in r.stdout.replace("}{", "}\n{").splitlines()] == [
        "/one",
        "/two",
        "/three",
    ]
    # one client connection, one upstream connection for all three
    assert upstream.connections - before == 1
    assert len(api_proxy.wait_decisions(3)) == 3


def test_curl_connect_tunnel(api_proxy, upstream):
    url = f"http://api.example.test:{upstream.port}/tunnelled"
    r = curl("-p", "-x", api_proxy.url, url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"] == "/tunnelled"
    (d,) = api_proxy.wait_decisions(1)
    assert d["method"] == "CONNECT" and d["decision"] == "allow" and d["status"] == 200
    assert d["bytes_up"] > 0 and d["bytes_down"] > 0


def test_curl_post_bodies_streamed(api_proxy, upstream, tmp_path):
    url = f"http://api.example.test:{upstream.port}/post"
    r = curl("-x", api_proxy.url, "--data-binary", "hello body", url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["body"] == "hello body"
    big = "z" * 300000
    (tmp_path / "big").write_text(big)
    r = curl(
        "-x", api_proxy.url, "-H", "Transfer-Encoding: chunked",
        "--data-binary", f"@{tmp_path / 'big'}", url,
    )
    assert r.returncode == 0, r.stderr
    echo = json.loads(r.stdout)
    assert echo["body"] == big
    assert ["Transfer-Encoding", "chunked"] in echo["headers"]


def test_large_response_streamed(api_proxy, upstream):
    n = 5 * 1024 * 1024
    r = subprocess.run(
        ["curl", "-sS", "-x", api_proxy.url, f"http://api.example.test:{upstream.port}/big/{n}"],
        capture_output=True,
        timeout=60,
        env=CLEAN_ENV,
    )
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) == n and set(r.stdout) == {ord("x")}


def test_head_request(api_proxy, upstream):
    r = curl("-I", "-x", api_proxy.url, f"http://api.example.test:{upstream.port}/h")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("HTTP/1.1 200")


def test_python_urllib(api_proxy, upstream):
    handler = urllib.request.ProxyHandler({"http": api_proxy.url})
    opener = urllib.request.build_opener(handler)
    with opener.open(f"http://api.example.test:{upstream.port}/urllib", timeout=20) as resp:
        assert resp.status == 200
        assert json.loads(resp.read())["path"] == "/urllib"
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open("http://evil.test/", timeout=20)
    assert e.value.code == 403
    assert b"not in the allowlist" in e.value.read()


@pytest.mark.skipif(not shutil.which("git"), reason="git is not installed")
def test_git_clone_over_smart_http(make_proxy, tmp_path):
    root = tmp_path / "srv"
    src = tmp_path / "src"
    root.mkdir()
    env = dict(CLEAN_ENV, GIT_CONFIG_NOSYSTEM="1", HOME=str(tmp_path), GIT_TERMINAL_PROMPT="0")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(src)], check=True, env=env)
    (src / "README").write_text("through the proxy\n")
    subprocess.run([*git, "-C", str(src), "add", "README"], check=True, env=env)
    subprocess.run([*git, "-C", str(src), "commit", "-qm", "one"], check=True, env=env)
    subprocess.run(
        [*git, "clone", "-q", "--bare", str(src), str(root / "repo.git")], check=True, env=env
    )
    up = Upstream("127.0.0.1", git_root=root)
    try:
        proxy = make_proxy(
            "--allow", f"git.example.test:{up.port}",
            "--resolve", "git.example.test:127.0.0.1",
            "--allow-private", "127.0.0.1/32",
        )
        url = f"http://git.example.test:{up.port}/git/repo.git"
        r = subprocess.run(
            [*git, "-c", f"http.proxy={proxy.url}", "ls-remote", url],
            capture_output=True, text=True, env=env, timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert "refs/heads/main" in r.stdout
        dest = tmp_path / "clone"
        r = subprocess.run(
            [*git, "-c", f"http.proxy={proxy.url}", "clone", "-q", url, str(dest)],
            capture_output=True, text=True, env=env, timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert (dest / "README").read_text() == "through the proxy\n"
        assert any(q["method"] == "POST" for q in up.requests)  # git-upload-pack
        assert all(d["decision"] == "allow" for d in proxy.decisions())
    finally:
        up.close()


NODE_HTTP = r"""
const http = require('http');
const [proxyPort, target] = process.argv.slice(1);
const u = new URL(target);
const req = http.request({host: '127.0.0.1', port: +proxyPort, path: target,
                          headers: {Host: u.host}}, res => {
  let body = '';
  res.on('data', d => body += d);
  res.on('end', () => { console.log(JSON.stringify({status: res.statusCode, body})); });
});
req.on('error', e => { console.error(e.message); process.exit(1); });
req.end();
"""

NODE_FETCH = r"""
const { ProxyAgent, fetch } = require(process.argv[1]);
const [, , proxy, target, denied] = process.argv;
(async () => {
  const dispatcher = new ProxyAgent(proxy);
  const r = await fetch(target, { dispatcher });
  const body = await r.text();
  let deniedStatus = null;
  try { await fetch(denied, { dispatcher }); } catch (e) {
    deniedStatus = String(e.cause && (e.cause.statusCode || e.cause.code || e.cause.message));
  }
  console.log(JSON.stringify({ status: r.status, body, deniedStatus }));
})().catch(e => { console.error(e); process.exit(1); });
"""


def find_undici():
    """undici (for fetch through a proxy: node 20's built-in fetch ignores
    proxies and has no NODE_USE_ENV_PROXY), from the tests' node cache."""
    return node_package("undici", "undici@6", "package.json")


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")
def test_node_http_absolute_uri(api_proxy, upstream):
    target = f"http://api.example.test:{upstream.port}/node-http"
    r = subprocess.run(
        ["node", "-e", NODE_HTTP, str(api_proxy.port), target],
        capture_output=True, text=True, timeout=60, env=CLEAN_ENV,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == 200
    assert json.loads(out["body"])["path"] == "/node-http"


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")
def test_node_fetch_through_proxy(api_proxy, upstream):
    undici = find_undici()
    if undici is None:
        pytest.skip("undici is not available (npm install failed); node 20's fetch has no proxy")
    target = f"http://api.example.test:{upstream.port}/node-fetch"
    r = subprocess.run(
        ["node", "-e", NODE_FETCH, str(undici), api_proxy.url, target, "http://evil.test/"],
        capture_output=True, text=True, timeout=60, env=CLEAN_ENV,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == 200
    assert json.loads(out["body"])["path"] == "/node-fetch"
    # undici tunnels with CONNECT; the proxy's refusal fails the fetch
    assert out["deniedStatus"] is not None
    assert any(
        d["decision"] == "deny" and d["host"] == "evil.test" and d["method"] == "CONNECT"
        for d in api_proxy.wait_decisions(2)
    )


# ------------------------------------------------------- adversarial table

# (name, request target, Host header or None, expected status, body
# fragment). P is replaced by the upstream's port.
ADVERSARIAL = [
    ("allowed", "http://api.example.test:{p}/", None, 200, None),
    ("case-folding", "http://API.Example.TEST:{p}/", None, 200, None),
    ("trailing-dot", "http://api.example.test.:{p}/", None, 200, None),
    ("host-header-agrees", "http://api.example.test:{p}/", "API.example.test.:{p}", 200, None),
    ("suffix-attack", "http://api.example.test.evil.test:{p}/", None, 403,
     "host 'api.example.test.evil.test' port {p} is not in the allowlist"),
    ("prefix-attack", "http://evilapi.example.test:{p}/", None, 200, None),  # *.example.test covers it
    ("no-dot-prefix", "http://evilexample.test:{p}/", None, 403, "is not in the allowlist"),
    ("wildcard-one-label", "http://a.wild.test:{p}/", None, 200, None),
    ("wildcard-deeper", "http://a.b.wild.test:{p}/", None, 200, None),
    ("wildcard-not-apex", "http://wild.test:{p}/", None, 403, "host 'wild.test' port {p} is not"),
    ("wildcard-no-dot", "http://evilwild.test:{p}/", None, 403, "is not in the allowlist"),
    ("deny-wins", "http://bad.example.test:{p}/", None, 403,
     "host 'bad.example.test' port {p} matches deny rule 'bad.example.test'"),
    ("unlisted-port", "http://api.example.test:1/", None, 403,
     "host 'api.example.test' port 1 is not in the allowlist"),
    ("default-port", "http://api.example.test/", None, 403, "port 80 is not in the allowlist"),
    ("host-mismatch", "http://api.example.test:{p}/", "evil.test", 400,
     "the Host header does not match the request target"),
    ("host-port-mismatch", "http://api.example.test:{p}/", "api.example.test:1", 400,
     "does not match"),
    ("userinfo", "http://api.example.test:{p}@evil.test/", None, 400,
     "userinfo in the request target is not allowed"),
    ("userinfo-allowed-host", "http://user:pw@api.example.test:{p}/", None, 400, "userinfo"),
    ("origin-form", "/path", "api.example.test:{p}", 400, "origin-form request"),
    ("https-uri", "https://api.example.test:{p}/", None, 400, "must be tunnelled with CONNECT"),
    ("other-scheme", "ftp://api.example.test:{p}/", None, 400, "only http://"),
    ("fragment", "http://api.example.test:{p}/#frag", None, 400, "fragment"),
    ("percent-host", "http://api%2eexample.test:{p}/", None, 400, "invalid host"),
    ("bad-port", "http://api.example.test:99999/", None, 400, "invalid host or port"),
    ("empty-port", "http://api.example.test:/", None, 400, "invalid host or port"),
    ("numeric-name", "http://foo.123:{p}/", None, 400, "invalid host"),
]


@pytest.mark.parametrize("case", ADVERSARIAL, ids=[c[0] for c in ADVERSARIAL])
def test_adversarial_forward(api_proxy, upstream, case):
    name, target, host, status, fragment = case
    p = str(upstream.port)
    before = len(upstream.requests)
    target = target.replace("{p}", p)
    got, headers, body = get(api_proxy, target, host=host.replace("{p}", p) if host else None)
    assert got == status, body
    text = body.decode()
    if status == 200:
        assert headers.get("x-upstream") == "yes"
    else:
        assert text.startswith("hutch-proxy: ")
        if fragment:
            assert fragment.replace("{p}", p) in text
        assert headers.get("x-upstream") is None
        assert len(upstream.requests) == before  # nothing reached the upstream
    (d,) = api_proxy.wait_decisions(1)
    assert d["status"] == status
    expect = {200: "allow", 403: "deny", 400: "error"}[status]
    assert d["decision"] == expect
    if status != 200:
        assert d["reason"] and d["reason"] in text


def test_duplicate_host_header(api_proxy, upstream):
    t = f"http://api.example.test:{upstream.port}/"
    h = f"api.example.test:{upstream.port}"
    status, _, body = get(api_proxy, t, extra=f"Host: {h}\r\n".encode(), host=h)
    assert status == 400 and b"duplicate Host header" in body


def test_smuggling_shapes_refused(api_proxy, upstream):
    t = f"http://api.example.test:{upstream.port}/"
    before = len(upstream.requests)
    cases = [
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        b"Content-Length: 5\r\nContent-Length: 6\r\n",
        b"X-Folded: a\r\n b\r\n",
        b" Leading-Space: x\r\n",
        b"X-Ctl: a\x01b\r\n",
    ]
    for extra in cases:
        status, _, body = get(api_proxy, t, extra=extra)
        assert status == 400, (extra, body)
    assert len(upstream.requests) == before


IP_SPELLINGS = ["127.0.0.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.1", "127.0.1",
                "0x7f.0.0.1", "[::ffff:127.0.0.1]", "127.0.0.1."]


@pytest.mark.parametrize("spelling", IP_SPELLINGS)
def test_connect_ip_literal_needs_an_address_entry(make_proxy, spelling):
    echo = StreamServer("127.0.0.1")
    try:
        proxy = make_proxy("--allow", f"api.example.test:{echo.port}",
                           "--resolve", "api.example.test:127.0.0.1",
                           "--allow-private", "127.0.0.0/8")
        status, _, body, s = connect(proxy, f"{spelling}:{echo.port}")
        s.close()
        assert status == 403, body
        assert b"host '127.0.0.1' port" in body and b"is not in the allowlist" in body
        (d,) = proxy.wait_decisions(1)
        assert d["host"] == "127.0.0.1" and d["decision"] == "deny"
    finally:
        echo.close()


@pytest.mark.parametrize("spelling", IP_SPELLINGS)
def test_connect_ip_literal_every_spelling_matches_entry(make_proxy, spelling):
    echo = StreamServer("127.0.0.1")
    try:
        proxy = make_proxy("--allow", f"127.0.0.1:{echo.port}", "--allow-private", "127.0.0.0/8")
        status, _, _, s = connect(proxy, f"{spelling}:{echo.port}")
        with s:
            assert status == 200
            s.sendall(b"ping")
            assert s.recv(4) == b"ping"
        (d,) = proxy.wait_decisions(1)
        assert d["host"] == "127.0.0.1" and d["rule"] == f"127.0.0.1:{echo.port}"
    finally:
        echo.close()


def test_connect_ip_literal_private_without_allow_private(make_proxy):
    echo = StreamServer("127.0.0.1")
    try:
        proxy = make_proxy("--allow", f"127.0.0.1:{echo.port}")
        status, _, body, s = connect(proxy, f"2130706433:{echo.port}")
        s.close()
        assert status == 403
        assert b"address 127.0.0.1 port" in body and b"private address (loopback)" in body
    finally:
        echo.close()


def test_connect_tunnel_relays_and_half_closes(make_proxy):
    echo = StreamServer("127.0.0.1")
    try:
        proxy = make_proxy("--allow", f"echo.test:{echo.port}",
                           "--resolve", "echo.test:127.0.0.1", "--allow-private", "127.0.0.1/32")
        status, _, _, s = connect(proxy, f"echo.test:{echo.port}")
        with s:
            assert status == 200
            payload = os.urandom(3 * 1024 * 1024)
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                data = s.recv(1 << 20)
                if not data:
                    break
                got += data
            assert got == payload
        (d,) = proxy.wait_decisions(1)
        assert d["bytes_up"] == len(payload) and d["bytes_down"] == len(payload)
        assert d["reason"] is None
    finally:
        echo.close()


def test_connect_early_data_is_kept(make_proxy):
    echo = StreamServer("127.0.0.1")
    try:
        proxy = make_proxy("--allow", f"echo.test:{echo.port}",
                           "--resolve", "echo.test:127.0.0.1", "--allow-private", "127.0.0.1/32")
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
            # the first tunnel bytes ride in the same packet as the CONNECT
            s.sendall(f"CONNECT echo.test:{echo.port} HTTP/1.1\r\n\r\nearly bytes".encode())
            buf = b""
            while not buf.endswith(b"early bytes"):
                data = s.recv(4096)
                assert data
                buf += data
            assert buf.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n")
    finally:
        echo.close()


def test_connect_unlisted_port_and_missing_port(api_proxy, upstream):
    status, _, body, s = connect(api_proxy, "api.example.test:22")
    s.close()
    assert status == 403 and b"port 22 is not in the allowlist" in body
    status, _, body, s = connect(api_proxy, "api.example.test")
    s.close()
    assert status == 400 and b"CONNECT needs a target of the form host:port" in body


@pytest.mark.skipif(not proxyutil.ipv6_loopback_works(), reason="no IPv6 loopback here")
def test_ipv6_listener_and_upstream(make_proxy):
    up6 = Upstream("::1")
    try:
        proxy = make_proxy("--allow", f"v6.test:{up6.port}", "--allow", f"[::1]:{up6.port}",
                           "--resolve", "v6.test:::1", "--allow-private", "::1/128", ipv6=True)
        # through the [::1] listener, by name and by literal
        status, _, body = raw_request(
            proxy.port6, f"GET http://v6.test:{up6.port}/six HTTP/1.1\r\n\r\n".encode(),
            host="::1")
        assert status == 200 and json.loads(body)["path"] == "/six"
        status, _, body = raw_request(
            proxy.port6,
            f"GET http://[0:0::1]:{up6.port}/lit HTTP/1.1\r\nHost: [::1]:{up6.port}\r\n\r\n".encode(),
            host="::1")
        assert status == 200, body
        d = proxy.wait_decisions(2)
        assert {x["address"] for x in d} == {"::1"}
    finally:
        up6.close()


# ----------------------------------------------------- private addresses


def test_name_resolving_to_loopback_refused_without_allow_private(make_proxy, upstream):
    proxy = make_proxy("--allow", f"api.example.test:{upstream.port}",
                       "--resolve", "api.example.test:127.0.0.1")
    before = upstream.connections
    status, _, body = get(proxy, f"http://api.example.test:{upstream.port}/")
    assert status == 403
    assert (f"host 'api.example.test' port {upstream.port} resolves to a private address "
            f"127.0.0.1 (loopback)").encode() in body
    (d,) = proxy.wait_decisions(1)
    assert d["decision"] == "deny" and d["address"] == "127.0.0.1"
    assert d["rule"] == f"api.example.test:{upstream.port}"
    assert upstream.connections == before  # refused before connecting


def test_name_resolving_to_metadata_refused(make_proxy):
    # --resolve points at the metadata address; the proxy must refuse
    # before any packet is sent (nothing listens there on this machine).
    proxy = make_proxy("--allow", "meta.test", "--resolve", "meta.test:169.254.169.254",
                       "--allow-private", "127.0.0.0/8", "--connect-timeout", "1s")
    status, _, body = get(proxy, "http://meta.test/latest/meta-data/")
    assert status == 403
    assert b"resolves to a private address 169.254.169.254 (metadata)" in body
    status, _, body, s = connect(proxy, "meta.test:443")
    s.close()
    assert status == 403 and b"169.254.169.254 (metadata)" in body


def test_ipv6_metadata_and_mapped_refused(make_proxy):
    proxy = make_proxy("--allow", "m6.test", "--allow", "mapped.test", "--allow", "sixtofour.test",
                       "--resolve", "m6.test:fd00:ec2::254",
                       "--resolve", "mapped.test:::ffff:10.0.0.1",
                       "--resolve", "sixtofour.test:2002:7f00:1::1")
    for name, addr, cls in [("m6.test", "fd00:ec2::254", "metadata"),
                            ("mapped.test", "10.0.0.1", "private"),
                            ("sixtofour.test", "2002:7f00:1::1", "loopback")]:
        status, _, body = get(proxy, f"http://{name}/")
        assert status == 403, body
        assert f"resolves to a private address {addr} ({cls})".encode() in body


def test_allow_private_admits_only_its_range(make_proxy, upstream):
    proxy = make_proxy("--allow", f"api.example.test:{upstream.port}",
                       "--resolve", "api.example.test:127.0.0.1",
                       "--allow-private", "127.0.0.2/32")
    status, _, body = get(proxy, f"http://api.example.test:{upstream.port}/")
    assert status == 403 and b"127.0.0.1 (loopback)" in body


def test_mixed_answers_use_only_permitted_addresses(make_proxy, upstream):
    # 169.254.169.254 first: it is skipped, never connected to
    proxy = make_proxy("--allow", f"api.example.test:{upstream.port}",
                       "--resolve", "api.example.test:169.254.169.254,127.0.0.1",
                       "--allow-private", "127.0.0.0/8")
    status, _, _ = get(proxy, f"http://api.example.test:{upstream.port}/")
    assert status == 200
    (d,) = proxy.wait_decisions(1)
    assert d["address"] == "127.0.0.1"


def test_dns_resolution_through_evdns(make_proxy, upstream):
    dns = FakeDns({"dns.test": "127.0.0.1", "meta-dns.test": "169.254.169.254"})
    try:
        strict = make_proxy("--allow", f"dns.test:{upstream.port}", "--allow", "meta-dns.test",
                            "--nameserver", f"127.0.0.1:{dns.port}")
        status, _, body = get(strict, f"http://dns.test:{upstream.port}/")
        assert status == 403 and b"resolves to a private address 127.0.0.1" in body
        status, _, body = get(strict, "http://meta-dns.test/")
        assert status == 403 and b"169.254.169.254 (metadata)" in body
        status, _, body = get(strict, f"http://nxdomain.test:{upstream.port}/")
        assert status == 403  # not allowed: never even resolved
        assert ("nxdomain.test", 1) not in dns.queries

        loose = make_proxy("--allow", f"dns.test:{upstream.port}", "--allow", "gone.test",
                           "--nameserver", f"127.0.0.1:{dns.port}",
                           "--allow-private", "127.0.0.0/8")
        status, _, body = get(loose, f"http://dns.test:{upstream.port}/via-dns")
        assert status == 200 and json.loads(body)["path"] == "/via-dns"
        status, _, body = get(loose, "http://gone.test/")
        assert status == 502 and b"cannot resolve host 'gone.test'" in body
        assert ("dns.test", 1) in dns.queries
    finally:
        dns.close()


def test_dns_timeout_is_bounded(make_proxy):
    dns = FakeDns({}, silent=True)
    try:
        proxy = make_proxy("--allow", "slow.test", "--nameserver", f"127.0.0.1:{dns.port}",
                           "--dns-timeout", "1s")
        t0 = time.monotonic()
        status, _, body = get(proxy, "http://slow.test/")
        took = time.monotonic() - t0
        assert status == 504 and b"timed out" in body
        assert took < 5
    finally:
        dns.close()


def test_connect_refused_is_502(make_proxy):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    proxy = make_proxy("--allow", f"down.test:{port}", "--resolve", "down.test:127.0.0.1",
                       "--allow-private", "127.0.0.0/8")
    status, _, body = get(proxy, f"http://down.test:{port}/")
    assert status == 502 and b"cannot connect to host 'down.test'" in body
    (d,) = proxy.wait_decisions(1)
    assert d["decision"] == "allow" and d["status"] == 502


# ------------------------------------------------------------ bounds


def test_oversize_request_line_414_and_next_client_served(api_proxy, upstream):
    long_target = f"http://api.example.test:{upstream.port}/" + "a" * 9000
    status, _, body = get(api_proxy, long_target)
    assert status == 414 and b"request line is too long" in body
    ok, _, _ = get(api_proxy, f"http://api.example.test:{upstream.port}/after")
    assert ok == 200


def test_oversize_headers_431(api_proxy, upstream):
    t = f"http://api.example.test:{upstream.port}/"
    status, _, body = get(api_proxy, t, extra=b"X-Big: " + b"b" * 40000 + b"\r\n")
    assert status == 431
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(101))
    status, _, body = get(api_proxy, t, extra=many)
    assert status == 431 and b"too many header fields" in body
    fine = b"".join(b"X-H%d: v\r\n" % i for i in range(90))
    status, _, _ = get(api_proxy, t, extra=fine)
    assert status == 200
    assert [d["status"] for d in api_proxy.wait_decisions(3)] == [431, 431, 200]


def test_garbage_is_400(api_proxy):
    status, _, body = raw_request(api_proxy.port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\r\n\r\n")
    assert status == 400 and body.startswith(b"hutch-proxy: ")


def test_slowloris_gets_408_while_others_are_served(api_proxy, upstream):
    slow = socket.create_connection(("127.0.0.1", api_proxy.port), timeout=20)
    t0 = time.monotonic()
    slow.sendall(b"GET http://api.example.test")
    # meanwhile, another client is served at once
    ok, _, _ = get(api_proxy, f"http://api.example.test:{upstream.port}/meanwhile")
    assert ok == 200
    # keep dribbling: it does not extend the deadline
    for ch in b":1234/":
        time.sleep(0.2)
        try:
            slow.sendall(bytes([ch]))
        except OSError:
            break
    status, _, body = read_response(slow, timeout=10)
    took = time.monotonic() - t0
    assert status == 408 and b"did not arrive within 2000 ms" in body
    assert 1.5 < took < 6
    assert connection_closed(slow, timeout=5)
    slow.close()
    assert any(d["status"] == 408 and d["decision"] == "error" for d in api_proxy.decisions())


def test_idle_keep_alive_closed_without_408(make_proxy, upstream):
    proxy = make_proxy("--allow", f"api.example.test:{upstream.port}",
                       "--resolve", "api.example.test:127.0.0.1",
                       "--allow-private", "127.0.0.0/8", "--idle-timeout", "500ms",
                       "--header-timeout", "500ms")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
        s.sendall(f"GET http://api.example.test:{upstream.port}/ HTTP/1.1\r\n\r\n".encode())
        status, _, _ = read_response(s)
        assert status == 200
        assert connection_closed(s, timeout=5)
    assert [d["status"] for d in proxy.wait_decisions(1)] == [200]


def test_pipelined_requests_and_denial_keeps_connection(api_proxy, upstream):
    p = upstream.port
    reqs = (f"GET http://api.example.test:{p}/1 HTTP/1.1\r\n\r\n"
            f"GET http://evil.test/ HTTP/1.1\r\n\r\n"
            f"GET http://api.example.test:{p}/3 HTTP/1.1\r\nConnection: close\r\n\r\n")
    with socket.create_connection(("127.0.0.1", api_proxy.port), timeout=20) as s:
        s.sendall(reqs.encode())
        reader = proxyutil.ResponseReader(s)
        a = reader.response()
        b = reader.response()
        c = reader.response()
    assert [a[0], b[0], c[0]] == [200, 403, 200]
    assert json.loads(c[2])["path"] == "/3"
    assert b[1]["connection"] == "keep-alive"


# --------------------------------------------- audit, summary, lifecycle


def test_summary_counts_denials_on_sigterm(api_proxy, upstream):
    for _ in range(2):
        get(api_proxy, "http://evil.test/")
    s = connect(api_proxy, "evil.test:443")[3]
    s.close()
    get(api_proxy, f"http://api.example.test:{upstream.port}/")
    api_proxy.wait_decisions(4)
    assert api_proxy.stop() == 0
    records = api_proxy.audit()
    summary = records[-1]
    assert summary["type"] == "summary"
    assert summary["sandbox"] == "test-sbx"
    assert summary["allowed"] == 1 and summary["denied_total"] == 3
    denied = {(d["host"], d["port"]): d for d in summary["denied"]}
    assert denied[("evil.test", 80)]["count"] == 2
    assert denied[("evil.test", 443)]["count"] == 1
    assert "not in the allowlist" in denied[("evil.test", 443)]["reason"]
    assert summary["denied_truncated"] is False


def test_summary_fd_and_watch_fd(make_proxy):
    sum_r, sum_w = os.pipe()
    watch_r, watch_w = os.pipe()
    proxy = make_proxy("--summary-fd", str(sum_w), "--watch-fd", str(watch_r),
                       extra_fds=(sum_w, watch_r))
    os.close(sum_w)
    os.close(watch_r)
    get(proxy, "http://nope.test/")
    proxy.wait_decisions(1)
    os.close(watch_w)  # the "supervisor" goes away
    assert proxy.proc.wait(timeout=10) == 0
    with os.fdopen(sum_r) as f:
        line = f.read()
    summary = json.loads(line)
    assert summary["denied"][0]["host"] == "nope.test"


def test_dies_with_its_parent(tmp_path):
    """The proxy is started by a parent that then dies: PR_SET_PDEATHSIG
    takes it down (and it writes its summary)."""
    audit = tmp_path / "audit.jsonl"
    pidfile = tmp_path / "pid"
    parent = f"""
import os, socket, subprocess, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
r, w = os.pipe()
p = subprocess.Popen([{str(proxyutil.PROXY_BIN)!r}, "--listen-fd", str(s.fileno()),
                      "--ready-fd", str(w), "--audit-log", {str(audit)!r}],
                     pass_fds=[s.fileno(), w])
os.close(w)
assert os.read(r, 16) == b"ready\\n"
open({str(pidfile)!r}, "w").write(str(p.pid))
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", parent], check=True, timeout=30)
    pid = int(pidfile.read_text())
    fd = os.pidfd_open(pid)
    try:
        import select
        r, _, _ = select.select([fd], [], [], 10)
        assert r, "hutch-proxy outlived its parent"
    finally:
        os.close(fd)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "summary" not in audit.read_text():
        time.sleep(0.05)
    assert json.loads(audit.read_text().splitlines()[-1])["type"] == "summary"


def test_config_fd_json(make_proxy, upstream):
    cfg = {
        "allow": [f"api.example.test:{upstream.port}"],
        "resolve": ["api.example.test:127.0.0.1"],
        "allow_private": ["127.0.0.0/8"],
        "sandbox_id": "from-json",
        "header_timeout": "3s",
    }
    r, w = os.pipe()
    os.write(w, json.dumps(cfg).encode())
    os.close(w)
    proxy = make_proxy("--config-fd", str(r), extra_fds=(r,))
    os.close(r)
    status, _, _ = get(proxy, f"http://api.example.test:{upstream.port}/json")
    assert status == 200
    (d,) = proxy.wait_decisions(1)
    assert d["sandbox"] == "from-json"


def run_bad(args, extra_fds=()):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        return subprocess.run(
            [str(proxyutil.PROXY_BIN), "--listen-fd", str(s.fileno()), *args],
            pass_fds=[s.fileno(), *extra_fds], capture_output=True, text=True, timeout=20,
        )
    finally:
        s.close()


@pytest.mark.parametrize("args,fragment", [
    (["--allow", "*foo.com"], "invalid host pattern '*foo.com'"),
    (["--allow", "*."], "invalid host pattern '*.'"),
    (["--allow", "a..b"], "invalid host pattern 'a..b'"),
    (["--allow", "foo.*.com"], "invalid host pattern 'foo.*.com'"),
    (["--allow", "example.com:0"], "out of range"),
    (["--allow", "example.com:65536"], "out of range"),
    (["--allow", ""], "the pattern is empty"),
    (["--deny", "x" * 64 + ".com"], "longer than 63"),
    (["--allow-private", "10.1.0.0/8"], "host bits"),
    (["--resolve", "nocolon"], "expected NAME:ADDR"),
    (["--resolve", "a.test:notanip"], "is not an IP address"),
    (["--header-timeout", "10"], "expected a duration"),
    (["--listen-fd", "0"], "not a file descriptor number"),
    (["--listen-fd", "999"], "not open"),
    (["--bogus"], "unknown option"),
])
def test_bad_config_exits_125(args, fragment):
    r = run_bad(args)
    assert r.returncode == 125, r.stderr
    assert fragment in r.stderr


def test_bad_json_config_names_pointer():
    rfd, wfd = os.pipe()
    os.write(wfd, b'{"allow": ["ok.test", "*bad"], "x": 1}')
    os.close(wfd)
    r = run_bad(["--config-fd", str(rfd)], extra_fds=(rfd,))
    os.close(rfd)
    assert r.returncode == 125
    assert "invalid host pattern '*bad'" in r.stderr and "/allow/1" in r.stderr
    rfd, wfd = os.pipe()
    os.write(wfd, b'{"allow": [], "surprise": true}')
    os.close(wfd)
    r = run_bad(["--config-fd", str(rfd)], extra_fds=(rfd,))
    os.close(rfd)
    assert r.returncode == 125 and "unknown configuration key 'surprise'" in r.stderr


def test_not_a_listening_socket_is_125():
    s = socket.socket()
    try:
        r = subprocess.run([str(proxyutil.PROXY_BIN), "--listen-fd", str(s.fileno())],
                           pass_fds=[s.fileno()], capture_output=True, text=True, timeout=20)
    finally:
        s.close()
    assert r.returncode == 125 and "is not a listening socket" in r.stderr


def test_many_concurrent_clients(api_proxy, upstream):
    """Event-driven: 50 half-open heads do not block a complete one."""
    held = []
    try:
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", api_proxy.port), timeout=20)
            s.sendall(b"GET http://api.example")
            held.append(s)
        status, _, _ = get(api_proxy, f"http://api.example.test:{upstream.port}/busy")
        assert status == 200
    finally:
        for s in held:
            s.close()


def test_hop_by_hop_fields_removed_both_ways(api_proxy, upstream):
    p = upstream.port
    req = (f"GET http://api.example.test:{p}/hop HTTP/1.1\r\n"
           f"Host: api.example.test:{p}\r\n"
           "Connection: keep-alive, X-Hop-Secret\r\n"
           "X-Hop-Secret: 1\r\n"
           "Proxy-Connection: keep-alive\r\n"
           "Keep-Alive: timeout=5\r\n"
           "TE: trailers\r\n"
           "Trailer: X-T\r\n"
           "Upgrade: h2c\r\n"
           "Proxy-Authorization: Basic c2VjcmV0\r\n"
           "X-Keep: yes\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", api_proxy.port), timeout=20) as s:
        s.sendall(req)
        status, headers, body = read_response(s)
    assert status == 200
    sent = {k.lower() for k, _ in json.loads(body)["headers"]}
    assert sent == {"host", "x-keep"}
    # the upstream's own Keep-Alive and Connection stop at the proxy
    assert "keep-alive" not in headers and "connection" not in headers
    assert headers["x-upstream"] == "yes"


def test_expect_100_continue(api_proxy, upstream, tmp_path):
    (tmp_path / "body").write_bytes(b"e" * 200000)
    r = curl("-v", "-x", api_proxy.url, "-H", "Expect: 100-continue",
             "--data-binary", f"@{tmp_path / 'body'}",
             f"http://api.example.test:{upstream.port}/expect")
    assert r.returncode == 0, r.stderr
    assert "HTTP/1.1 100 Continue" in r.stderr
    assert len(json.loads(r.stdout)["body"]) == 200000


def test_max_connections_queues_the_rest(make_proxy, upstream):
    proxy = make_proxy("--allow", f"api.example.test:{upstream.port}",
                       "--resolve", "api.example.test:127.0.0.1",
                       "--allow-private", "127.0.0.0/8", "--max-connections", "2")
    held = [socket.create_connection(("127.0.0.1", proxy.port), timeout=20) for _ in range(2)]
    for s in held:
        s.sendall(f"GET http://api.example.test:{upstream.port}/held HTTP/1.1\r\n\r\n".encode())
        assert read_response(s)[0] == 200
    third = socket.create_connection(("127.0.0.1", proxy.port), timeout=20)
    third.sendall(f"GET http://api.example.test:{upstream.port}/third HTTP/1.1\r\n\r\n".encode())
    import select
    ready, _, _ = select.select([third], [], [], 0.5)
    assert not ready, "a third connection was served beyond --max-connections 2"
    held[0].close()  # a slot frees up: the queued client is accepted
    assert read_response(third)[0] == 200
    third.close()
    held[1].close()
