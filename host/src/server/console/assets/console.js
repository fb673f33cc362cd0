// wf console: vanilla JS, no dependencies. Hash routes (#/sources,
// #/plugins, #/capabilities, #/endpoints, #/runs, #/runs/<id>); data from /console/api/
// with the tokens kept in sessionStorage; live run updates read from a
// server-sent event stream through fetch (so it can carry the tokens).
// Every text goes through textContent: nothing from the server is parsed as HTML.
// Signing in: the link `wf serve --http` prints sets an HttpOnly session
// cookie (the page never sees it); /console/api/access says what this viewer
// may do, or how to get in. A viewer without access gets one paragraph saying
// how, never an error and a spinner; actions it may not use are shown
// disabled with the reason (title, and a note the button points to).
"use strict";

const API = "/console/api";
const SVG = "http://www.w3.org/2000/svg";
const main = document.getElementById("main");
const statusLine = document.getElementById("status");
let pageAbort = null; // aborts the current page's requests and stream
let access = null; // what /console/api/access said about this viewer
// Why a login link was refused (the server's redirect says `?login=<why>`);
// read once, then dropped from the address bar.
const LOGIN_REFUSED = {
  used: "That sign-in link was already used.",
  expired: "That sign-in link has expired.",
  invalid: "That sign-in link is not one this wf printed (wf restarted since, or the link is incomplete).",
  off: "Sign-in links are off in this wf's config.",
  denied: "The identity provider did not sign you in.",
  oidc: "Signing in with the identity provider failed (wf's log says why).",
  stale: "That sign-in was not started in this browser, was used already, or took too long: sign in again.",
};
let loginRefused = LOGIN_REFUSED[new URLSearchParams(location.search).get("login")] || "";
if (location.search) history.replaceState(null, "", location.pathname + location.hash);

// ---- small DOM helpers -------------------------------------------------
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined) continue;
    e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return e;
}
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
function say(text, isError) {
  statusLine.textContent = text || "";
  statusLine.className = isError ? "error" : "";
}
function json(v) { return JSON.stringify(v, null, 2); }
function when(ms) { return ms ? new Date(ms).toLocaleString() : "—"; }
function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}
function badge(status) { return el("span", { class: `badge st-${status}`, text: status }); }
function table(headers, rows, label) {
  return el("div", { class: "scroll" },
    el("table", { "aria-label": label },
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, rows)));
}

// ---- tokens and API calls ----------------------------------------------
const tokens = {
  get bearer() { return sessionStorage.getItem("wf.bearer") || ""; },
  get admin() { return sessionStorage.getItem("wf.admin") || ""; },
  save(bearer, admin) {
    sessionStorage.setItem("wf.bearer", bearer);
    sessionStorage.setItem("wf.admin", admin);
  },
  clear() { sessionStorage.removeItem("wf.bearer"); sessionStorage.removeItem("wf.admin"); },
};
function headers(extra) {
  const h = Object.assign({}, extra);
  if (tokens.bearer) h["Authorization"] = `Bearer ${tokens.bearer}`;
  if (tokens.admin) h["X-Wf-Admin-Token"] = tokens.admin;
  return h;
}
class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status; this.body = body;
  }
}
async function api(path, body) {
  const init = { headers: headers(), signal: pageAbort && pageAbort.signal };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(API + path, init);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { error: text.trim() }; }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}
function showTokens(why, focus = true) {
  const box = document.getElementById("tokens");
  box.hidden = false;
  document.getElementById("tokens-button").setAttribute("aria-expanded", "true");
  if (why) document.getElementById("tokens-why").textContent = why;
  document.getElementById("bearer-token").value = tokens.bearer;
  document.getElementById("admin-token").value = tokens.admin;
  if (focus) document.getElementById("bearer-token").focus();
}
function explain(e) { return `${e.message}${e.body && e.body.hint ? ` (${e.body.hint})` : ""}`; }
function failed(e) {
  if (e.name === "AbortError") return;
  if (e.status === 401) {
    say(`Not allowed: ${explain(e)}`);
    recheck();
  } else if (e.status === 403) {
    say(`Not allowed: ${explain(e)}`);
  } else {
    say(`Error: ${explain(e)}`, true);
  }
}
// What replaces a page's "Loading…" when its data cannot be shown: why,
// in plain words (refusals are not errors), or the error.
function problem(e) {
  if (e.name === "AbortError") return null;
  if (e.status === 401) recheck();
  if (e.status === 403 || e.status === 401) {
    return el("p", { class: "notice", "data-refused": "", text: `This view is not available to you: ${explain(e)}` });
  }
  return el("p", { class: "err", role: "alert", text: `Error: ${explain(e)}` });
}
// After a 401: signed out meanwhile (session ended) shows how to get in;
// still signed in (a view needs the admin token) opens the token form.
async function recheck() {
  try { await loadAccess(); } catch { return; }
  if (!access.signed_in) signInPage();
  else showTokens(null, false);
}
// A page body: "Loading…" until `fill` resolves; what went wrong if it fails.
async function loading(box, fill) {
  box.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
  try { await fill(); } catch (e) { const p = problem(e); if (p) box.replaceChildren(p); }
}

