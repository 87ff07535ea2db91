/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The hutch dashboard (docs/ui.md): a client of the HTTP API (docs/api.md)
 * and nothing else. Everything a sandbox produced (names, commands, output,
 * host names, file contents) is untrusted: it only ever enters the page as
 * text (textContent), never as HTML. */
"use strict";

const LIST_REFRESH_MS = 5000;
const CHART_POINTS = 150; /* 5 minutes of samples, one every 2 s */

let csrf = null;
let timer = null;
let cleanups = [];

/* ---- helpers ---- */

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return e;
}

function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}

function when(ms) {
  if (!ms) return "—";
  return new Date(ms).toLocaleString();
}

function enc(name) {
  return encodeURIComponent(name);
}

function showStatus(msg) {
  const s = document.getElementById("status");
  s.textContent = msg || "";
  s.hidden = !msg;
}

async function api(method, path, body) {
  const headers = {};
  if (method !== "GET" && csrf) headers["X-Hutch-CSRF"] = csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (r.status === 401) {
    location.assign("/ui/login");
    throw new Error("not signed in");
  }
  if (!r.ok) {
    let msg = `${method} ${path}: ${r.status}`;
    try {
      const j = await r.json();
      if (j.error) msg = j.error.message;
    } catch (e) {
      /* not JSON */
    }
    throw new Error(msg);
  }
  if (r.status === 204) return null;
  const type = r.headers.get("Content-Type") || "";
  return type.startsWith("application/json") ? r.json() : r.text();
}

/* Asks before a destructive action; resolves true when confirmed. */
function confirmAction(text) {
  const d = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
    d.returnValue = "";
    d.showModal();
    document.getElementById("confirm-ok").focus();
  });
}

async function act(label, fn) {
  try {
    showStatus("");
    await fn();
  } catch (e) {
    showStatus(`${label} failed: ${e.message}`);
  }
}

function table(caption, headers, rows) {
  return el(
    "table",
    {},
    el("caption", { class: "visually-hidden", text: caption }),
    el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, ...rows),
  );
}

/* ---- the sandboxes ---- */

async function viewList(main) {
  const body = el("div", {}, el("p", { text: "Loading…" }));
  main.replaceChildren(el("h1", { text: "Sandboxes" }), body);
  const refresh = async () => {
    try {
      const { sandboxes } = await api("GET", "/v1/sandboxes");
      const stats = await Promise.all(
        sandboxes.map((s) =>
          s.state === "running"
            ? api("GET", `/v1/sandboxes/${enc(s.name)}/stats`).catch(() => null)
            : null,
        ),
      );
      body.replaceChildren(listTable(sandboxes, stats));
    } catch (e) {
      showStatus(`listing the sandboxes failed: ${e.message}`);
    }
    timer = setTimeout(refresh, LIST_REFRESH_MS);
  };
  await refresh();
}

function listTable(sandboxes, stats) {
  if (!sandboxes.length) return el("p", { text: "No sandboxes." });
  const rows = sandboxes.map((s, i) => {
    const st = stats[i];
    const cpu = st && st.cpu_usec !== null ? (st.cpu_usec / 1e6).toFixed(2) + " s" : "—";
    return el(
      "tr",
      { "data-sandbox": s.name },
      el("td", {}, el("a", { href: `#/sb/${enc(s.name)}`, text: s.name })),
      el("td", { class: `state-${s.state}`, text: s.state }),
      el("td", { text: s.backend || "—" }),
      el("td", { title: s.image || s.parent || null,
        text: s.image_name || shortImage(s.image) || s.parent || "—" }),
      el("td", { text: when(s.created_ms) }),
      el("td", { text: when(s.last_used_ms) }),
      el("td", { class: "num", text: bytes(s.disk_bytes) }),
      el("td", { class: "num", text: st ? bytes(st.memory_bytes) : "—" }),
      el("td", { class: "num", text: cpu }),
      el("td", {}, ...portLinks(s)),
    );
  });
  return table(
    "Sandboxes",
    ["Name", "State", "Backend", "Image or snapshot", "Created", "Last used", "Disk", "Memory",
      "CPU time", "Ports"],
    rows,
  );
}

/* An image pinned to its digest, shortened as docker does (the whole in
 * the cell's title), where no name of the image store points at it
 * (image_name, API 1.6). */
function shortImage(image) {
  if (!image) return null;
  return /^sha256:[0-9a-f]{64}$/.test(image) ? image.slice(0, 19) : image;
}

