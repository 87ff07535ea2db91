# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch_sandbox_describe() (include/hutch.h, issue 23): a sandbox's
backend, image and published ports in a struct the library allocates, so
that hutch_sandbox_info, which callers allocate (hutch_get()) and walk
(hutch_list()), keeps its size. Driven through capi-probe, as root and as
the unprivileged test user."""

from test_capi import api, installed  # noqa: F401 (fixtures)

# name[64], id[17], running, three uint64_t, parent[64], policy_json,
# disk_limit_bytes on x86-64 and aarch64: the struct before issue 23.
INFO_SIZE = 192


def test_describe_gives_backend_image_and_ports(api):  # noqa: F811
    api.create("desc-ports", "--json", '{"ports": ["0:8080", "127.0.0.1:0:9090"]}')
    d = api.ok("describe", "desc-ports")
    assert d["backend"] == "ns" and d["image"] == "", d
    assert d["n_ports"] == 2 and sorted(d["ports"]) == [8080, 9090], d
    assert d["info_size"] == INFO_SIZE, d
    # Twin: a sandbox that publishes nothing has no ports.
    api.create("desc-bare")
    assert api.ok("describe", "desc-bare")["ports"] == []


def test_describe_a_missing_sandbox_is_enoent(api):  # noqa: F811
    e = api.err("describe", "desc-none")
    assert e["error"] == 2, e
