# SPDX-License-Identifier: LGPL-2.1-or-later
"""hutch serve --ui (docs/ui.md): the web dashboard, driven in headless
Chromium (Debian's chromium and chromium-driver, through python3-selenium)
against a real server on 127.0.0.1, as root and as the unprivileged user.

The dashboard logs in with the token (and refuses a wrong one), lists the
sandboxes the test made, shows a running command's output while it runs,
the exec history, a refused host with its reason, a changed file's diff,
and stops a sandbox; with no console error and no axe-core (from npm,
injected into the page) violation of WCAG 2 A/AA (labels, contrast, ...),
and reachable with the keyboard. Each view's screenshot is kept under the
test's tmp dir (the path is printed). The session cookie's CSRF rule is
checked with raw HTTP."""

import http.client
import json
import os
import secrets
import shutil
import time
import urllib.parse

import pytest

from conftest import node_package
from test_serve import Api, Server, read_line

READY_TIMEOUT = 30
WAIT = 60
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
AXE = "axe-core"
# As root, Chromium runs only without its sandbox; nothing here may
# reach the network but the server on 127.0.0.1.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
]


# ---- fixtures ----


@pytest.fixture(scope="session")
def axe():
    pkg = node_package(AXE, f"{AXE}@4", "axe.min.js")
    if pkg is None:
        pytest.fail(f"cannot install {AXE} with npm into the tests' cache")
    return (pkg / "axe.min.js").read_text()


class Dash:
    """hutch serve --ui on a unix socket and 127.0.0.1, with a token."""

    def __init__(self, runner, extra=()):
        self.srv = Server(runner)
        tdir = runner.make_dir(mode=0o700, name="token")
        self.token = secrets.token_urlsafe(32)
        tfile = tdir / "token"
        tfile.write_text(self.token + "\n")
        os.chmod(tfile, 0o600)
        runner.chown(tdir)
        sock = str(self.srv.state / "ui.sock")
        self.proc, unix, self.addr = self.srv.start(
            "--socket", sock, "--listen", "127.0.0.1:0", "--token-file", str(tfile), "--ui",
            *extra, expect_tcp=True,
        )
        line = read_line(self.proc, READY_TIMEOUT)
        assert line == f"dashboard at http://{self.addr}/ui/", line
        self.url = f"http://{self.addr}/ui/"
        self.api = Api(unix, self.srv.uid)
        self.runner = runner

    def tcp(self, method, path, body=None, headers=None):
        """One raw request over TCP: (status, headers, body bytes)."""
        host, port = self.addr.rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=WAIT)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def login_cookie(self, token):
        """POST /ui/login as the form does: the Set-Cookie answered."""
        body = urllib.parse.urlencode({"token": token})
        status, h, _ = self.tcp(
            "POST", "/ui/login", body,
            {"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert status == 303, status
        return h.get("location"), h.get("set-cookie")


@pytest.fixture(params=["root", "user"])
def dash(request):
    runner = request.getfixturevalue(f"{request.param}_runner")
    d = None
    try:
        d = Dash(runner)
        d.mode = request.param
        yield d
    finally:
        if d:
            d.srv.cleanup()


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.fail("chromium and chromium-driver are needed (tools/deps.sh test)")
    opts = Options()
    opts.binary_location = CHROMIUM
    for f in CHROMIUM_FLAGS:
        opts.add_argument(f)
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    opts.add_argument(f"--user-data-dir={profile}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(WAIT)
    drv.set_script_timeout(WAIT)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    drv.shots = shots
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)


# ---- helpers ----


def wait_for(drv, what, fn, timeout=WAIT):
    """Waits until fn(drv) is truthy (polling the page, which changes by
    itself); returns its value."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    def check(d):
        try:
            return fn(d)
        except StaleElementReferenceException:
            return False

    try:
        return WebDriverWait(drv, timeout, poll_frequency=0.1).until(check)
    except Exception as e:
        raise AssertionError(f"timed out waiting for {what}: {drv.current_url}\n"
                             f"{drv.find_element('tag name', 'body').text[:2000]}") from e


def by_css(drv, css):
    return drv.find_elements("css selector", css)


def text_of(drv, css):
    els = by_css(drv, css)
    return els[0].text if els else ""


def screenshot(drv, name):
    path = drv.shots / f"{name}.png"
    assert drv.save_screenshot(str(path)), path
    print(f"screenshot: {path}")
    return path


def console_errors(drv):
    return [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]


def assert_no_console_error(drv):
    errs = console_errors(drv)
    assert errs == [], errs


def assert_accessible(drv, axe_src, view):
    """axe-core's WCAG 2 A and AA rules find nothing in the page."""
    drv.execute_script(axe_src)
    violations = drv.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}})"
        ".then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact,"
        " nodes: v.nodes.map(n => n.html).slice(0, 3)}))))"
        ".catch(e => done([{id: 'axe-error', impact: String(e), nodes: []}]));"
    )
    assert violations == [], f"{view}: {json.dumps(violations, indent=1)}"


