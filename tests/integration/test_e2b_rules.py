# SPDX-License-Identifier: LGPL-2.1-or-later
"""E2B's `network.rules` on `hutch serve --e2b` (docs/e2b.md
"network.rules"): a rule that sets a header for one host becomes a hutch
secret bound to that host and header. Driven by the real `e2b` SDK
(e2b-control.mjs): the sandbox sees only a placeholder in
$E2B_RULE_<HOST>_<HEADER>, the loopback TLS upstream gets the real value
from hutch-proxy, the value is in no record or answer of the API; the
negative twins: the placeholder sent to another allowed host is a
tripwire (that host never sees it), and a rule for a host outside the
sandbox's allowlist, a transform other than headers, a value that cannot
be brokered or rules without network are refused with 400 naming the
member, nothing made. As root and as the unprivileged user."""

import json
import re

import pytest

from test_e2b_control import e2b, e2b_sdk, name_of  # noqa: F401 (fixtures)
from test_secrets import TlsUpstream

trustme = pytest.importorskip("trustme")

API = "api.secret.test"
OTHER = "other.secret.test"
REAL = "sk-rule-REALvalue0123456789abcdefXYZ"


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_upstream(ca):
    u = TlsUpstream(ca)
    yield u
    u.close()


def start(e2b, ca, up):
    d = e2b.runner.make_dir(name="ca")
    ca_path = d / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    ca_path.chmod(0o644)
    e2b.runner.chown(ca_path)
    p = up.port
    return e2b.start("--allow-host", f"{API}:{p}", "--allow-host", f"{OTHER}:{p}",
                     "--resolve", f"{API}:127.0.0.1", "--resolve", f"{OTHER}:127.0.0.1",
                     "--allow-private", "127.0.0.0/8", "--upstream-ca", str(ca_path))


def rule(host, headers):
    return {"network": {"rules": {host: [{"transform": {"headers": headers}}]}}}


def var_of(host, header):
    return "E2B_RULE_" + re.sub(r"[^A-Z0-9]", "_", host.upper()) + "_" + re.sub(r"[^A-Z0-9]", "_", header.upper())


def test_rule_is_a_brokered_secret(e2b, ca, tls_upstream):
    srv = start(e2b, ca, tls_upstream)
    p = tls_upstream.port
    host = f"{API}:{p}"
    var = var_of(host, "Authorization")
    sid = srv.sdk("create", rule(host, {"Authorization": f"Bearer {REAL}"}))["sandboxId"]
    script = (f'echo "${var}"; curl -sS -H "Authorization: Bearer ${var}" https://{API}:{p}/rule-api; echo; '
              f'curl -ksS -o /dev/null -w "%{{http_code}}" -H "Authorization: Bearer ${var}" '
              f'https://{OTHER}:{p}/rule-other; true')
    r = srv.hutch("exec", name_of(sid), "--", "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    placeholder, echoed, _ = r.stdout.split("\n", 2)
    # the sandbox has a placeholder of the value's shape, never the value
    assert placeholder and placeholder != REAL and len(placeholder) == len(REAL), placeholder
    assert REAL not in r.stdout
    # the upstream got the real value in that header
    got = [q for q in tls_upstream.requests if q["path"] == "/rule-api"]
    assert got and dict(got[-1]["headers"])["Authorization"] == f"Bearer {REAL}"
    assert json.loads(echoed)["path"] == "/rule-api"
    # negative twin: another allowed host never gets the value (at most
    # the placeholder)
    for q in tls_upstream.requests:
        if q["path"] == "/rule-other":
            assert REAL not in json.dumps(q), q
    # the value is in no answer of the API, nor in the record
    info = srv.request("GET", f"/sandboxes/{sid}", headers={"X-API-Key": srv_key(srv)})
    assert info[0] == 200 and REAL.encode() not in info[2]
    assert REAL not in (srv.home / "e2b" / f"{sid}.json").read_text()
    # kill: the secrets folder goes with the sandbox
    assert (srv.home / "e2b" / f"{sid}.secrets").is_dir()
    assert srv.sdk("kill", {"id": sid})["killed"] is True
    assert not (srv.home / "e2b" / f"{sid}.secrets").exists()
    srv.stop()
    assert srv.sandboxes() == {}


def srv_key(srv):
    return srv.key_file.read_text().strip()


@pytest.mark.parametrize("body,member", [
    # a host outside the allowlist: a secret would allow it
    (rule("elsewhere.secret.test", {"Authorization": f"Bearer {REAL}"}), "elsewhere.secret.test"),
    # a transform hutch cannot broker
    ({"network": {"rules": {API: [{"transform": {"headers": {"X-A": REAL}, "body": "x"}}]}}}, "transform.body"),
    ({"network": {"rules": {API: [{"transform": {"headers": {"X-A": "two spaces in it"}}}]}}}, "headers.X-A"),
    ({"network": {"rules": {API: [{"transform": {"headers": {"X-A": "short"}}}]}}}, "headers.X-A"),
    ({"network": {"rules": {API: [{}]}}}, "transform"),
    # no network: nothing to broker
    ({"allowInternetAccess": False, **rule(API, {"Authorization": f"Bearer {REAL}"})}, "no network"),
])
def test_rules_refused(e2b, ca, tls_upstream, body, member):
    srv = start(e2b, ca, tls_upstream)
    p = tls_upstream.port
    body = json.loads(json.dumps(body).replace(f'"{API}"', f'"{API}:{p}"'))
    e = srv.sdk("createError", body)
    assert e["error"] and "400" in e["message"] and member in e["message"], e
    assert REAL not in e["message"]
    assert srv.sandboxes() == {}
    assert not list((srv.home / "e2b").glob("*.secrets"))
    srv.stop()
