# SPDX-License-Identifier: LGPL-2.1-or-later
"""Using images (issue 17, docs/images.md): `hutch run --image NAME` and
`hutch create NAME --image IMG`, driven through the real binary.

The images are busybox images built offline by imageutil and imported
with `hutch image import` into a store of the test's own (HUTCH_HOME in a
fresh directory the caller owns). Claims, each with its twin:
  - the image's files are the root, not the host's (and the host base
    stays the default);
  - the image's config is honoured: Env (below -e), WorkingDir (below -w
    and the workspace), User (from the image's /etc/passwd; root only:
    an unprivileged caller has one id), Entrypoint and Cmd (docker's
    rules);
  - writes go to the sandbox's upper, never to the store's layers;
  - ownership: as root the image's ids are the sandbox's (idmapped), as a
    user every file is the sandbox root's;
  - a persistent image sandbox keeps its changes after stop and in a
    snapshot's fork, and `hutch image rm` is refused while it exists;
  - the containment basics hold with an image root: no host file is
    reachable, /proc's masks, --network none, a limit."""

import json
import os
import uuid
from pathlib import Path

import pytest

import imageutil
from test_persistent import Store

NO_USER = {"Env": ["PATH=/bin", "GREETING=hello"], "WorkingDir": "/home/app",
           "Cmd": ["/bin/sh", "-c", "echo hello from the image"]}


class Images:
    """A store of the test's own with images imported into it, for one
    Runner (root or the unprivileged user)."""

    def __init__(self, runner):
        self.runner = runner
        self.store = Store(runner)
        self.work = runner.make_dir(name="images")

    def env(self, extra=None):
        return self.store.env(extra)

    def hutch(self, *args, **kw):
        return self.store.hutch(*args, **kw)

    def run(self, *args, **kw):
        return self.hutch("run", *args, **kw)

    def add(self, name, **image_kw):
        """Imports an imageutil image (make_image(**image_kw)) as @name
        and returns its record (`hutch image inspect`)."""
        layout = self.work / f"layout-{uuid.uuid4().hex[:8]}"
        imageutil.write_oci_layout(layout, imageutil.make_image(**image_kw), ref=None)
        self.runner.chown(layout)
        r = self.hutch("image", "import", layout, name)
        assert r.returncode == 0, r.stderr
        r = self.hutch("image", "inspect", name)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def finalize(self):
        self.store.finalize()


@pytest.fixture(params=["root", "user"])
def images(request):
    """The busybox image as "bb" (its config without User, which an
    unprivileged caller cannot take), as root and as the user."""
    im = Images(request.getfixturevalue(f"{request.param}_runner"))
    im.add("bb", config=NO_USER)
    yield im
    im.finalize()


@pytest.fixture
def root_images(root_runner):
    """As root: "bb" and "app" (imageutil's config, User app)."""
    im = Images(root_runner)
    im.add("bb", config=NO_USER)
    im.add("app")
    yield im
    im.finalize()


