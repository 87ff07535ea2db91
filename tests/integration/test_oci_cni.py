# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch-oci's network wall in a pod's network namespace (issue 21,
docs/oci.md): a namespace a CNI plugin gave an interface, stood for by
one the test makes: a veth pair between a "pod" namespace (10.231.N.2 on
eth0) and an "outside" one (10.231.N.1) with an HTTP server, both made
and removed by the test. The container joins the pod namespace by path,
as Kubernetes does. With io.hutch.allow-host, hutch-oci puts an nftables
wall in front of eth0: the allowed site answers through hutch-proxy, a
direct connection out by eth0 is refused, and a connection into the
container from outside still works (a pod's probes and services). Twins:
the same container without the annotation reaches the outside directly;
with CAP_NET_ADMIN (which could lift the wall) it is refused."""

import json
import os
import shutil
import subprocess
import threading
import uuid
from http.server import ThreadingHTTPServer

import pytest

import containerutil as cu
from test_oci import bundle, oci  # noqa: F401 (fixtures)
from test_oci_network import _Body

NFT = shutil.which("nft") or "/usr/sbin/nft"
PORT_OUT = 8089
PORT_IN = 7000


@pytest.fixture
def site():
    s = ThreadingHTTPServer(("127.0.0.1", 0), _Body)
    s.body = b"allowed-site-body"
    threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        yield s.server_address[1]
    finally:
        s.shutdown()
        s.server_close()


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def pod_netns(tmp_path):
    """(pod namespace path, outside namespace name, pod address, outside
    address); an HTTP server answers "outside-body" on the outside one."""
    if not os.path.exists(NFT):
        pytest.fail("nft is needed (tools/deps.sh installs nftables)")
    tag = uuid.uuid4().hex[:6]
    pod, out = f"hutch-pod-{tag}", f"hutch-out-{tag}"
    net = 200 + int(tag[:2], 16) % 50
    pod_ip, out_ip = f"10.231.{net}.2", f"10.231.{net}.1"
    ip("netns", "add", pod)
    ip("netns", "add", out)
    server = None
    try:
        ip("-n", pod, "link", "add", "eth0", "type", "veth", "peer", "name", "peer0", "netns", out)
        ip("-n", pod, "addr", "add", f"{pod_ip}/24", "dev", "eth0")
        ip("-n", out, "addr", "add", f"{out_ip}/24", "dev", "peer0")
        for ns, dev in ((pod, "eth0"), (out, "peer0")):
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        www = tmp_path / "www"
        www.mkdir()
        (www / "index.html").write_text("outside-body")
        server = subprocess.Popen(
            ["ip", "netns", "exec", out, "/usr/bin/python3", "-m", "http.server", "--bind", out_ip,
             str(PORT_OUT), "--directory", str(www)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert cu.wait_for(lambda: subprocess.run(
            ["ip", "netns", "exec", out, "curl", "-sf", f"http://{out_ip}:{PORT_OUT}/"],
            capture_output=True).returncode == 0, 30)
        yield f"/run/netns/{pod}", out, pod_ip, out_ip
    finally:
        if server:
            server.kill()
            server.wait()
        subprocess.run(["ip", "netns", "del", pod], capture_output=True)
        subprocess.run(["ip", "netns", "del", out], capture_output=True)


def start_in_pod(bundle, netns_path, annotations, script, caps=None):  # noqa: F811
    tmp_path, config = bundle
    config["annotations"] = annotations
    config["linux"]["namespaces"] = [n for n in config["linux"]["namespaces"]
                                     if n["type"] != "network"] + [{"type": "network",
                                                                    "path": netns_path}]
    config["process"]["args"] = ["sh", "-c", script]
    if caps:
        config["process"]["capabilities"] = {k: caps for k in ("bounding", "effective", "permitted")}
    (tmp_path / "bundle" / "config.json").write_text(json.dumps(config))
    r = oci(tmp_path, "create", "--bundle", tmp_path / "bundle", "--pid-file", tmp_path / "pid",
            "pod", check=False)
    if r.returncode == 0:
        oci(tmp_path, "start", "pod")
    return r


SCRIPT = (
    "mkdir -p /tmp/www; echo inside-body > /tmp/www/index.html; "
    "busybox httpd -p {pod_ip}:{port_in} -h /tmp/www; "
    "printf 'GET http://site.test:{site}/ HTTP/1.0\\r\\nHost: site.test:{site}\\r\\n\\r\\n' "
    "| busybox nc 127.0.0.1 3128 > /tmp/proxied 2>&1; "
    "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox timeout 5 busybox nc {out_ip} {port_out} "
    "> /tmp/direct 2>&1; echo $? > /tmp/direct.rc; touch /tmp/done; sleep 300"
)


def wait_done(tmp_path):
    done = tmp_path / "bundle" / "rootfs" / "tmp" / "done"
    assert cu.wait_for(done.exists, 60)
    return tmp_path / "bundle" / "rootfs" / "tmp"


def test_the_pod_interface_is_walled_and_inbound_still_works(bundle, pod_netns, site):  # noqa: F811
    tmp_path, _ = bundle
    netns, out, pod_ip, out_ip = pod_netns
    ann = {"io.hutch.allow-host": f"site.test:{site}", "io.hutch.resolve": "site.test:127.0.0.1",
           "io.hutch.allow-private": "127.0.0.1/32"}
    script = SCRIPT.format(pod_ip=pod_ip, port_in=PORT_IN, site=site, out_ip=out_ip,
                           port_out=PORT_OUT)
    try:
        r = start_in_pod(bundle, netns, ann, script)
        assert r.returncode == 0, r.stderr
        d = wait_done(tmp_path)
        assert "allowed-site-body" in (d / "proxied").read_text()
        assert "outside-body" not in (d / "direct").read_text()
        assert (d / "direct.rc").read_text().strip() != "0"
        # Inbound: from outside, the container's server answers.
        got = subprocess.run(["ip", "netns", "exec", out, "curl", "-sS", "-m", "10",
                              f"http://{pod_ip}:{PORT_IN}/"], capture_output=True, text=True)
        assert got.stdout.strip() == "inside-body", got.stderr
        # The wall lives in the pod's namespace, owned by hutch-oci.
        rules = subprocess.run(["ip", "netns", "exec", netns.rsplit("/", 1)[1], NFT, "list",
                                "table", "inet", "hutch_oci_wall"], capture_output=True, text=True)
        assert "policy drop" in rules.stdout and 'oifname "lo" accept' in rules.stdout
    finally:
        oci(tmp_path, "delete", "--force", "pod", check=False)


def test_without_the_annotation_the_pod_reaches_out_directly(bundle, pod_netns, site):  # noqa: F811
    tmp_path, _ = bundle
    netns, out, pod_ip, out_ip = pod_netns
    script = SCRIPT.format(pod_ip=pod_ip, port_in=PORT_IN, site=site, out_ip=out_ip,
                           port_out=PORT_OUT)
    try:
        r = start_in_pod(bundle, netns, {}, script)
        assert r.returncode == 0, r.stderr
        d = wait_done(tmp_path)
        assert "outside-body" in (d / "direct").read_text()
    finally:
        oci(tmp_path, "delete", "--force", "pod", check=False)


@pytest.mark.parametrize("cap", ["CAP_NET_ADMIN", "CAP_SYS_ADMIN"])
def test_a_container_that_could_lift_the_wall_is_refused(bundle, pod_netns, cap):  # noqa: F811
    tmp_path, _ = bundle
    netns, out, pod_ip, out_ip = pod_netns
    r = start_in_pod(bundle, netns, {"io.hutch.allow-host": "site.test"}, "sleep 300", caps=[cap])
    try:
        assert r.returncode != 0
        assert "CAP_NET_ADMIN and CAP_SYS_ADMIN" in r.stderr and "'eth0'" in r.stderr, r.stderr
        assert not (tmp_path / "state" / "pod").exists()
    finally:
        oci(tmp_path, "delete", "--force", "pod", check=False)
