# SPDX-License-Identifier: LGPL-2.1-or-later
"""Transparent DNS (issue 22): `hutch run --dns transparent` gives tools
that ignore the proxy variables (getent, raw sockets, git without
http.proxy) a resolver inside the sandbox. It answers the exact
allowlisted names, and only those, with synthetic addresses on the
sandbox's loopback where hutch-proxy accepts; the proxy learns the name
from the address and applies the CONNECT rules (docs/network.md,
"Transparent DNS").

Upstreams are servers on the host's loopback (proxyutil.Upstream, a TLS
echo server with a trustme CA); the sandbox reaches them only through the
proxy, by names mapped with --resolve and the loopback range allowed with
--allow-private. Every command in the sandbox runs with the proxy
variables removed. Nothing is sent to any other address."""

import json
import os
import shutil
import subprocess

import pytest

from proxyutil import Upstream
from test_secrets import API, OTHER, PLACEHOLDER_RE, REAL, TlsUpstream, ca_file

trustme = pytest.importorskip("trustme")

NAME = "allowed.dns.test"
PROXY_VARS = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NODE_USE_ENV_PROXY"]
# The proxy variables gone: what a tool that ignores them sees.
NOPROXY = ["env"] + [a for v in PROXY_VARS for a in ("-u", v, "-u", v.lower())]

RAW_GET = """
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
try:
    s = socket.create_connection((host, port), timeout=10)
except OSError as e:
    print("connect-failed", type(e).__name__, e.errno)
    sys.exit(3)
s.sendall(("GET /raw HTTP/1.1\\r\\nHost: %s:%d\\r\\nConnection: close\\r\\n\\r\\n" % (host, port)).encode())
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(data.decode("latin-1"))
"""


@pytest.fixture(scope="module")
def second():
    """Another server on the host's loopback that no entry allows."""
    u = Upstream("127.0.0.1")
    yield u
    u.close()


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


def flags(port, name=NAME, extra=()):
    return [
        "--dns",
        "transparent",
        "--allow-host",
        f"{name}:{port}",
        "--resolve",
        f"{name}:127.0.0.1",
        "--allow-private",
        "127.0.0.0/8",
        *extra,
    ]


def run(sbx, fl, cmd, env=None, **kw):
    """`hutch run FLAGS --json OUT --audit-log LOG -- env -u ... CMD`:
    the result, the outcome and the audit log's lines."""
    d = sbx.make_dir(name="out")
    out, audit = d / "outcome.json", d / "audit.jsonl"
    r = sbx.run(
        [*fl, "--json", str(out), "--audit-log", str(audit), "--", *NOPROXY, *cmd],
        env=env,
        **kw,
    )
    outcome = json.loads(out.read_text()) if out.exists() and out.stat().st_size else None
    lines = [json.loads(x) for x in audit.read_text().splitlines()] if audit.exists() else []
    return r, outcome, lines


