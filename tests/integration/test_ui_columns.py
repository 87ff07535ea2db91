# SPDX-License-Identifier: LGPL-2.1-or-later
"""The dashboard's list (docs/ui.md) shows each sandbox's backend, image
and published ports, each bound port a link to its host address (issue 23),
from the Sandbox object's `backend`, `image` and `ports` (API 1.4), which
`hutch ls --json` carries too; and that serve's preview route is refused
to the dashboard's session (a sandbox's page on the dashboard's origin). In headless Chromium through test_ui.py's
fixtures, as root and as the unprivileged user. The twin: a sandbox of
the host's base with no port shows "—" in both columns."""

import json
import re

import imageutil
from test_ui import (  # noqa: F401 (fixtures)
    assert_accessible,
    assert_no_console_error,
    axe,
    browser,
    by_css,
    dash,
    login,
    screenshot,
    wait_for,
)

NO_USER = {"Env": ["PATH=/bin"], "WorkingDir": "/", "Cmd": ["/bin/sh"]}


def test_list_shows_backend_image_and_ports(dash, browser, axe):  # noqa: F811
    drv = browser
    runner = dash.runner
    layout = runner.make_dir(name="layout")
    imageutil.write_oci_layout(layout, imageutil.make_image(config=NO_USER), ref=None)
    runner.chown(layout)
    r = dash.srv.hutch("image", "import", str(layout), "bb")
    assert r.returncode == 0, r.stderr
    api = dash.api
    api.ok("POST", "/v1/sandboxes", {"name": "img", "policy": {"image": "bb", "ports": ["0:8080"]}},
           status=201)
    api.ok("POST", "/v1/sandboxes", {"name": "plain"}, status=201)

    # The image as the policy records it: pinned to its digest.
    sb = api.ok("GET", "/v1/sandboxes/img").json
    digest = sb["image"]
    assert sb["backend"] == "ns" and re.fullmatch(r"sha256:[0-9a-f]{64}", digest), sb
    # API 1.6: the name that points at it, for showing (null without one).
    assert sb["image_name"].endswith("bb:latest"), sb
    assert [(p["port"], p["host_port"]) for p in sb["ports"]] == [(8080, 0)], sb
    plain = api.ok("GET", "/v1/sandboxes/plain").json
    assert (plain["backend"], plain["image"], plain["ports"]) == ("ns", None, []), plain
    assert plain["image_name"] is None, plain
    # Started: the port as bound.
    assert api.exec("img", ["true"])["outcome"]["exit_code"] == 0
    sb = api.ok("GET", "/v1/sandboxes/img").json
    host_port = sb["ports"][0]["host_port"]
    assert sb["state"] == "running" and host_port > 0, sb
    ls = {s["name"]: s for s in json.loads(dash.srv.hutch("ls", "--json").stdout)}
    assert ls["img"]["image"] == digest and ls["img"]["ports"][0]["host_port"] == host_port, ls
    assert ls["plain"]["image"] is None and ls["plain"]["ports"] == [], ls

    login(drv, dash, dash.token)
    rows = wait_for(drv, "both sandboxes listed", lambda d: {
        r.get_attribute("data-sandbox"): [c.text for c in r.find_elements("css selector", "td")]
        for r in by_css(d, "tr[data-sandbox]")
    } if len(by_css(d, "tr[data-sandbox]")) == 2 else None)
    # Name, State, Backend, Image or snapshot, ..., Ports (the last).
    assert rows["img"][2] == "ns" and rows["img"][3] == sb["image_name"], rows
    assert rows["img"][-1] == f"8080 → {host_port}", rows
    assert rows["plain"][2] == "ns" and rows["plain"][3] == "—" and rows["plain"][-1] == "—", rows
    link = by_css(drv, "tr[data-sandbox='img'] a[data-port='8080']")[0]
    assert link.get_attribute("href") == f"http://127.0.0.1:{host_port}/", link.get_attribute("href")
    screenshot(drv, f"list-columns-{dash.mode}")
    assert_no_console_error(drv)
    assert_accessible(drv, axe, "sandbox list with ports")


def test_preview_refused_to_the_dashboard_session(dash):  # noqa: F811
    """SECURITY: a preview is never served on the dashboard's origin to its
    session (the sandbox's page would drive the API with it); the twin:
    the token still opens the preview route (502: nothing listens)."""
    api = dash.api
    api.ok("POST", "/v1/sandboxes", {"name": "pv"}, status=201)
    assert api.exec("pv", ["true"])["outcome"]["exit_code"] == 0
    _, cookie = dash.login_cookie(dash.token)
    cookie = cookie.split(";", 1)[0]
    status, _, body = dash.tcp("GET", "/v1/sandboxes/pv/ports/8080/", headers={"Cookie": cookie})
    assert status == 403 and b"dashboard's session" in body, (status, body)
    # The session still opens the API itself.
    status, _, body = dash.tcp("GET", "/v1/sandboxes/pv", headers={"Cookie": cookie})
    assert status == 200, (status, body)
    status, _, body = dash.tcp("GET", "/v1/sandboxes/pv/ports/8080/",
                               headers={"Authorization": f"Bearer {dash.token}"})
    assert status == 502, (status, body)