/* Published ports (the API's {port, host_ip, host_port}): once bound,
 * each a link to its host address, another origin than this page. Not
 * to serve's preview route: a preview on this page's origin would run the
 * sandbox's pages with the operator's session, which the server refuses
 * (docs/ui.md). */
function portLinks(s) {
  if (!Array.isArray(s.ports) || !s.ports.length) return ["—"];
  const ports = s.ports.filter((p) => p && Number.isInteger(p.port) && p.port > 0 && p.port < 65536);
  if (!ports.length) return ["—"];
  const items = ports.map((p) => {
    if (!p.host_port) {
      return el("span", { "data-port": String(p.port), title: "published when it starts",
                          text: String(p.port) });
    }
    const any = p.host_ip === "0.0.0.0" || p.host_ip === "::";
    const host = any ? location.hostname : p.host_ip.includes(":") ? `[${p.host_ip}]` : p.host_ip;
    return el("a", {
      href: `http://${host}:${p.host_port}/`,
      rel: "noopener noreferrer",
      "data-port": String(p.port),
      title: `sandbox port ${p.port}, published on ${p.host_ip}:${p.host_port}`,
      text: `${p.port} → ${p.host_port}`,
    });
  });
  return items.flatMap((a, i) => (i ? [" ", a] : [a]));
}

/* ---- one sandbox ---- */

async function viewSandbox(main, name) {
  const sb = await api("GET", `/v1/sandboxes/${enc(name)}`);
  const head = el("div", { class: "row" });
  const renderHead = (s) => {
    head.replaceChildren(
      el("span", {}, "State: ", el("span", { class: `state-${s.state}`, id: "sb-state", text: s.state })),
      el("span", { class: "muted", text: `id ${s.id}` }),
      el("button", {
        type: "button", id: "btn-stop", class: "danger", disabled: s.state !== "running",
        onclick: () => act("stop", async () => {
          if (!(await confirmAction(`Stop sandbox ${name}? Its running commands are killed.`))) return;
          await api("POST", `/v1/sandboxes/${enc(name)}/stop`);
          renderHead(await api("GET", `/v1/sandboxes/${enc(name)}`));
        }),
        text: "Stop",
      }),
      el("button", {
        type: "button", id: "btn-rm", class: "danger",
        onclick: () => act("remove", async () => {
          if (!(await confirmAction(`Remove sandbox ${name} and everything in it?`))) return;
          await api("DELETE", `/v1/sandboxes/${enc(name)}`);
          location.hash = "#/";
        }),
        text: "Remove",
      }),
    );
  };
  renderHead(sb);

  const sections = [
    chartSection(name),
    execSection(name, () => { history.reload(); audit.reload(); }),
    processesSection(name),
  ];
  const history = historySection(name);
  const audit = auditSection(name);
  const diff = diffSection(name, sb);
  const snaps = snapshotSection(name, renderHead);
  main.replaceChildren(
    el("h1", {}, "Sandbox ", el("code", { text: name })),
    head,
    ...sections,
    history.section,
    audit.section,
    diff.section,
    snaps.section,
  );
}

/* Memory and cpu over the last minutes, from the stats stream (SSE). */
function chartSection(name) {
  const canvas = el("canvas", {
    width: 600, height: 140, role: "img", id: "chart",
    "aria-label": "Memory and CPU use over the last minutes",
  });
  const now = el("p", { id: "chart-now", "aria-live": "off", text: "Waiting for samples…" });
  const points = [];
  const es = new EventSource(`/v1/sandboxes/${enc(name)}/stats/stream`);
  let last = null;
  es.onmessage = (ev) => {
    const s = JSON.parse(ev.data);
    let cpuPct = null;
    if (last && s.cpu_usec !== null && last.cpu_usec !== null && s.sampled_ms > last.sampled_ms) {
      cpuPct = ((s.cpu_usec - last.cpu_usec) / 10) / (s.sampled_ms - last.sampled_ms);
    }
    last = s;
    points.push({ mem: s.memory_bytes, cpu: cpuPct });
    if (points.length > CHART_POINTS) points.shift();
    now.textContent = s.running
      ? `Memory ${bytes(s.memory_bytes)}, CPU ${cpuPct === null ? "—" : cpuPct.toFixed(1) + " %"}`
      : "Not running.";
    drawChart(canvas, points);
  };
  cleanups.push(() => es.close());
  return el(
    "section",
    { "aria-labelledby": "h-chart" },
    el("h2", { id: "h-chart", text: "Memory and CPU" }),
    el("p", {}, el("span", { class: "legend-mem", text: "— memory" }), " ",
      el("span", { class: "legend-cpu", text: "— CPU %" })),
    canvas,
    now,
  );
}

