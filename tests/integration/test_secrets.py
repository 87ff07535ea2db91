# SPDX-License-Identifier: LGPL-2.1-or-later
"""Credential brokering through `hutch run --secret` (issue 5): the sandbox
holds a placeholder, hutch-proxy swaps in the real value for the secret's
hosts only (docs/secrets.md).

Upstreams are HTTPS echo servers on the host's loopback with a test CA
(python3-trustme) that hutch-proxy is told to trust with --upstream-ca;
the sandbox reaches them only through the proxy, by names mapped with
--resolve. Nothing is sent to any other address."""

import hashlib
import json
import re
import shutil
import socket
import ssl
import threading

import pytest

from proxyutil import EchoHandler, Upstream, _ThreadingServer
from test_proxy import find_undici

trustme = pytest.importorskip("trustme")

API = "api.secret.test"
OTHER = "other.secret.test"
PLAIN = "plain.secret.test"
REAL = "sk-proj-REALvalue0123456789abcdefXYZ"
PLACEHOLDER_RE = re.compile(r"^sk-proj-[A-Za-z0-9]{%d}$" % (len(REAL) - len("sk-proj-")))
CA_VARS = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "AWS_CA_BUNDLE",
]
BUNDLE = "/run/hutch/ca-bundle.pem"
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


class TlsUpstream:
    """The proxyutil echo server behind TLS with a trustme certificate for
    API and OTHER."""

    def __init__(self, ca):
        self.server = _ThreadingServer(("127.0.0.1", 0), EchoHandler, socket.AF_INET)
        self.server.lock = threading.Lock()
        self.server.requests = []
        self.server.connections = 0
        self.server.git_root = None
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(API, OTHER).configure_cert(ctx)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def requests(self):
        with self.server.lock:
            return list(self.server.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_upstream(ca):
    u = TlsUpstream(ca)
    yield u
    u.close()


@pytest.fixture(scope="module")
def plain_upstream():
    u = Upstream("127.0.0.1")
    yield u
    u.close()


def proxy_ready(sbx):
    # hutch-proxy with --ca-out-fd (the proxy side of issue 5).
    from proxyutil import PROXY_BIN

    import subprocess

    if not PROXY_BIN.is_file():
        pytest.skip("hutch-proxy is not built")
    out = subprocess.run([str(PROXY_BIN), "--help"], capture_output=True, text=True).stdout
    if "--ca-out-fd" not in out:
        pytest.skip("hutch-proxy has no --ca-out-fd yet")


def ca_file(sbx, ca):
    d = sbx.make_dir(name="ca")
    path = d / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    path.chmod(0o644)
    sbx.chown(path)
    return path


def secret_flags(sbx, ca, up, spec_suffix="", extra_hosts=()):
    flags = [
        "--secret",
        f"TOKEN@{API}:{up.port}{spec_suffix}",
        "--resolve",
        f"{API}:127.0.0.1",
        "--allow-private",
        "127.0.0.0/8",
        "--upstream-ca",
        str(ca_file(sbx, ca)),
    ]
    for h in extra_hosts:
        flags += ["--allow-host", h[0], "--resolve", f"{h[0].split(':')[0]}:127.0.0.1"]
    return flags


def run_json(sbx, flags, cmd, env=None, **kw):
    out = sbx.make_dir(name="out") / "outcome.json"
    r = sbx.run([*flags, "--json", str(out), "--", *cmd], env=env, **kw)
    outcome = json.loads(out.read_text()) if out.exists() and out.stat().st_size else None
    return r, outcome


# ------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "flags,env,needle",
    [
        (["--secret", "TOKEN@api.example"], {}, "secret 'TOKEN': environment variable TOKEN is not set"),
        (["--secret", "TOKEN@api.example"], {"TOKEN": ""}, "environment variable TOKEN is empty"),
        (["--secret", "TOKEN@api.example"], {"TOKEN": "short"}, "shorter than 8"),
        # The real value may not come in under another name.
        (
            ["--secret", "TOKEN=env:SRC@api.example", "--env-pass", "SRC"],
            {"SRC": REAL},
            "through the environment variable 'SRC'",
        ),
        (
            ["--secret", "TOKEN=env:SRC@api.example", "-e", f"OTHER={REAL}"],
            {"SRC": REAL},
            "through the environment variable 'OTHER'",
        ),
        (["--secret", "TOKEN@a..example"], {"TOKEN": REAL}, "invalid host pattern 'a..example'"),
        (["--secret", "TOKEN@api.example;colour=red"], {"TOKEN": REAL}, "unknown option 'colour'"),
        (["--secret", "TOKEN@api.example;methods=get"], {"TOKEN": REAL}, "invalid method 'get'"),
        (
            ["--secret", "TOKEN@api.example", "--secret", "TOKEN@b.example"],
            {"TOKEN": REAL},
            "secret 'TOKEN' in --secret 'TOKEN@b.example' is given twice",
        ),
        (["--secret", "TOKEN=file:/nonexistent/key@api.example"], {}, "cannot read the file '/nonexistent/key'"),
        (["--secret", "TOKEN@api.example", "--network", "none"], {"TOKEN": REAL}, "needs network mode 'allow'"),
        (["--upstream-ca", "/nonexistent/ca.pem"], {}, "upstream CA file '/nonexistent/ca.pem'"),
    ],
)
def test_bad_secret_input(sbx, flags, env, needle):
    r = sbx.run([*flags, "--", "true"], env=env)
    assert r.returncode == 125, r.stderr
    assert needle in r.stderr
    assert REAL not in r.stderr


