# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch image pull` (issue 17, docs/images.md "Pulling"): the OCI
distribution protocol against Debian's docker-registry on 127.0.0.1, with
images made offline (a busybox layout) and pushed by skopeo; a front
server on loopback adds token auth, TLS, redirects, cut connections and
scripted bad answers. Every failure must exit 125 naming the problem and
leave no named image behind."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import trustme

import imageutil
import registryutil

EXIT_FAILURE = 125

pytestmark = pytest.mark.skipif(
    not shutil.which("docker-registry") or not shutil.which("skopeo"),
    reason="needs docker-registry and skopeo (tools/deps.sh test)")


@pytest.fixture(scope="module")
def registry():
    def fill(reg, layout):
        _, reg.arm = layout.image("arm64")
        layout.tag(reg.arm, "arm")
        layout.tag_index([reg.amd, reg.arm], "multi")
        layout.tag_index([reg.arm], "armonly")
        reg.push(layout, "amd", "busybox:1")
        reg.push(layout, "multi", "multi:1", all_images=True)
        reg.push(layout, "armonly", "armonly:1", all_images=True)

    with registryutil.running_registry("hutch-registry-", fill) as reg:
        yield reg


@pytest.fixture
def front(registry):
    fronts = []

    def make(cert=None, upstream=True):
        f = registryutil.Front(registry.port if upstream else None, cert=cert)
        fronts.append(f)
        return f

    yield make
    for f in fronts:
        f.close()


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


def hutch_home(runner):
    """A fresh $HUTCH_HOME the caller owns (its image store starts empty)."""
    return runner.make_dir(name="home") / "hutch"


def pull(runner, *args, home=None, env=None, timeout=120):
    """`hutch image pull ARGS...` as @runner's caller, with the store in
    @home (a fresh one when None)."""
    home = home or hutch_home(runner)
    return runner.run_raw(["image", "pull", *args],
                          env={"HUTCH_HOME": str(home), **(env or {})}, timeout=timeout)


def image(runner, home, *args):
    r = runner.run_raw(["image", *args], env={"HUTCH_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    return r.stdout


def pull_dirs(home):
    d = Path(home) / "images"
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".tmp-")) if d.is_dir() else []