function drawChart(canvas, points) {
  const g = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height;
  g.clearRect(0, 0, w, h);
  const maxMem = Math.max(1, ...points.map((p) => p.mem || 0));
  const maxCpu = Math.max(100, ...points.map((p) => p.cpu || 0));
  const line = (key, max, color) => {
    g.strokeStyle = color;
    g.lineWidth = 2;
    g.beginPath();
    let started = false;
    points.forEach((p, i) => {
      if (p[key] === null || p[key] === undefined) return;
      const x = (i / (CHART_POINTS - 1)) * w;
      const y = h - 4 - (p[key] / max) * (h - 8);
      if (started) g.lineTo(x, y);
      else g.moveTo(x, y);
      started = true;
    });
    g.stroke();
  };
  line("mem", maxMem, "#0b5cad");
  line("cpu", maxCpu, "#a4161a");
}

/* Runs a command with the streaming exec API; its output shows live. */
function execSection(name, onDone) {
  const input = el("input", { id: "exec-cmd", type: "text", size: 60, required: true });
  const out = el("pre", { id: "exec-output", role: "log", "aria-label": "Command output" });
  const state = el("p", { id: "exec-state", class: "muted" });
  const run = el("button", { type: "submit", id: "exec-run", text: "Run" });
  const form = el(
    "form",
    {
      onsubmit: (ev) => {
        ev.preventDefault();
        runStream(name, input.value, out, state, run).then(onDone);
      },
    },
    el("div", { class: "row" },
      el("label", { for: "exec-cmd", text: "Command (run with sh -c)" }), input, run),
  );
  return el("section", { "aria-labelledby": "h-exec" },
    el("h2", { id: "h-exec", text: "Run a command" }), form, state, out);
}

async function runStream(name, cmd, out, state, button) {
  out.replaceChildren();
  state.textContent = "Starting…";
  button.disabled = true;
  const ctl = new AbortController();
  cleanups.push(() => ctl.abort());
  try {
    const r = await fetch(`/v1/sandboxes/${enc(name)}/exec/stream`, {
      method: "POST",
      credentials: "same-origin",
      signal: ctl.signal,
      headers: { "Content-Type": "application/json", "X-Hutch-CSRF": csrf || "" },
      body: JSON.stringify({ argv: ["sh", "-c", cmd] }),
    });
    if (!r.ok) {
      const j = await r.json().catch(() => ({}));
      throw new Error(j.error ? j.error.message : `status ${r.status}`);
    }
    await readNdjson(r, (m) => streamLine(m, out, state));
  } catch (e) {
    if (e.name !== "AbortError") state.textContent = `Failed: ${e.message}`;
  } finally {
    button.disabled = false;
  }
}

/* Calls onLine with each JSON line of the NDJSON answer @r as it comes. */
async function readNdjson(r, onLine) {
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line) onLine(JSON.parse(line));
    }
  }
}

/* The running commands, whoever started them (GET .../execs: an agent
 * through the API or MCP, `hutch exec`), listed every 2 s; a detached
 * one's output follows live (GET .../execs/ID/output?follow=1, the NDJSON
 * lines of exec/stream, then its outcome). An attached command's output
 * goes to its own client only. */