def login(drv, dash, token):
    drv.get(dash.url)
    wait_for(drv, "the login page", lambda d: d.current_url.endswith("/ui/login") and by_css(d, "#token"))
    field = by_css(drv, "#token")[0]
    field.send_keys(token)
    field.submit()


def make_sandboxes(dash, suffix):
    """Sandbox a-SUFFIX (an overlay workspace with a changed file, a
    refused host in its history and audit) and b-SUFFIX (never run)."""
    runner = dash.runner
    ws = runner.make_dir(name="ws")
    (ws / "notes.txt").write_text("first line\nsecond line\n")
    runner.chown(ws)
    a, b = f"a-{suffix}", f"b-{suffix}"
    dash.api.ok("POST", "/v1/sandboxes", {
        "name": a,
        "policy": {"workspace": {"path": str(ws), "mode": "overlay"},
                   "allow_hosts": ["allowed.example.test"]},
    }, status=201)
    dash.api.ok("POST", "/v1/sandboxes", {"name": b}, status=201)
    ans = dash.api.exec(a, ["sh", "-c", "echo 'a changed line' >> /workspace/notes.txt"])
    assert ans["outcome"]["exit_code"] == 0, ans
    ans = dash.api.exec(a, ["curl", "-sS", "--max-time", "20", "http://refused.example.test/x"])
    assert [d["host"] for d in ans["outcome"]["denied"]] == ["refused.example.test"], ans
    return a, b, ws


# ---- tests ----


def test_login_gate_refuses_a_wrong_token(dash, browser, axe):
    drv = browser
    # The API without a session or the token: 401, and no page but the login.
    status, _, _ = dash.tcp("GET", "/v1/sandboxes")
    assert status == 401
    status, h, _ = dash.tcp("GET", "/ui/app.js")
    assert status == 303 and h["location"] == "/ui/login"

    login(drv, dash, dash.token + "x")
    wait_for(drv, "the wrong-token alert", lambda d: by_css(d, "#failed") and by_css(d, "#failed")[0].is_displayed())
    assert "Wrong token" in text_of(drv, "#failed")
    assert drv.get_cookie("hutch_ui") is None
    screenshot(drv, f"login-refused-{dash.mode}")
    assert_accessible(drv, axe, "login page")
    drv.get(dash.url)
    wait_for(drv, "the login page again", lambda d: d.current_url.endswith("/ui/login"))
    assert drv.get_cookie("hutch_ui") is None

    # Twin: the right token, typed and sent with the keyboard (Enter).
    from selenium.webdriver.common.keys import Keys

    field = by_css(drv, "#token")[0]
    field.send_keys(dash.token + Keys.ENTER)
    wait_for(drv, "the dashboard", lambda d: d.current_url.endswith("/ui/") and by_css(d, "main[data-ready]"))
    cookie = drv.get_cookie("hutch_ui")
    assert cookie and cookie["httpOnly"] and cookie["sameSite"] == "Strict", cookie
    # Not readable by the page's script.
    assert "hutch_ui" not in drv.execute_script("return document.cookie")
    assert_no_console_error(drv)

    # Signing out ends it in the browser.
    by_css(drv, "#logout")[0].click()
    wait_for(drv, "the login page after sign-out", lambda d: d.current_url.endswith("/ui/login"))
    assert drv.get_cookie("hutch_ui") is None


