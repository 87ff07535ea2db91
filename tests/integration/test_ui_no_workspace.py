# SPDX-License-Identifier: LGPL-2.1-or-later
"""The view of a sandbox without an overlay workspace loads with no console
error (issue 23's "no console error"): its changes section says that diff
and apply need `--workspace DIR:overlay` and asks the API nothing (the API
answers such a diff with a 400, which Chromium logs as an error). The twin:
an overlay sandbox's section lists its changed file. In headless Chromium
through test_ui.py's fixtures, as root and as the user."""

import secrets

from test_ui import (  # noqa: F401 (fixtures)
    assert_no_console_error,
    browser,
    by_css,
    dash,
    login,
    text_of,
    wait_for,
)


def test_a_sandbox_without_an_overlay_workspace_shows_no_error(dash, browser):  # noqa: F811
    drv = browser
    bare, mounted, overlay = (f"{k}-{secrets.token_hex(3)}" for k in ("nows", "mnt", "ovl"))
    ws = dash.runner.make_dir(name="ws")
    (ws / "notes.txt").write_text("one\n")
    dash.runner.chown(ws)
    dash.api.ok("POST", "/v1/sandboxes", {"name": bare}, status=201)
    dash.api.ok("POST", "/v1/sandboxes", {
        "name": mounted, "policy": {"workspace": {"path": str(ws), "mode": "mount"}}}, status=201)
    dash.api.ok("POST", "/v1/sandboxes", {
        "name": overlay, "policy": {"workspace": {"path": str(ws), "mode": "overlay"}}}, status=201)
    ans = dash.api.exec(overlay, ["sh", "-c", "echo two >> /workspace/notes.txt"])
    assert ans["outcome"]["exit_code"] == 0, ans

    login(drv, dash, dash.token)
    wait_for(drv, "the dashboard", lambda d: by_css(d, "main[data-ready]"))
    for name in (bare, mounted):
        drv.get(f"{dash.url}#/sb/{name}")
        wait_for(drv, f"{name}'s changes section",
                 lambda d: "No overlay workspace" in text_of(d, "#diff"))
        assert_no_console_error(drv)

    # Twin: the overlay sandbox's changed file is listed.
    drv.get(f"{dash.url}#/sb/{overlay}")
    wait_for(drv, "the changed file", lambda d: by_css(d, "#diff button[data-path='notes.txt']")
             or by_css(d, "#diff button[data-path='/notes.txt']"))
    assert "No overlay workspace" not in text_of(drv, "#diff")
    assert_no_console_error(drv)
