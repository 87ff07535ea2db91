# SPDX-License-Identifier: LGPL-2.1-or-later
"""`hutch exec --user SPEC` and the sandbox's default user (issue 17,
docs/images-run.md "The user"), driven through the real binary.

The image is imageutil's busybox with a root-owned /usr (where apt-get
would write), a root-only file, and a user `app` (uid 1000) who is also in
the group `staff` (50); its config's User is `app`. Claims, each with its
twin:
  - an exec runs as the image's User by default, and `--user` takes each
    of docker's forms (NAME, UID, NAME:GROUP, UID:GID) with HOME and USER
    following; `root`/`0` always works, so root can write /usr where the
    image's user cannot (as root, and as a user with sub-ids);
  - the user cannot read root's files;
  - an unknown user or group, or a malformed spec, is refused (exit 125,
    named) and nothing is left running;
  - `create --user` and `run --user` set the sandbox's default user;
  - a rootless sandbox with the single-id map (a caller without sub-ids):
    an exec as the image's non-root User fails naming it and the way out
    (`--user root`), which works;
  - the API (`user` in POST .../exec), MCP's exec tool and both clients
    pass it through, once each."""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import imageutil
from conftest import IS_ROOT, Runner, stage_binaries
from subids import SubIds
from test_image_run import Images

APP = {"Env": ["PATH=/bin:/usr/bin"], "User": "app"}
NO_USER = {"Env": ["PATH=/bin:/usr/bin"]}


def usr_layer():
    t = imageutil.TarBuilder()
    for d in ("usr", "usr/bin", "usr/lib", "root"):
        t.dir(d, 0o700 if d == "root" else 0o755)
    t.file("root/secret", b"root only\n", 0o600)
    t.dir("etc")
    t.file("etc/group", b"root:x:0:\napp:x:1000:\nstaff:x:50:app\n")
    return t.bytes()


def layers():
    return [imageutil.layer0(), imageutil.layer1(), usr_layer()]


def add_images(im):
    im.add("app", layers=layers(), config=APP)
    im.add("plain", layers=layers(), config=NO_USER)


@pytest.fixture(scope="module")
def subids(user_runner):
    if not IS_ROOT:
        pytest.skip("needs root: gives the test user a range of sub-ids")
    if not (shutil.which("newuidmap") and shutil.which("newgidmap")):
        pytest.fail("newuidmap/newgidmap missing: apt-get install uidmap (tools/deps.sh)")
    s = SubIds("hutchtest", user_runner.uid)
    yield s
    s.close()


@pytest.fixture(params=["root", "user"])
def images(request, subids):
    """"app" and "plain", as root and as the test user with sub-ids (a
    persistent sandbox then has a range of ids)."""
    im = Images(request.getfixturevalue(f"{request.param}_runner"))
    add_images(im)
    yield im
    im.finalize()