function processesSection(name) {
  const body = el("div", {});
  const outputs = el("div", {});
  const following = new Map();
  const section = el("section", { "aria-labelledby": "h-procs", id: "procs" },
    el("h2", { id: "h-procs", text: "Running commands" }), body, outputs);
  let shown = null;
  let t = null;
  let stopped = false;

  const follow = async (x, button) => {
    if (following.has(x.id)) return;
    const ctl = new AbortController();
    following.set(x.id, ctl);
    button.disabled = true;
    const out = el("pre", { id: `proc-out-${x.id}`, "aria-label": `Output of command ${x.id}` });
    const state = el("p", { id: `proc-state-${x.id}`, "aria-live": "polite", text: "Following…" });
    outputs.append(el("div", { class: "proc-output" },
      el("h3", {}, `Command ${x.id}: `, el("code", { text: x.argv.join(" ") })), state, out));
    try {
      const r = await fetch(`/v1/sandboxes/${enc(name)}/execs/${x.id}/output?follow=1`, {
        credentials: "same-origin", signal: ctl.signal,
      });
      if (!r.ok) {
        const j = await r.json().catch(() => ({}));
        throw new Error(j.error ? j.error.message : `status ${r.status}`);
      }
      await readNdjson(r, (m) => streamLine(m, out, state));
    } catch (e) {
      if (e.name !== "AbortError") state.textContent = `Failed: ${e.message}`;
    }
  };

  /* As `hutch kill` (POST .../signal with no signal: TERM, then KILL
   * 10 s later if anything of it still runs), after asking. */
  const killButton = (x) => {
    const b = el("button", {
      type: "button", class: "danger", "data-kill": String(x.id), text: "Kill",
      "aria-label": `Kill command ${x.id}`,
    });
    b.addEventListener("click", () => act("kill", async () => {
      if (!(await confirmAction(`Kill command ${x.id} (${x.argv.join(" ")}) in ${name}? ` +
        "It gets SIGTERM, and SIGKILL 10 s later if it still runs."))) return;
      b.disabled = true;
      try {
        await api("POST", `/v1/sandboxes/${enc(name)}/execs/${x.id}/signal`, {});
      } catch (e) {
        b.disabled = false;
        throw e;
      }
    }));
    return b;
  };

  const reload = async () => {
    try {
      const { execs } = await api("GET", `/v1/sandboxes/${enc(name)}/execs`);
      const key = JSON.stringify(execs.map((x) => x.id));
      if (key !== shown) {
        shown = key;
        body.replaceChildren(execs.length ? table("Running commands", ["#", "Command", "Started", "Output", "Kill"],
          execs.map((x) => {
            const button = x.detached ? el("button", {
              type: "button", class: "secondary", "data-follow": String(x.id),
              disabled: following.has(x.id), text: "Follow output",
              "aria-label": `Follow the output of command ${x.id}`,
            }) : null;
            if (button) button.addEventListener("click", () => follow(x, button));
            return el("tr", { "data-exec": String(x.id) },
              el("td", { class: "num", text: String(x.id) }),
              el("td", {}, el("code", { text: x.argv.join(" ") })),
              el("td", { text: when(x.start_ms) }),
              el("td", {}, button || el("span", { class: "muted", text: "to its own client" })),
              el("td", {}, killButton(x)));
          })) : el("p", { id: "procs-none", text: "No command is running." }));
      }
    } catch (e) {
      shown = null;
      body.replaceChildren(el("p", { text: `listing the running commands failed: ${e.message}` }));
    }
    if (!stopped) t = setTimeout(reload, 2000);
  };
  cleanups.push(() => {
    stopped = true;
    clearTimeout(t);
    for (const ctl of following.values()) ctl.abort();
  });
  reload();
  return section;
}

function streamLine(m, out, state) {
  if (m.started) {
    state.textContent = `Running (exec ${m.started.id})…`;
  } else if (m.stream) {
    const text = m.encoding === "base64" ? atob(m.data) : m.data;
    out.append(m.stream === "stderr" ? el("span", { class: "stderr", text }) : text);
  } else if (m.outcome) {
    const o = m.outcome;
    state.textContent = `Done: ${o.reason}, exit code ${o.exit_code === null ? "—" : o.exit_code}` +
      (o.signal ? `, signal ${o.signal}` : "") + `, ${o.wall_ms} ms`;
    state.setAttribute("data-done", "1");
  } else if (m.error) {
    state.textContent = `Failed: ${m.error.message}`;
    state.setAttribute("data-done", "1");
  }
}

function historySection(name) {
  const body = el("div", {});
  const section = el("section", { "aria-labelledby": "h-history", id: "history" },
    el("h2", { id: "h-history", text: "Exec history" }), body);
  const reload = () => api("GET", `/v1/sandboxes/${enc(name)}/history?limit=50`).then(({ entries }) => {
    if (!entries.length) {
      body.replaceChildren(el("p", { text: "No command has finished yet." }));
      return;
    }
    body.replaceChildren(table("Exec history", ["#", "Command", "Outcome", "Exit", "Wall", "CPU",
      "Peak memory", "Refused"], entries.reverse().map((e) => {
      const o = e.outcome || {};
      return el("tr", {},
        el("td", { class: "num", text: String(e.id) }),
        el("td", {}, el("code", { text: (e.argv || []).join(" ") })),
        el("td", { text: o.reason || "—" }),
        el("td", { class: "num", text: o.exit_code === null || o.exit_code === undefined ? "—" : String(o.exit_code) }),
        el("td", { class: "num", text: o.wall_ms === undefined ? "—" : `${o.wall_ms} ms` }),
        el("td", { class: "num", text: o.cpu_ms === undefined ? "—" : `${o.cpu_ms} ms` }),
        el("td", { class: "num", text: bytes(o.mem_peak_bytes) }),
        el("td", { text: (o.denied || []).map((d) => d.host || JSON.stringify(d)).join(", ") || "—" }));
    })));
  }).catch((e) => body.replaceChildren(el("p", { text: `Cannot read the history: ${e.message}` })));
  reload();
  return { section, reload };
}