// ---- access ---------------------------------------------------------------
async function loadAccess() {
  const r = await fetch(`${API}/access`, { headers: headers() });
  if (!r.ok) throw new ApiError(r.status, await r.json().catch(() => null));
  access = await r.json();
  // The token form only where a token can get in.
  document.getElementById("tokens-button").hidden = !(access.tokens.bearer || access.tokens.admin);
  const who = document.getElementById("who");
  if (!access.signed_in) who.textContent = "Not signed in";
  else if (access.via === "link") who.textContent = Object.values(access.actions).every((a) => a) ? "Signed in (read-only)" : "Signed in";
  else who.textContent = `Signed in as ${access.principal}`;
}
// Why action `key` is not available to this viewer ("" when it is).
function denied(key) { return (access && access.actions && access.actions[key]) || ""; }
// A button for action `key`: usable, or marked disabled with the reason on
// hover (title) and on focus (aria-describedby the note `noteId`, which
// shows the reason). It stays focusable so the reason can be reached.
function actionButton(key, attrs, noteId) {
  const why = denied(key);
  const b = el("button", Object.assign({ type: "button" }, attrs));
  if (why) {
    b.setAttribute("aria-disabled", "true");
    b.title = why;
    if (noteId) b.setAttribute("aria-describedby", noteId);
    b.removeEventListener("click", attrs.onclick);
    b.addEventListener("click", (e) => { e.preventDefault(); say(why); });
  }
  return b;
}
// The note that says why some actions are unavailable (null if none is).
function actionsNote(id, keys) {
  const reasons = [...new Set(keys.map(denied).filter(Boolean))];
  return reasons.length ? el("p", { id, class: "note", text: `Not available: ${reasons.join("; ")}.` }) : null;
}
// The page for a viewer who is not signed in: one paragraph on how to get in.
function signInPage() {
  const box = el("section", { class: "notice", id: "signin", "aria-labelledby": "signin-title" },
    el("h2", { id: "signin-title", text: "Sign in to use the console" }),
    el("p", { id: "signin-how", text: [loginRefused || access.error, access.how].filter(Boolean).join(" ") }),
    access.oidc ? el("p", {}, el("a", { id: "signin-oidc", class: "button", href: access.oidc.start, text: `Sign in with ${access.oidc.issuer}` })) : null);
  main.replaceChildren(box);
  if (access.tokens && (access.tokens.bearer || access.tokens.admin)) showTokens(null, false);
  say("");
}

// Reads `data:` events from the server-sent event stream at `path` until the
// page changes; reconnects after a drop (calling onEvent({type:"ready"}) again).
async function stream(path, onEvent) {
  const signal = pageAbort.signal;
  let backoff = 500;
  while (!signal.aborted) {
    try {
      const r = await fetch(API + path, { headers: headers(), signal });
      if (!r.ok) {
        let body = null;
        try { body = await r.json(); } catch { /* not JSON */ }
        throw new ApiError(r.status, body);
      }
      backoff = 500;
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let end;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const chunk = buf.slice(0, end);
          buf = buf.slice(end + 2);
          for (const line of chunk.split("\n")) {
            if (line.startsWith("data: ")) onEvent(JSON.parse(line.slice(6)));
          }
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (e.status === 401 || e.status === 403) { failed(e); return; }
    }
    await new Promise((ok) => setTimeout(ok, backoff));
    backoff = Math.min(backoff * 2, 10000);
  }
}