def test_changes_need_the_csrf_token(dash):
    suffix = secrets.token_hex(3)
    name = f"c-{suffix}"
    dash.api.ok("POST", "/v1/sandboxes", {"name": name}, status=201)
    dash.api.exec(name, ["true"])
    assert dash.api.ok("GET", f"/v1/sandboxes/{name}").json["state"] == "running"

    where, set_cookie = dash.login_cookie("wrong-" + dash.token)
    assert where == "/ui/login#failed" and set_cookie is None
    where, set_cookie = dash.login_cookie(dash.token)
    assert where == "/ui/"
    attrs = [a.strip() for a in set_cookie.split(";")]
    assert attrs[0].startswith("hutch_ui=")
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attrs), set_cookie
    cookie = {"Cookie": attrs[0]}

    # Pages carry the strict CSP.
    status, h, _ = dash.tcp("GET", "/ui/", headers=cookie)
    assert status == 200
    csp = h["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp, csp
    assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp, csp

    # Reads pass with the session.
    status, _, body = dash.tcp("GET", "/v1/sandboxes", headers=cookie)
    assert status == 200 and name in body.decode()
    status, _, body = dash.tcp("GET", "/ui/session", headers=cookie)
    csrf = json.loads(body)["csrf"]
    assert status == 200 and len(csrf) == 64

    # A change without the CSRF token, or with a wrong one, or from another
    # origin (another port of the same host is the same site: the cookie
    # goes along): 403, nothing done.
    stop = f"/v1/sandboxes/{name}/stop"
    host, port = dash.addr.rsplit(":", 1)
    other = f"http://{host}:{int(port) % 65535 + 1}"
    for extra in ({}, {"X-Hutch-CSRF": "0" * 64}, {"X-Hutch-CSRF": attrs[0].split("=", 1)[1]},
                  {"X-Hutch-CSRF": csrf, "Origin": other}):
        status, _, body = dash.tcp("POST", stop, headers={**cookie, **extra})
        assert status == 403, (extra, body)
        assert json.loads(body)["error"]["code"] == "permission_denied"
        assert dash.api.ok("GET", f"/v1/sandboxes/{name}").json["state"] == "running"
    # A forged cookie is no session, with or without a token.
    forged = {"Cookie": "hutch_ui=" + "0" * 16 + "." + "0" * 64}
    status, _, _ = dash.tcp("GET", "/v1/sandboxes", headers=forged)
    assert status == 401
    status, _, _ = dash.tcp("POST", stop, headers={**forged, "X-Hutch-CSRF": csrf})
    assert status == 401
    assert dash.api.ok("GET", f"/v1/sandboxes/{name}").json["state"] == "running"

    # A WebSocket-style upgrade from another origin is refused too.
    status, _, _ = dash.tcp("GET", "/v1/sandboxes", headers={
        **cookie, "Upgrade": "websocket", "Connection": "Upgrade", "Origin": other})
    assert status == 403

    # Twin: with it, from this origin, the change is made.
    status, _, body = dash.tcp("POST", stop, headers={
        **cookie, "X-Hutch-CSRF": csrf, "Origin": f"http://{dash.addr}"})
    assert status == 204, body
    assert dash.api.ok("GET", f"/v1/sandboxes/{name}").json["state"] == "stopped"

    # The unix socket serves the pages too, without a login (it needs none).
    r = dash.api.call("GET", "/ui/")
    assert r.status == 200 and "default-src 'none'" in r.headers["Content-Security-Policy"]
    assert dash.api.ok("GET", "/ui/session").json == {"csrf": None, "login": False}
    status, _, body = dash.tcp("GET", "/ui/session", headers=cookie)
    assert json.loads(body)["login"] is True

    # An unauthenticated login POST is capped before its body is read.
    status, _, _ = dash.tcp("POST", "/ui/login", b"token=" + b"x" * 9000,
                            {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 413


def test_dashboard(dash, browser, axe):
    drv = browser
    suffix = secrets.token_hex(3)
    a, b, ws = make_sandboxes(dash, suffix)

    login(drv, dash, dash.token)
    wait_for(drv, "the dashboard", lambda d: by_css(d, "main[data-ready]"))

    # ---- the list ----
    rows = wait_for(drv, "both sandboxes listed", lambda d: {
        r.get_attribute("data-sandbox"): r.text for r in by_css(d, "tr[data-sandbox]")
    } if len(by_css(d, "tr[data-sandbox]")) == 2 else None)
    assert set(rows) == {a, b}, rows
    assert "running" in rows[a] and "stopped" in rows[b], rows
    screenshot(drv, f"list-{dash.mode}")
    assert_no_console_error(drv)
    assert_accessible(drv, axe, "sandbox list")

    # Keyboard: Tab reaches the sandbox's link, Enter opens it.
    from selenium.webdriver.common.keys import Keys

    body = by_css(drv, "body")[0]
    body.send_keys(Keys.TAB)
    for _ in range(20):
        active = drv.switch_to.active_element
        if active.get_attribute("href") and active.get_attribute("href").endswith(f"#/sb/{a}"):
            break
        active.send_keys(Keys.TAB)
    else:
        pytest.fail("Tab never reached the sandbox's link")
    active.send_keys(Keys.ENTER)
    wait_for(drv, "the sandbox view", lambda d: d.current_url.endswith(f"#/sb/{a}") and by_css(d, "#exec-cmd"))

    # ---- history, network, diff ----
    hist = wait_for(drv, "the exec history", lambda d: text_of(d, "#history table"))
    assert "refused.example.test" in hist and "exited" in hist, hist
    audit = wait_for(drv, "the network audit", lambda d: text_of(d, "#audit table"))
    refused = [line for line in audit.splitlines() if "refused.example.test" in line]
    assert refused and "deny" in refused[0] and "allowlist" in refused[0], audit
    diff_button = wait_for(drv, "the changed file", lambda d: by_css(d, "#diff button[data-path='notes.txt']"))
    diff_button[0].click()
    patch = wait_for(drv, "the file's diff", lambda d: text_of(d, "#diff-patch"))
    assert "+++ b/notes.txt" in patch and "+a changed line" in patch, patch
    assert " first line" in patch and "@@" in patch, patch
    # The host's file is unchanged (no apply).
    assert (ws / "notes.txt").read_text() == "first line\nsecond line\n"
    screenshot(drv, f"sandbox-{dash.mode}")
    assert_no_console_error(drv)
    assert_accessible(drv, axe, "sandbox view")

    # ---- live output: the first line shows while the command still runs ----
    gate = f"/tmp/go-{suffix}"
    cmd = by_css(drv, "#exec-cmd")[0]
    cmd.send_keys(f"echo tick-one; while [ ! -e {gate} ]; do sleep 0.05; done; echo tick-two")
    by_css(drv, "#exec-run")[0].click()
    wait_for(drv, "the first line, live", lambda d: "tick-one" in text_of(d, "#exec-output"))
    assert "tick-two" not in text_of(drv, "#exec-output")
    assert not by_css(drv, "#exec-state[data-done]")
    assert "Running" in text_of(drv, "#exec-state")
    screenshot(drv, f"exec-live-{dash.mode}")
    # Released through the API: the command ends, its outcome shows.
    assert dash.api.exec(a, ["touch", gate])["outcome"]["exit_code"] == 0
    wait_for(drv, "the second line", lambda d: by_css(d, "#exec-state[data-done]"))
    assert "tick-one\ntick-two" in text_of(drv, "#exec-output")
    assert "exit code 0" in text_of(drv, "#exec-state")

    # ---- the chart: samples from the cgroup ----
    now = wait_for(drv, "a stats sample", lambda d: text_of(d, "#chart-now").startswith("Memory") and text_of(d, "#chart-now"))
    st = dash.api.ok("GET", f"/v1/sandboxes/{a}/stats").json
    assert st["running"] is True, st
    if dash.mode == "root":
        assert "Memory —" not in now, now
        # The sandbox's own cgroup (a shell and sleep), not the keeper's or
        # hutch-proxy's.
        assert 0 < st["memory_bytes"] < 256 << 20, st
        assert st["cpu_usec"] > 0, st
    screenshot(drv, f"chart-{dash.mode}")

    # ---- stop, after a confirmation ----
    by_css(drv, "#btn-stop")[0].click()
    wait_for(drv, "the confirmation", lambda d: by_css(d, "dialog[open]"))
    screenshot(drv, f"confirm-stop-{dash.mode}")
    # Cancel first: nothing happens.
    by_css(drv, "dialog[open] button[value='cancel']")[0].click()
    wait_for(drv, "the dialog closed", lambda d: not by_css(d, "dialog[open]"))
    assert dash.api.ok("GET", f"/v1/sandboxes/{a}").json["state"] == "running"
    by_css(drv, "#btn-stop")[0].click()
    wait_for(drv, "the confirmation", lambda d: by_css(d, "dialog[open]"))
    by_css(drv, "#confirm-ok")[0].click()
    wait_for(drv, "the stopped state", lambda d: text_of(d, "#sb-state") == "stopped")
    assert dash.api.ok("GET", f"/v1/sandboxes/{a}").json["state"] == "stopped"
    st = dash.api.ok("GET", f"/v1/sandboxes/{a}/stats").json
    assert st["running"] is False and st["memory_bytes"] is None and st["cpu_usec"] is None, st
    wait_for(drv, "the chart saying so", lambda d: text_of(d, "#chart-now") == "Not running.")
    screenshot(drv, f"stopped-{dash.mode}")
    assert_no_console_error(drv)


def test_snapshot_fork_and_restore(dash, browser, axe):
    drv = browser
    suffix = secrets.token_hex(3)
    name, snap, fork = f"s-{suffix}", f"s-{suffix}.one", f"f-{suffix}"
    dash.api.ok("POST", "/v1/sandboxes", {"name": name}, status=201)
    assert dash.api.exec(name, ["sh", "-c", "echo kept > /root/state.txt"])["outcome"]["exit_code"] == 0
    dash.api.ok("POST", f"/v1/sandboxes/{name}/stop", status=204)

    login(drv, dash, dash.token)
    wait_for(drv, "the dashboard", lambda d: by_css(d, "main[data-ready]"))
    drv.get(f"{dash.url}#/sb/{name}")
    wait_for(drv, "the snapshot form", lambda d: by_css(d, "#snap-name"))

    # Take a snapshot.
    by_css(drv, "#snap-name")[0].send_keys(snap)
    by_css(drv, "#snap-create")[0].click()
    row = wait_for(drv, "the snapshot listed", lambda d: by_css(d, f"tr[data-snapshot='{snap}']"))
    assert {"name": snap} in dash.api.ok("GET", "/v1/snapshots").json["snapshots"]
    screenshot(drv, f"snapshots-{dash.mode}")
    assert_accessible(drv, axe, "snapshots")

    # Change the sandbox, then restore it: only after the confirmation.
    assert dash.api.exec(name, ["sh", "-c", "echo changed > /root/state.txt"])["outcome"]["exit_code"] == 0
    by_css(row[0], "button.restore")[0].click()
    wait_for(drv, "the confirmation", lambda d: by_css(d, "dialog[open]"))
    assert "Restore" in text_of(drv, "#confirm-text")
    by_css(drv, "dialog[open] button[value='cancel']")[0].click()
    wait_for(drv, "the dialog closed", lambda d: not by_css(d, "dialog[open]"))
    state = dash.api.ok("GET", f"/v1/sandboxes/{name}/files?path=/root/state.txt").data
    assert state == b"changed\n"
    row = by_css(drv, f"tr[data-snapshot='{snap}']")
    by_css(row[0], "button.restore")[0].click()
    wait_for(drv, "the confirmation", lambda d: by_css(d, "dialog[open]"))
    by_css(drv, "#confirm-ok")[0].click()
    wait_for(drv, "the restore done", lambda d: by_css(d, "p.restored"))
    state = dash.api.ok("GET", f"/v1/sandboxes/{name}/files?path=/root/state.txt").data
    assert state == b"kept\n"

    # Fork a new sandbox from the snapshot: the page goes to it.
    row = by_css(drv, f"tr[data-snapshot='{snap}']")
    by_css(row[0], "input")[0].send_keys(fork)
    by_css(row[0], "button.fork")[0].click()
    wait_for(drv, "the fork's view", lambda d: d.current_url.endswith(f"#/sb/{fork}") and by_css(d, "#sb-state"))
    assert dash.api.ok("GET", f"/v1/sandboxes/{fork}").json["parent"] == snap
    state = dash.api.ok("GET", f"/v1/sandboxes/{fork}/files?path=/root/state.txt").data
    assert state == b"kept\n"
    screenshot(drv, f"fork-{dash.mode}")
    # A sandbox without a workspace has no diff: said in the page, which
    # asks the API nothing for it (test_ui_no_workspace.py), so no error.
    wait_for(drv, "the diff section", lambda d: "No overlay workspace" in text_of(d, "#diff"))
    assert_no_console_error(drv)