function auditSection(name) {
  const body = el("div", {});
  const section = el("section", { "aria-labelledby": "h-audit", id: "audit" },
    el("h2", { id: "h-audit", text: "Network" }), body);
  const reload = () => api("GET", `/v1/sandboxes/${enc(name)}/audit?limit=200`).then(({ entries }) => {
    const rows = entries.filter((e) => e.type === "decision").reverse();
    if (!rows.length) {
      body.replaceChildren(el("p", { text: "No network request recorded." }));
      return;
    }
    body.replaceChildren(table("Network decisions", ["Time", "Decision", "Host", "Port", "Method",
      "Reason", "Status"], rows.map((e) => el("tr", {},
      el("td", { text: e.time || "—" }),
      el("td", { class: e.decision === "allowed" ? "allowed" : "denied", text: e.decision }),
      el("td", {}, el("code", { text: e.host || e.address || "—" })),
      el("td", { class: "num", text: e.port === null ? "—" : String(e.port) }),
      el("td", { text: e.method || "—" }),
      el("td", { text: e.reason || "—" }),
      el("td", { class: "num", text: e.status ? String(e.status) : "—" })))));
  }).catch((e) => body.replaceChildren(el("p", { text: `Cannot read the audit log: ${e.message}` })));
  reload();
  return { section, reload };
}

/* The workspace's changes; a file's unified diff on demand. Only an
 * overlay workspace has a diff (docs/api.md): for any other sandbox the
 * section says so without asking the API, whose 400 the browser would log. */
function diffSection(name, sb) {
  const body = el("div", {});
  const patch = el("pre", { class: "diff", id: "diff-patch", hidden: true, tabindex: 0, role: "region",
    "aria-label": "Unified diff" });
  const section = el("section", { "aria-labelledby": "h-diff", id: "diff" },
    el("h2", { id: "h-diff", text: "Workspace changes" }), body, patch);
  const showPatch = (path) => act("diff", async () => {
    const text = await api("GET", `/v1/sandboxes/${enc(name)}/diff/patch?path=${enc(path)}`);
    patch.replaceChildren(...text.split("\n").map((l) => {
      const cls = l.startsWith("@@") ? "hunk" : l.startsWith("+") && !l.startsWith("+++") ? "add"
        : l.startsWith("-") && !l.startsWith("---") ? "del" : null;
      return el("span", { class: cls, text: l + "\n" });
    }));
    patch.hidden = false;
    patch.setAttribute("data-path", path);
    patch.focus();
  });
  const reload = () => api("GET", `/v1/sandboxes/${enc(name)}/diff`).then(({ changes }) => {
    if (!changes.length) {
      body.replaceChildren(el("p", { text: "No changes." }));
      return;
    }
    const apply = el("button", {
      type: "button", id: "btn-apply", class: "danger", text: "Apply all to the host folder",
      onclick: () => act("apply", async () => {
        if (!(await confirmAction(`Write ${changes.length} change(s) of ${name} into the host folder?`))) return;
        const r = await api("POST", `/v1/sandboxes/${enc(name)}/apply`, {});
        showStatus("");
        body.prepend(el("p", { role: "status", text: `Applied ${r.applied} change(s).` }));
        reload();
      }),
    });
    body.replaceChildren(table("Changed files", ["Path", "Change", "Type", ""], changes.map((c) =>
      el("tr", {},
        el("td", {}, el("code", { text: c.path })),
        el("td", { text: c.kind }),
        el("td", { text: c.type }),
        el("td", {}, c.type === "file"
          ? el("button", { type: "button", class: "secondary", "data-path": c.path,
            "aria-label": `Show the diff of ${c.path}`, text: "Diff", onclick: () => showPatch(c.path) })
          : "")))), el("div", { class: "row" }, apply));
  }).catch((e) => body.replaceChildren(el("p", { text: `No workspace diff: ${e.message}` })));
  const ws = sb.policy && sb.policy.workspace;
  if (!ws || ws.mode !== "overlay") {
    body.replaceChildren(el("p", { text: "No overlay workspace: diff and apply work on --workspace DIR:overlay." }));
    return { section, reload: () => {} };
  }
  reload();
  return { section, reload };
}

