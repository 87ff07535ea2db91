# SPDX-License-Identifier: LGPL-2.1-or-later
"""--network none (the default): a new net namespace with only lo, up; the
host's loopback and every other address are unreachable, DNS fails fast."""

import select
import socket
import time

import pytest


@pytest.mark.parametrize("flags", [[], ["--network", "none"]], ids=["default", "none"])
def test_only_loopback_up(sbx, flags):
    assert sbx.fact("ifaces", flags=flags).splitlines() == ["lo up"]


def test_loopback_inside_works(sbx):
    assert sbx.fact("listen-connect") == "ok"


@pytest.fixture
def host_server():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    yield srv
    srv.close()


def test_host_loopback_server_unreachable(sbx, host_server):
    port = host_server.getsockname()[1]
    # Twin: from the host the server is reachable.
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    conn, _ = host_server.accept()
    conn.close()
    result = sbx.fact("connect", "127.0.0.1", str(port))
    assert result != "ok"
    assert result == "ECONNREFUSED", result
    readable, _, _ = select.select([host_server], [], [], 0)
    assert not readable, "a connection from the sandbox reached the host's loopback"


def host_address():
    """The host's own outbound address, if it has a route anywhere."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))
        return s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()


@pytest.mark.parametrize("addr", ["192.0.2.1", "10.0.0.1", "169.254.169.254", "host"])
def test_no_route_out(sbx, addr):
    """No route anywhere but lo: a documentation address, a private one,
    the cloud metadata address and the host's own outbound address (when
    it has one; then the case repeats 192.0.2.1)."""
    if addr == "host":
        addr = host_address() or "192.0.2.1"
    assert sbx.fact("connect", addr, "80") == "ENETUNREACH"


def test_dns_fails_fast(sbx):
    start = time.monotonic()
    out = sbx.fact("resolve", "example.com", timeout=15)
    elapsed = time.monotonic() - start
    assert out.startswith("error"), out
    assert elapsed < 5, f"DNS failure took {elapsed:.1f}s"


def test_hosts_file_lookup_twin(sbx):
    """Twin: name lookup itself works (from /etc/hosts); only DNS fails."""
    assert sbx.fact("resolve", "localhost") in ("127.0.0.1", "::1")
