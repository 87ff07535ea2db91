# SPDX-License-Identifier: LGPL-2.1-or-later
"""The dashboard's sessions end on the server (docs/ui.md, issue 23): the
server keeps each live session, so signing out (the page's button, POST
/ui/logout) ends it there and a copy of the cookie taken before is refused
from then on, while another session goes on; and every session expires, its
expiry inside the signed value (12 h, or `hutch serve --ui-session`). As
root and as the unprivileged user; the sign-out through headless Chromium
with test_ui.py's fixtures."""

import json
import time

import pytest

from test_ui import (  # noqa: F401 (fixtures)
    WAIT,
    Dash,
    assert_no_console_error,
    browser,
    by_css,
    dash,
    login,
    screenshot,
    wait_for,
)


def session_of(set_cookie):
    """The "hutch_ui=VALUE" of a Set-Cookie header, and its attributes."""
    attrs = [a.strip() for a in set_cookie.split(";")]
    assert attrs[0].startswith("hutch_ui="), set_cookie
    return attrs[0], attrs[1:]


def csrf_of(dash, cookie):
    status, _, body = dash.tcp("GET", "/ui/session", headers={"Cookie": cookie})
    assert status == 200, body
    return json.loads(body)["csrf"]


def test_sign_out_ends_a_copied_cookie(dash, browser):  # noqa: F811
    drv = browser
    name = f"sess-{dash.mode}"
    dash.api.ok("POST", "/v1/sandboxes", {"name": name}, status=201)
    # Another session, signed in elsewhere (raw HTTP), goes on throughout.
    _, other_set = dash.login_cookie(dash.token)
    other, _ = session_of(other_set)

    login(drv, dash, dash.token)
    wait_for(drv, "the dashboard", lambda d: d.current_url.endswith("/ui/") and by_css(d, "main[data-ready]"))
    c = drv.get_cookie("hutch_ui")
    assert c, drv.get_cookies()
    stolen = f"hutch_ui={c['value']}"
    # The copy works while the session lives: reads, and a change with
    # its CSRF token.
    status, _, body = dash.tcp("GET", "/v1/sandboxes", headers={"Cookie": stolen})
    assert status == 200 and name in body.decode(), status
    csrf = csrf_of(dash, stolen)
    status, _, body = dash.tcp("POST", f"/v1/sandboxes/{name}/stop",
                               headers={"Cookie": stolen, "X-Hutch-CSRF": csrf})
    assert status == 204, body

    # Sign-out through the page.
    by_css(drv, "#logout")[0].click()
    wait_for(drv, "the login page after sign-out", lambda d: d.current_url.endswith("/ui/login"))
    assert drv.get_cookie("hutch_ui") is None
    screenshot(drv, f"signed-out-{dash.mode}")
    assert_no_console_error(drv)

    # The copy is refused now: the API (401), the pages (to the login),
    # a change even with the CSRF token it had (401, not done).
    status, _, _ = dash.tcp("GET", "/v1/sandboxes", headers={"Cookie": stolen})
    assert status == 401
    status, h, _ = dash.tcp("GET", "/ui/", headers={"Cookie": stolen})
    assert status == 303 and h["location"] == "/ui/login"
    status, _, body = dash.tcp("GET", "/ui/session", headers={"Cookie": stolen})
    assert status == 303, body
    status, _, _ = dash.tcp("DELETE", f"/v1/sandboxes/{name}",
                            headers={"Cookie": stolen, "X-Hutch-CSRF": csrf})
    assert status == 401
    assert dash.api.ok("GET", f"/v1/sandboxes/{name}").json["name"] == name
    # Putting the copy back into the browser does not sign it in again.
    drv.add_cookie({"name": "hutch_ui", "value": c["value"], "path": "/"})
    drv.get(dash.url)
    wait_for(drv, "the login page for the stale cookie", lambda d: d.current_url.endswith("/ui/login"))

    # Twin: the other session was not ended by this sign-out.
    status, _, body = dash.tcp("GET", "/v1/sandboxes", headers={"Cookie": other})
    assert status == 200 and name in body.decode(), status
    # ... until it signs out itself (raw HTTP, as the page does).
    status, h, _ = dash.tcp("POST", "/ui/logout", headers={
        "Cookie": other, "X-Hutch-CSRF": csrf_of(dash, other)})
    assert status == 303 and "Max-Age=0" in h["set-cookie"], h
    status, _, _ = dash.tcp("GET", "/v1/sandboxes", headers={"Cookie": other})
    assert status == 401
    # A sign-out without the CSRF token ends nothing (403 before it).
    _, third_set = dash.login_cookie(dash.token)
    third, _ = session_of(third_set)
    status, _, _ = dash.tcp("POST", "/ui/logout", headers={"Cookie": third})
    assert status == 403
    status, _, _ = dash.tcp("GET", "/v1/sandboxes", headers={"Cookie": third})
    assert status == 200


