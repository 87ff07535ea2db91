# SPDX-License-Identifier: LGPL-2.1-or-later
"""File operations beyond read/write/list/stat/remove (issue 19): writes
that make their parent folders, mkdir, move and the recursive list, in
the HTTP API (docs/api.md) and the C API's builtin behind it
(src/shared/file-op.h), as root and as the unprivileged test user.

Each runs inside the sandbox by a process of the sandbox, resolving every
directory without following a symlink: a symlink the sandbox planted
(here to the host-visible /oldroot-like escape target, and to a folder of
the sandbox's own) is refused (-ELOOP, 400 invalid_path) for the new
operations as for the old ones, and never followed by the recursive
list; each has its twin through the real directory."""

import pytest

from test_serve import create, make_workspace, server  # noqa: F401 (fixture)


def sh(api, name, script):
    ans = api.exec(name, ["sh", "-c", script])
    assert ans["outcome"]["exit_code"] == 0, ans
    return ans["stdout"]


@pytest.fixture
def box(server):  # noqa: F811
    ws = make_workspace(server)
    create(server.api, "files", policy={"workspace": {"path": str(ws), "mode": "overlay"}})
    return server.api


def test_write_with_parents_makes_the_folders(box):
    api = box
    r = api.call("PUT", "/v1/sandboxes/files/files?path=a/b/c.txt", b"deep")
    assert r.status == 404, r  # the twin: no parents, no folders
    api.ok("PUT", "/v1/sandboxes/files/files?path=a/b/c.txt&parents=true", b"deep")
    assert sh(api, "files", "cat a/b/c.txt; stat -c %a a a/b") == "deep755\n755\n"
    r = api.call("PUT", "/v1/sandboxes/files/files?path=x&parents=maybe", b"")
    assert r.status == 400 and "parents" in r.error["message"], r


def test_mkdir_plain_and_with_parents(box):
    api = box
    api.ok("POST", "/v1/sandboxes/files/files/mkdir?path=one&mode=0700")
    assert sh(api, "files", "stat -c %a one") == "700\n"
    r = api.call("POST", "/v1/sandboxes/files/files/mkdir?path=one")
    assert r.status == 409, r  # exists
    r = api.call("POST", "/v1/sandboxes/files/files/mkdir?path=two/three")
    assert r.status == 404, r  # no parent
    api.ok("POST", "/v1/sandboxes/files/files/mkdir?path=two/three&parents=1")
    api.ok("POST", "/v1/sandboxes/files/files/mkdir?path=two/three&parents=1")  # mkdir -p
    sh(api, "files", "test -d two/three")
    # A file where a folder is asked for stays a conflict even with parents.
    r = api.call("POST", "/v1/sandboxes/files/files/mkdir?path=hello.txt&parents=1")
    assert r.status == 409, r


def test_move_refuses_to_replace_unless_asked(box):
    api = box
    api.ok("PUT", "/v1/sandboxes/files/files?path=src.txt", b"new")
    api.ok("PUT", "/v1/sandboxes/files/files?path=dst.txt", b"old")
    r = api.call("POST", "/v1/sandboxes/files/files/move", {"from": "src.txt", "to": "dst.txt"})
    assert r.status == 409, r
    assert sh(api, "files", "cat src.txt dst.txt") == "newold"
    api.ok("POST", "/v1/sandboxes/files/files/move",
           {"from": "src.txt", "to": "dst.txt", "replace": True})
    assert sh(api, "files", "cat dst.txt; test ! -e src.txt && echo gone") == "new" + "gone\n"
    api.ok("POST", "/v1/sandboxes/files/files/move",
           {"from": "dst.txt", "to": "/tmp/far/away.txt", "parents": True})
    assert sh(api, "files", "cat /tmp/far/away.txt") == "new"
    # A folder across file systems (the workspace to /tmp) is not copied.
    sh(api, "files", "mkdir dir")
    r = api.call("POST", "/v1/sandboxes/files/files/move", {"from": "dir", "to": "/tmp/dir"})
    assert r.status == 400 and "cross-device" in r.error["message"], r
    r = api.call("POST", "/v1/sandboxes/files/files/move", {"from": "nope", "to": "x"})
    assert r.status == 404, r
    r = api.call("POST", "/v1/sandboxes/files/files/move", {"from": "x"})
    assert r.status == 400 and r.error["field"] == "/to", r