// ---- pages ---------------------------------------------------------------
async function sourcesPage() {
  const refreshAll = actionButton("refresh", { id: "refresh-all", onclick: () => act(() => api("/sources/refresh", {}), "Refreshed every source"), text: "Refresh all" }, "actions-why");
  const reload = actionButton("reload", { id: "reload", onclick: () => act(() => api("/reload", {}), "Config reloaded"), text: "Reload config" }, "actions-why");
  const body = el("div", {});
  main.replaceChildren(el("h2", { text: "Sources" }), el("div", { class: "row" }, refreshAll, reload), actionsNote("actions-why", ["refresh", "reload"]), body);
  async function act(call, done) {
    try {
      say("Working…");
      const r = await call();
      const errors = (r && r.refreshed || []).filter((x) => x.error).map((x) => `${x.source}: ${x.error}`);
      say(errors.length ? `${done}; errors: ${errors.join("; ")}` : done, errors.length > 0);
      await load();
    } catch (e) { failed(e); }
  }
  async function load() {
    const [{ sources }, status] = await Promise.all([api("/sources"), api("/status")]);
    const rows = sources.map((s) => {
      const healthy = s.state === "ready";
      return el("tr", { "data-source": s.name },
        el("th", { scope: "row", text: s.name }),
        el("td", {}, el("span", { class: `badge ${healthy ? "ok" : s.enabled === false ? "warn" : "bad"}`, text: s.state || (s.enabled === false ? "disabled" : "—") })),
        el("td", { text: s.kind || "—" }),
        el("td", { text: s.plugin || "—" }),
        el("td", { text: s.session_epoch ?? "—" }),
        el("td", { text: Array.isArray(s.sessions) ? s.sessions.length : "—" }),
        el("td", { text: s.calls_in_flight ?? "—" }),
        el("td", {}, when(s.last_discovery_at), s.discovery_ms != null ? el("span", { class: "muted", text: ` (${s.discovery_ms} ms)` }) : null),
        el("td", { class: "err", text: [s.error, ...(s.rejected || []).map((r) => typeof r === "string" ? r : json(r)),
          ...(s.held || []).map((h) => `held: ${h.message}`),
          ...(s.warnings || []).map((w) => `${w.name}: ${w.rule} in ${w.field} [${w.span[0]}..${w.span[1]}]: ${w.excerpt}`)].filter(Boolean).join("; ") || "—" }),
        el("td", {}, s.enabled === false ? "—" : actionButton("refresh", { "aria-label": `Refresh ${s.name}`, onclick: () => act(() => api("/sources/refresh", { source: s.name }), `Refreshed ${s.name}`), text: "Refresh" }, "actions-why")));
    });
    const last = status.last_reload;
    // Tool pins (issue 54): held tools with an Approve each, Pin all, the diff.
    const held = sources.flatMap((s) => (s.held || []).map((h) => ({ ref: `${s.name}.${h.name}`, ...h })));
    const diffBox = el("pre", { id: "tools-diff", class: "muted" });
    const pins = el("section", { "aria-labelledby": "pins-title" },
      el("h3", { id: "pins-title", text: "Tool pins" }),
      el("div", { class: "row" },
        actionButton("pin", { id: "pin-all", onclick: () => act(() => api("/tools/pin", {}), "Pinned every source's tools"), text: "Pin all" }, "actions-why"),
        el("button", { type: "button", id: "show-diff", onclick: async () => {
          try {
            const { changes } = await api("/tools/diff", {});
            diffBox.textContent = changes.length ? changes.map((d) => [`${d.status} ${d.source}.${d.tool}`, ...(d.description || []).map((l) => `    ${l}`), ...(d.schema || []).map((l) => `  ${l}`)].join("\n")).join("\n") : "No changes since the pins.";
          } catch (e) { failed(e); }
        }, text: "Show diff" })),
      held.length
        ? table(["Tool", "Why", ""], held.map((h) => el("tr", { "data-held": h.ref },
            el("th", { scope: "row", text: h.ref }), el("td", { text: h.message }),
            el("td", {}, actionButton("approve", { "aria-label": `Approve ${h.ref}`, onclick: () => act(() => api("/tools/approve", { names: [h.ref] }), `Approved ${h.ref}`), text: "Approve" }, "actions-why")))), "Held tools")
        : el("p", { class: "muted", text: "No tool is held." }),
      diffBox);
    body.replaceChildren(
      table(["Source", "Health", "Kind", "Plugin", "Epoch", "Sessions", "Calls in flight", "Last discovery", "Errors", ""], rows, "Sources"),
      el("p", { class: "muted" }, `wf ${status.version}, up ${duration(status.uptime_ms)}, config ${status.config_file || "—"}; last reload: `,
        last ? `${last.error ? `failed: ${last.error}` : "ok"}` : "none"),
      pins);
    // Opened while wf starts: look again until every source has been
    // discovered once, so what it holds or rejects shows up unasked.
    const starting = sources.some((s) => s.enabled !== false && !s.last_discovery_at && !s.error);
    if (starting) setTimeout(() => { if (document.body.contains(body)) load().catch(() => {}); }, 1000);
  }
  await loading(body, load);
}