def test_the_default_session_lasts_12_hours(dash):  # noqa: F811
    before = int(time.time())
    _, set_cookie = dash.login_cookie(dash.token)
    after = int(time.time())
    cookie, attrs = session_of(set_cookie)
    assert "Max-Age=43200" in attrs, attrs
    # The expiry is the signed value's first field (hex seconds).
    value = cookie.split("=", 1)[1]
    expiry = int(value.split(".")[0], 16)
    assert before + 43200 <= expiry <= after + 43200, (value, before, after)
    status, _, _ = dash.tcp("GET", "/v1/sandboxes", headers={"Cookie": cookie})
    assert status == 200
    # A later (or earlier) expiry under the same MAC is no session.
    for other in (expiry + 3600, expiry - 1):
        forged = f"hutch_ui={other:016x}." + value.split(".", 1)[1]
        status, _, _ = dash.tcp("GET", "/v1/sandboxes", headers={"Cookie": forged})
        assert status == 401, forged


@pytest.fixture(params=["root", "user"])
def short_dash(request):
    runner = request.getfixturevalue(f"{request.param}_runner")
    d = None
    try:
        d = Dash(runner, extra=("--ui-session", "3s"))
        d.mode = request.param
        yield d
    finally:
        if d:
            d.srv.cleanup()


def test_a_session_expires(short_dash):
    dash = short_dash
    _, set_cookie = dash.login_cookie(dash.token)
    cookie, attrs = session_of(set_cookie)
    assert "Max-Age=3" in attrs, attrs
    status, _, _ = dash.tcp("GET", "/v1/sandboxes", headers={"Cookie": cookie})
    assert status == 200
    # Refused once its time is up (the server's clock decides, whatever
    # the browser keeps).
    deadline = time.monotonic() + WAIT
    while True:
        status, _, _ = dash.tcp("GET", "/v1/sandboxes", headers={"Cookie": cookie})
        if status == 401 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 401
    status, h, _ = dash.tcp("GET", "/ui/", headers={"Cookie": cookie})
    assert status == 303 and h["location"] == "/ui/login"
    # Twin: a new sign-in works again.
    _, set_cookie = dash.login_cookie(dash.token)
    fresh, _ = session_of(set_cookie)
    status, _, _ = dash.tcp("GET", "/v1/sandboxes", headers={"Cookie": fresh})
    assert status == 200


def test_ui_session_option_is_checked(root_runner):
    from test_serve import Server

    srv = Server(root_runner)
    try:
        for args, msg in ((["--ui", "--ui-session", "0"], "invalid --ui-session"),
                          (["--ui", "--ui-session", "169h"], "invalid --ui-session"),
                          (["--ui", "--ui-session", "12"], "invalid --ui-session"),
                          (["--ui-session", "1h"], "only used with --ui")):
            r = srv.run_fail("--socket", str(srv.state / "x.sock"), *args)
            assert r.returncode != 0 and msg in r.stderr, (args, r.stderr)
    finally:
        srv.cleanup()