def blob_files(layout):
    d = Path(layout) / "blobs" / "sha256"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def assert_layout_holds(layout, manifest_digest, tag):
    """Every blob of the layout matches its name; index.json names the
    manifest with @tag; the manifest's blobs are all there."""
    layout = Path(layout)
    for name in blob_files(layout):
        data = (layout / "blobs" / "sha256" / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == name
    index = json.loads((layout / "index.json").read_text())
    named = [m for m in index["manifests"]
             if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
    assert [m["digest"] for m in named] == [manifest_digest]
    man = json.loads((layout / "blobs" / "sha256" / manifest_digest[7:]).read_bytes())
    for d in [man["config"], *man["layers"]]:
        assert d["digest"][7:] in blob_files(layout)


def layout_dir(runner):
    """A path for a new layout, in a folder the caller owns."""
    return runner.make_dir(name="layout") / "oci"


def test_pull_writes_a_layout_that_skopeo_reads(sbx, registry):
    out = layout_dir(sbx)
    r = pull(sbx, "--tls-verify=false", "--layout", out, f"{registry.host}/busybox:1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == registry.amd["digest"]
    assert_layout_holds(out, registry.amd["digest"], "1")
    s = subprocess.run(["skopeo", "--insecure-policy", "inspect", "--raw", f"oci:{out}:1"],
                       capture_output=True, check=True)
    assert registryutil.sha256(s.stdout) == registry.amd["digest"]
    # A second pull reuses (re-hashes) what is there and changes nothing.
    before = blob_files(out)
    r = pull(sbx, "--tls-verify=false", "--layout", out, f"{registry.host}/busybox:1")
    assert r.returncode == 0, r.stderr
    assert blob_files(out) == before


def test_plain_http_needs_tls_verify_false(sbx, registry):
    """The negative twin: without --tls-verify=false a plain-HTTP registry,
    even on loopback, is refused and nothing is written."""
    out = layout_dir(sbx)
    r = pull(sbx, "--layout", out, f"{registry.host}/busybox:1")
    assert r.returncode == EXIT_FAILURE
    assert "TLS" in r.stderr and "--tls-verify=false" in r.stderr
    assert blob_files(out) == []
    assert not (out / "index.json").exists()


def test_an_index_resolves_to_linux_amd64(sbx, registry):
    out = layout_dir(sbx)
    r = pull(sbx, "--tls-verify=false", "--layout", out, f"{registry.host}/multi:1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == registry.amd["digest"]
    assert_layout_holds(out, registry.amd["digest"], "1")
    assert registry.arm["digest"][7:] not in blob_files(out)


def test_platform_picks_another_image_of_the_index(sbx, registry):
    out = layout_dir(sbx)
    r = pull(sbx, "--tls-verify=false", "--platform", "linux/arm64", "--layout", out,
             f"{registry.host}/multi:1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == registry.arm["digest"]


def test_an_index_without_amd64_is_refused(sbx, registry):
    out = layout_dir(sbx)
    r = pull(sbx, "--tls-verify=false", "--layout", out, f"{registry.host}/armonly:1")
    assert r.returncode == EXIT_FAILURE
    assert "no image for linux/amd64" in r.stderr and "linux/arm64" in r.stderr
    assert not (out / "index.json").exists()


def test_pull_by_digest(sbx, registry):
    out = layout_dir(sbx)
    r = pull(sbx, "--tls-verify=false", "--layout", out,
             f"{registry.host}/busybox@{registry.amd['digest']}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == registry.amd["digest"]
    # A digest the registry does not have.
    r = pull(sbx, "--tls-verify=false", "--layout", out,
             f"{registry.host}/busybox@sha256:{'0' * 64}")
    assert r.returncode == EXIT_FAILURE
    assert "not found" in r.stderr


def test_bad_references_are_refused(caller):
    home = hutch_home(caller)
    for ref, why in [("UPPER/Case", "invalid repository name"),
                     ("busybox:-x", "invalid tag"),
                     ("busybox@sha512:" + "0" * 128, "only sha256"),
                     ("busybox@sha256:12", "not a sha256 digest"),
                     ("", "empty image reference")]:
        r = pull(caller, "--layout", caller.base_dir / "unused", ref, home=home)
        assert r.returncode == EXIT_FAILURE, ref
        assert why in r.stderr, (ref, r.stderr)
    assert not (caller.base_dir / "unused").exists()


def test_bearer_token_auth(sbx, registry, front):
    f = front()
    f.bearer = "tok-" + os.urandom(8).hex()
    f.scope = "busybox"
    out = layout_dir(sbx)
    r = pull(sbx, "--tls-verify=false", "--layout", out, f"{f.host}/busybox:1")
    assert r.returncode == 0, r.stderr
    assert_layout_holds(out, registry.amd["digest"], "1")
    tokens = [p for p, _ in f.requests if p.startswith("/token")]
    assert tokens, f.requests
    assert "service=test-registry" in tokens[0]
    assert "scope=repository%3Abusybox%3Apull" in tokens[0]
    # Every blob request after the token carried it.
    blobs = [h for p, h in f.requests if "/blobs/" in p]
    assert blobs and all(h.get("Authorization") == f"Bearer {f.bearer}" for h in blobs)


def test_token_server_credentials_from_the_auth_file(sbx, registry, front):
    f = front()
    f.bearer = "tok-" + os.urandom(8).hex()
    f.scope = "busybox"
    f.token_userpass = "agent:s3cret"
    auth = sbx.make_dir(name="auth") / "auth.json"
    out = layout_dir(sbx)
    # Without credentials: the token server refuses, exit 125, nothing named.
    r = pull(sbx, "--tls-verify=false", "--authfile", auth, "--layout", out, f"{f.host}/busybox:1")
    assert r.returncode == EXIT_FAILURE
    assert "token server" in r.stderr and "401" in r.stderr
    assert not (out / "index.json").exists()
    auth.write_text(json.dumps({"auths": {f.host: {
        "auth": base64.b64encode(b"agent:s3cret").decode()}}}))
    sbx.chown(auth)
    r = pull(sbx, "--tls-verify=false", "--authfile", auth, "--layout", out, f"{f.host}/busybox:1")
    assert r.returncode == 0, r.stderr
    assert "s3cret" not in r.stderr + r.stdout


def test_basic_auth_with_credentials_from_the_auth_file(sbx, registry, front):
    f = front()
    f.basic = "agent:pw-" + os.urandom(4).hex()
    auth = sbx.make_dir(name="auth") / "config.json"
    out = layout_dir(sbx)
    r = pull(sbx, "--tls-verify=false", "--authfile", auth, "--layout", out, f"{f.host}/busybox:1")
    assert r.returncode == EXIT_FAILURE
    assert "needs a user name and password" in r.stderr
    auth.write_text(json.dumps({"auths": {f"http://{f.host}/v1/": {
        "auth": base64.b64encode(f.basic.encode()).decode()}}}))
    sbx.chown(auth)
    r = pull(sbx, "--tls-verify=false", "--authfile", auth, "--layout", out, f"{f.host}/busybox:1")
    assert r.returncode == 0, r.stderr
    assert_layout_holds(out, registry.amd["digest"], "1")


def test_https_with_cert_dir(sbx, registry, front, ca):
    """TLS verified against --cert-dir; the negative twin: without the CA
    the certificate is not trusted, and --tls-verify=false accepts it."""
    f = front(cert=ca.issue_cert("127.0.0.1"))
    certs = sbx.make_dir(name="certs")
    ca.cert_pem.write_to_path(str(certs / "ca.crt"))
    sbx.chown(certs)
    out = layout_dir(sbx)
    r = pull(sbx, "--layout", out, f"{f.host}/busybox:1")
    assert r.returncode == EXIT_FAILURE
    assert "not trusted" in r.stderr
    r = pull(sbx, "--cert-dir", certs, "--layout", out, f"{f.host}/busybox:1")
    assert r.returncode == 0, r.stderr
    assert_layout_holds(out, registry.amd["digest"], "1")
    out2 = layout_dir(sbx)
    r = pull(sbx, "--tls-verify=false", "--layout", out2, f"{f.host}/busybox:1")
    assert r.returncode == 0, r.stderr


def test_a_certificate_for_another_name_is_refused(sbx, registry, front, ca):
    f = front(cert=ca.issue_cert("registry.example.test"))
    certs = sbx.make_dir(name="certs")
    ca.cert_pem.write_to_path(str(certs / "ca.crt"))
    sbx.chown(certs)
    out = layout_dir(sbx)
    r = pull(sbx, "--cert-dir", certs, "--layout", out, f"{f.host}/busybox:1")
    assert r.returncode == EXIT_FAILURE
    assert "not trusted" in r.stderr


@pytest.fixture
def connect_proxy():
    proxies = []

    def make(**kw):
        p = registryutil.ConnectProxy(**kw)
        proxies.append(p)
        return p

    yield make
    for p in proxies:
        p.close()


def test_https_proxy_tunnels_to_the_registry(sbx, registry, front, ca, connect_proxy):
    """HTTPS_PROXY: a CONNECT tunnel, TLS still verified end to end; the
    twins: NO_PROXY reaches the registry directly, a proxy that refuses is
    exit 125 naming it."""
    f = front(cert=ca.issue_cert("127.0.0.1"))
    certs = sbx.make_dir(name="certs")
    ca.cert_pem.write_to_path(str(certs / "ca.crt"))
    sbx.chown(certs)
    p = connect_proxy()
    env = {"HTTPS_PROXY": f"http://127.0.0.1:{p.port}"}
    r = pull(sbx, "--cert-dir", certs, "--layout", layout_dir(sbx), f"{f.host}/busybox:1",
             env=env)
    assert r.returncode == 0, r.stderr
    assert set(p.targets) == {f.host}
    assert len(p.targets) == 3  # manifest, config, layer
    r = pull(sbx, "--cert-dir", certs, "--layout", layout_dir(sbx), f"{f.host}/busybox:1",
             env={**env, "NO_PROXY": "localhost,127.0.0.1"})
    assert r.returncode == 0, r.stderr
    assert len(p.targets) == 3
    refusing = connect_proxy(refuse=True)
    r = pull(sbx, "--cert-dir", certs, "--layout", layout_dir(sbx), f"{f.host}/busybox:1",
             env={"https_proxy": f"127.0.0.1:{refusing.port}"})
    assert r.returncode == EXIT_FAILURE
    assert "refused the tunnel" in r.stderr and "403" in r.stderr


def test_redirect_to_blob_storage_drops_authorization(sbx, registry, front):
    storage = front()
    f = front()
    f.bearer = "tok-" + os.urandom(8).hex()
    f.scope = "busybox"
    f.redirect_blobs = f"http://{storage.host}"
    out = layout_dir(sbx)
    r = pull(sbx, "--tls-verify=false", "--layout", out, f"{f.host}/busybox:1")
    assert r.returncode == 0, r.stderr
    assert_layout_holds(out, registry.amd["digest"], "1")
    blobs = [h for p, h in storage.requests if "/blobs/" in p]
    assert len(blobs) == 2
    assert all("Authorization" not in h for h in blobs), blobs


def test_redirect_from_https_to_http_is_refused(sbx, registry, front, ca):
    storage = front()
    f = front(cert=ca.issue_cert("127.0.0.1"))
    f.redirect_blobs = f"http://{storage.host}"
    certs = sbx.make_dir(name="certs")
    ca.cert_pem.write_to_path(str(certs / "ca.crt"))
    sbx.chown(certs)
    out = layout_dir(sbx)
    r = pull(sbx, "--cert-dir", certs, "--layout", out, f"{f.host}/busybox:1")
    assert r.returncode == EXIT_FAILURE
    assert "refusing the redirect from https:// to http://" in r.stderr
    assert not [p for p, _ in storage.requests]


def test_a_cut_blob_is_resumed_with_a_range_request(sbx, registry, front):
    layout = registryutil.Layout(sbx.make_dir(name="big-src"))
    _, big = layout.image(big=1 << 20)
    layout.tag(big, "big")
    registry.push(layout, "big", "big:1")
    layer = json.loads((layout.root / "blobs" / "sha256" / big["digest"][7:]).read_bytes())[
        "layers"][0]
    f = front()
    f.cut_after = 300000
    out = layout_dir(sbx)
    r = pull(sbx, "--tls-verify=false", "--layout", out, f"{f.host}/big:1")
    assert r.returncode == EXIT_FAILURE
    assert "cut off" in r.stderr
    partial = out / "blobs" / "sha256" / (layer["digest"][7:] + ".partial")
    assert partial.stat().st_size == 300000
    assert not (out / "index.json").exists()
    f.cut_after = None
    r = pull(sbx, "--tls-verify=false", "--layout", out, f"{f.host}/big:1")
    assert r.returncode == 0, r.stderr
    ranges = [h.get("Range") for p, h in f.requests if layer["digest"] in p]
    assert ranges[-1] == "bytes=300000-", ranges
    assert not partial.exists()
    assert_layout_holds(out, big["digest"], "1")


def test_pull_imports_into_the_store(sbx, registry):
    home = hutch_home(sbx)
    r = pull(sbx, "--tls-verify=false", f"{registry.host}/busybox:1", home=home)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == registry.amd["digest"]
    info = json.loads(image(sbx, home, "inspect", f"{registry.host}/busybox:1"))
    assert info["digest"] == registry.amd["digest"]
    assert len(info["layers"]) == 1
    # The same image under a name of the caller's choice.
    r = pull(sbx, "--tls-verify=false", f"{registry.host}/busybox:1", "mybox:v1", home=home)
    assert r.returncode == 0, r.stderr
    assert json.loads(image(sbx, home, "inspect", "mybox:v1"))["digest"] == info["digest"]
    assert [i["digest"] for i in json.loads(image(sbx, home, "ls", "--json"))] == [
        registry.amd["digest"]]
    # The pull's folder went with the import.
    assert pull_dirs(home) == []


def test_zstd_layers_are_pulled_and_imported(sbx, registry):
    src = sbx.make_dir(name="zstd-src")
    img = imageutil.write_oci_layout(src / "oci", imageutil.make_image(
        compression=("zstd", "zstd")), ref="zstd:1")
    registry.push(registryutil.Layout.existing(src / "oci"), "1", "zstdbox:1")
    home = hutch_home(sbx)
    r = pull(sbx, "--tls-verify=false", f"{registry.host}/zstdbox:1", home=home)
    assert r.returncode == 0, r.stderr
    info = json.loads(image(sbx, home, "inspect", f"{registry.host}/zstdbox:1"))
    assert info["digest"] == img.digest
    assert {la["media_type"] for la in info["layers"]} == {imageutil.MT_LAYER["zstd"]}


def test_a_cut_pull_into_the_store_resumes_and_gc_removes_leftovers(sbx, registry, front):
    layout = registryutil.Layout(sbx.make_dir(name="big-src"))
    _, big = layout.image(big=1 << 20, marker=b"store")
    layout.tag(big, "big")
    registry.push(layout, "big", "bigstore:1")
    f = front()
    f.cut_after = 200000
    home = hutch_home(sbx)
    r = pull(sbx, "--tls-verify=false", f"{f.host}/bigstore:1", home=home)
    assert r.returncode == EXIT_FAILURE
    assert "cut off" in r.stderr
    assert image(sbx, home, "ls", "-q").split() == []
    [kept] = pull_dirs(home)
    assert kept.startswith(".tmp-pull-")
    f.cut_after = None
    r = pull(sbx, "--tls-verify=false", f"{f.host}/bigstore:1", home=home)
    assert r.returncode == 0, r.stderr
    assert any(h.get("Range") == "bytes=200000-" for _, h in f.requests)
    assert pull_dirs(home) == []
    # Cut again in another store: gc removes what the pull kept.
    f.cut_after = 1000
    home2 = hutch_home(sbx)
    r = pull(sbx, "--tls-verify=false", f"{f.host}/bigstore:1", home=home2)
    assert r.returncode == EXIT_FAILURE
    assert len(pull_dirs(home2)) == 1
    image(sbx, home2, "gc")
    assert pull_dirs(home2) == []


# ---- bad answers from a scripted registry ----

def _json(h, status, obj, ctype="application/vnd.oci.image.manifest.v1+json", extra=()):
    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    h._send(status, body, [("Content-Type", ctype), *extra])


def _scripted(registry, manifest=None, config=None, layer=None, manifest_type=None,
              layer_answer=None):
    """Routes for /v2/bad/...: the amd64 image's manifest, config and layer
    (each replaceable)."""
    src = registry.layout.root / "blobs" / "sha256"
    man = manifest if manifest is not None else (src / registry.amd["digest"][7:]).read_bytes()
    m = json.loads(registry_manifest(registry))
    routes = {"/v2/bad/manifests/1": lambda h: _json(
        h, 200, man, manifest_type or "application/vnd.oci.image.manifest.v1+json")}
    cfg, lay = m["config"], m["layers"][0]
    routes[f"/v2/bad/blobs/{cfg['digest']}"] = lambda h: h._send(
        200, config if config is not None else (src / cfg["digest"][7:]).read_bytes())
    data = layer if layer is not None else (src / lay["digest"][7:]).read_bytes()
    routes[f"/v2/bad/blobs/{lay['digest']}"] = layer_answer or (lambda h: h._send(200, data))
    return routes


def registry_manifest(registry):
    return (registry.layout.root / "blobs" / "sha256" / registry.amd["digest"][7:]).read_bytes()


def _truncated(h):
    h.send_response(200)
    h.send_header("Content-Length", "1000")
    h.end_headers()
    h.wfile.write(b"x" * 10)
    h.close_connection = True


BAD = {
    "401 without a challenge": (
        lambda reg: {"/v2/bad/manifests/1": lambda h: h._send(401)},
        "without a WWW-Authenticate challenge"),
    "404": (lambda reg: {}, "not found on registry"),
    "500": (lambda reg: {"/v2/bad/manifests/1": lambda h: h._send(500, b"boom")},
            "answered HTTP 500"),
    "garbage json": (lambda reg: {"/v2/bad/manifests/1": lambda h: _json(h, 200, b"{not json")},
                     "is not JSON"),
    "unknown media type": (
        lambda reg: {"/v2/bad/manifests/1": lambda h: _json(
            h, 200, {"schemaVersion": 1}, "application/vnd.docker.distribution.manifest.v1+json")},
        "unknown media type"),
    "unknown layer media type": (
        lambda reg: _scripted(reg, manifest=registry_manifest(reg).replace(
            b"tar+gzip", b"tar+lz4")),
        "unknown media type"),
    "blob digest mismatch": (
        lambda reg: _scripted(reg, layer_answer=lambda h: h._send(
            200, bytes(len_of_layer(reg)))),
        "does not match its digest"),
    "blob larger than its descriptor": (
        lambda reg: _scripted(reg, layer_answer=lambda h: h._send(
            200, bytes(len_of_layer(reg) + 1))),
        "larger than its descriptor"),
    "truncated body": (lambda reg: _scripted(reg, layer_answer=_truncated), "cut off"),
    "manifest over 4 MiB": (
        lambda reg: {"/v2/bad/manifests/1": lambda h: _json(h, 200, b" " * (5 << 20))},
        "larger than 4 MiB"),
    "an index naming an index": (
        lambda reg: {"/v2/bad/manifests/1": lambda h: _json(h, 200, {
            "schemaVersion": 2, "manifests": [{
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "digest": "sha256:" + "1" * 64, "size": 10,
                "platform": {"os": "linux", "architecture": "amd64"}}]},
            "application/vnd.oci.image.index.v1+json")},
        "no image for linux/amd64"),
}


def len_of_layer(reg):
    return json.loads(registry_manifest(reg))["layers"][0]["size"]


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_answers_exit_125_naming_the_problem(caller, registry, front, case):
    routes, why = BAD[case]
    f = front(upstream=False)
    f.routes = routes(registry)
    out = layout_dir(caller)
    r = pull(caller, "--tls-verify=false", "--layout", out, f"{f.host}/bad:1")
    assert r.returncode == EXIT_FAILURE, r.stderr
    assert why in r.stderr, r.stderr
    assert not (out / "index.json").exists()
    # A wrong blob is never kept, not even for resume.
    if case in ("blob digest mismatch", "blob larger than its descriptor"):
        assert [n for n in blob_files(out) if n.endswith(".partial")] == []
    # Into the store: no image, and gc leaves nothing of the pull.
    home = hutch_home(caller)
    r = pull(caller, "--tls-verify=false", f"{f.host}/bad:1", home=home)
    assert r.returncode == EXIT_FAILURE, r.stderr
    assert why in r.stderr, r.stderr
    assert image(caller, home, "ls", "-q").split() == []
    image(caller, home, "gc")
    assert pull_dirs(home) == []