async function pluginsPage() {
  const body = el("div", {});
  main.replaceChildren(el("h2", { text: "Plugins" }), body);
  await loading(body, () => pluginsBody(body));
}
// "in_process", or "process: pid N, R restarts, state" for a plugin in a child.
function isolation(x) {
  const c = x.process;
  if (!c) return x.isolation || "in_process";
  return `process: pid ${c.pid ?? "–"}, ${c.restarts} restarts, ${c.state}` + (c.error ? ` (${c.error})` : "");
}
async function pluginsBody(body) {
  const p = await api("/plugins");
  const supported = typeof p.supported_api === "string" ? p.supported_api : json(p.supported_api);
  const loaded = p.loaded.map((x) => el("tr", { "data-plugin": x.name },
    el("th", { scope: "row", text: x.name }), el("td", { text: x.version }), el("td", { text: x.api_version }),
    el("td", { text: (x.kinds || []).join(", ") }), el("td", { text: isolation(x) }),
    el("td", {}, el("code", { text: x.file }))));
  const refused = p.refused.map((x) => el("tr", { "data-refused": x.file },
    el("td", {}, el("code", { text: x.file })), el("td", { class: "err", text: x.reason })));
  body.replaceChildren(
    el("p", { class: "muted", text: `This wf loads plugin API versions ${supported}.` }),
    el("h2", { text: `Loaded (${loaded.length})` }),
    loaded.length ? table(["Plugin", "Version", "API version", "Kinds", "Isolation", "File"], loaded, "Loaded plugins") : el("p", { text: "None." }),
    el("h2", { text: `Refused (${refused.length})` }),
    refused.length ? table(["File", "Reason"], refused, "Refused plugin files") : el("p", { text: "None." }),
    (p.restart_needed || []).length ? el("p", { class: "err", text: `Restart needed for: ${p.restart_needed.join(", ")}` }) : null);
  say("");
}

async function capabilitiesPage() {
  const q = el("input", { id: "cap-query", type: "search", placeholder: "e.g. template", "aria-describedby": "cap-count" });
  const kind = el("select", { id: "cap-kind" }, ["", "tool", "prompt", "resource", "resource_template"].map((k) => el("option", { value: k, text: k || "any kind" })));
  const count = el("p", { id: "cap-count", class: "muted", "aria-live": "polite" });
  const list = el("div", { id: "cap-list" });
  const form = el("form", { class: "row", role: "search", onsubmit: (e) => { e.preventDefault(); clearTimeout(timer); search(); } },
    el("label", { for: "cap-query" }, "Search", q), el("label", { for: "cap-kind" }, "Kind", kind),
    el("button", { type: "submit", text: "Search" }));
  main.replaceChildren(el("h2", { text: "Capabilities" }), form, count, list);
  let timer = null;
  q.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(search, 250); });
  kind.addEventListener("change", search);
  let asked = 0;
  async function search() {
    const mine = ++asked;
    try {
      const r = await api("/capabilities", { query: q.value, kind: kind.value });
      if (mine !== asked) return; // a newer search is under way
      const open = new Set([...list.querySelectorAll("details[open]")].map((d) => d.getAttribute("data-capability")));
      count.textContent = `${r.total} found${r.truncated ? `, first ${r.items.length} shown` : ""}`;
      list.replaceChildren(...r.items.map((c) => el("details", { class: "cap", "data-capability": c.name, open: open.has(c.name) },
        el("summary", {}, el("code", { text: c.name }), " ", el("span", { class: "badge", text: c.kind }), " ",
          el("span", { class: "muted", text: `${c.source} · ${c.description || ""}` })),
        el("div", {},
          el("dl", { class: "facts" }, el("dt", { text: "Source" }), el("dd", { text: c.source }),
            el("dt", { text: "Name at the source" }), el("dd", { text: c.original }),
            c.uri ? [el("dt", { text: "URI" }), el("dd", { text: c.uri })] : null,
            c.uri_template ? [el("dt", { text: "URI template" }), el("dd", { text: c.uri_template })] : null),
          c.input_schema ? [el("h3", { text: "Input schema" }), el("pre", { text: json(c.input_schema) })] : null,
          c.output_schema ? [el("h3", { text: "Output schema" }), el("pre", { text: json(c.output_schema) })] : null,
          c.arguments ? [el("h3", { text: "Arguments" }), el("pre", { text: json(c.arguments) })] : null))));
      say("");
    } catch (e) { const p = problem(e); if (p) { count.textContent = ""; list.replaceChildren(p); } }
  }
  list.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
  await search();
  q.focus();
}