def test_upstream_ca_that_is_no_certificate(sbx):
    """An --upstream-ca file that exists but holds no certificate fails the
    run before the command starts, every time: hutch-proxy loads it before
    it sends the CA certificate the sandbox's start waits for. Negative
    twin: the same run with a good file runs the command."""
    proxy_ready(sbx)
    d = sbx.make_dir(name="ca")
    bad = d / "bad.pem"
    bad.write_text("not a certificate\n")
    bad.chmod(0o644)
    sbx.chown(bad)
    good = ca_file(sbx, trustme.CA())
    for _ in range(3):
        r = sbx.run(
            ["--secret", "TOKEN@api.example", "--upstream-ca", str(bad), "--", "echo", "ran"],
            env={"TOKEN": REAL},
        )
        assert r.returncode == 125, r.stderr
        assert f"failed to load --upstream-ca '{bad}'" in r.stderr
        assert "ran" not in r.stdout and REAL not in r.stderr
    r = sbx.run(
        ["--secret", "TOKEN@api.example", "--upstream-ca", str(good), "--", "echo", "ran"],
        env={"TOKEN": REAL},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ran\n"


def test_empty_secret_file(sbx):
    d = sbx.make_dir(name="keys")
    key = d / "key"
    key.write_text("\n")
    sbx.chown(key)
    r = sbx.run(["--secret", f"TOKEN=file:{key}@api.example", "--", "true"])
    assert r.returncode == 125
    assert f"secret 'TOKEN': the file '{key}' is empty" in r.stderr


def test_unreadable_secret_file(sbx):
    d = sbx.make_dir(name="keys")
    key = d / "key"
    if sbx.switches_user:
        key.write_text(REAL)
        key.chmod(0o600)  # owned by root, the caller is not
        expected = "Permission denied"
    else:
        # Root reads any file: a directory is what it cannot read.
        key.mkdir()
        expected = "Is a directory"
    r = sbx.run(["--secret", f"TOKEN=file:{key}@api.example", "--", "true"])
    assert r.returncode == 125
    assert expected in r.stderr and REAL not in r.stderr


# ------------------------------------------------------------ inside the sandbox


def test_placeholder_env_and_trust(sbx, ca, tls_upstream):
    proxy_ready(sbx)
    script = "env; echo ===; cat " + SYSTEM_BUNDLE + "; echo ===; cat " + BUNDLE
    r, o = run_json(sbx, secret_flags(sbx, ca, tls_upstream), ["sh", "-c", script], env={"TOKEN": REAL})
    assert r.returncode == 0, r.stderr
    env_text, system, bundle = r.stdout.split("===\n")
    env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
    assert PLACEHOLDER_RE.match(env["TOKEN"]), env["TOKEN"]
    assert env["TOKEN"] != REAL
    for v in CA_VARS:
        assert env[v] == BUNDLE
    assert REAL not in r.stdout
    # The bundle: the host's CAs, then the sandbox CA, over the system path.
    host = open(SYSTEM_BUNDLE).read()
    assert system == bundle
    assert bundle.startswith(host.rstrip("\n"))
    extra = bundle[len(host) :]
    assert extra.count("-----BEGIN CERTIFICATE-----") == 1
    assert "PRIVATE KEY" not in bundle


def test_bundle_cannot_be_changed_from_inside(sbx, ca, tls_upstream):
    """init copies the host's bundle into its own tmpfs and appends the
    sandbox CA; the command can change neither the copy (read-only tmpfs)
    nor what is bound over the system path, and the host's file stays as it
    was. Negative twin: the same probe creates a file in /tmp."""
    proxy_ready(sbx)
    with open(SYSTEM_BUNDLE, "rb") as f:
        before = hashlib.sha256(f.read()).hexdigest()
    flags = secret_flags(sbx, ca, tls_upstream)
    # EACCES where landlock refuses first; the mounts are read-only anyway.
    for path in (BUNDLE, SYSTEM_BUNDLE):
        assert sbx.fact("can-open", path, "w", flags=flags, env={"TOKEN": REAL}) in ("EROFS", "EACCES")
        assert sbx.fact("create", path, flags=flags, env={"TOKEN": REAL}) in ("EROFS", "EACCES")
    assert sbx.fact("create", "/run/hutch/new", flags=flags, env={"TOKEN": REAL}) in ("EROFS", "EACCES")
    for path in ("/run/hutch", SYSTEM_BUNDLE):
        assert sbx.fact("statfs", path, flags=flags, env={"TOKEN": REAL}).split()[1].startswith("flags=ro,")
    assert sbx.fact("create", "/tmp/new", flags=flags, env={"TOKEN": REAL}) == "ok"
    with open(SYSTEM_BUNDLE, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == before


def test_placeholder_is_new_for_every_sandbox(sbx, ca, tls_upstream):
    proxy_ready(sbx)
    seen = set()
    for _ in range(3):
        r = sbx.run([*secret_flags(sbx, ca, tls_upstream), "--", "sh", "-c", "echo $TOKEN"], env={"TOKEN": REAL})
        assert r.returncode == 0, r.stderr
        seen.add(r.stdout.strip())
    assert len(seen) == 3


def test_real_value_is_nowhere_the_sandbox_can_read(sbx, ca, tls_upstream):
    proxy_ready(sbx)
    d = sbx.make_dir(name="keys")
    key = d / "key"
    key.write_text(REAL + "\n")
    sbx.chown(key)
    # Both sources: the environment (passed in with --env-pass too, which
    # the placeholder must win over) and a file.
    flags = secret_flags(sbx, ca, tls_upstream) + [
        "--env-pass",
        "TOKEN",
        "--secret",
        f"FILEKEY=file:{key}@{OTHER}",
    ]
    # The needle comes on stdin into /dev/shm (not searched) for grep -f,
    # so no command line holds it.
    script = (
        "cat > /dev/shm/needle; test -s /dev/shm/needle || exit 3; "
        "grep -rlsF -f /dev/shm/needle /etc /root /tmp /run /usr/local /proc/self/environ "
        "/proc/1/environ /proc/[0-9]*/cmdline /proc/[0-9]*/environ; "
        'echo "$TOKEN $FILEKEY"'
    )
    r, o = run_json(sbx, flags, ["sh", "-c", script], env={"TOKEN": REAL}, input=REAL + "\n")
    assert r.returncode == 0, r.stderr
    assert REAL not in r.stdout and REAL not in r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout  # grep found nothing
    token, filekey = lines[0].split()
    assert PLACEHOLDER_RE.match(token) and PLACEHOLDER_RE.match(filekey)
    assert token != filekey


# ------------------------------------------------------------ end to end


def test_curl_gets_the_real_value_upstream_and_the_placeholder_back(sbx, ca, tls_upstream):
    proxy_ready(sbx)
    url = f"https://{API}:{tls_upstream.port}/e2e-curl"
    script = f'echo "$TOKEN"; curl -sS -H "Authorization: Bearer $TOKEN" {url}'
    log = sbx.make_dir(name="audit") / "audit.jsonl"
    flags = secret_flags(sbx, ca, tls_upstream) + ["--audit-log", str(log)]
    r, o = run_json(sbx, flags, ["sh", "-c", script], env={"TOKEN": REAL})
    assert r.returncode == 0, r.stderr
    placeholder, body = r.stdout.split("\n", 1)
    echoed = dict(json.loads(body)["headers"])
    # The upstream echoes what it got (the real value); the proxy turns it
    # back into the placeholder on the way in.
    assert echoed["Authorization"] == f"Bearer {placeholder}"
    assert REAL not in r.stdout
    got = [q for q in tls_upstream.requests if q["path"] == "/e2e-curl"]
    assert dict(got[-1]["headers"])["Authorization"] == f"Bearer {REAL}"
    assert o["denied"] == []
    audit = log.read_text()
    assert REAL not in audit
    assert any(d.get("intercepted") and d.get("secrets") == ["TOKEN"] for d in map(json.loads, audit.splitlines()))


def test_python_urllib_trusts_the_sandbox_ca(sbx, ca, tls_upstream):
    proxy_ready(sbx)
    url = f"https://{API}:{tls_upstream.port}/e2e-python"
    code = (
        "import os, urllib.request as u; "
        f"q = u.Request('{url}', headers={{'X-Api-Key': os.environ['TOKEN']}}); "
        "print(u.urlopen(q, timeout=20).status)"
    )
    r, o = run_json(sbx, secret_flags(sbx, ca, tls_upstream), ["python3", "-c", code], env={"TOKEN": REAL})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "200"
    got = [q for q in tls_upstream.requests if q["path"] == "/e2e-python"]
    assert dict(got[-1]["headers"])["X-Api-Key"] == REAL


def test_ssl_cert_dir_users_trust_the_sandbox_ca(sbx, ca, tls_upstream):
    """A client that only looks in hashed directories (SSL_CERT_FILE
    pointing nowhere) trusts the sandbox CA through SSL_CERT_DIR, whose
    first entry holds it as <subject-hash>.0. Negative twin: with only the
    system directory it does not."""
    proxy_ready(sbx)
    url = f"https://{API}:{tls_upstream.port}/e2e-certdir"
    code = (
        "import urllib.request as u, sys\n"
        "try:\n"
        f"    print(u.urlopen('{url}', timeout=20).status)\n"
        "except Exception as e:\n"
        "    print('failed', type(e).__name__, e)\n"
    )
    script = (
        'echo "dir=$SSL_CERT_DIR"; ls /run/hutch/certs; '
        f'SSL_CERT_FILE=/nonexistent python3 -c "$0"; '
        f'SSL_CERT_FILE=/nonexistent SSL_CERT_DIR=/etc/ssl/certs python3 -c "$0"'
    )
    r, o = run_json(
        sbx, secret_flags(sbx, ca, tls_upstream), ["sh", "-c", script, code], env={"TOKEN": REAL}
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "dir=/run/hutch/certs:/etc/ssl/certs"
    assert re.fullmatch(r"[0-9a-f]{8}\.0", lines[1]), lines
    assert lines[2] == "200", lines
    assert lines[3].startswith("failed") and "CERTIFICATE_VERIFY_FAILED" in lines[3], lines


def test_header_scope(sbx, ca, tls_upstream):
    proxy_ready(sbx)
    url = f"https://{API}:{tls_upstream.port}/e2e-scope"
    # ;header= replaces the default lanes: X-Api-Key is one of those, so
    # here the placeholder in it is a tripwire (issue 14), never sent.
    script = (f'curl -sS -o /dev/null -H "X-Custom: Bearer $TOKEN" {url}; '
              f'curl -sS -w "%{{http_code}}" -o /dev/null -H "X-Api-Key: $TOKEN" {url}-2')
    r, o = run_json(
        sbx,
        secret_flags(sbx, ca, tls_upstream, ";header=X-Custom"),
        ["sh", "-c", script],
        env={"TOKEN": REAL},
    )
    assert r.returncode == 0, r.stderr
    got = dict([q for q in tls_upstream.requests if q["path"] == "/e2e-scope"][-1]["headers"])
    assert got["X-Custom"] == f"Bearer {REAL}"
    assert r.stdout == "403"
    assert not [q for q in tls_upstream.requests if q["path"] == "/e2e-scope-2"]


def test_other_allowed_host_gets_the_placeholder(sbx, ca, tls_upstream):
    proxy_ready(sbx)
    url = f"https://{OTHER}:{tls_upstream.port}/e2e-other"
    flags = secret_flags(sbx, ca, tls_upstream, extra_hosts=[(f"{OTHER}:{tls_upstream.port}",)])
    # OTHER is an opaque tunnel: the client must trust the test CA itself.
    cafile = [f for f in flags if f.endswith("upstream-ca.pem")][0]
    script = f'echo "$TOKEN"; curl -sS -o /dev/null --cacert {cafile} -H "Authorization: Bearer $TOKEN" {url}'
    flags += ["-v", f"{cafile}:{cafile}:ro"]
    r, o = run_json(sbx, flags, ["sh", "-c", script], env={"TOKEN": REAL})
    assert r.returncode == 0, r.stderr
    placeholder = r.stdout.strip()
    got = dict([q for q in tls_upstream.requests if q["path"] == "/e2e-other"][-1]["headers"])
    assert got["Authorization"] == f"Bearer {placeholder}"


def test_placeholder_to_a_third_host_is_a_tripwire(sbx, ca, tls_upstream, plain_upstream):
    proxy_ready(sbx)
    flags = secret_flags(sbx, ca, tls_upstream, extra_hosts=[(f"{PLAIN}:{plain_upstream.port}",)])
    url = f"http://{PLAIN}:{plain_upstream.port}/e2e-tripwire"
    script = f'curl -sS -o /dev/null -w "%{{http_code}}" -H "Authorization: Bearer $TOKEN" {url}'
    r, o = run_json(sbx, flags, ["sh", "-c", script], env={"TOKEN": REAL})
    assert r.stdout == "403", r.stderr
    assert not [q for q in plain_upstream.requests if q["path"] == "/e2e-tripwire"]
    assert any(d["host"] == PLAIN and "tripwire" in d["reason"] and "TOKEN" in d["reason"] for d in o["denied"]), o
    assert REAL not in json.dumps(o)


# ------------------------------------------------------------ other clients
#
# Each client sends the placeholder to API (intercepted: the sandbox CA
# signs, and the client trusts it only through what hutch sets up) and,
# as the negative twin, to OTHER (allowed, no secret: an opaque tunnel, so
# that one request names the test CA itself). The script prints one JSON
# line: the placeholder it held, API's status and body, OTHER's status.


def client_flags(sbx, ca, up):
    flags = secret_flags(sbx, ca, up, extra_hosts=[(f"{OTHER}:{up.port}",)])
    cafile = [f for f in flags if f.endswith("upstream-ca.pem")][0]
    return flags + ["-v", f"{cafile}:{cafile}:ro"], cafile


def urlpath(url):
    return "/" + url.split("/", 3)[3]


def assert_swapped_both_ways(up, r, o, api_path, other_path):
    assert r.returncode == 0, r.stderr
    assert REAL not in r.stdout and REAL not in r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    placeholder = out["placeholder"]
    assert PLACEHOLDER_RE.match(placeholder) and placeholder != REAL, placeholder
    assert out["status"] == 200 and out["other"] == 200, out
    # API: the real value upstream, the placeholder back in the body.
    got = [q for q in up.requests if q["path"] == api_path]
    assert len(got) == 1, got
    assert dict(got[0]["headers"])["Authorization"] == f"Bearer {REAL}"
    echoed = json.loads(out["body"])
    assert echoed["path"] == api_path
    assert dict(echoed["headers"])["Authorization"] == f"Bearer {placeholder}"
    # OTHER: the placeholder, untouched.
    got = [q for q in up.requests if q["path"] == other_path]
    assert len(got) == 1, got
    assert dict(got[0]["headers"])["Authorization"] == f"Bearer {placeholder}"
    assert o["denied"] == []


PY_REQUESTS = r"""
import json, os, sys
import requests
api, other, cafile = sys.argv[1:]
tok = os.environ["TOKEN"]
h = {"Authorization": "Bearer " + tok}
a = requests.get(api, headers=h, timeout=20)
b = requests.get(other, headers=h, timeout=20, verify=cafile)
print(json.dumps({"placeholder": tok, "status": a.status_code, "body": a.text, "other": b.status_code}))
"""


def test_python_requests_trusts_the_sandbox_ca(sbx, ca, tls_upstream):
    proxy_ready(sbx)
    flags, cafile = client_flags(sbx, ca, tls_upstream)
    api = f"https://{API}:{tls_upstream.port}/e2e-requests-{sbx.mode}"
    other = f"https://{OTHER}:{tls_upstream.port}/e2e-requests-other-{sbx.mode}"
    r, o = run_json(sbx, flags, ["python3", "-c", PY_REQUESTS, api, other, cafile], env={"TOKEN": REAL})
    assert_swapped_both_ways(tls_upstream, r, o, urlpath(api), urlpath(other))


NODE_UNDICI_SECRET = r"""
const fs = require('fs');
const { ProxyAgent, fetch } = require(process.argv[1]);
const [, , api, other, cafile] = process.argv;
(async () => {
  const tok = process.env.TOKEN;
  const headers = { Authorization: 'Bearer ' + tok };
  // No TLS options: node's defaults, which NODE_EXTRA_CA_CERTS extends.
  const a = await fetch(api, { headers, dispatcher: new ProxyAgent(process.env.HTTPS_PROXY) });
  const body = await a.text();
  const opaque = new ProxyAgent({ uri: process.env.HTTPS_PROXY,
                                  requestTls: { ca: fs.readFileSync(cafile) } });
  const b = await fetch(other, { headers, dispatcher: opaque });
  await b.text();
  console.log(JSON.stringify({ placeholder: tok, status: a.status, body, other: b.status }));
})().catch(e => { console.error(e); process.exit(1); });
"""


def test_node_fetch_trusts_the_sandbox_ca(sbx, ca, tls_upstream):
    proxy_ready(sbx)
    undici = find_undici()
    if undici is None:
        pytest.skip("undici could not be installed with npm (node 20's fetch needs it for proxies)")
    # A copy the caller can read, whoever the caller is.
    copy = sbx.make_dir(name="undici") / "undici"
    shutil.copytree(undici, copy)
    sbx.chown(copy)
    flags, cafile = client_flags(sbx, ca, tls_upstream)
    flags += ["-v", f"{copy}:/opt/undici:ro"]
    api = f"https://{API}:{tls_upstream.port}/e2e-node-{sbx.mode}"
    other = f"https://{OTHER}:{tls_upstream.port}/e2e-node-other-{sbx.mode}"
    cmd = ["node", "-e", NODE_UNDICI_SECRET, "/opt/undici", api, other, cafile]
    r, o = run_json(sbx, flags, cmd, env={"TOKEN": REAL}, timeout=60)
    assert_swapped_both_ways(tls_upstream, r, o, urlpath(api), urlpath(other))

