# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-oci's network wall from io.hutch.* annotations (issue 21,
docs/oci.md "hutch's policy in annotations").

Podman runs the container with `--network none` and the annotations;
hutch-oci makes hutch-proxy's listening sockets inside the container's
network namespace and starts the proxy outside it. Two HTTP servers on
the host's loopback stand for an allowed and a refused site (named by
io.hutch.resolve, reachable through io.hutch.allow-private). Each claim has
its twin: the same container without the annotations reaches nothing; a
namespace with an interface besides lo is refused, since the container
could go around the proxy."""

import json
import os
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import BUILD
from test_oci import IMAGE, OCI, bundle, oci, podman, prun  # noqa: F401 (fixtures)

PROXY = BUILD / "src" / "proxy" / "hutch-proxy"


class _Body(BaseHTTPRequestHandler):
    def do_GET(self):
        body = self.server.body
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def sites():
    """Two servers on 127.0.0.1: {"allowed": port, "refused": port}."""
    servers = {}
    for name in ("allowed", "refused"):
        s = ThreadingHTTPServer(("127.0.0.1", 0), _Body)
        s.body = f"body-of-{name}-{uuid.uuid4().hex[:8]}".encode()
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers[name] = s
    try:
        yield servers
    finally:
        for s in servers.values():
            s.shutdown()
            s.server_close()


def proxies_of(cid_part):
    """Pids of hutch-proxy processes whose --sandbox-id contains @cid_part."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{pid}/exe") != str(PROXY):
                continue
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for i, a in enumerate(argv[:-1]):
            if a == b"--sandbox-id" and cid_part.encode() in argv[i + 1]:
                found.append(int(pid))
    return found