def out(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r.stdout


def refused(r, *words):
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    for w in words:
        assert w in r.stderr, (w, r.stderr)


# ---- the root is the image ----


def test_the_images_files_not_the_hosts_are_the_root(images):
    assert Path("/usr/bin/python3").exists(), "the twin needs the host's python3"
    assert out(images.run("--image", "bb", "--", "cat", "/etc/motd")) == "layer1\n"
    r = images.run("--image", "bb", "--", "test", "-e", "/usr/bin/python3")
    assert r.returncode == 1, "the host's /usr must not be there"
    # Whiteouts and opaque directories of the image's layers.
    assert out(images.run("--image", "bb", "--", "ls", "/data", "/opq")).split() == [
        "/data:", "keep", "/opq:", "new"]
    # Twin: without --image, the host base (its /usr, no image file).
    assert images.run("--", "test", "-e", "/usr/bin/python3").returncode == 0
    assert images.run("--", "test", "-e", "/opq/new").returncode == 1


def test_a_missing_image_is_named(images):
    refused(images.run("--image", "nosuch:1", "--", "true"), "'nosuch:1'", "hutch image")
    refused(images.hutch("create", "nosuchbox", "--image", "nosuch:1"), "'nosuch:1'")
    # Twin: the image that is there runs.
    assert images.run("--image", "bb", "--", "true").returncode == 0


# --backend vm with --image: test_images_vm.py.


# ---- the image's config ----


def test_cmd_runs_without_a_command_and_a_command_replaces_it(images):
    assert out(images.run("--image", "bb")) == "hello from the image\n"
    assert out(images.run("--image", "bb", "--", "echo", "mine")) == "mine\n"


def test_entrypoint_takes_the_command_or_cmd_as_arguments(images):
    images.add("ep", config={"Env": ["PATH=/bin"], "Entrypoint": ["/bin/echo", "ep"],
                             "Cmd": ["from-cmd"]})
    assert out(images.run("--image", "ep")) == "ep from-cmd\n"
    assert out(images.run("--image", "ep", "--", "given")) == "ep given\n"
    images.add("none", config={"Env": ["PATH=/bin"]})
    refused(images.run("--image", "none"), "missing command", "no Entrypoint or Cmd")


def test_env_is_the_images_below_e(images):
    assert out(images.run("--image", "bb", "--", "sh", "-c", "echo $GREETING $PATH")) == \
        "hello /bin\n"
    assert out(images.run("--image", "bb", "-e", "GREETING=bye", "--", "sh", "-c",
                          "echo $GREETING")) == "bye\n"
    # Twin: the host base has no GREETING.
    assert out(images.run("--", "sh", "-c", "echo x${GREETING}x")) == "xx\n"


def test_workdir_is_the_images_below_w_and_the_workspace(images):
    assert out(images.run("--image", "bb", "--", "pwd")) == "/home/app\n"
    assert out(images.run("--image", "bb", "-w", "/tmp", "--", "pwd")) == "/tmp\n"
    ws = images.runner.make_dir(name="ws")
    assert out(images.run("--image", "bb", "--workspace", ws, "--", "pwd")) == "/workspace\n"
    # Without a WorkingDir: "/" (docker's).
    images.add("nowd", config={"Env": ["PATH=/bin"]})
    assert out(images.run("--image", "nowd", "--", "pwd")) == "/\n"


def test_user_is_found_in_the_images_passwd(root_images):
    o = out(root_images.run("--image", "app", "--", "sh", "-c", "id -u; id -g; echo $HOME $USER"))
    assert o.split() == ["1000", "1000", "/home/app", "app"]
    # A numeric User with a group not in the image works too (docker's rule).
    root_images.add("num", config={"Env": ["PATH=/bin"], "User": "1234:4321"})
    assert out(root_images.run("--image", "num", "--", "sh", "-c", "id -u; id -g")).split() == \
        ["1234", "4321"]
    # A name the image's /etc/passwd lacks is refused.
    root_images.add("ghost", config={"Env": ["PATH=/bin"], "User": "ghost"})
    refused(root_images.run("--image", "ghost", "--", "true"), "'ghost'", "/etc/passwd")
    # Twin: without User the command is the sandbox's root.
    assert out(root_images.run("--image", "bb", "--", "id", "-u")) == "0\n"


def test_user_of_an_unprivileged_caller_is_refused(user_runner):
    im = Images(user_runner)
    try:
        im.add("app")
        refused(im.run("--image", "app", "--", "true"), "User 'app'", "not mapped")
        # Twin: the same image without User runs.
        im.add("bb", config=NO_USER)
        assert im.run("--image", "bb", "--", "true").returncode == 0
    finally:
        im.finalize()


# ---- writes and ownership ----


def layer_file(record, rel):
    """The file @rel in the top layer of the image that has it, on the
    host (the store's copy)."""
    for layer in reversed(record["layers"]):
        p = Path(layer["path"]) / rel
        if os.path.lexists(p):
            return p
    raise AssertionError(f"{rel} in no layer")


def test_writes_never_change_the_stores_layers(images):
    rec = json.loads(out(images.hutch("image", "inspect", "bb")))
    motd, busybox = layer_file(rec, "etc/motd"), layer_file(rec, "bin/busybox")
    size = busybox.stat().st_size
    script = "echo changed > /etc/motd && rm /bin/busybox.not-there 2>/dev/null; " \
             "echo new > /etc/new && cat /etc/motd /etc/new && /bin/busybox rm /bin/cat"
    assert out(images.run("--image", "bb", "--", "sh", "-c", script)) == "changed\nnew\n"
    assert motd.read_text() == "layer1\n"
    assert busybox.stat().st_size == size
    assert layer_file(rec, "bin/cat")
    assert not any((Path(x["path"]) / "etc/new").exists() for x in rec["layers"])
    # Twin: the next run sees the image as it was.
    assert out(images.run("--image", "bb", "--", "cat", "/etc/motd")) == "layer1\n"


def test_read_only_makes_the_image_root_read_only(images):
    r = images.run("--image", "bb", "--read-only", "--", "sh", "-c", "echo x > /etc/x")
    assert r.returncode != 0 and "Read-only" in r.stderr
    # Twin: without it the root is writable, and /tmp stays so with it.
    assert images.run("--image", "bb", "--", "sh", "-c", "echo x > /etc/x").returncode == 0
    assert images.run("--image", "bb", "--read-only", "--", "sh", "-c",
                      "echo x > /tmp/x").returncode == 0


def test_image_ids_are_the_sandboxs(images):
    o = out(images.run("--image", "bb", "--", "stat", "-c", "%u:%g", "/home/app/owned",
                       "/bin/busybox"))
    if images.runner.mode == "root":
        # Idmapped: the image's 1000 is the sandbox's 1000, its 0 the
        # sandbox's root (never the host's: the uid map says so).
        assert o.split() == ["1000:1000", "0:0"]
    else:
        # Single-id map: the layers are the user's files, the sandbox root's.
        assert o.split() == ["0:0", "0:0"]


def test_image_root_is_not_host_root(root_images):
    """SECURITY: the image's uid 0 files are the sandbox's root, whose
    host uid is the sandbox's range, never 0."""
    m = out(root_images.run("--image", "bb", "--", "cat", "/proc/self/uid_map")).split()
    assert m[0] == "0" and m[1] != "0"
    # Twin: a file of the image's root can be changed by the sandbox's root
    # (its copy), which it could not be if it were host root's unmapped file.
    assert root_images.run("--image", "bb", "--", "sh", "-c",
                           "echo x >> /etc/passwd").returncode == 0


# ---- persistent ----


def test_persistent_image_sandbox_keeps_its_changes(images):
    s = images.store
    rec = json.loads(out(images.hutch("image", "inspect", "bb")))
    s.create("pimg", "--image", "bb")
    # An exec's defaults are the image's too: its WorkingDir and Env.
    assert out(s.exec("pimg", "sh", "-c", "pwd; echo $GREETING")) == "/home/app\nhello\n"
    s.sh("pimg", "echo kept > /etc/marker && mkdir -p /usr/local/x")
    out(s.hutch("stop", "pimg"))
    assert out(s.exec("pimg", "cat", "/etc/marker")) == "kept\n"
    assert out(s.exec("pimg", "cat", "/etc/motd")) == "layer1\n"
    out(s.hutch("stop", "pimg"))  # a user's sandbox without cgroups is not frozen
    out(s.hutch("snapshot", "pimg", "psnap"))
    s.create("pfork", "--from", "psnap")
    assert out(s.exec("pfork", "cat", "/etc/marker")) == "kept\n"
    assert out(s.exec("pfork", "ls", "/usr/local")) == "x\n"
    assert not any((Path(x["path"]) / "etc/marker").exists() for x in rec["layers"])
    # Twin: a sandbox on the host base has neither the image nor the marker.
    s.create("phost")
    assert s.exec("phost", "test", "-e", "/etc/marker").returncode == 1
    assert s.exec("phost", "test", "-e", "/opq/new").returncode == 1


def test_image_rm_is_refused_while_a_sandbox_uses_it(images):
    s = images.store
    s.create("holder", "--image", "bb")
    refused(images.hutch("image", "rm", "bb"), "holder")
    out(s.hutch("snapshot", "holder", "holdsnap"))
    out(s.hutch("rm", "--force", "holder"))
    refused(images.hutch("image", "rm", "bb"), "holdsnap")
    out(s.hutch("snapshot", "rm", "holdsnap"))
    # Twin: with no user left, it goes.
    assert images.hutch("image", "rm", "bb").returncode == 0


def test_persistent_sandbox_keeps_its_image_when_the_name_moves(images):
    """The image is pinned by digest at create: importing another image
    under the same name changes nothing below the sandbox."""
    s = images.store
    s.create("pinned", "--image", "bb")
    images.add("bb", config={"Env": ["PATH=/bin"]},
               layers=[imageutil.layer0()])  # /etc/motd "layer0"
    assert out(s.exec("pinned", "cat", "/etc/motd")) == "layer1\n"
    # Twin: a run names the image as it is now.
    assert out(images.run("--image", "bb", "--", "cat", "/etc/motd")) == "layer0\n"


# ---- containment with an image root ----


def test_no_host_file_is_reachable(images):
    probe = images.runner.probe_args
    flags = ["--image", "bb"]
    r = images.run(*probe("can-open", "/etc/shadow", "r", flags=flags))
    assert "ENOENT" in r.stdout, r.stdout  # the image has none, the host's is not there
    r = images.run(*probe("ls", "/", flags=flags))
    assert "oldroot" not in r.stdout and ".hutch" not in r.stdout and "usr" not in r.stdout
    mi = out(images.run("--image", "bb", "--", "cat", "/proc/self/mountinfo"))
    points = [line.split()[4] for line in mi.splitlines()]
    assert not [p for p in points if p.startswith(("/oldroot", "/newroot", "/.hutch"))], points
    # Twin: the host base shows the host's /usr.
    assert "usr" in images.run(*probe("ls", "/")).stdout


def test_proc_masks_hold(images):
    r = images.run("--image", "bb", "--", "sh", "-c", "echo 1 > /proc/sys/kernel/ns_last_pid")
    assert r.returncode != 0
    # Twin: /proc is there and readable.
    assert out(images.run("--image", "bb", "--", "cat", "/proc/self/comm")) == "cat\n"


def ifaces(text):
    return [line.split(":")[0].strip() for line in text.splitlines()[2:]]


def test_network_none_with_an_image(images):
    o = out(images.run("--image", "bb", "--", "cat", "/proc/net/dev"))
    assert ifaces(o) == ["lo"]
    # Twin: the host has more than loopback, so the claim says something.
    assert len(ifaces(Path("/proc/net/dev").read_text())) > 1


def test_pids_limit_holds_with_an_image(images):
    spawn = "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do /bin/sh -c 'read x' & done; wait"
    r = images.run("--image", "bb", "--pids", "6", "--", "sh", "-c", spawn, input="")
    assert r.returncode != 0 or "fork" in r.stderr.lower() or "resource" in r.stderr.lower()
    # Twin: without the limit they all start.
    r = images.run("--image", "bb", "--", "sh", "-c", spawn, input="")
    assert r.returncode == 0, r.stderr


def test_update_keeps_the_image(images):
    s = images.store
    s.create("upd", "--image", "bb")
    # The same image, by name: no change (the record has its digest).
    assert out(images.hutch("update", "upd", "--image", "bb", "--hostname", "upd")) == \
        "hostname\n"
    # Twin: another image is refused, naming the field.
    images.add("other", config={"Env": ["PATH=/bin"]}, layers=[imageutil.layer0()])
    refused(images.hutch("update", "upd", "--image", "other"), "image")
    assert out(s.exec("upd", "cat", "/etc/motd")) == "layer1\n"


def test_export_names_the_image_and_import_needs_it(images):
    s = images.store
    s.create("exp", "--image", "bb")
    s.sh("exp", "echo exported > /etc/marker")
    out(s.hutch("stop", "exp"))
    out(s.hutch("snapshot", "exp", "exps"))
    archive = images.work / "exps.tar.zst"
    out(s.hutch("snapshot", "export", "exps", "-o", archive, "-q"))
    digest = json.loads(out(images.hutch("image", "inspect", "bb")))["digest"]

    other = Images(images.runner)  # a store without the image
    try:
        refused(other.hutch("snapshot", "import", archive, "--name", "imp"),
                digest, "not in the image store")
        assert "imp" not in out(other.hutch("snapshot", "ls"))
        # Twin: with the image there, the fork has the image and the change,
        # and the image is in use by the imported snapshot.
        other.add("bb2", config=NO_USER)
        out(other.hutch("snapshot", "import", archive, "--name", "imp", "-q"))
        other.store.create("impbox", "--from", "imp")
        assert out(other.store.exec("impbox", "cat", "/etc/marker", "/etc/motd")) == \
            "exported\nlayer1\n"
        refused(other.hutch("image", "rm", "bb2"), "imp")
    finally:
        other.finalize()


# ---- the CA bundle with --secret ----


def layers_with_bundle(path, entries=None):
    parts = path.strip("/").split("/")
    tree = [("dir", "/".join(parts[:i]), None) for i in range(1, len(parts))]
    tree += entries or [("file", path.strip("/"), b"IMAGE-CA-MARKER\n")]
    return [imageutil.layer0(), imageutil.layer_with(tree)]


SECRET = ["--secret", "TOKEN@api.example"]
TOKEN = {"TOKEN": "hutch-test-token-0123"}


@pytest.mark.parametrize("bundle", ["/etc/pki/tls/certs/ca-bundle.crt",
                                    "/etc/ssl/certs/ca-certificates.crt"])
def test_ca_bundle_goes_where_the_images_distribution_keeps_it(images, bundle):
    images.add("ca", config={"Env": ["PATH=/bin"]}, layers=layers_with_bundle(bundle))
    o = out(images.run("--image", "ca", *SECRET, "--", "cat", bundle, env=TOKEN))
    assert o.startswith("IMAGE-CA-MARKER\n") and "-----BEGIN CERTIFICATE-----" in o
    # Twin: without a secret the image's bundle is as it is.
    assert out(images.run("--image", "ca", "--", "cat", bundle)) == "IMAGE-CA-MARKER\n"


def test_ca_bundle_symlink_to_the_host_is_not_followed(images):
    """SECURITY: the image's bundle is read inside its own root; a symlink
    of the image's pointing where the host's root is attached while the
    tree is built never brings the host's file in."""
    host = Path("/etc/ssl/certs/ca-certificates.crt")
    assert host.is_file(), "the twin needs the host's bundle"
    first = host.read_text().split("-----END CERTIFICATE-----")[0]
    images.add("evil", config={"Env": ["PATH=/bin"]}, layers=[
        imageutil.layer0(),
        imageutil.layer_with([("dir", "etc", None), ("symlink", "etc/ssl", "/oldroot/etc/ssl")])])
    r = images.run("--image", "evil", *SECRET, "--", "sh", "-c",
                   "cat /run/hutch/ca-bundle.pem /etc/ssl/certs/ca-certificates.crt", env=TOKEN)
    assert first not in r.stdout
    images.add("evil2", config={"Env": ["PATH=/bin"]}, layers=layers_with_bundle(
        "/etc/ssl/certs/ca-certificates.crt",
        [("symlink", "etc/ssl/certs/ca-certificates.crt",
          "/oldroot/etc/ssl/certs/ca-certificates.crt")]))
    r = images.run("--image", "evil2", *SECRET, "--", "cat", "/run/hutch/ca-bundle.pem",
                   env=TOKEN)
    assert r.returncode == 0 and first not in r.stdout
    # Twin: the host base's bundle is the host's (so `first` is a real test).
    assert first in out(images.run(*SECRET, "--", "cat", str(host), env=TOKEN))


def test_a_mount_point_the_image_has_as_a_symlink_is_refused(images):
    """SECURITY: hutch mounts its /tmp, /proc, /dev... on the image's
    directories; one the image made a symlink (here into where the host's
    root is attached while the tree is built) is refused, not followed."""
    images.add("sym", config={"Env": ["PATH=/bin"]}, layers=[
        imageutil.layer0(), imageutil.layer_with([("symlink", "tmp", "/oldroot/tmp")])])
    refused(images.run("--image", "sym", "--", "true"), "'/tmp'", "not a directory")
    # Twin: the same image without the symlink runs.
    assert images.run("--image", "bb", "--", "test", "-d", "/tmp").returncode == 0


def test_rm_takes_the_sandboxs_mark_away(images):
    """A sandbox removed and made again under the same name on another
    image no longer holds the first one."""
    s = images.store
    images.add("second", config={"Env": ["PATH=/bin"]}, layers=[imageutil.layer0()])
    s.create("again", "--image", "bb")
    out(s.hutch("rm", "again"))
    s.create("again", "--image", "second")
    assert images.hutch("image", "rm", "bb").returncode == 0
    # Twin: the one it uses now is held.
    refused(images.hutch("image", "rm", "second"), "again")


def mcp_exec(images, name, ws, *flags):
    """One `hutch mcp` session: initialize, then the exec tool once."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "exec", "arguments": {"command": "cat /etc/motd"}}},
    ]
    images.store.names.append(name)
    r = images.hutch("mcp", "--name", name, "--workspace", ws, *flags,
                     input="".join(json.dumps(m) + "\n" for m in msgs))
    answer = [json.loads(line) for line in r.stdout.splitlines() if '"id":2' in line][0]
    text = answer.get("result", {}).get("content", [{}])[0].get("text", "")
    try:
        return json.loads(text)
    except ValueError:
        return answer


def test_mcp_serves_an_image_sandbox_across_sessions(images):
    ws = images.runner.make_dir(name="mcpws")
    assert mcp_exec(images, "mcpimg", ws, "--image", "bb")["stdout"] == "layer1\n"
    # The next session names the image again: the same policy (the sandbox
    # recorded its digest), so it serves it.
    assert mcp_exec(images, "mcpimg", ws, "--image", "bb")["stdout"] == "layer1\n"
    # Twin: without --image it is another policy, refused.
    res = mcp_exec(images, "mcpimg", ws)
    assert "another policy" in json.dumps(res)