def test_recursive_list_walks_without_following_symlinks(box):
    api = box
    sh(api, "files", "mkdir -p t/d/e && echo 1 > t/d/e/f && ln -s / t/root && ln -s d t/dlink")
    flat = api.ok("GET", "/v1/sandboxes/files/files/list?path=t").json["entries"]
    assert sorted(e["name"] for e in flat) == ["d", "dlink", "root"]
    deep = api.ok("GET", "/v1/sandboxes/files/files/list?path=t&recursive=true").json["entries"]
    names = [e["name"] for e in deep]
    assert names == sorted(names)
    assert set(names) == {"d", "d/e", "d/e/f", "dlink", "root"}, names
    types = {e["name"]: e["type"] for e in deep}
    assert types["root"] == "symlink" and types["d/e"] == "dir" and types["d/e/f"] == "file"
    assert {e["mode"] for e in deep if e["name"] == "d/e/f"} == {"0644"}
    one = api.ok("GET", "/v1/sandboxes/files/files/list?path=t&recursive=1&depth=1").json
    assert {e["name"] for e in one["entries"]} == {"d", "dlink", "root"}
    r = api.call("GET", "/v1/sandboxes/files/files/list?path=t&depth=1")
    assert r.status == 400, r


@pytest.mark.parametrize("call", [
    ("PUT", "/v1/sandboxes/files/files?path=lnk/new.txt&parents=true", b"x"),
    ("POST", "/v1/sandboxes/files/files/mkdir?path=lnk/sub&parents=true", None),
    ("POST", "/v1/sandboxes/files/files/move", {"from": "hello.txt", "to": "lnk/moved.txt"}),
    ("POST", "/v1/sandboxes/files/files/move", {"from": "lnk/inside.txt", "to": "out.txt"}),
    ("GET", "/v1/sandboxes/files/files/list?path=lnk&recursive=true", None),
])
def test_a_planted_symlink_is_never_followed(box, call):
    """The sandbox points `lnk` at a folder of its own: each new
    operation through it is refused, and the folder is untouched; the same
    operation through the real folder works (the twin)."""
    api = box
    sh(api, "files", "mkdir -p /tmp/real && echo in > /tmp/real/inside.txt && ln -s /tmp/real lnk")
    method, url, body = call
    r = api.call(method, url, body)
    assert r.status == 400 and r.error["code"] == "invalid_path", r
    assert sh(api, "files", "ls -A /tmp/real") == "inside.txt\n"
    real = url.replace("path=lnk", "path=/tmp/real")
    if isinstance(body, dict):
        body = {k: v.replace("lnk/", "/tmp/real/") for k, v in body.items()}
    api.ok(method, real, body)


def test_dotdot_stays_inside(box):
    api = box
    r = api.call("POST", "/v1/sandboxes/files/files/mkdir?path=/../../escape&parents=true")
    assert r.status == 400 and r.error["code"] == "invalid_path", r
    r = api.call("POST", "/v1/sandboxes/files/files/move",
                 {"from": "hello.txt", "to": "/../../../hello.txt"})
    assert r.status == 400 and r.error["code"] == "invalid_path", r
    assert "hello" in sh(api, "files", "cat hello.txt")


# ---- MCP: the same operations as tools (docs/mcp.md) ----


@pytest.fixture
def mcp(caller):
    from test_mcp import McpEnv, RawServer

    e = McpEnv(caller)
    s = RawServer(e)
    try:
        s.initialize()
        yield e, s
    finally:
        if s.p.poll() is None:
            s.p.kill()
            s.p.wait()
        e.cleanup()


def test_mcp_parents_mkdir_move_and_recursive_list(mcp):
    _, s = mcp
    res = s.tool("write_file", {"path": "a/b/c.txt", "content": "x"})
    assert res.get("isError"), res  # the twin: no parents
    res = s.tool("write_file", {"path": "a/b/c.txt", "content": "x", "parents": True})
    assert not res.get("isError"), res
    res = s.tool("make_directory", {"path": "a/b"})
    assert res.get("isError"), res  # exists
    res = s.tool("make_directory", {"path": "a/b", "parents": True})
    assert not res.get("isError"), res
    res = s.tool("move_file", {"path": "a/b/c.txt", "to": "a/d.txt"})
    assert not res.get("isError"), res
    res = s.tool("list_files", {"path": "a", "recursive": True})
    assert not res.get("isError"), res
    names = {x["name"]: x["type"] for x in res["structuredContent"]["entries"]}
    assert names == {"b": "dir", "d.txt": "file"}, names
    res = s.tool("list_files", {"path": "a", "recursive": "yes"})
    assert res.get("isError") and "must be a boolean" in res["content"][0]["text"], res
    res = s.tool("move_file", {"path": "a/d.txt", "to": "../../out.txt"})
    assert res.get("isError") and "leaves the workspace" in res["content"][0]["text"], res
    s.close()