async function endpointsPage() {
  const r = await api("/endpoints");
  const list = (xs) => (xs && xs.length ? xs.join(", ") : "—");
  const rows = r.endpoints.map((e) => el("details", { class: "cap", "data-endpoint": e.name },
    el("summary", {}, el("code", { text: e.path }), " ", el("span", { class: "badge", text: e.mode }), " ",
      el("span", { class: "muted", text: `${e.server_name} · ${e.tools.length} tools${e.allowed ? "" : " · you are not allowed on it"}` })),
    el("div", {},
      el("dl", { class: "facts" },
        el("dt", { text: "Allowed" }), el("dd", { text: e.allow ? list(e.allow) : "every principal" }),
        el("dt", { text: "Selection" }), el("dd", { text: Object.entries(e.selection).filter(([, v]) => v && v.length).map(([k, v]) => `${k}: ${list(v)}`).join("; ") || "transforms only" }),
        e.instructions ? [el("dt", { text: "Instructions" }), el("dd", { text: e.instructions })] : null,
        el("dt", { text: "Prompts" }), el("dd", { text: list(e.prompts) }),
        el("dt", { text: "Resources" }), el("dd", { text: list(e.resources) })),
      e.tools.length ? table(["Tool", "At /mcp", "Description", "Fixed"], e.tools.map((t) => el("tr", { "data-tool": t.name },
        el("td", {}, el("code", { text: t.name })), el("td", {}, el("code", { text: t.original })),
        el("td", { text: t.description || "" }), el("td", { text: list(t.fixed) }))), `Tools of ${e.name}`) : el("p", { text: "No tools." }),
      e.problems.length ? el("p", { class: "err", text: e.problems.join("; ") }) : null)));
  main.replaceChildren(el("h2", { text: `Endpoints (${r.endpoints.length})` }),
    rows.length ? el("div", { id: "endpoint-list" }, rows) : el("p", { text: "No [endpoints.NAME] in the config." }));
  say("");
}

const RUN_STATUSES = ["", "running", "succeeded", "failed", "cancelled", "interrupted"];
async function runsPage() {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const status = el("select", { id: "run-status" }, RUN_STATUSES.map((s) => el("option", { value: s, text: s || "any status" })));
  status.value = params.get("status") || "";
  const q = el("input", { id: "run-query", type: "search", placeholder: "run id, workflow, principal", value: params.get("q") || "" });
  const body = el("div", {});
  const form = el("form", { class: "row", role: "search", onsubmit: (e) => { e.preventDefault(); load(); } },
    el("label", { for: "run-status" }, "Status", status), el("label", { for: "run-query" }, "Filter", q),
    el("button", { type: "submit", text: "Apply" }));
  const tasksBox = el("div", {});
  main.replaceChildren(el("h2", { text: "Runs" }), form, body, el("h3", { text: "Tasks at sources" }), tasksBox);
  status.addEventListener("change", load);
  // MCP Tasks that sources serve for clients (runs started as tasks are marked above).
  async function loadTasks() {
    try {
      const r = await api("/tasks");
      const rows = r.tasks.map((t) => {
        const known = !t.status.startsWith("unknown");
        return el("tr", {},
          el("td", { text: t.source || "—" }), el("td", { text: t.source_task || "—" }),
          el("td", {}, badge(known ? t.status : "unknown"), known ? null : el("span", { class: "muted", text: ` ${t.status.slice(8)}` })),
          el("td", { text: t.principal || "—" }), el("td", { text: when(t.created_at) }), el("td", { text: when(t.expires_at) }));
      });
      tasksBox.replaceChildren(rows.length
        ? table(["Source", "Source's task", "Status", "Principal", "Created", "Forgotten at"], rows, "Tasks at sources")
        : el("p", { class: "muted", text: "No task is open at a source." }),
        r.more ? el("p", { class: "muted", text: `and ${r.more} more` }) : "");
    } catch (e) { const p = problem(e); if (p) tasksBox.replaceChildren(p); }
  }
  async function load() {
    try {
      const r = await api("/runs", { status: status.value, query: q.value, limit: 200 });
      const rows = r.runs.map((x) => el("tr", { "data-run": x.run_id },
        el("td", {}, el("a", { href: `#/runs/${encodeURIComponent(x.run_id)}`, text: x.run_id })),
        el("td", { text: x.workflow }), el("td", {}, badge(x.status), x.task ? el("span", { class: "muted", title: "started as an MCP task", text: " task" }) : null), el("td", { text: x.principal || "—" }),
        el("td", { text: when(x.started_at) }),
        el("td", { text: x.finished_at ? duration(x.finished_at - x.started_at) : "—" }),
        el("td", { class: "err", text: x.error || "" })));
      body.replaceChildren(rows.length ? table(["Run", "Workflow", "Status", "Principal", "Started", "Took", "Error"], rows, "Runs") : el("p", { text: "No runs match." }));
      say("");
      return true;
    } catch (e) { const p = problem(e); if (p) body.replaceChildren(p); return false; }
  }
  body.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
  if (!(await load())) return;
  loadTasks();
  // A task's state lives at its source: looked at again every few seconds.
  const tasksTimer = setInterval(() => { if (document.body.contains(tasksBox)) loadTasks(); else clearInterval(tasksTimer); }, 5000);
  // New and finished runs show up without a reload.
  let timer = null;
  stream("/events", (ev) => {
    if (ev.type === "run_started" || ev.type === "run_finished" || ev.type === "lagged") {
      clearTimeout(timer); timer = setTimeout(load, 200);
    }
  });
}

