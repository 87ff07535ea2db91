# SPDX-License-Identifier: LGPL-2.1-or-later
"""Socket families (issue 15, item 2): the seccomp filter allows AF_UNIX,
AF_INET, AF_INET6 and AF_NETLINK, which the sandbox's network namespace
isolates (or which stay inside it); every other family fails with
EAFNOSUPPORT, on x86_64 and through the i386 entry point. AF_VSOCK in
particular would reach the host's vsock space, which no namespace
separates. On i386, socketcall(2) with SYS_SOCKET or SYS_SOCKETPAIR is
refused whatever the family (seccomp cannot read its arguments); the
direct i386 socket and socketpair calls are filtered by family.

The probe's `socket HOW FAMILY TYPE` verb makes the call and prints "ok"
or the errno's name. The twins: the allowed families in the sandbox, and
the refused ones on the host without a sandbox (AF_KEY and AF_ALG are
not in every kernel: where the host lacks them they answer EAFNOSUPPORT
there too, and only the sandbox rows say anything)."""

import socket
import subprocess

import pytest

from conftest import find_probe

AF_KEY, AF_ALG, AF_VSOCK = 15, 38, 40

REFUSED = {
    "AF_VSOCK": (AF_VSOCK, socket.SOCK_STREAM),
    "AF_PACKET": (socket.AF_PACKET, socket.SOCK_RAW),
    "AF_KEY": (AF_KEY, socket.SOCK_RAW),
    "AF_ALG": (AF_ALG, socket.SOCK_SEQPACKET),
    "AF_XDP": (44, socket.SOCK_RAW),
    "AF_BRIDGE": (7, socket.SOCK_DGRAM),
}

ALLOWED = {
    "AF_UNIX": (socket.AF_UNIX, socket.SOCK_STREAM),
    "AF_INET": (socket.AF_INET, socket.SOCK_STREAM),
    "AF_INET6": (socket.AF_INET6, socket.SOCK_DGRAM),
    "AF_NETLINK": (socket.AF_NETLINK, socket.SOCK_RAW),
}

# The host must have these for the twins to mean anything.
ON_THE_HOST = ("AF_VSOCK", "AF_PACKET")


def sock(sbx, how, family, typ, flags=()):
    return sbx.fact("socket", how, str(family), str(typ), flags=flags)


@pytest.mark.parametrize("how", ["native", "i386", "socketcall"])
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_family_is_eafnosupport(sbx, name, how):
    family, typ = REFUSED[name]
    assert sock(sbx, how, family, typ) == "EAFNOSUPPORT"
    assert sock(sbx, f"{how}-pair", family, socket.SOCK_STREAM) == "EAFNOSUPPORT"


@pytest.mark.parametrize("how", ["native", "i386"])
@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_allowed_family_works(sbx, name, how):
    family, typ = ALLOWED[name]
    assert sock(sbx, how, family, typ) == "ok"


@pytest.mark.parametrize("how", ["native", "i386"])
def test_socketpair_of_unix_sockets_works(sbx, how):
    assert sock(sbx, f"{how}-pair", socket.AF_UNIX, socket.SOCK_STREAM) == "ok"
    # An allowed family that has no pairs: the kernel's answer, not ours.
    assert sock(sbx, f"{how}-pair", socket.AF_INET, socket.SOCK_STREAM) == "EOPNOTSUPP"


def test_socketcall_is_refused_for_every_family(sbx):
    """Fails closed: the family is in memory the filter cannot read."""
    assert sock(sbx, "socketcall", socket.AF_UNIX, socket.SOCK_STREAM) == "EAFNOSUPPORT"
    assert sock(sbx, "socketcall-pair", socket.AF_UNIX, socket.SOCK_STREAM) == "EAFNOSUPPORT"


def test_vsock_is_refused_with_the_network_allowed(sbx):
    """The filter does not depend on the network mode."""
    flags = ["--network", "allow", "--allow-host", "example.test"]
    assert sock(sbx, "native", AF_VSOCK, socket.SOCK_STREAM, flags=flags) == "EAFNOSUPPORT"
    assert sock(sbx, "native", socket.AF_INET, socket.SOCK_STREAM, flags=flags) == "ok"


def host_probe(*args):
    probe = find_probe()
    assert probe, "the probe is not built"
    r = subprocess.run([str(probe), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize("how", ["native", "i386", "socketcall"])
@pytest.mark.parametrize("name", ON_THE_HOST)
def test_refused_families_reach_the_kernel_without_a_sandbox(name, how):
    """Twin: the same calls on the host are answered by the family's code
    (a socket, or EPERM for AF_PACKET without CAP_NET_RAW)."""
    family, typ = REFUSED[name]
    assert host_probe("socket", how, str(family), str(typ)) in ("ok", "EPERM")
