# SPDX-License-Identifier: LGPL-2.1-or-later
"""The API as the only door from the front ends into the core (issue 16):
hutch_get() gives the sandbox's recorded policy (hutch_sandbox_info's
policy_json), which `hutch mcp` compares through instead of opening the
store itself; hutch_list() leaves it out. Driven through capi-probe, as
root and as the unprivileged test user."""

from test_capi import api, installed, workspace  # noqa: F401 (fixtures)


def test_get_has_the_recorded_policy(api):
    ws = workspace(api)
    api.create("door-ws", "--workspace", f"{ws}:overlay")
    info = api.ok("get", "door-ws")
    assert info["policy"]["workspace"]["mode"] == "overlay", info
    assert isinstance(info["disk_limit_bytes"], int) and info["disk_limit_bytes"] >= 0
    # Twin: another sandbox's policy is its own (no workspace there).
    api.create("door-bare")
    bare = api.ok("get", "door-bare")
    assert isinstance(bare["policy"], dict) and "workspace" not in bare["policy"], bare


def test_list_has_no_policy(api):
    api.create("door-list")
    listed = api.ok("list-sandboxes")
    assert [s["name"] for s in listed] == ["door-list"]
    assert "policy" not in listed[0] and "disk_limit_bytes" not in listed[0]