def test_getent_answers_allowed_names_only(sbx, upstream):
    script = (
        f"env | grep -i _proxy; cat /etc/resolv.conf; getent hosts {NAME}; echo rc=$?; "
        "getent hosts other.dns.test; echo rc=$?; "
        f"python3 -c 'import socket; socket.getaddrinfo(\"{NAME}\", 80, socket.AF_INET6)' "
        "2>/dev/null; echo v6rc=$?"
    )
    r, o, audit = run(sbx, flags(upstream.port), ["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert "http_proxy=" not in r.stdout.lower() and "all_proxy=" not in r.stdout.lower()
    assert "nameserver 127.0.0.53" in r.stdout
    lines = r.stdout.splitlines()
    # The allowed name: one synthetic address on the sandbox's loopback.
    answer = lines[lines.index("rc=0") - 1].split()
    assert answer[0].startswith("127.77.") and answer[1] == NAME
    # Negative twin: any other name gets no address (NXDOMAIN: getent 2),
    # with an audit line and a refusal in the outcome.
    assert "rc=2" in lines
    assert "other.dns.test" not in r.stdout
    refused = [a for a in audit if a.get("method") == "DNS"]
    assert refused and all(a["decision"] == "deny" for a in refused)
    assert {a["host"] for a in refused} == {"other.dns.test"}
    assert "dns refused 'other.dns.test'" in refused[0]["reason"]
    assert [d["host"] for d in o["denied"]] == ["other.dns.test"]
    assert "hutch: refused other.dns.test " in r.stderr
    # No IPv6 address: the name exists (no refusal for it), no AAAA record.
    assert "v6rc=1" in lines
    assert not any(a["host"] == NAME for a in refused)


def test_without_transparent_mode_there_is_no_dns(sbx, upstream):
    """Negative twin: the default mode is unchanged, a name resolves only
    inside the proxy."""
    fl = [a for a in flags(upstream.port) if a not in ("--dns", "transparent")]
    r, _, _ = run(sbx, fl, ["sh", "-c", f"getent hosts {NAME}; echo rc=$?"])
    assert r.returncode == 0, r.stderr
    assert "rc=0" not in r.stdout and "127.77." not in r.stdout


def test_raw_tcp_client_reaches_the_allowed_port(sbx, upstream):
    n = len(upstream.requests)
    r, o, audit = run(sbx, flags(upstream.port), ["python3", "-c", RAW_GET, NAME, str(upstream.port)])
    assert r.returncode == 0, r.stderr + r.stdout
    assert "HTTP/1.1 200 OK" in r.stdout and "X-Upstream: yes" in r.stdout
    assert any(q["path"] == "/raw" for q in upstream.requests[n:])
    # The proxy decided it as a CONNECT to the name and port would be.
    tcp = [a for a in audit if a.get("method") == "TCP"]
    assert len(tcp) == 1
    assert tcp[0]["host"] == NAME and tcp[0]["port"] == upstream.port
    assert tcp[0]["decision"] == "allow" and tcp[0]["rule"] == f"{NAME}:{upstream.port}"
    assert tcp[0]["address"] == "127.0.0.1"
    assert o["denied"] == []


def test_port_not_allowed_on_an_allowed_name_is_refused(sbx, upstream, second):
    """Negative twin: the name resolves, but only its allowed ports lead
    anywhere; the other server never sees a connection."""
    before = second.connections
    r, _, _ = run(sbx, flags(upstream.port), ["python3", "-c", RAW_GET, NAME, str(second.port)])
    assert r.returncode == 3, r.stdout + r.stderr
    assert "connect-failed ConnectionRefusedError" in r.stdout
    assert second.connections == before


def test_direct_connections_do_not_leave(sbx, upstream):
    """Negative twin: nothing bypasses the proxy. The upstream's real
    address is the sandbox's own loopback there (nothing listens), and any
    other address has no route."""
    n = upstream.connections
    r, _, _ = run(
        sbx, flags(upstream.port), ["python3", "-c", RAW_GET, "127.0.0.1", str(upstream.port)]
    )
    assert r.returncode == 3 and "ConnectionRefusedError" in r.stdout, r.stdout
    r, _, _ = run(sbx, flags(upstream.port), ["python3", "-c", RAW_GET, "192.0.2.1", "80"])
    assert r.returncode == 3 and "connect-failed" in r.stdout, r.stdout
    assert "errno 101" in r.stdout.lower() or " 101" in r.stdout  # ENETUNREACH
    assert upstream.connections == n


def test_deny_rule_and_wildcards_get_no_address(sbx, upstream):
    fl = flags(
        upstream.port,
        extra=[
            "--allow-host",
            "blocked.dns.test",
            "--deny-host",
            "blocked.dns.test",
            "--allow-host",
            "*.wild.dns.test",
        ],
    )
    script = "getent hosts blocked.dns.test; echo rc=$?; getent hosts a.wild.dns.test; echo rc=$?"
    r, _, audit = run(sbx, fl, ["sh", "-c", script])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["rc=2", "rc=2"]
    reasons = {a["host"]: a["reason"] for a in audit if a.get("method") == "DNS"}
    assert "deny rule 'blocked.dns.test'" in reasons["blocked.dns.test"]
    assert "exact names only" in reasons["a.wild.dns.test"]


@pytest.mark.parametrize(
    "fl, needle",
    [
        (["--dns", "transparent", "--network", "none"], "needs network mode 'allow'"),
        (["--dns", "transparent"], "needs network mode 'allow'"),
        (["--dns", "magic", "--allow-host", "a.test"], "invalid DNS mode 'magic'"),
        (
            ["--dns", "transparent"] + [a for i in range(25) for a in ("--allow-host", f"n{i}.test")],
            "transparent DNS serves at most 48 host:port pairs",
        ),
    ],
)
def test_bad_input(sbx, fl, needle):
    r = sbx.run([*fl, "--", "true"])
    assert r.returncode == 125
    assert needle in r.stderr


def test_secret_host_gets_the_real_key_only_through_the_proxy(sbx, ca):
    """A secret's host through a raw TLS client without proxy variables:
    the proxy terminates TLS (the sandbox trusts its CA), puts the real
    value in, and masks it in the answer."""
    up = TlsUpstream(ca)
    try:
        fl = [
            "--dns",
            "transparent",
            "--secret",
            f"TOKEN@{API}:{up.port}",
            "--resolve",
            f"{API}:127.0.0.1",
            "--allow-private",
            "127.0.0.0/8",
            "--upstream-ca",
            str(ca_file(sbx, ca)),
        ]
        script = (
            f'curl -sS --noproxy "*" -H "Authorization: Bearer $TOKEN" https://{API}:{up.port}/v1/x; '
            'echo; echo "placeholder=$TOKEN"'
        )
        r, _, audit = run(sbx, fl, ["sh", "-c", script], env={"TOKEN": REAL})
        assert r.returncode == 0, r.stderr
        assert REAL not in r.stdout and REAL not in r.stderr
        placeholder = r.stdout.split("placeholder=")[1].strip()
        assert PLACEHOLDER_RE.match(placeholder)
        echoed = json.loads(r.stdout.split("\n")[0])
        # The value came back masked as the placeholder.
        assert ["Authorization", f"Bearer {placeholder}"] in echoed["headers"]
        got = [q for q in up.requests if q["path"] == "/v1/x"]
        assert got and ["Authorization", f"Bearer {REAL}"] in got[0]["headers"]
        tcp = [a for a in audit if a.get("method") == "TCP"]
        assert tcp and tcp[0]["intercepted"] is True
        assert any(a.get("secrets") == ["TOKEN"] for a in audit)
        assert REAL not in json.dumps(audit)
    finally:
        up.close()


def test_secret_placeholder_to_another_host_stays_a_placeholder(sbx, ca, upstream):
    """Negative twin: the real value never goes to a host that is not the
    secret's, even one reached transparently."""
    up = TlsUpstream(ca)
    try:
        fl = flags(
            upstream.port,
            extra=[
                "--secret",
                f"TOKEN@{API}:{up.port}",
                "--resolve",
                f"{API}:127.0.0.1",
                "--upstream-ca",
                str(ca_file(sbx, ca)),
            ],
        )
        n = len(upstream.requests)
        script = (
            f'curl -sS --noproxy "*" -H "Authorization: Bearer $TOKEN" http://{NAME}:{upstream.port}/leak'
        )
        r, _, _ = run(sbx, fl, ["sh", "-c", script], env={"TOKEN": REAL})
        assert r.returncode == 0, r.stderr
        got = [q for q in upstream.requests[n:] if q["path"] == "/leak"]
        assert got and REAL not in json.dumps(got)
        assert REAL not in r.stdout
    finally:
        up.close()


@pytest.mark.skipif(not shutil.which("git"), reason="git is not installed")
def test_git_clone_over_https_without_proxy_variables(sbx, ca, tmp_path):
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    src, root = tmp_path / "src", tmp_path / "root"
    root.mkdir()
    subprocess.run([*git, "init", "-q", str(src)], check=True, env=env)
    (src / "README").write_text("transparent\n")
    subprocess.run([*git, "-C", str(src), "add", "README"], check=True, env=env)
    subprocess.run([*git, "-C", str(src), "commit", "-qm", "one"], check=True, env=env)
    subprocess.run([*git, "clone", "-q", "--bare", str(src), str(root / "repo.git")], check=True, env=env)
    up = TlsUpstream(ca)
    up.server.git_root = root
    try:
        cadir = ca_file(sbx, ca).parent
        fl = [
            "--dns",
            "transparent",
            "--allow-host",
            f"{OTHER}:{up.port}",
            "--resolve",
            f"{OTHER}:127.0.0.1",
            "--allow-private",
            "127.0.0.0/8",
            "-v",
            f"{cadir}:/ca:ro",
        ]
        script = (
            "cd /tmp && GIT_SSL_CAINFO=/ca/upstream-ca.pem "
            f"git clone -q https://{OTHER}:{up.port}/git/repo.git r && cat r/README"
        )
        r, _, audit = run(sbx, fl, ["sh", "-c", script])
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "transparent"
        assert any(q["method"] == "POST" for q in up.requests)  # git-upload-pack
        tcp = [a for a in audit if a.get("method") == "TCP"]
        assert tcp and all(a["host"] == OTHER and a["decision"] == "allow" for a in tcp)
    finally:
        up.close()


# ------------------------------------------------- persistent sandboxes


def lookup(s, name, host):
    """`getent hosts HOST` in sandbox NAME: (exit status, address or None)."""
    r = s.exec(name, "getent", "hosts", host)
    return r.returncode, (r.stdout.split()[0] if r.stdout.strip() else None)


def test_persistent_sandbox_and_live_updates(store, upstream):
    """`hutch create --dns transparent` keeps the mode; a live `hutch
    update` narrows the resolver at once, while a name it adds gets an
    address only from the next start (its listener is made then)."""
    s = store
    s.create("dns", *flags(upstream.port))
    assert lookup(s, "dns", NAME)[1].startswith("127.77.")
    r = s.exec("dns", *NOPROXY, "python3", "-c", RAW_GET, NAME, str(upstream.port))
    assert r.returncode == 0 and "X-Upstream: yes" in r.stdout, r.stdout + r.stderr
    assert lookup(s, "dns", "new.dns.test") == (2, None)

    r = s.hutch("update", "dns", "--allow-host", f"new.dns.test:{upstream.port}", "--resolve",
                "new.dns.test:127.0.0.1")
    assert r.returncode == 0, r.stderr
    # Running: no listener for the new name yet, so no address either.
    assert lookup(s, "dns", "new.dns.test") == (2, None)
    # Narrowing applies at once: the name is refused, so is its port.
    r = s.hutch("update", "dns", "--deny-host", NAME)
    assert r.returncode == 0, r.stderr
    assert lookup(s, "dns", NAME) == (2, None)
    n = len(upstream.requests)
    r = s.exec("dns", *NOPROXY, "python3", "-c", RAW_GET, "127.77.0.1", str(upstream.port))
    assert "X-Upstream" not in r.stdout
    assert len(upstream.requests) == n
    # After a restart the table is the stored policy's.
    s.hutch("stop", "dns")
    assert lookup(s, "dns", "new.dns.test")[1].startswith("127.77.")
    assert lookup(s, "dns", NAME) == (2, None)


# A host whose resolv.conf is systemd-resolved's symlink into /run: an
# overlay of /run with the stub file and one of /etc with the symlink, in a
# private mount namespace of this test only (the host's /etc and /run are
# untouched).
SYMLINKED_ETC = """
set -e
d=$1; shift
mkdir -p "$d/ru" "$d/rw" "$d/u" "$d/w" "$d/m"
mount -t overlay overlay -o "lowerdir=/run,upperdir=$d/ru,workdir=$d/rw" /run
mkdir -p /run/systemd/resolve
cp /etc/resolv.conf /run/systemd/resolve/stub-resolv.conf
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$d/u,workdir=$d/w" "$d/m"
rm -f "$d/m/resolv.conf"
ln -s ../run/systemd/resolve/stub-resolv.conf "$d/m/resolv.conf"
mount --bind "$d/m" /etc
exec "$@"
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a private mount namespace")
def test_host_resolv_conf_symlink_into_run(sbx, upstream, tmp_path):
    """The sandbox's /run is hutch's own: the symlink's target is made
    there and covered, so the resolver is found as on any host."""
    script = f"readlink /etc/resolv.conf; cat /etc/resolv.conf; getent hosts {NAME}"
    argv = sbx.argv([*flags(upstream.port), "--", *NOPROXY, "sh", "-c", script])
    r = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", SYMLINKED_ETC, "sh", str(tmp_path), *argv],
        env=sbx.env(),
        cwd=str(sbx.base_dir),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "../run/systemd/resolve/stub-resolv.conf"
    assert "nameserver 127.0.0.53" in lines
    assert lines[-1].split()[0].startswith("127.77.") and lines[-1].split()[1] == NAME


def test_bash_completion_offers_the_flag_and_its_modes():
    from test_cli_help import bash_complete, hutch_bin

    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    assert "--dns" in bash_complete([hutch_bin(), "run", "--dn"], 2, env)
    assert bash_complete([hutch_bin(), "run", "--dns", ""], 3, env) == ["proxy", "transparent"]
