# SPDX-License-Identifier: LGPL-2.1-or-later
"""The credential broker against an upstream that tries to hand the real
value back (issue 14, docs/secrets.md): target binding inside the
intercepted tunnel, substitution lanes and tripwires, and masking of the
value's encoded forms. Through `hutch run --secret` as root and as a user,
against a reflecting HTTPS upstream on 127.0.0.1.

Every sandbox output is searched for the real value in every form the
masking claims to cover (assert_no_value)."""

import base64
import gzip
import json
import re
import ssl
import threading
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import proxyutil

trustme = pytest.importorskip("trustme")

API = "api.secret.test"
OTHER = "other.secret.test"
# '/' and '+' so the percent-encoded and JSON-escaped forms differ from
# the raw one.
REAL = "sk-live-REAL/value+0123456789abcdefXYZ"


def value_forms(v):
    """The real value's forms that must never reach the sandbox: raw,
    base64 and base64url at each alignment (the part that does not depend
    on the neighbours), percent-encoded (upper, lower, every byte), JSON
    (\\/ and \\uXXXX)."""
    b = v.encode()
    out = {v}
    for off in range(3):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            full = enc(b"\0" * off + b + b"\0\0").decode()
            out.add(full[(8 * off + 5) // 6 : (8 * (off + len(b))) // 6])
    out.add(urllib.parse.quote(v, safe=""))
    out.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), urllib.parse.quote(v, safe="")))
    out.add("".join("%%%02X" % c for c in b))
    out.add("".join("%%%02x" % c for c in b))
    out.add("".join("\\u%04x" % c for c in b))
    out.add("".join("\\u%04X" % c for c in b))
    out.add(v.replace("/", "\\/"))
    return out


FORMS = value_forms(REAL)


def assert_no_value(*texts):
    for t in texts:
        for f in FORMS:
            assert f not in t, f"the real value reached the sandbox as {f!r}"


class ReflectHandler(BaseHTTPRequestHandler):
    """Reflects what it received (the real value, once substituted) in the
    form the path asks for:

    /plain            the request (line, headers, body) as text
    /gzip, /deflate   the same, always compressed whatever was asked
    /b64/N/std|url    base64 of N bytes, the Authorization value, a tail
    /pct/quote|lower  the value percent-encoded (quote(); every byte lower)
    /json/u|slash     a JSON string of the value (\\u00XX each; \\/)
    /range            the reflection, honouring a Range header (206)
    /br               "Content-Encoding: br" whatever was asked
    /te-gzip          "Transfer-Encoding: gzip, chunked" whatever was asked"""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _respond(self):
        body = proxyutil.read_request_body(self)
        rec = {"path": self.path, "headers": [[k, v] for k, v in self.headers.items()],
               "body": body.decode("latin-1")}
        with self.server.lock:
            self.server.requests.append(rec)
        reflect = (f"{self.requestline}\n{self.headers}\n".encode() + body)
        value = self.headers.get("Authorization", "").removeprefix("Bearer ").encode()
        parts = self.path.split("?")[0].strip("/").split("/")
        status, extra, out = 200, [], reflect
        kind = parts[0]
        if kind == "gzip":
            out = gzip.compress(reflect)
            extra.append(("Content-Encoding", "gzip"))
        elif kind == "deflate":
            out = zlib.compress(reflect)
            extra.append(("Content-Encoding", "deflate"))
        elif kind == "br":
            out = reflect
            extra.append(("Content-Encoding", "br"))
        elif kind == "te-gzip":
            z = gzip.compress(reflect)
            self.wfile.write(b"HTTP/1.1 200 X\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                             + b"%x\r\n%s\r\n0\r\n\r\n" % (len(z), z))
            return
        elif kind == "b64":
            raw = b"x" * int(parts[1]) + value + b"!tail"
            out = (base64.b64encode if parts[2] == "std" else base64.urlsafe_b64encode)(raw)
        elif kind == "pct":
            s = value.decode()
            out = (urllib.parse.quote(s, safe="") if parts[1] == "quote"
                   else "".join("%%%02x" % c for c in value)).encode()
        elif kind == "json":
            s = value.decode()
            enc = ("".join("\\u%04x" % ord(c) for c in s) if parts[1] == "u"
                   else s.replace("/", "\\/"))
            out = ('{"key": "%s"}' % enc).encode()
        elif kind == "range" and self.headers.get("Range"):
            a, b = self.headers["Range"].removeprefix("bytes=").split("-")
            out = reflect[int(a) : int(b) + 1]
            status = 206
            extra.append(("Content-Range", f"bytes {a}-{b}/{len(reflect)}"))
        head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(out)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in extra)
        self.wfile.write(head.encode() + b"\r\n" + out)

    do_GET = do_POST = _respond