def out(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r.stdout


def refused(r, *words):
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def who(st, name, *flags):
    return out(st.exec(name, "sh", "-c", 'echo "$(id -u) $(id -g) $(id -G) $HOME $USER"',
                       flags=flags)).split()


def running(st, name):
    """The execs `hutch ps` lists for @name."""
    r = st.hutch("ps", name, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# ---- the forms, as root and as a user with sub-ids ----


def test_exec_user_forms(images):
    st = images.store
    st.create("box", "--image", "app")
    # The image's User by default: its gid and the groups that list it.
    assert who(st, "box") == ["1000", "1000", "1000", "50", "/home/app", "app"]
    assert who(st, "box", "--user", "root") == ["0", "0", "0", "/root", "root"]
    assert who(st, "box", "-u", "0")[:3] == ["0", "0", "0"]
    assert who(st, "box", "-u", "app") == ["1000", "1000", "1000", "50", "/home/app", "app"]
    # An explicit group is the only one (docker's rule).
    assert who(st, "box", "-u", "app:staff") == ["1000", "50", "50", "/home/app", "app"]
    assert who(st, "box", "-u", "1000:1000") == ["1000", "1000", "1000", "/home/app", "app"]
    # A uid the image lacks: gid 0, HOME / (docker's rule).
    assert who(st, "box", "-u", "4321")[:4] == ["4321", "0", "0", "/"]
    assert who(st, "box", "-u", "4321:4322")[:3] == ["4321", "4322", "4322"]


def test_root_writes_usr_where_the_images_user_cannot(images):
    st = images.store
    st.create("box", "--image", "app")
    # apt-get's kind of write: a new file under /usr, as root.
    out(st.exec("box", "sh", "-c", "echo tool > /usr/bin/newtool && mkdir /usr/lib/pkg",
                flags=["--user", "root"]))
    assert out(st.exec("box", "cat", "/usr/bin/newtool")) == "tool\n"
    # Twin: the image's user cannot.
    r = st.exec("box", "sh", "-c", "echo x > /usr/bin/other")
    assert r.returncode != 0 and "denied" in r.stderr.lower(), (r.returncode, r.stderr)
    r = st.exec("box", "ls", "/usr/bin")
    assert out(r).split() == ["newtool"]


def test_the_user_cannot_read_roots_files(images):
    st = images.store
    st.create("box", "--image", "app")
    assert out(st.exec("box", "cat", "/root/secret", flags=["-u", "root"])) == "root only\n"
    for flags in ([], ["-u", "app"], ["-u", "4321"]):
        r = st.exec("box", "cat", "/root/secret", flags=flags)
        assert r.returncode != 0 and "root only" not in r.stdout, (flags, r.stdout, r.stderr)
        assert "denied" in r.stderr.lower(), r.stderr


def test_unknown_user_or_group_is_refused(images):
    st = images.store
    st.create("box", "--image", "app")
    refused(st.exec("box", "true", flags=["-u", "ghost"]), "'ghost'", "/etc/passwd")
    refused(st.exec("box", "true", flags=["-u", "app:nogroup"]), "'nogroup'", "/etc/group")
    # Nothing of those execs is left running.
    assert running(st, "box") == []
    # Malformed: refused before anything starts.
    for bad in ("a b", "", ":1", "1:", "-x", "a:b:c", "x" * 70):
        r = st.exec("box", "true", flags=["--user", bad])
        assert r.returncode == 125 and "user" in r.stderr, (bad, r.returncode, r.stderr)
    # Twin: a known one runs.
    assert out(st.exec("box", "id", "-un", flags=["-u", "app"])) == "app\n"


def test_create_and_run_take_a_default_user(images):
    st = images.store
    st.create("rootbox", "--image", "app", "--user", "root")
    assert who(st, "rootbox")[:3] == ["0", "0", "0"]
    assert who(st, "rootbox", "-u", "app")[0] == "1000"
    # An image without User: the sandbox's user is --user's.
    st.create("plainbox", "--image", "plain", "--user", "app")
    assert who(st, "plainbox")[0] == "1000"
    # Twin: without --user, an image without User execs as root.
    st.create("rootdefault", "--image", "plain")
    assert who(st, "rootdefault")[0] == "0"
    # It stays the default after a stop.
    out(st.hutch("stop", "plainbox"))
    assert who(st, "plainbox")[0] == "1000"


def test_run_user(images):
    if images.runner.mode == "user":
        # A one-shot run as a user has the single-id map: only root.
        o = out(images.run("--image", "app", "--user", "root", "--", "id", "-u"))
        assert o == "0\n"
        r = images.run("--image", "plain", "--user", "app", "--", "true")
        refused(r, "'app'", "not mapped", "--user root")
        return
    assert out(images.run("--image", "app", "--user", "root", "--", "id", "-u")) == "0\n"
    assert out(images.run("--image", "plain", "-u", "app", "--", "id", "-u")) == "1000\n"
    refused(images.run("--image", "plain", "-u", "ghost", "--", "true"), "'ghost'")
    # Twin: without --user the image's User.
    assert out(images.run("--image", "app", "--", "id", "-u")) == "1000\n"


# ---- the single-id map: a caller without sub-ids ----


@pytest.fixture
def nobody_images(binaries):
    """Images of `nobody`, who has no sub-ids: a persistent sandbox gets
    the single-id map."""
    if not IS_ROOT:
        pytest.skip("needs root: runs hutch as nobody")
    base = Path(tempfile.mkdtemp(prefix="hutch-nobody-"))
    os.chmod(base, 0o755)
    hutch, pdir = stage_binaries(base, *binaries)
    im = Images(Runner("user", hutch, pdir, 65534, 65534, base))
    try:
        add_images(im)
        yield im
    finally:
        im.finalize()
        shutil.rmtree(base, ignore_errors=True)


def test_single_id_sandbox_names_the_user_and_the_way_out(nobody_images):
    st = nobody_images.store
    r = st.hutch("create", "box", "--image", "app")
    st.names.append("box")
    assert r.returncode == 0, r.stderr
    r = st.exec("box", "true")
    refused(r, "'app'", "uid 1000", "--user root")
    assert running(st, "box") == []
    # The way out: root, the sandbox's one id, writes /usr.
    out(st.exec("box", "sh", "-c", "echo ok > /usr/bin/tool && id -u", flags=["-u", "root"]))
    # And a sandbox created so runs every exec as it.
    st.create("rootbox", "--image", "app", "--user", "root")
    assert out(st.exec("rootbox", "id", "-u")) == "0\n"


# ---- the API, the exec WebSocket, MCP and both clients (once each, as root) ----


@pytest.fixture
def served(root_runner):
    """`hutch serve` (test_serve's Server) with "app" in its store and a
    sandbox "box" of it."""
    from test_serve import Api, Server

    srv = Server(root_runner)
    try:
        layout = root_runner.make_dir(name="layout") / "oci"
        imageutil.write_oci_layout(layout, imageutil.make_image(layers=layers(), config=APP),
                                   ref=None)
        r = srv.hutch("image", "import", layout, "app")
        assert r.returncode == 0, r.stderr
        proc, path, _ = srv.start()
        srv.proc = proc
        srv.api = Api(path, srv.uid)
        srv.sock = path
        srv.api.ok("POST", "/v1/sandboxes", {"name": "box", "policy": {"image": "app"}},
                   status=201)
        yield srv
    finally:
        srv.cleanup()


def test_api_exec_user(served):
    api = served.api
    a = api.exec("box", ["id", "-u"])
    assert a["stdout"] == "1000\n", a
    a = api.exec("box", ["sh", "-c", "id -u; echo x > /usr/bin/t"], user="root")
    assert a["outcome"]["exit_code"] == 0 and a["stdout"] == "0\n", a
    # The stream route takes it too.
    from test_serve import read_lines
    c, r = api.stream("box", {"argv": ["id", "-u"], "user": "4321"})
    try:
        assert r.status == 200
        lines = read_lines(r)
    finally:
        c.close()
    assert {"stream": "stdout", "data": "4321\n", "encoding": "utf-8"} in lines, lines
    # Negative twins: malformed is a 400 naming the field; unknown is 125.
    r = api.call("POST", "/v1/sandboxes/box/exec", {"argv": ["true"], "user": "a b"})
    assert r.status == 400 and r.error["field"] == "/user", r
    r = api.call("POST", "/v1/sandboxes/box/exec", {"argv": ["true"], "user": 7})
    assert r.status == 400, r
    a = api.exec("box", ["true"], user="ghost")
    assert a["outcome"]["exit_code"] == 125 and "'ghost'" in a["stderr"], a


def test_python_client_and_websocket_user(served):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
    try:
        import hutch
    finally:
        sys.path.pop(0)
    c = hutch.Client(socket=served.sock)
    sb = c.sandbox("box")
    assert sb.exec(["id", "-u"], user="root").stdout == b"0\n"
    assert sb.exec(["id", "-u"]).stdout == b"1000\n"
    r = sb.exec(["true"], user="ghost")
    assert r.outcome.exit_code == 125
    # The exec WebSocket (the client's terminal()).
    with sb.terminal(["id", "-u"], user="root") as t:
        out, _ = t.wait(timeout=60)
    assert out == b"0\n", out


def test_typescript_client_user(served):
    node = shutil.which("node")
    if not node:
        pytest.fail("needs node (Node 18+): tools/deps.sh installs nodejs")
    index = Path(__file__).resolve().parents[2] / "clients" / "typescript" / "index.js"
    script = f"""
import {{ HutchClient }} from {json.dumps(str(index))};
const c = new HutchClient({{ socket: {json.dumps(served.sock)} }});
const sb = c.sandbox("box");
const a = await sb.exec(["id", "-u"], {{ user: "root" }});
const b = await sb.exec(["id", "-u"]);
console.log(JSON.stringify([a.stdoutText, b.stdoutText]));
"""
    r = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == ["0\n", "1000\n"]


def test_mcp_exec_user(root_runner):
    im = Images(root_runner)
    try:
        add_images(im)
        ws = root_runner.make_dir(name="mcpws")

        def call(args):
            msgs = [
                {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                            "clientInfo": {"name": "test", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "exec", "arguments": args}},
            ]
            r = im.hutch("mcp", "--name", "mcpbox", "--workspace", ws, "--image", "app",
                         input="".join(json.dumps(m) + "\n" for m in msgs))
            ans = [json.loads(x) for x in r.stdout.splitlines() if '"id":2' in x][0]
            return ans["result"]

        im.store.names.append("mcpbox")
        res = call({"command": "id -u", "user": "root"})
        assert json.loads(res["content"][0]["text"])["stdout"] == "0\n", res
        res = call({"command": "id -u"})
        assert json.loads(res["content"][0]["text"])["stdout"] == "1000\n", res
        # Twin: a malformed one is the tool's error.
        res = call({"command": "id -u", "user": "a b"})
        assert res.get("isError") and "user" in res["content"][0]["text"], res
    finally:
        im.finalize()
