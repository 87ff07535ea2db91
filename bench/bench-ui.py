#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The dashboard under load (issue 23): `hutch serve --ui` with N sandboxes
(default 100, RUNNING of them started) and S live output streams (default
10: streaming execs printing a line every 0.2 s, read by clients of the
API), and the dashboard's list page open in headless Chromium (it refreshes
every 5 s and asks each running sandbox's stats).

Measured:
- page interactive: the list page loaded in a fresh tab, from navigation
  start to DOMContentLoaded (domInteractive) and to the list drawn (the
  page's "hutch-ready" mark: the sandboxes and their stats fetched and
  rendered); median of ROUNDS loads;
- server CPU: the server process's user + system time over WINDOW
  seconds, as a share of one CPU, and its workers' (the forks that run the
  slow routes: stop, diff, ...; listing no longer mounts disk images), with
  the streams and the open list page; then the same with the streams
  stopped and the page idle on a sandbox's view (its stats stream only).

    bench/bench-ui.py [BUILD_DIR] [SANDBOXES] [RUNNING] [STREAMS]
"""

import http.client
import json
import os
import pathlib
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "build").resolve()
SANDBOXES = int(sys.argv[2]) if len(sys.argv) > 2 else 100
RUNNING = int(sys.argv[3]) if len(sys.argv) > 3 else 20
STREAMS = int(sys.argv[4]) if len(sys.argv) > 4 else 10
ROUNDS = 5
WINDOW = 30
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self.path_ = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path_)


def call(sock, method, url, body=None):
    c = Unix(sock)
    try:
        c.request(method, url, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        assert r.status < 300, (method, url, r.status, data)
        return data
    finally:
        c.close()


def stream(sock, name, stop, lines):
    """One streaming exec printing a line every 0.2 s until @stop."""
    c = Unix(sock)
    c.request("POST", f"/v1/sandboxes/{name}/exec/stream",
              body=json.dumps({"argv": ["sh", "-c", "while :; do echo tick; sleep 0.2; done"]}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    while not stop.is_set():
        if not r.readline():
            break
        lines[name] = lines.get(name, 0) + 1
    c.close()  # the command dies with its client


def cpu_seconds(pid):
    """(the server's own cpu time, its reaped workers')."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime, stime, cutime, cstime (fields 14-17 of proc_pid_stat(5))
    t = [int(x) / os.sysconf("SC_CLK_TCK") for x in fields[11:15]]
    return t[0] + t[1], t[2] + t[3]


def share(c0, c1, secs):
    return [(b - a) / secs * 100 for a, b in zip(c0, c1)]


def main():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-ui-"))
    os.chmod(tmp, 0o700)
    env = dict(os.environ, HUTCH_HOME=str(tmp / "home"), HUTCH_STATE_DIR=str(tmp / "state"))
    for d in ("home", "state"):
        (tmp / d).mkdir(mode=0o700)
    token = secrets.token_urlsafe(32)
    (tmp / "token").write_text(token)
    os.chmod(tmp / "token", 0o600)
    sock = str(tmp / "api.sock")
    hutch = str(BUILD / "src" / "cli" / "hutch")
    srv = subprocess.Popen([hutch, "serve", "--socket", sock, "--listen", "127.0.0.1:0",
                            "--token-file", str(tmp / "token"), "--ui"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    stop = threading.Event()
    threads, drv = [], None
    try:
        srv.stdout.readline()
        addr = srv.stdout.readline().decode().strip().split("tcp:", 1)[1]
        srv.stdout.readline()
        names = [f"s{i:03d}" for i in range(SANDBOXES)]
        for n in names:
            call(sock, "POST", "/v1/sandboxes", {"name": n})
        for n in names[:RUNNING]:
            call(sock, "POST", f"/v1/sandboxes/{n}/exec", {"argv": ["true"]})
        lines = {}
        for n in names[:STREAMS]:
            t = threading.Thread(target=stream, args=(sock, n, stop, lines), daemon=True)
            t.start()
            threads.append(t)

        opts = Options()
        opts.binary_location = "/usr/bin/chromium"
        for f in CHROMIUM_FLAGS:
            opts.add_argument(f)
        opts.add_argument(f"--user-data-dir={tmp / 'chromium'}")
        drv = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        drv.get(f"http://{addr}/ui/login")
        field = drv.find_element("css selector", "#token")
        field.send_keys(token)
        field.submit()
        time.sleep(2)

        interactive, ready = [], []
        for _ in range(ROUNDS):
            drv.get("about:blank")
            drv.get(f"http://{addr}/ui/#/")
            t0 = time.monotonic()
            while not drv.execute_script(
                    "return performance.getEntriesByName('hutch-ready').length"):
                assert time.monotonic() - t0 < 30, "the list never got ready"
                time.sleep(0.02)
            nav = drv.execute_script(
                "const n = performance.getEntriesByType('navigation')[0];"
                "return [n.domInteractive, performance.getEntriesByName('hutch-ready')[0].startTime,"
                " document.querySelectorAll('tr[data-sandbox]').length];")
            assert nav[2] == SANDBOXES, nav
            slow = drv.execute_script(
                "return performance.getEntriesByType('resource')"
                ".filter(e => e.duration > 200).map(e => [e.name, Math.round(e.startTime),"
                " Math.round(e.duration)])")
            if slow:
                print("slow requests:", slow[:10])
            interactive.append(nav[0])
            ready.append(nav[1])

        time.sleep(3)
        c0, t0 = cpu_seconds(srv.pid), time.monotonic()
        l0 = sum(lines.values())
        time.sleep(WINDOW)
        busy = share(c0, cpu_seconds(srv.pid), time.monotonic() - t0)
        streamed = (sum(lines.values()) - l0) / (time.monotonic() - t0)

        stop.set()
        for t in threads:
            t.join(timeout=10)
        drv.get(f"http://{addr}/ui/#/sb/{names[STREAMS]}")
        time.sleep(10)
        c0, t0 = cpu_seconds(srv.pid), time.monotonic()
        time.sleep(WINDOW)
        idle = share(c0, cpu_seconds(srv.pid), time.monotonic() - t0)

        print(f"sandboxes {SANDBOXES} (running {RUNNING}), live streams {STREAMS}")
        print(f"page interactive (domInteractive), median of {ROUNDS}: "
              f"{statistics.median(interactive):.0f} ms (max {max(interactive):.0f})")
        print(f"list drawn (sandboxes and stats fetched), median: "
              f"{statistics.median(ready):.0f} ms (max {max(ready):.0f})")
        print(f"server CPU with the streams ({streamed:.0f} lines/s) and the list page open: "
              f"{busy[0]:.2f} % of one CPU, its workers {busy[1]:.2f} %")
        print(f"server CPU idle (a sandbox's view open, its stats stream): {idle[0]:.2f} %, "
              f"its workers {idle[1]:.2f} %")
    finally:
        stop.set()
        if drv:
            drv.quit()
        srv.terminate()
        srv.wait(timeout=30)
        subprocess.run([hutch, "ls", "--json"], env=env, capture_output=True)
        for n in [f"s{i:03d}" for i in range(SANDBOXES)]:
            subprocess.run([hutch, "rm", "--force", n], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