const CALL_OUTCOMES = ["", "ok", "tool_error", "protocol_error", "cancelled", "timed_out", "denied", "limited"];
// The audit trail, newest first, looked at again every half second while shown.
async function callsPage() {
  const principal = el("input", { id: "call-principal", type: "search", placeholder: "principal" });
  const capability = el("input", { id: "call-capability", type: "search", placeholder: "e.g. github__*" });
  const outcome = el("select", { id: "call-outcome" }, CALL_OUTCOMES.map((o) => el("option", { value: o, text: o || "any outcome" })));
  const body = el("div", {});
  const form = el("form", { class: "row", role: "search", onsubmit: (e) => { e.preventDefault(); load(); } },
    el("label", { for: "call-principal" }, "Principal", principal), el("label", { for: "call-capability" }, "Capability", capability),
    el("label", { for: "call-outcome" }, "Outcome", outcome), el("button", { type: "submit", text: "Apply" }));
  main.replaceChildren(el("h2", { text: "Calls" }), form, body);
  outcome.addEventListener("change", load);
  let busy = false;
  async function load() {
    if (busy) return true;
    busy = true;
    try {
      const r = await api("/audit", { principal: principal.value.trim(), capability: capability.value.trim(), outcome: outcome.value, limit: 200 });
      const rows = r.records.map((x) => el("tr", { "data-call": x.id },
        el("td", { text: when(x.at) }), el("td", { text: x.principal }),
        el("td", {}, el("code", { text: x.capability })), el("td", { text: x.kind }),
        el("td", {}, badge(x.decision), x.policies && x.policies.length ? el("span", { class: "muted", text: ` ${x.policies.join(" ")}` }) : null),
        el("td", {}, badge(x.outcome)), el("td", { text: duration(Math.round(x.duration_us / 100) / 10) }),
        el("td", {}, x.run_id ? el("a", { href: `#/runs/${encodeURIComponent(x.run_id)}`, text: x.node_id ? `${x.run_id} · ${x.node_id}` : x.run_id }) : "—"),
        el("td", { class: "err", text: x.error || "" })));
      body.replaceChildren(rows.length
        ? table(["Time", "Principal", "Capability", "Kind", "Decision", "Outcome", "Took", "Run", "Error"], rows, "Calls")
        : el("p", { text: "No calls match." }));
      say("");
      return true;
    } catch (e) { const p = problem(e); if (p) body.replaceChildren(p); return false; } finally { busy = false; }
  }
  body.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
  if (!(await load())) return;
  const timer = setInterval(() => { if (document.body.contains(body)) load(); else clearInterval(timer); }, 500);
}

// Layered layout: a node's layer is its longest path from a root; layers go
// top to bottom, nodes in a layer left to right ordered by their parents'
// mean position (one pass), edges as curves from bottom to top.
function layout(graph) {
  const ids = graph.nodes.map((n) => n.id);
  const parents = new Map(ids.map((id) => [id, []]));
  for (const [from, to] of graph.edges) if (parents.has(to) && parents.has(from)) parents.get(to).push(from);
  const layer = new Map();
  const depth = (id, seen) => {
    if (layer.has(id)) return layer.get(id);
    if (seen.has(id)) return 0; // a cycle cannot validate; do not loop on one
    seen.add(id);
    const d = Math.max(-1, ...parents.get(id).map((p) => depth(p, seen))) + 1;
    layer.set(id, d);
    return d;
  };
  ids.forEach((id) => depth(id, new Set()));
  const layers = [];
  for (const id of ids) (layers[layer.get(id)] ||= []).push(id);
  const W = 170, H = 46, GX = 24, GY = 46, PAD = 16;
  const pos = new Map();
  layers.forEach((row, y) => {
    if (y > 0) {
      const mean = (id) => { const ps = parents.get(id); return ps.length ? ps.reduce((a, p) => a + pos.get(p).x, 0) / ps.length : 0; };
      row.sort((a, b) => mean(a) - mean(b));
    }
    row.forEach((id, x) => pos.set(id, { x: PAD + x * (W + GX), y: PAD + y * (H + GY) }));
  });
  const width = PAD * 2 + Math.max(1, ...layers.map((r) => r.length)) * (W + GX) - GX;
  const height = PAD * 2 + layers.length * (H + GY) - GY;
  return { pos, width, height, W, H };
}