def wait_gone(cid_part, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proxies_of(cid_part):
            return True
        time.sleep(0.05)
    return False


def annotations(sites, audit):
    a, r = sites["allowed"].server_port, sites["refused"].server_port
    return ["--annotation", f"io.hutch.allow-host=allowed.test:{a}",
            "--annotation", "io.hutch.resolve=allowed.test:127.0.0.1;refused.test:127.0.0.1",
            "--annotation", "io.hutch.allow-private=127.0.0.1/32",
            "--annotation", f"io.hutch.audit-log={audit}"], a, r


# Debian's static busybox's wget crashes in its resolver (under runc too),
# so the requests are written by hand: a proxy request to the address the
# proxy variables name, and a direct connection to the server's port.
SCRIPT = ("req() {{ printf 'GET http://%s/ HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n' $1 $1 | "
          "busybox nc -w 5 127.0.0.1 3128; echo \" rc=$?\"; }}; "
          "req allowed.test:{a}; req refused.test:{r}; "
          "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 5 127.0.0.1 {a} 2>&1; "
          "echo \" direct=$?\"; echo \"proxy=$http_proxy\"")


def test_podman_annotation_lets_exactly_the_allowed_host_through(podman, sites, tmp_path):
    audit = tmp_path / "audit.jsonl"
    flags, a, r = annotations(sites, audit)
    name = f"hutch-net-{uuid.uuid4().hex[:8]}"
    rc, out, err = prun(podman, "--name", name, "--network", "none", *flags,
                        "localhost/" + IMAGE, "sh", "-c", SCRIPT.format(a=a, r=r))
    assert rc == 0, err
    assert sites["allowed"].body.decode() + " rc=0" in out, out
    assert sites["refused"].body.decode() not in out, out
    assert "HTTP/1.1 403" in out, out  # refused.test: the proxy's answer
    # Straight to the server's port: the container's own loopback does
    # not serve it, and there is no other way out.
    assert "Connection refused" in out and " direct=1" in out, out
    assert "proxy=http://127.0.0.1:3128" in out, out
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert any(x.get("host") == "refused.test" and x.get("decision") == "deny" for x in lines), \
        lines
    assert any(x.get("host") == "allowed.test" and x.get("decision") == "allow" for x in lines), \
        lines
    # The proxy ends with its container (podman names it by an id of its
    # own, and no other container runs here).
    assert wait_gone(""), proxies_of("")


def test_podman_without_annotations_reaches_nothing(podman, sites):
    """The twin: the same container and names, no annotations."""
    a, r = sites["allowed"].server_port, sites["refused"].server_port
    rc, out, err = prun(podman, "--network", "none", "localhost/" + IMAGE, "sh", "-c",
                        SCRIPT.format(a=a, r=r))
    assert rc == 0, err
    assert sites["allowed"].body.decode() not in out, out
    # No proxy listens: both requests fail to connect, like the direct one.
    assert out.count(" rc=1") == 2 and " direct=1" in out, out
    assert "proxy=\n" in out + "\n", out


def test_podman_exec_finds_the_proxy_too(podman, sites):
    flags, a, _ = annotations(sites, "/dev/null")
    name = f"hutch-net-{uuid.uuid4().hex[:8]}"
    r = podman.cli("--runtime", str(OCI), "run", "-d", "--name", name, "--network", "none",
                   "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", *flags,
                   "localhost/" + IMAGE, "sleep", "300")
    assert r.returncode == 0, r.stderr
    try:
        r = podman.cli("--runtime", str(OCI), "exec", name, "sh", "-c",
                       "printf 'GET http://allowed.test:%s/ HTTP/1.0\\r\\n\\r\\n' "
                       f"{a} | busybox nc -w 5 127.0.0.1 3128; echo proxy=$http_proxy")
        assert r.returncode == 0, r.stderr
        assert sites["allowed"].body.decode() in r.stdout.decode(), r.stdout
        assert "proxy=http://127.0.0.1:3128" in r.stdout.decode(), r.stdout
        assert proxies_of(""), "no hutch-proxy while the container runs"
    finally:
        podman.cli("--runtime", str(OCI), "rm", "-f", "-t", "0", name)
    assert wait_gone(""), proxies_of("")


@pytest.fixture
def netns_with_interface():
    """A named network namespace with an interface besides lo (a tap
    device: this kernel has no dummy module)."""
    name = f"hutch-oci-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "tuntap", "add", "d0", "mode", "tap"], check=True)
        yield f"/run/netns/{name}"
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def create_with(bundle, annotations, namespaces=None):  # noqa: F811
    tmp_path, config = bundle
    config["annotations"] = annotations
    if namespaces is not None:
        config["linux"]["namespaces"] = namespaces
    (tmp_path / "bundle" / "config.json").write_text(json.dumps(config))
    return oci(tmp_path, "create", "--bundle", tmp_path / "bundle", "net", check=False)


def test_namespace_with_another_interface_gets_the_wall(bundle, netns_with_interface):  # noqa: F811
    """An interface besides lo is walled off by hutch-oci's nftables table
    (test_oci_cni.py tries it with traffic)."""
    tmp_path, config = bundle
    ns = [n for n in config["linux"]["namespaces"] if n["type"] != "network"]
    r = create_with(bundle, {"io.hutch.allow-host": "example.test"},
                    ns + [{"type": "network", "path": netns_with_interface}])
    try:
        assert r.returncode == 0, r.stderr
        rules = subprocess.run(["ip", "netns", "exec", netns_with_interface.rsplit("/", 1)[1],
                                "nft", "list", "table", "inet", "hutch_oci_wall"],
                               capture_output=True, text=True)
        assert "policy drop" in rules.stdout, rules.stderr
    finally:
        oci(tmp_path, "delete", "--force", "net", check=False)
    assert wait_gone("net"), proxies_of("net")


def test_loopback_only_namespace_by_path_is_accepted(bundle):  # noqa: F811
    """The twin: a namespace joined by path with lo alone is fine."""
    tmp_path, config = bundle
    name = f"hutch-oci-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        ns = [n for n in config["linux"]["namespaces"] if n["type"] != "network"]
        r = create_with(bundle, {"io.hutch.allow-host": "example.test"},
                        ns + [{"type": "network", "path": f"/run/netns/{name}"}])
        assert r.returncode == 0, r.stderr
        assert proxies_of("net")
        oci(tmp_path, "delete", "--force", "net")
        assert wait_gone("net"), proxies_of("net")
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.mark.parametrize("ann,needle", [
    ({"io.hutch.secret": "TOKEN@example.test"}, "io.hutch.secret"),
    ({"io.hutch.timeout": "10 parsecs"}, "io.hutch.timeout"),
    ({"io.hutch.allow-host": ""}, "io.hutch.allow-host"),
    ({"io.hutch.allow-host": "example.test,bad!"}, "'bad!'"),
    ({"io.hutch.deny-host": "example.test"}, "need io.hutch.allow-host"),
    ({"io.hutch.allow-host": "example.test", "io.hutch.audit-log": "rel/path"}, "absolute"),
    ({"io.hutch.allow-host": "example.test", "io.hutch.allow-private": "not-a-cidr"},
     "not-a-cidr"),
])
def test_bad_annotation_is_refused_by_name(bundle, ann, needle):  # noqa: F811
    tmp_path, _ = bundle
    r = create_with(bundle, ann)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert not (tmp_path / "state" / "net").exists()


def test_annotation_without_a_network_namespace_is_refused(bundle):  # noqa: F811
    tmp_path, config = bundle
    ns = [n for n in config["linux"]["namespaces"] if n["type"] != "network"]
    r = create_with(bundle, {"io.hutch.allow-host": "example.test"}, ns)
    assert r.returncode != 0
    assert "network namespace of its own" in r.stderr, r.stderr
