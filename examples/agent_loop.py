#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""An agent loop with the Python client (docs/clients.md): the "model"
proposes shell commands, each runs in one persistent sandbox with the
repository as an overlay workspace, and the outcome goes back to the
model. The model here is a script; put an LLM call in next_step().

    PYTHONPATH=clients/python python3 examples/agent_loop.py /path/to/repo
"""

import sys

import hutch

SCRIPT = [
    ["sh", "-c", "ls -la"],
    ["sh", "-c", "echo 'print(6 * 7)' > answer.py && python3 answer.py"],
    ["sh", "-c", "cat /etc/shadow"],  # the sandbox's own view, never the host's file
]


def next_step(history):
    """The model: the next command, or None when done."""
    return SCRIPT[len(history)] if len(history) < len(SCRIPT) else None


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    history = []
    with hutch.Client.connect() as c:
        sb = c.create("agent-loop", policy={"workspace": {"path": repo, "mode": "overlay"},
                                            "limits": {"memory": "1g"}})
        try:
            while (argv := next_step(history)) is not None:
                r = sb.exec(argv, cwd="/workspace", timeout_ms=60_000)
                print(f"$ {argv[-1]}\n{r.stdout_text}{r.stderr_text}"
                      f"[{r.outcome.reason} {r.exit_code}, {r.outcome.wall_ms} ms]")
                history.append((argv, r))
            print("changes the agent made:", [ch["path"] for ch in sb.diff()])
        finally:
            sb.delete()


if __name__ == "__main__":
    main()