function runPage(id) {
  const state = { run: null, nodes: new Map(), graph: null, pending: null };
  const head = el("div", {});
  const cancel = actionButton("cancel", { class: "danger", id: "cancel-run", hidden: true, text: "Cancel run", onclick: doCancel }, "cancel-why");
  const graphBox = el("div", { class: "graph", id: "run-graph", role: "group", "aria-label": "Workflow graph: Tab to a node, Enter to show its details" });
  const legend = el("div", { class: "legend", "aria-hidden": "true" }, ["pending", "running", "succeeded", "failed", "skipped", "cancelled"].map(badge));
  const details = el("div", { id: "node-details" });
  const cancelNote = actionsNote("cancel-why", ["cancel"]);
  if (cancelNote) cancelNote.hidden = true;
  main.replaceChildren(el("p", {}, el("a", { href: "#/runs", text: "← Runs" })), head, el("div", { class: "row" }, cancel), cancelNote,
    el("h2", { text: "Graph" }), legend, graphBox, el("h2", { text: "Nodes" }), details);

  async function doCancel() {
    cancel.disabled = true;
    say("Cancelling…");
    try {
      const r = await api(`/runs/${encodeURIComponent(id)}/cancel`, {});
      say(`Cancel: run is ${r.status}`);
      await load();
    } catch (e) { failed(e); }
    cancel.disabled = false;
  }
  async function load() {
    state.pending = [];
    const r = await api(`/runs/${encodeURIComponent(id)}`);
    state.run = r.run;
    state.graph = r.graph || { nodes: r.nodes.map((n) => ({ id: n.node_id, use: n.capability })), edges: [] };
    state.nodes = new Map(r.nodes.map((n) => [n.node_id, n]));
    const later = state.pending || []; state.pending = null;
    later.forEach(apply);
    render();
  }
  function apply(ev) {
    if (state.pending) { state.pending.push(ev); return; }
    if (ev.type === "node") { state.nodes.set(ev.node.node_id, ev.node); renderNode(ev.node.node_id); renderDetails(); }
  }
  function statusOf(nodeId) { const n = state.nodes.get(nodeId); return n ? n.status : "pending"; }
  function render() {
    const run = state.run;
    head.replaceChildren(el("h2", {}, `Run ${run.id} `, badge(run.status)),
      el("dl", { class: "facts" },
        el("dt", { text: "Workflow" }), el("dd", { text: run.workflow }),
        el("dt", { text: "Origin" }), el("dd", { text: run.origin && run.origin.kind ? Object.values(run.origin).join(" ") : "—" }),
        el("dt", { text: "Principal" }), el("dd", { text: run.principal || "—" }),
        el("dt", { text: "Started" }), el("dd", { text: when(run.started_at) }),
        el("dt", { text: "Took" }), el("dd", { text: run.finished_at ? duration(run.finished_at - run.started_at) : "running" }),
        run.error ? [el("dt", { text: "Error" }), el("dd", { class: "err", text: run.error })] : null,
        el("dt", { text: "Inputs" }), el("dd", {}, el("pre", { text: json(run.inputs) })),
        run.outputs ? [el("dt", { text: "Outputs" }), el("dd", {}, el("pre", { text: json(run.outputs) }))] : null));
    head.setAttribute("data-run-status", run.status);
    cancel.hidden = run.status !== "running";
    if (cancelNote) cancelNote.hidden = cancel.hidden;
    drawGraph();
    renderDetails();
  }
  function drawGraph() {
    const g = state.graph;
    const { pos, width, height, W, H } = layout(g);
    const s = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "presentation" });
    for (const [from, to] of g.edges) {
      const a = pos.get(from), b = pos.get(to);
      if (!a || !b) continue;
      const x1 = a.x + W / 2, y1 = a.y + H, x2 = b.x + W / 2, y2 = b.y, my = (y1 + y2) / 2;
      s.append(svg("path", { class: "edge", d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`, "data-edge": `${from}->${to}` }));
    }
    for (const n of g.nodes) {
      const p = pos.get(n.id);
      const node = svg("g", { class: "node", transform: `translate(${p.x},${p.y})`, tabindex: "0", role: "button", "data-node": n.id });
      node.append(svg("rect", { width: W, height: H, rx: 6 }));
      const t1 = svg("text", { x: 10, y: 19, "font-weight": "600" }); t1.textContent = clip(n.id, 22);
      const t2 = svg("text", { x: 10, y: 36 });
      node.append(t1, t2);
      node.addEventListener("click", () => openDetails(n.id));
      node.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); openDetails(n.id); } });
      s.append(node);
    }
    graphBox.replaceChildren(s);
    g.nodes.forEach((n) => renderNode(n.id));
  }
  function clip(text, n) { return text.length > n ? `${text.slice(0, n - 1)}…` : text; }
  function renderNode(nodeId) {
    const g = graphBox.querySelector(`[data-node="${CSS.escape(nodeId)}"]`);
    if (!g) { drawGraphIfNew(nodeId); return; }
    const st = statusOf(nodeId);
    const use = (state.graph.nodes.find((n) => n.id === nodeId) || {}).use || "";
    g.setAttribute("data-status", st);
    g.setAttribute("aria-label", `${nodeId}: ${st}, ${use}`);
    g.querySelectorAll("text")[1].textContent = clip(`${st} · ${use}`, 24);
  }
  function drawGraphIfNew(nodeId) {
    // A node the graph did not know (a run drawn from its records): add it.
    if (!state.graph.nodes.some((n) => n.id === nodeId)) {
      const n = state.nodes.get(nodeId);
      state.graph.nodes.push({ id: nodeId, use: n ? n.capability : "" });
      drawGraph();
    }
  }
  function openDetails(nodeId) {
    const d = details.querySelector(`details[data-node-details="${CSS.escape(nodeId)}"]`);
    if (d) { d.open = true; d.querySelector("summary").focus(); d.scrollIntoView({ block: "nearest" }); }
  }
  function renderDetails() {
    const open = new Set([...details.querySelectorAll("details[open]")].map((d) => d.getAttribute("data-node-details")));
    details.replaceChildren(...state.graph.nodes.map((gn) => {
      const n = state.nodes.get(gn.id) || { status: "pending", attempts: 0 };
      const took = n.started_at ? (n.finished_at || Date.now()) - n.started_at : null;
      return el("details", { class: "node", "data-node-details": gn.id, open: open.has(gn.id) },
        el("summary", {}, el("code", { text: gn.id }), " ", badge(n.status), " ",
          el("span", { class: "muted", text: `${gn.use} · attempts ${n.attempts || 0} · ${n.finished_at ? duration(took) : n.started_at ? "running" : "not started"}` })),
        el("div", {},
          el("h3", { text: "Inputs" }), el("pre", { text: n.args === undefined || n.args === null ? "—" : json(n.args) }),
          n.error ? [el("h3", { text: "Error" }), el("pre", { class: "err", text: `${n.error_code ? `[${n.error_code}] ` : ""}${n.error}` })] : null,
          n.output !== undefined && n.output !== null ? [el("h3", { text: "Output" }), el("pre", { text: json(n.output) })] : null,
          el("p", { class: "muted", text: `started ${when(n.started_at)}, finished ${when(n.finished_at)}${n.epoch != null ? `, session epoch ${n.epoch}` : ""}` })));
    }));
  }
  // Subscribe first, then load: nothing that happens in between is missed.
  stream(`/events?run=${encodeURIComponent(id)}`, (ev) => {
    if (ev.type === "ready" || ev.type === "lagged" || ev.type === "run_finished") {
      load().catch((e) => { const p = problem(e); if (p) { head.replaceChildren(p); graphBox.replaceChildren(); details.replaceChildren(); } });
    }
    else apply(ev);
  });
}

// ---- routing -------------------------------------------------------------
const PAGES = { sources: sourcesPage, plugins: pluginsPage, capabilities: capabilitiesPage, endpoints: endpointsPage, runs: runsPage, calls: callsPage };
async function route() {
  if (pageAbort) pageAbort.abort();
  pageAbort = new AbortController();
  const path = (location.hash.replace(/^#\/?/, "").split("?")[0] || "sources").split("/");
  const tab = PAGES[path[0]] ? path[0] : "sources";
  document.querySelectorAll("nav a").forEach((a) => {
    if (a.dataset.tab === tab) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  });
  document.title = `wf console: ${tab}`;
  try {
    await loadAccess();
  } catch (e) {
    main.replaceChildren(el("p", { class: "err", role: "alert", text: `Error: cannot reach wf (${e.message})` }));
    return;
  }
  if (!access.signed_in) { signInPage(); return; }
  loginRefused = "";
  say("");
  try {
    if (tab === "runs" && path[1]) runPage(decodeURIComponent(path[1]));
    else await PAGES[tab]();
  } catch (e) { const p = problem(e); if (p) main.replaceChildren(p); }
}

document.getElementById("tokens-form").addEventListener("submit", (e) => {
  e.preventDefault();
  tokens.save(document.getElementById("bearer-token").value.trim(), document.getElementById("admin-token").value.trim());
  document.getElementById("tokens").hidden = true;
  document.getElementById("tokens-button").setAttribute("aria-expanded", "false");
  say("Tokens saved for this tab.");
  route();
  main.focus();
});
document.getElementById("tokens-clear").addEventListener("click", () => {
  tokens.clear();
  document.getElementById("bearer-token").value = "";
  document.getElementById("admin-token").value = "";
  say("Tokens forgotten.");
});
document.getElementById("tokens-button").addEventListener("click", () => {
  const box = document.getElementById("tokens");
  if (box.hidden) showTokens(); else { box.hidden = true; document.getElementById("tokens-button").setAttribute("aria-expanded", "false"); }
});
window.addEventListener("hashchange", route);
route();
