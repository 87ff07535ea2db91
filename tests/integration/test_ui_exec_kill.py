# SPDX-License-Identifier: LGPL-2.1-or-later
"""The dashboard kills a running command after asking (docs/ui.md, issue
23): a command an agent started detached (`hutch exec -d`) is listed in the
sandbox's view with a Kill button; cancelling the confirmation leaves it
running, confirming sends what `hutch kill` sends (POST .../signal) and it
ends by SIGTERM while its sandbox's other command goes on. In headless
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


def running_ids(dash, name):
    return sorted(x["id"] for x in dash.api.ok("GET", f"/v1/sandboxes/{name}/execs").json["execs"])


def test_kill_a_running_command_after_a_confirmation(dash, browser, axe):  # noqa: F811
    drv = browser
    name = f"k-{secrets.token_hex(3)}"
    ws = dash.runner.make_dir(name="ws")
    dash.runner.chown(ws)
    dash.api.ok("POST", "/v1/sandboxes", {
        "name": name, "policy": {"workspace": {"path": str(ws), "mode": "overlay"}}}, status=201)
    for _ in range(2):
        r = dash.srv.hutch("exec", name, "-d", "--", "sleep", "3600")
        assert r.returncode == 0, r.stderr
    victim, other = running_ids(dash, name)

    login(drv, dash, dash.token)
    wait_for(drv, "the dashboard", lambda d: by_css(d, "main[data-ready]"))
    drv.get(f"{dash.url}#/sb/{name}")
    wait_for(drv, "both commands listed", lambda d: len(by_css(d, "#procs button[data-kill]")) == 2)
    assert_accessible(drv, axe, "running commands with kill buttons")

    # Cancelled: nothing is sent.
    by_css(drv, f"#procs button[data-kill='{victim}']")[0].click()
    wait_for(drv, "the confirmation", lambda d: by_css(d, "dialog[open]"))
    assert f"Kill command {victim}" in text_of(drv, "#confirm-text")
    screenshot(drv, f"confirm-kill-{dash.mode}")
    by_css(drv, "dialog[open] button[value='cancel']")[0].click()
    wait_for(drv, "the dialog closed", lambda d: not by_css(d, "dialog[open]"))
    assert running_ids(dash, name) == [victim, other]

    # Confirmed: it ends by SIGTERM; the other command runs on.
    by_css(drv, f"#procs button[data-kill='{victim}']")[0].click()
    wait_for(drv, "the confirmation", lambda d: by_css(d, "dialog[open]"))
    by_css(drv, "#confirm-ok")[0].click()
    ended = dash.api.ok("GET", f"/v1/sandboxes/{name}/execs/{victim}?wait=1").json
    # As `hutch kill` reports it: reason "killed", the shell's 128 + 15.
    assert ended["running"] is False and ended["outcome"]["reason"] == "killed", ended
    assert ended["outcome"]["exit_code"] == 143, ended
    wait_for(drv, "the killed command gone from the list",
             lambda d: [r.get_attribute("data-exec") for r in by_css(d, "#procs tr[data-exec]")] == [str(other)])
    assert running_ids(dash, name) == [other]
    screenshot(drv, f"killed-{dash.mode}")
    assert_no_console_error(drv)
    assert not by_css(drv, "#status:not([hidden])"), text_of(drv, "#status")