class Reflector:
    def __init__(self, ca):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), ReflectHandler)
        self.server.daemon_threads = True
        self.server.lock = threading.Lock()
        self.server.requests = []
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(API, OTHER).configure_cert(ctx)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def requests(self, path=None):
        with self.server.lock:
            return [r for r in self.server.requests if path is None or r["path"].startswith(path)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture(scope="module")
def up(ca):
    u = Reflector(ca)
    yield u
    u.close()


def run(sbx, ca, up, script, spec_suffix="", outcome=None):
    """Runs @script (sh) in a sandbox holding TOKEN as a secret for API;
    returns (placeholder, the rest of stdout, CompletedProcess). Whatever
    the sandbox printed is searched for the value."""
    d = sbx.make_dir(name="ca")
    cafile = d / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(cafile))
    cafile.chmod(0o644)
    sbx.chown(cafile)
    flags = [
        "--secret", f"TOKEN@{API}:{up.port}{spec_suffix}",
        "--resolve", f"{API}:127.0.0.1",
        "--resolve", f"{OTHER}:127.0.0.1",
        "--allow-private", "127.0.0.1/32",
        "--upstream-ca", str(cafile),
    ]
    if outcome is not None:
        out = sbx.make_dir(name="out") / "outcome.json"
        flags += ["--json", str(out)]
    r = sbx.run([*flags, "--", "sh", "-c", 'echo "$TOKEN"; ' + script], env={"TOKEN": REAL})
    assert_no_value(r.stdout, r.stderr)
    ph, _, rest = r.stdout.partition("\n")
    assert ph and ph != REAL, r.stderr
    if outcome is not None:
        outcome.update(json.loads(out.read_text()))
        assert_no_value(out.read_text())
    return ph, rest, r


def url(up, path, host=API):
    return f"https://{host}:{up.port}{path}"


CURL = 'curl -sS --compressed -w "\\n%{http_code}"'


def status(out):
    return out.rstrip("\n").rsplit("\n", 1)[-1]


# ------------------------------------------------------------ binding


def test_host_swap_inside_the_tunnel_is_421_and_never_sent(sbx, ca, up):
    path = f"/plain/swap-{sbx.mode}"
    o = {}
    ph, out, r = run(sbx, ca, up, f'{CURL} -H "Host: {OTHER}:{up.port}" '
                     f'-H "Authorization: Bearer $TOKEN" {url(up, path)}', outcome=o)
    assert status(out) == "421", out + r.stderr
    assert "misdirected request" in out
    # Audited: a denial in the outcome.
    assert any(d["host"] == API and "misdirected request" in d["reason"] for d in o["denied"]), o
    # The upstream never saw the request, so never the value for OTHER.
    assert up.requests(path) == []


def test_host_naming_the_target_still_works(sbx, ca, up):
    """Negative twin: Host in another case, or with the port written out,
    is the same target."""
    path = f"/plain/host-ok-{sbx.mode}"
    ph, out, r = run(sbx, ca, up, f'{CURL} -H "Host: API.Secret.Test:{up.port}" '
                     f'-H "Authorization: Bearer $TOKEN" {url(up, path)}')
    assert status(out) == "200", out + r.stderr
    got = up.requests(path)
    assert [v for k, v in got[-1]["headers"] if k == "Authorization"] == [f"Bearer {REAL}"]
    assert ph in out


# ------------------------------------------------------------ lanes


def test_legitimate_authorization_still_works(sbx, ca, up):
    path = f"/plain/auth-{sbx.mode}"
    ph, out, r = run(sbx, ca, up, f'{CURL} -H "Authorization: Bearer $TOKEN" {url(up, path)}')
    assert status(out) == "200", out + r.stderr
    got = up.requests(path)[-1]
    assert dict(got["headers"])["Authorization"] == f"Bearer {REAL}"
    assert dict(got["headers"])["Accept-Encoding"] == "identity"
    # The reflection comes back with the placeholder.
    assert f"Authorization: Bearer {ph}" in out


@pytest.mark.parametrize(
    "where,args,path",
    [
        ("user-agent", '-A "agent $TOKEN"', "/plain/ua"),
        ("cookie", '-b "session=$TOKEN"', "/plain/cookie"),
        ("path", "", "/plain/path/$TOKEN"),
        ("body", '--data-binary "payload=$TOKEN"', "/plain/body"),
    ],
)
def test_placeholder_outside_its_lanes_is_a_tripwire(sbx, ca, up, where, args, path):
    path = path.replace("/plain/", f"/plain/{sbx.mode}-")
    ph, out, r = run(sbx, ca, up, f'{CURL} -H "Authorization: Bearer $TOKEN" {args} '
                     f'"{url(up, path)}"')
    assert status(out) == "403", out + r.stderr
    assert "tripwire: placeholder of TOKEN" in out
    # Never substituted, never forwarded (not even the placeholder).
    prefix = path.split("$")[0]
    for q in up.requests(prefix):
        assert ph not in json.dumps(q) and REAL not in json.dumps(q)


def test_query_lane(sbx, ca, up):
    path = f"/plain/query-{sbx.mode}"
    ph, out, r = run(sbx, ca, up, f'{CURL} "{url(up, path)}?a=1&key=$TOKEN"; echo; echo ===; '
                     f'{CURL} "{url(up, path)}?other=$TOKEN"', spec_suffix=";query=key")
    first, second = out.split("===\n")
    assert status(first) == "200", out + r.stderr
    got = up.requests(path)
    assert got[0]["path"] == f"{path}?a=1&key={REAL}"
    assert f"key={ph}" in first
    # Negative twin: another parameter is no lane.
    assert status(second) == "403", out
    assert len(got) == 1


