# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-oci's io.hutch.secret (issue 21, docs/oci.md): a container holds
a placeholder, hutch-proxy outside it swaps in the real value only on
requests to the secret's host, and the container trusts the proxy's CA
through the bundle hutch-oci binds over its own.

The container's root is a bundle with the host's /usr bound in (for curl)
and its own /etc holding a copy of the host's CA bundle; its network
namespace has loopback only. The upstream is an HTTPS echo server on
127.0.0.1 named example-style by io.hutch.resolve, with a certificate from
a test CA given to the proxy by io.hutch.upstream-ca. Twins: without the
annotation the container has no value at all and the upstream receives
none; bad annotations are refused by name with nothing created."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import trustme

import containerutil as cu
import tlsutil
from test_oci import OCI, oci  # noqa: F401

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="hutch-oci create runs as root here")

API = "api.oci-secret.test"
REAL = "sk-live-REALvalue0123456789abcdefXYZ"
PLACEHOLDER_RE = re.compile(r"^sk-live-[A-Za-z0-9]{%d}$" % (len(REAL) - len("sk-live-")))
HOST_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


@pytest.fixture
def upstream(tmp_path):
    ca = trustme.CA()
    ca_file = tmp_path / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    up = tlsutil.TlsUpstream(ca, [API])
    try:
        yield up, ca_file
    finally:
        up.close()


@pytest.fixture
def host_bundle(tmp_path):
    if not OCI.exists():
        pytest.skip(f"{OCI} is not built")
    if not shutil.which("curl") or not os.path.isfile(HOST_BUNDLE):
        pytest.fail("curl and the system CA bundle are needed (tools/deps.sh installs them)")
    root = tmp_path / "bundle" / "rootfs"
    for d in ("proc", "dev", "tmp", "usr", "etc/ssl/certs", "run"):
        (root / d).mkdir(parents=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{link}"):
            os.symlink(os.readlink(f"/{link}"), root / link)
    shutil.copy(HOST_BUNDLE, root / "etc/ssl/certs/ca-certificates.crt")
    config = {
        "ociVersion": "1.0.2",
        "process": {"args": ["true"], "env": ["PATH=/usr/bin:/bin"], "cwd": "/",
                    "user": {"uid": 0, "gid": 0}},
        "root": {"path": "rootfs"},
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                   {"destination": "/usr", "type": "bind", "source": "/usr",
                    "options": ["rbind", "ro"]}],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "network"},
                                 {"type": "uts"}, {"type": "ipc"}],
                  "cgroupsPath": f"/hutch-oci-test/{tmp_path.name}"},
    }
    try:
        yield tmp_path, config
    finally:
        state = tmp_path / "state"
        for c in (state.iterdir() if state.exists() else ()):
            oci(tmp_path, "delete", "--force", c.name, check=False)
        for d in Path("/sys/fs/cgroup").glob("*/hutch-oci-test"):
            os.system(f"rmdir {d} 2>/dev/null")


def run_to_end(tmp_path, config, cid, script):
    config["process"]["args"] = ["sh", "-c", script]
    (tmp_path / "bundle" / "config.json").write_text(json.dumps(config))
    oci(tmp_path, "create", "--bundle", tmp_path / "bundle", "--pid-file", tmp_path / "pid", cid)
    pid = int((tmp_path / "pid").read_text())
    oci(tmp_path, "start", cid)
    assert cu.wait_gone(pid, 60)
    return tmp_path / "bundle" / "rootfs" / "tmp"


def secret_annotations(tmp_path, up, ca_file, spec=None):
    key = tmp_path / "key"
    key.write_text(REAL + "\n")
    key.chmod(0o600)
    return {
        "io.hutch.secret": spec or f"TOKEN=file:{key}@{API}:{up.port}",
        "io.hutch.resolve": f"{API}:127.0.0.1",
        "io.hutch.allow-private": "127.0.0.1/32",
        "io.hutch.upstream-ca": str(ca_file),
    }


