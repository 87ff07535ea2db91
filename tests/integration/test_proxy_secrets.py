# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-proxy's credential brokering (docs/network.md, "Secrets"), driven
directly on loopback: HTTPS upstreams with a test CA (python3-trustme),
secrets over --config-fd, the sandbox CA from --ca-out-fd, curl and
python as clients through CONNECT."""

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess

import pytest

import proxyutil
import tlsutil

pytestmark = pytest.mark.skipif(proxyutil.proxy_binary() is None, reason="hutch-proxy not built")

PH = "sk-test-PLACEHOLDERabcdefgh1234"
VAL = "sk-test-REALVALUE0123456789abcd"
PH2 = "ghp_PLACEHOLDER2zzzzzzzzzzzzzzz"
VAL2 = "ghp_REALVALUE2yyyyyyyyyyyyyyyyy"
PH3 = "tok-PLACEHOLDER3qqqqqqqq"
VAL3 = "tok-REALVALUE3wwwwwwwwww"
assert len(PH) == len(VAL) and len(PH2) == len(VAL2) and len(PH3) == len(VAL3)
VALUES = [VAL, VAL2, VAL3]

CLEAN_ENV = {
    k: v
    for k, v in os.environ.items()
    if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
}


@pytest.fixture(scope="module")
def ca():
    return tlsutil.make_ca()


@pytest.fixture(scope="module")
def upstreams(ca):
    """One HTTPS echo server per role; "wrong" has a certificate for
    another name."""
    u = {
        "api": tlsutil.TlsUpstream(ca, ["api.secret.test"]),
        "gh": tlsutil.TlsUpstream(ca, ["gh.secret.test"]),
        "other": tlsutil.TlsUpstream(ca, ["other.test"]),
        "wrong": tlsutil.TlsUpstream(ca, ["not-the-host.test"]),
    }
    yield u
    for s in u.values():
        s.close()


@pytest.fixture
def env(ca, upstreams, tmp_path):
    upca = tmp_path / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(upca))
    api, gh, other, wrong = (upstreams[k].port for k in ("api", "gh", "other", "wrong"))
    config = {
        "secrets": [
            {"name": "API_KEY", "placeholder": PH, "value": VAL,
             "hosts": [f"api.secret.test:{api}", f"badcert.test:{wrong}"]},
            {"name": "GH_TOKEN", "placeholder": PH2, "value": VAL2,
             "hosts": [f"gh.secret.test:{gh}"], "header": "X-Api-Key"},
            {"name": "SCOPED", "placeholder": PH3, "value": VAL3,
             "hosts": [f"api.secret.test:{api}"], "path_prefix": "/v1/",
             "methods": ["GET", "POST"]},
        ],
    }
    proxy = tlsutil.SecretProxy(
        [
            "--allow", f"other.test:{other}",
            "--allow", f"third.test:{other}",
            "--resolve", "api.secret.test:127.0.0.1",
            "--resolve", "gh.secret.test:127.0.0.1",
            "--resolve", "other.test:127.0.0.1",
            "--resolve", "third.test:127.0.0.1",
            "--resolve", "badcert.test:127.0.0.1",
            "--allow-private", "127.0.0.0/8",
            "--upstream-ca", str(upca),
        ],
        config,
        tmp_path,
    )
    both = tmp_path / "both.pem"
    both.write_bytes(proxy.ca_pem + ca.cert_pem.bytes())
    e = {"proxy": proxy, "ports": {"api": api, "gh": gh, "other": other, "wrong": wrong},
         "both": both, "upstreams": upstreams, "bodies": []}
    yield e
    proxy.stop()
    # SECURITY: no real value anywhere the sandbox or a log could see it.
    audit = proxy.audit_path.read_text()
    for v in VALUES:
        assert v not in audit
        assert v not in proxy.stderr and v not in proxy.stdout
        assert v.encode() not in proxy.ca_pem
        for b in e["bodies"]:
            assert v not in b
    proxy.close()


def curl(e, *args):
    r = subprocess.run(
        ["curl", "-sS", "--max-time", "20", "--cacert", str(e["both"]),
         "-x", e["proxy"].url, *args],
        capture_output=True, text=True, timeout=30, env=CLEAN_ENV,
    )
    e["bodies"] += [r.stdout, r.stderr]
    return r


def last_request(e, name):
    return e["upstreams"][name].requests[-1]


def header(rec, name):
    return [v for k, v in rec["headers"] if k.lower() == name.lower()]


def test_ca_out_fd_is_a_ca(env):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    cert = x509.load_pem_x509_certificate(env["proxy"].ca_pem)
    cn = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
    assert cn == "hutch sandbox CA test-sbx"
    assert cert.issuer == cert.subject
    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca and bc.value.path_length == 0
    ku = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.key_cert_sign
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1"
    # The subjectPublicKeyInfo is written by hand (tls-mint.c): the
    # self-signature verifies with it, and the key identifier is its hash.
    cert.public_key().verify(
        cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm)
    )
    ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert ski == x509.SubjectKeyIdentifier.from_public_key(cert.public_key())
    life = cert.not_valid_after - cert.not_valid_before
    assert 7 * 86400 <= life.total_seconds() <= 7 * 86400 + 3600
    assert b"PRIVATE" not in env["proxy"].ca_pem


def test_curl_placeholder_substituted_for_its_host(env):
    port = env["ports"]["api"]
    r = curl(env, "-H", f"Authorization: Bearer {PH}", f"https://api.secret.test:{port}/v1/x")
    assert r.returncode == 0, r.stderr
    rec = last_request(env, "api")
    assert header(rec, "Authorization") == [f"Bearer {VAL}"]
    # The echo of the real value comes back masked.
    assert PH in r.stdout and VAL not in r.stdout
    d = env["proxy"].wait_decisions(2)
    inner = [x for x in d if x["method"] == "GET"]
    assert inner and inner[-1]["intercepted"] is True
    assert inner[-1]["secrets"] == ["API_KEY"] and inner[-1]["status"] == 200


def test_other_allowed_host_stays_an_opaque_tunnel(env):
    port = env["ports"]["other"]
    r = curl(env, "-H", f"X-Note: {PH3}", f"https://other.test:{port}/")
    # other.test is not a secret host: the upstream's own certificate is
    # seen (trusted through the test CA) and nothing is substituted. A
    # placeholder inside an opaque tunnel cannot be seen (documented).
    assert r.returncode == 0, r.stderr
    assert header(last_request(env, "other"), "X-Note") == [PH3]
    d = env["proxy"].wait_decisions(1)
    assert d[-1]["method"] == "CONNECT" and "intercepted" not in d[-1]


def test_header_scope(env):
    port = env["ports"]["gh"]
    r = curl(env, "-H", f"X-Api-Key: {PH2}", f"https://gh.secret.test:{port}/repos")
    assert r.returncode == 0, r.stderr
    rec = last_request(env, "gh")
    assert header(rec, "X-Api-Key") == [VAL2]
    # Negative twin: with ;header= the placeholder anywhere else (even
    # Authorization, a default lane) is a tripwire, and nothing goes out.
    before = len(env["upstreams"]["gh"].requests)
    for h in ("X-Other", "Authorization"):
        r = curl(env, "-w", "%{http_code}", "-H", f"X-Api-Key: {PH2}", "-H", f"{h}: {PH2}",
                 f"https://gh.secret.test:{port}/repos")
        assert r.stdout.endswith("403"), r.stdout + r.stderr
        assert "tripwire: placeholder of GH_TOKEN in a header" in r.stdout
    assert len(env["upstreams"]["gh"].requests) == before


def test_path_prefix_and_method_scope(env):
    port = env["ports"]["api"]
    ctx = tlsutil.client_context(env["proxy"].ca_path)
    conn = tlsutil.tunnel(env["proxy"], "api.secret.test", port, ctx)
    seen = []
    for method, path in [("GET", "/v1/models"), ("GET", "/v2/models"), ("DELETE", "/v1/x"),
                         ("POST", "/v1/chat")]:
        conn.request(method, path, body=b"{}" if method == "POST" else None,
                     headers={"X-Api-Key": PH3})
        r = conn.getresponse()
        env["bodies"].append(r.read().decode())
        assert r.status == 200
        seen.append(header(last_request(env, "api"), "X-Api-Key")[0])
    conn.close()
    assert seen == [VAL3, PH3, PH3, VAL3]
    assert last_request(env, "api")["body"] == "{}"


def test_keep_alive_and_chunked_request_body(env):
    port = env["ports"]["api"]
    ctx = tlsutil.client_context(env["proxy"].ca_path)
    conn = tlsutil.tunnel(env["proxy"], "api.secret.test", port, ctx)
    before = len(env["upstreams"]["api"].requests)
    for n in range(5):
        conn.request("POST", "/v1/echo", body=iter([b"part-%d-" % n, b"end"]), encode_chunked=True,
                     headers={"Authorization": f"Bearer {PH}", "Transfer-Encoding": "chunked"})
        r = conn.getresponse()
        env["bodies"].append(r.read().decode())
        assert r.status == 200
        rec = last_request(env, "api")
        assert rec["body"] == f"part-{n}-end"
        assert header(rec, "Authorization") == [f"Bearer {VAL}"]
    conn.close()
    assert len(env["upstreams"]["api"].requests) == before + 5


@pytest.mark.parametrize("path", ["/leak", "/leak-cl"])
def test_echoed_value_is_masked_in_headers_and_body(env, path):
    port = env["ports"]["api"]
    ctx = tlsutil.client_context(env["proxy"].ca_path)
    conn = tlsutil.tunnel(env["proxy"], "api.secret.test", port, ctx)
    conn.request("GET", path, headers={"Authorization": f"Bearer {PH}"})
    r = conn.getresponse()
    body = r.read().decode()
    env["bodies"] += [body, str(r.getheaders())]
    assert r.status == 200
    assert r.getheader("X-Leak") == PH
    # The upstream split the value over chunks; the client sees whole
    # placeholders, and Content-Length stays right.
    assert body == f"start {PH} middle {PH} end"
    conn.close()


def test_tripwire_plain_http_to_third_host(env):
    port = env["ports"]["other"]
    r = curl(env, "-H", f"Authorization: Bearer {PH}", "-w", "%{http_code}",
             f"http://third.test:{port}/")
    assert r.stdout.endswith("403")
    assert "tripwire: placeholder of API_KEY sent to third.test" in r.stdout
    r = curl(env, "-w", "%{http_code}", f"http://third.test:{port}/q?key={PH2}")
    assert r.stdout.endswith("403")
    d = env["proxy"].wait_decisions(2)
    trips = [x for x in d if x.get("secret")]
    assert [x["secret"] for x in trips] == ["API_KEY", "GH_TOKEN"]
    assert all(x["decision"] == "deny" and x["status"] == 403 for x in trips)
    assert trips[0]["reason"] == "tripwire: placeholder of API_KEY sent to third.test"
    env["proxy"].stop()
    summary = [x for x in env["proxy"].audit() if x["type"] == "summary"][0]
    reasons = {x["reason"] for x in summary["denied"]}
    assert "tripwire: placeholder of GH_TOKEN sent to third.test" in reasons


def test_tripwire_inside_intercepted_connection(env):
    # GH_TOKEN's placeholder sent to API_KEY's host.
    port = env["ports"]["api"]
    before = len(env["upstreams"]["api"].requests)
    r = curl(env, "-H", f"X-Api-Key: {PH2}", "-w", "%{http_code}",
             f"https://api.secret.test:{port}/v1/x")
    assert r.stdout.endswith("403"), r.stdout + r.stderr
    assert "tripwire: placeholder of GH_TOKEN sent to api.secret.test" in r.stdout
    assert len(env["upstreams"]["api"].requests) == before
    d = env["proxy"].wait_decisions(2)
    assert d[-1]["secret"] == "GH_TOKEN" and d[-1]["intercepted"] is True


def test_upstream_certificate_mismatch_is_502(env):
    port = env["ports"]["wrong"]
    r = curl(env, "-H", f"Authorization: Bearer {PH}", "-w", "%{http_code}",
             f"https://badcert.test:{port}/")
    assert r.stdout.endswith("502"), r.stdout + r.stderr
    assert "upstream certificate for 'badcert.test' did not verify" in r.stdout
    assert env["upstreams"]["wrong"].requests == [] or all(
        VAL not in json.dumps(x) for x in env["upstreams"]["wrong"].requests)
    d = env["proxy"].wait_decisions(2)
    assert d[-1]["status"] == 502 and "did not verify" in d[-1]["reason"]
    assert d[-1]["decision"] in ("error", "deny")


def test_h2_only_client_fails_cleanly(env):
    port = env["ports"]["api"]
    ctx = tlsutil.client_context(env["proxy"].ca_path, alpn=("h2",))
    with pytest.raises(ssl.SSLError):
        tlsutil.tls_through(env["proxy"], "api.secret.test", port, ctx)
    d = env["proxy"].wait_decisions(2)
    assert "TLS handshake with the client failed" in d[-1]["reason"]
    # The proxy goes on serving.
    ctx = tlsutil.client_context(env["proxy"].ca_path, alpn=("h2", "http/1.1"))
    s = tlsutil.tls_through(env["proxy"], "api.secret.test", port, ctx)
    assert s.selected_alpn_protocol() == "http/1.1"
    s.close()


def test_leaf_cached_per_host(env):
    from cryptography import x509

    ctx = tlsutil.client_context(env["proxy"].ca_path)
    certs = []
    for host, port in [("api.secret.test", env["ports"]["api"]),
                       ("api.secret.test", env["ports"]["api"]),
                       ("gh.secret.test", env["ports"]["gh"])]:
        s = tlsutil.tls_through(env["proxy"], host, port, ctx)
        certs.append(x509.load_der_x509_certificate(s.getpeercert(binary_form=True)))
        s.close()
    assert certs[0].serial_number == certs[1].serial_number
    assert certs[0].serial_number != certs[2].serial_number
    san = certs[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["api.secret.test"]
    eku = certs[0].extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.ExtendedKeyUsageOID.SERVER_AUTH in list(eku)


def test_no_secrets_ca_out_fd_is_empty(tmp_path):
    p = tlsutil.SecretProxy(["--allow", "x.test"], {}, tmp_path)
    try:
        assert p.ca_pem == b""
    finally:
        p.close()


@pytest.mark.parametrize("bad", [
    {"name": "A", "placeholder": "abc", "value": "abcd", "hosts": ["a.test"]},
    {"name": "A", "placeholder": "abc", "value": "xyz", "hosts": []},
    {"name": "A", "placeholder": "abc", "value": "xyz", "hosts": ["bad..name"]},
    {"name": "A", "placeholder": "abc", "value": "xyz", "hosts": ["a.test"], "extra": 1},
])
def test_bad_secret_config_exits_125(tmp_path, bad):
    r, w = os.pipe()
    os.write(w, json.dumps({"secrets": [bad]}).encode())
    os.close(w)
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen()
    try:
        p = subprocess.run([str(proxyutil.proxy_binary()), "--listen-fd", str(lst.fileno()),
                            "--config-fd", str(r)], pass_fds=[lst.fileno(), r],
                           capture_output=True, text=True, timeout=20)
    finally:
        os.close(r)
        lst.close()
    assert p.returncode == 125, p.stderr
    assert bad["value"] not in p.stderr


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")
def test_curl_alone_without_proxy_ca_fails(env):
    """Sanity: the leaf really is the proxy's (curl without its CA)."""
    port = env["ports"]["api"]
    r = subprocess.run(["curl", "-sS", "--max-time", "20", "-x", env["proxy"].url,
                        f"https://api.secret.test:{port}/"], capture_output=True, text=True,
                       timeout=30, env=CLEAN_ENV)
    assert r.returncode != 0
