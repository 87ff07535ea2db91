# SPDX-License-Identifier: LGPL-2.1-or-later
"""The dashboard's running commands (docs/ui.md, issue 23): a command an
agent started detached (`hutch exec -d`, not through the page) is listed
in the sandbox's view (GET .../execs), and its output streams into the
page while it runs (GET .../execs/ID/output?follow=1), then its outcome;
once ended it leaves the list. An attached command is listed without an
output to follow (its output goes to its client only). In headless
Chromium through test_ui.py's fixtures, as root and as the user."""

import secrets

from test_ui import (  # noqa: F401 (fixtures)
    assert_accessible,
    assert_no_console_error,
    axe,
    browser,
    by_css,
    dash,
    login,
    screenshot,
    text_of,
    wait_for,
)


def test_detached_exec_output_streams_into_the_page(dash, browser, axe):  # noqa: F811
    drv = browser
    name = f"p-{secrets.token_hex(3)}"
    gate = f"/tmp/go-{name}"
    ws = dash.runner.make_dir(name="ws")
    dash.runner.chown(ws)
    dash.api.ok("POST", "/v1/sandboxes", {
        "name": name, "policy": {"workspace": {"path": str(ws), "mode": "overlay"}}}, status=201)
    r = dash.srv.hutch("exec", name, "-d", "--", "sh", "-c",
                       f"echo tick-one; while [ ! -e {gate} ]; do sleep 0.05; done; echo tick-two")
    assert r.returncode == 0, r.stderr
    xid = [x["id"] for x in dash.api.ok("GET", f"/v1/sandboxes/{name}/execs").json["execs"]][0]
    # An attached one too (through the API's stream, kept open).
    c, resp = dash.api.stream(name, {"argv": ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"]})
    assert resp.status == 200

    login(drv, dash, dash.token)
    wait_for(drv, "the dashboard", lambda d: by_css(d, "main[data-ready]"))
    drv.get(f"{dash.url}#/sb/{name}")
    rows = wait_for(drv, "both commands listed",
                    lambda d: by_css(d, "#procs tr[data-exec]") if len(by_css(d, "#procs tr[data-exec]")) == 2 else None)
    attached = [r for r in rows if r.get_attribute("data-exec") != str(xid)][0]
    assert "to its own client" in attached.text
    assert not attached.find_elements("css selector", "button[data-follow]")
    by_css(drv, f"#procs button[data-follow='{xid}']")[0].click()
    wait_for(drv, "the first line, live", lambda d: "tick-one" in text_of(d, f"#proc-out-{xid}"))
    assert "tick-two" not in text_of(drv, f"#proc-out-{xid}")
    assert "Running" in text_of(drv, f"#proc-state-{xid}") or "Following" in text_of(drv, f"#proc-state-{xid}")
    screenshot(drv, f"procs-live-{dash.mode}")
    assert_no_console_error(drv)
    assert_accessible(drv, axe, "running commands")

    # Released through the API: both end, the outcome shows, the list empties.
    assert dash.api.exec(name, ["touch", gate])["outcome"]["exit_code"] == 0
    resp.read()
    c.close()
    wait_for(drv, "the outcome", lambda d: "exit code 0" in text_of(d, f"#proc-state-{xid}"))
    assert "tick-one\ntick-two" in text_of(drv, f"#proc-out-{xid}")
    wait_for(drv, "the list emptied", lambda d: by_css(d, "#procs-none"))
    screenshot(drv, f"procs-done-{dash.mode}")
    assert_no_console_error(drv)