def test_the_container_gets_a_placeholder_and_the_upstream_the_real_value(host_bundle, upstream):
    tmp_path, config = host_bundle
    up, ca_file = upstream
    config["annotations"] = secret_annotations(tmp_path, up, ca_file)
    config["process"]["env"].append("TOKEN=set-by-the-config-0123")
    out = run_to_end(tmp_path, config, "sec1", (
        'echo "$TOKEN" > /tmp/ph; env > /tmp/env; '
        'cat /etc/ssl/certs/ca-certificates.crt > /tmp/bundle; '
        f'curl -sS -H "Authorization: Bearer $TOKEN" https://{API}:{up.port}/oci-e2e '
        '> /tmp/body 2> /tmp/err; echo $? > /tmp/rc'))
    placeholder = (out / "ph").read_text().strip()
    # The placeholder wins over the config's own value of that name.
    assert PLACEHOLDER_RE.match(placeholder) and placeholder != REAL
    assert (out / "rc").read_text().strip() == "0", (out / "err").read_text()
    got = [q for q in up.requests if q["path"] == "/oci-e2e"]
    assert dict(got[-1]["headers"])["Authorization"] == f"Bearer {REAL}"
    # The echo comes back with the placeholder, never the value.
    body = (out / "body").read_text()
    assert dict(json.loads(body)["headers"])["Authorization"] == f"Bearer {placeholder}"
    env = dict(ln.split("=", 1) for ln in (out / "env").read_text().splitlines() if "=" in ln)
    assert env["SSL_CERT_FILE"] == "/run/hutch/ca-bundle.pem"
    assert env["HTTPS_PROXY"].startswith("http://127.0.0.1:")
    # The root's own bundle, then the proxy's CA, bound over its path.
    bundle = (out / "bundle").read_text()
    assert bundle.startswith(Path(HOST_BUNDLE).read_text().rstrip("\n"))
    assert bundle[len(Path(HOST_BUNDLE).read_text()):].count("BEGIN CERTIFICATE") == 1
    # The file in the bundle directory itself is untouched.
    assert Path(tmp_path / "bundle/rootfs/etc/ssl/certs/ca-certificates.crt").read_text() == \
        Path(HOST_BUNDLE).read_text()
    for f in out.iterdir():
        assert REAL not in f.read_text(errors="replace"), f
    assert REAL not in (tmp_path / "log.json").read_text()


def test_exec_gets_the_same_placeholder(host_bundle, upstream):
    tmp_path, config = host_bundle
    up, ca_file = upstream
    config["annotations"] = secret_annotations(tmp_path, up, ca_file)
    config["process"]["args"] = ["sh", "-c", 'echo "$TOKEN" > /tmp/ph; sleep 300']
    (tmp_path / "bundle" / "config.json").write_text(json.dumps(config))
    cid = "sec2"
    try:
        oci(tmp_path, "create", "--bundle", tmp_path / "bundle", cid)
        oci(tmp_path, "start", cid)
        ph = tmp_path / "bundle/rootfs/tmp/ph"
        assert cu.wait_for(lambda: ph.exists() and ph.read_text().strip(), 30)
        r = oci(tmp_path, "exec", cid, "sh", "-c", 'echo "$TOKEN $SSL_CERT_FILE"')
        assert r.stdout.split() == [ph.read_text().strip(), "/run/hutch/ca-bundle.pem"]
    finally:
        oci(tmp_path, "delete", "--force", cid, check=False)


def test_without_the_annotation_there_is_no_value_and_no_trust(host_bundle, upstream):
    tmp_path, config = host_bundle
    up, ca_file = upstream
    config["annotations"] = {
        "io.hutch.allow-host": f"{API}:{up.port}",
        "io.hutch.resolve": f"{API}:127.0.0.1",
        "io.hutch.allow-private": "127.0.0.1/32",
    }
    out = run_to_end(tmp_path, config, "sec3", (
        'echo "[$TOKEN]" > /tmp/ph; '
        f'curl -sS -H "Authorization: Bearer $TOKEN" https://{API}:{up.port}/oci-twin '
        '> /tmp/body 2> /tmp/err; echo $? > /tmp/rc'))
    assert (out / "ph").read_text().strip() == "[]"
    # No interception: the upstream's certificate is not one the container trusts.
    assert (out / "rc").read_text().strip() == "60", (out / "err").read_text()
    assert not [q for q in up.requests if q["path"] == "/oci-twin"]


@pytest.mark.parametrize("spec,needle", [
    ("TOKEN@api.example.test", "must take its value from a file on the host"),
    ("TOKEN=env:HOME@api.example.test", "must take its value from a file on the host"),
    ("TOKEN=file:key@api.example.test", "the file must be an absolute path"),
    ("TOKEN=file:/nonexistent/key@api.example.test", "cannot read the file '/nonexistent/key'"),
    ("TOKEN=file:{key}@a..example", "invalid host pattern"),
])
def test_bad_secret_annotations_are_refused_by_name(host_bundle, upstream, spec, needle):
    tmp_path, config = host_bundle
    up, ca_file = upstream
    key = tmp_path / "key"
    ann = secret_annotations(tmp_path, up, ca_file, spec.replace("{key}", str(key)))
    config["annotations"] = ann
    (tmp_path / "bundle" / "config.json").write_text(json.dumps(config))
    r = oci(tmp_path, "create", "--bundle", tmp_path / "bundle", "bad", check=False)
    assert r.returncode != 0 and needle in r.stderr, r.stderr
    assert REAL not in r.stderr
    assert not (tmp_path / "state" / "bad").exists()


def test_a_relative_upstream_ca_is_refused(host_bundle, upstream):
    tmp_path, config = host_bundle
    up, ca_file = upstream
    ann = secret_annotations(tmp_path, up, ca_file)
    ann["io.hutch.upstream-ca"] = "ca.pem"
    config["annotations"] = ann
    (tmp_path / "bundle" / "config.json").write_text(json.dumps(config))
    r = oci(tmp_path, "create", "--bundle", tmp_path / "bundle", "bad", check=False)
    assert r.returncode != 0 and "io.hutch.upstream-ca" in r.stderr and "absolute" in r.stderr