function snapshotSection(name, renderHead) {
  const body = el("div", {});
  const snapName = el("input", { id: "snap-name", type: "text", pattern: "[a-z0-9][a-z0-9_.\\-]{0,62}", required: true });
  const form = el("form", {
    id: "snap-form",
    onsubmit: (ev) => {
      ev.preventDefault();
      act("snapshot", async () => {
        await api("POST", `/v1/sandboxes/${enc(name)}/snapshots`, { snapshot: snapName.value });
        snapName.value = "";
        reload();
      });
    },
  }, el("div", { class: "row" }, el("label", { for: "snap-name", text: "New snapshot" }), snapName,
    el("button", { type: "submit", id: "snap-create", text: "Snapshot" })));
  const section = el("section", { "aria-labelledby": "h-snaps", id: "snapshots" },
    el("h2", { id: "h-snaps", text: "Snapshots" }), form, body);
  const reload = () => api("GET", "/v1/snapshots").then(({ snapshots }) => {
    if (!snapshots.length) {
      body.replaceChildren(el("p", { text: "No snapshots." }));
      return;
    }
    const rows = snapshots.map((s, i) => {
      const forkName = el("input", { id: `fork-${i}`, type: "text", size: 16,
        pattern: "[a-z0-9][a-z0-9_.\\-]{0,62}" });
      return el("tr", { "data-snapshot": s.name },
        el("td", {}, el("code", { text: s.name })),
        el("td", {}, el("div", { class: "row" },
          el("label", { for: `fork-${i}`, text: "New sandbox" }), forkName,
          el("button", {
            type: "button", class: "secondary fork", text: "Fork",
            "aria-label": `Fork a new sandbox from ${s.name}`,
            onclick: () => act("fork", async () => {
              if (!forkName.value) throw new Error("name the new sandbox");
              await api("POST", "/v1/sandboxes", { name: forkName.value, from_snapshot: s.name });
              location.hash = `#/sb/${enc(forkName.value)}`;
            }),
          }),
          el("button", {
            type: "button", class: "danger restore", text: "Restore",
            "aria-label": `Restore ${name} to ${s.name}`,
            onclick: () => act("restore", async () => {
              if (!(await confirmAction(`Restore ${name} to snapshot ${s.name}? Its changes since are lost.`))) return;
              await api("POST", `/v1/sandboxes/${enc(name)}/restore`, { snapshot: s.name });
              renderHead(await api("GET", `/v1/sandboxes/${enc(name)}`));
              body.prepend(el("p", { role: "status", class: "restored", text: `Restored ${s.name}.` }));
            }),
          }))));
    });
    body.replaceChildren(table("Snapshots", ["Snapshot", "Actions"], rows));
  }).catch((e) => body.replaceChildren(el("p", { text: `Cannot list the snapshots: ${e.message}` })));
  reload();
  return { section, reload };
}

/* ---- routing ---- */

async function route() {
  clearTimeout(timer);
  for (const c of cleanups) c();
  cleanups = [];
  showStatus("");
  const main = document.getElementById("main");
  const m = location.hash.match(/^#\/sb\/([^/]+)$/);
  try {
    if (m) await viewSandbox(main, decodeURIComponent(m[1]));
    else await viewList(main);
    main.setAttribute("data-ready", "1");
    /* bench/bench-ui.py reads when the first view was ready. */
    if (!performance.getEntriesByName("hutch-ready").length) performance.mark("hutch-ready");
  } catch (e) {
    main.replaceChildren(el("h1", { text: "Error" }), el("p", { text: e.message }));
  }
}

async function start() {
  try {
    const s = await api("GET", "/ui/session");
    csrf = s.csrf;
    const out = document.getElementById("logout");
    out.hidden = !s.login;
    out.addEventListener("click", async () => {
      await fetch("/ui/logout", { method: "POST", credentials: "same-origin",
        headers: { "X-Hutch-CSRF": csrf || "" } });
      location.assign("/ui/login");
    });
  } catch (e) {
    showStatus(`cannot start: ${e.message}`);
    return;
  }
  window.addEventListener("hashchange", route);
  route();
}

document.addEventListener("DOMContentLoaded", start);