# ------------------------------------------------------------ encodings


@pytest.mark.parametrize("kind", ["gzip", "deflate"])
def test_compressed_echo_is_decoded_and_masked(sbx, ca, up, kind):
    path = f"/{kind}/{sbx.mode}"
    ph, out, r = run(sbx, ca, up, f'{CURL} -H "Accept-Encoding: {kind}" '
                     f'-H "Authorization: Bearer $TOKEN" {url(up, path)}')
    assert status(out) == "200", out + r.stderr
    assert f"Authorization: Bearer {ph}" in out
    # The proxy asked for identity.
    assert dict(up.requests(path)[-1]["headers"])["Accept-Encoding"] == "identity"


@pytest.mark.parametrize("alphabet", ["std", "url"])
@pytest.mark.parametrize("offset", [0, 1, 2])
def test_base64_echo_is_masked_at_each_alignment(sbx, ca, up, offset, alphabet):
    path = f"/b64/{offset}/{alphabet}/{sbx.mode}"
    ph, out, r = run(sbx, ca, up, f'{CURL} -H "Authorization: Bearer $TOKEN" {url(up, path)}')
    assert status(out) == "200", out + r.stderr
    body = out.rsplit("\n", 1)[0]
    dec = (base64.b64decode if alphabet == "std" else base64.urlsafe_b64decode)(body)
    # What the sandbox decodes is the placeholder in that place, to the
    # bit: the characters shared with the neighbours are fixed up too.
    assert dec == b"x" * offset + ph.encode() + b"!tail"


@pytest.mark.parametrize("kind", ["pct/quote", "pct/lower", "json/u", "json/slash"])
def test_escaped_echo_is_masked(sbx, ca, up, kind):
    path = f"/{kind}/{sbx.mode}"
    ph, out, r = run(sbx, ca, up, f'{CURL} -H "Authorization: Bearer $TOKEN" {url(up, path)}')
    assert status(out) == "200", out + r.stderr
    body = out.rsplit("\n", 1)[0]
    if kind.startswith("pct"):
        assert urllib.parse.unquote(body) == ph
    elif kind == "json/u":
        assert json.loads(body)["key"] == ph
    else:
        # "\/" is two bytes: where the placeholder has no '/', its
        # character is written twice (the length cannot change).
        key = json.loads(body)["key"]
        assert key == "".join(p * 2 if r == "/" and p != "/" else p for r, p in zip(REAL, ph))


def test_range_is_not_sent_with_a_value(sbx, ca, up):
    # A slice from inside the value would not be the value; the proxy
    # drops Range so the whole answer comes back and is masked.
    path = f"/range/{sbx.mode}"
    ph, out, r = run(sbx, ca, up, f'{CURL} -r 30-45 -H "Authorization: Bearer $TOKEN" '
                     f'{url(up, path)}')
    assert status(out) == "200", out + r.stderr
    assert "Range" not in dict(up.requests(path)[-1]["headers"])
    assert REAL[4:-4] not in out


@pytest.mark.parametrize("kind", ["br", "te-gzip"])
def test_undecodable_coding_is_502(sbx, ca, up, kind):
    # curl decodes both (--compressed, --tr-encoding) if they get through.
    path = f"/{kind}/{sbx.mode}"
    o = {}
    ph, out, r = run(sbx, ca, up, f'{CURL} --tr-encoding -H "Authorization: Bearer $TOKEN" '
                     f'{url(up, path)}', outcome=o)
    assert status(out) == "502", out + r.stderr
    assert "content coding the proxy cannot decode" in out
    assert any("cannot decode" in d["reason"] for d in o["denied"]), o


def test_undecodable_coding_passes_without_a_value(sbx, ca, up):
    """Negative twin: a request that carries no value is not the proxy's
    to decode; its answer goes through as it came."""
    path = f"/br/novalue-{sbx.mode}"
    ph, out, r = run(sbx, ca, up, f'curl -sS -o /dev/null -w "%{{http_code}}" {url(up, path)}')
    assert out == "200", out + r.stderr


# ------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "suffix,needle",
    [
        (";query=", "option 'query' needs a value"),
        (";query=a&b", "invalid query parameter name 'a&b'"),
        (";query=k;query=k", "option 'query' is given twice"),
        (";colour=red", "unknown option 'colour' (expected header, query or methods)"),
        (";header=X:Y", "invalid header name 'X:Y'"),
        (";header=X Y", "invalid header name 'X Y'"),
    ],
)
def test_bad_spec_exits_125_naming_it(sbx, suffix, needle):
    spec = f"TOKEN@{API}{suffix}"
    r = sbx.run(["--secret", spec, "--", "true"], env={"TOKEN": REAL})
    assert r.returncode == 125, r.stderr
    assert needle in r.stderr and f"--secret '{spec}'" in r.stderr, r.stderr
    assert_no_value(r.stdout, r.stderr)
