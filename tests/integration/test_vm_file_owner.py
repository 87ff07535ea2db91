# SPDX-License-Identifier: LGPL-2.1-or-later
"""Files written as a user are that user's on the microVM backend too
(issue 20; docs/api.md "Versions", 1.7): the guest's agent runs the same
file builtin (src/shared/file-op.c) in the sandbox's root, resolving the
user in its /etc/passwd and giving what it creates with fchown() on the
descriptor. test_e2b_file_owner.py's API claims under QEMU with TCG, as
root, on test_exec_user's image (a user `app`, uid 1000): as `app` →
1000, as root → 0, the parents made are the user's; a symlink planted as
a parent is refused and nothing is made through it; an unknown user is a
400."""

import imageutil
from test_exec_user import APP, layers


def test_api_user_owns_what_it_writes_in_a_vm_sandbox(root_runner):
    from test_serve import Api, Server

    srv = Server(root_runner)
    try:
        layout = root_runner.make_dir(name="layout") / "oci"
        imageutil.write_oci_layout(layout, imageutil.make_image(layers=layers(), config=APP),
                                   ref=None)
        r = srv.hutch("image", "import", layout, "app")
        assert r.returncode == 0, r.stderr
        proc, path, _ = srv.start()
        api = Api(path, srv.uid)
        api.ok("POST", "/v1/sandboxes",
               {"name": "vown", "policy": {"image": "app", "backend": "vm", "vm_accel": "tcg"}},
               status=201)
        base = "/v1/sandboxes/vown/files"
        api.ok("PUT", f"{base}?path=/tmp/o/a.txt&parents=true&user=app", b"x")
        api.ok("PUT", f"{base}?path=/tmp/r.txt&user=root", b"x")
        api.ok("POST", f"{base}/mkdir?path=/tmp/m&user=app")
        a = api.exec("vown", ["sh", "-c", "stat -c %u /tmp/o /tmp/o/a.txt /tmp/r.txt /tmp/m"],
                     user="root")
        assert a["stdout"] == "1000\n1000\n0\n1000\n", a
        r = api.call("PUT", f"{base}?path=/tmp/ghost.txt&user=ghost", b"x")
        assert r.status == 400 and "ghost" in r.error["message"], r
        a = api.exec("vown", ["sh", "-c", "mkdir -p /srv/v && ln -s /srv/v /tmp/lnk"],
                     user="root")
        assert a["outcome"]["exit_code"] == 0, a
        r = api.call("PUT", f"{base}?path=/tmp/lnk/x&user=app", b"x")
        assert r.status == 400, r
        a = api.exec("vown", ["sh", "-c", "ls -A /srv/v; test -e /tmp/ghost.txt || echo gone"],
                     user="root")
        assert a["stdout"] == "gone\n", a
        srv.hutch("rm", "--force", "vown")
    finally:
        srv.cleanup()
