# SPDX-License-Identifier: LGPL-2.1-or-later
"""--policy FILE: the same fields as the flags (docs/policy.md); flags
override the file. (Errors in the file: test_bad_input.py.)"""

import json


def policy(sbx, doc):
    d = sbx.make_dir()
    p = d / "policy.json"
    p.write_text(json.dumps(doc, indent=2) + "\n")
    sbx.chown(d)
    return p


def test_policy_sets_fields(sbx):
    ws = sbx.make_dir(name="ws")
    (ws / "file.txt").write_text("from policy ws\n")
    sbx.chown(ws)
    p = policy(
        sbx,
        {
            "hostname": "from-policy",
            "env": {"POLICY_VAR": "pv"},
            "workspace": {"path": str(ws), "mode": "copy"},
            "tmpfs": [{"path": "/scratch", "size": "8m"}],
        },
    )
    script = 'hostname; echo "$POLICY_VAR"; pwd; cat file.txt; df -k /scratch | tail -1'
    r = sbx.run(["--policy", p, "--", "sh", "-c", script])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:4] == ["from-policy", "pv", "/workspace", "from policy ws"]
    assert lines[4].split()[1] == str(8 * 1024), lines[4]


def test_flags_override_policy(sbx):
    p = policy(sbx, {"hostname": "from-policy"})
    assert sbx.fact("hostname", flags=["--policy", p, "--hostname", "from-flag"]) == "from-flag"
    # The flag wins wherever it is on the command line.
    assert sbx.fact("hostname", flags=["--hostname", "from-flag", "--policy", p]) == "from-flag"


def test_policy_read_only(sbx):
    """read_only has docker's meaning: $HOME is read-only, a bind keeps its
    own read_only."""
    d = sbx.make_dir(mode=0o777)
    p = policy(sbx, {"read_only": True, "binds": [{"source": str(d), "target": "/srv/data"}]})
    assert sbx.fact("create", "/root/x", flags=["--policy", p]) in ("EROFS", "EACCES", "EPERM")
    assert sbx.fact("create", "/srv/data/x", flags=["--policy", p]) == "ok"
    pro = policy(sbx, {"read_only": True,
                       "binds": [{"source": str(d), "target": "/srv/data", "read_only": True}]})
    assert sbx.fact("create", "/srv/data/y", flags=["--policy", pro]) in (
        "EROFS", "EACCES", "EPERM")
    # Twin: without read_only $HOME is writable.
    p2 = policy(sbx, {"binds": [{"source": str(d), "target": "/srv/data"}]})
    assert sbx.fact("create", "/root/x", flags=["--policy", p2]) == "ok"
