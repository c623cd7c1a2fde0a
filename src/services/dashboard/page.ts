/**
 * The web dashboard's one page: self-contained HTML (inline CSS and JS, no build step, no framework). It folds the
 * daemon's state stream, read over SSE, into the same view `berth dashboard` shows, and draws it with DOM text nodes
 * only — never `innerHTML` — so nothing a world, a service or a log line says can become markup. The only values
 * the server puts into the HTML are the per-daemon token and a nonce, both hex, and escaped all the same.
 */

export const escapeHtml = (text: string): string =>
  text
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;")

const STYLE = `
:root { color-scheme: light dark; --bg: #fbfbfa; --fg: #1d1d1b; --dim: #77756f; --line: #e4e2dc; --good: #1d7a3a;
  --moving: #a86a00; --bad: #b3261e; --accent: #1a5fb4; --chip: #efede8; }
@media (prefers-color-scheme: dark) { :root { --bg: #1b1b1a; --fg: #e9e7e2; --dim: #9a978f; --line: #34332f;
  --good: #5bc27a; --moving: #e0a43a; --bad: #ef6a5f; --accent: #7fb0ff; --chip: #2a2927; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; background: var(--bg); color: var(--fg); }
header { padding: 14px 22px; border-bottom: 1px solid var(--line); display: flex; gap: 18px; align-items: baseline;
  flex-wrap: wrap; }
header h1 { font-size: 17px; margin: 0; }
#machine, #summary { color: var(--dim); }
#conn { margin-left: auto; font-size: 12px; color: var(--dim); }
#conn.live::before { content: "● "; color: var(--good); }
#conn.lost::before { content: "● "; color: var(--bad); }
main { padding: 8px 22px 22px; display: grid; grid-template-columns: minmax(0, 1fr); gap: 16px; }
h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .06em; color: var(--dim); margin: 18px 0 6px; }
table { border-collapse: collapse; width: 100%; }
td, th { padding: 5px 8px; text-align: left; vertical-align: middle; white-space: nowrap; }
th { font-size: 12px; color: var(--dim); font-weight: 500; border-bottom: 1px solid var(--line); }
tr.world td { border-top: 1px solid var(--line); font-weight: 600; }
tr.service td:first-child { padding-left: 26px; font-weight: 400; }
.state { font-weight: 600; }
.good { color: var(--good); } .moving { color: var(--moving); } .bad { color: var(--bad); } .idle { color: var(--dim); }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.where, tr.world td.where { color: var(--dim); font-weight: 400; white-space: normal; }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
button { font: inherit; font-size: 12px; padding: 2px 9px; margin-right: 4px; border-radius: 6px; cursor: pointer;
  border: 1px solid var(--line); background: var(--chip); color: var(--fg); }
button:hover { border-color: var(--accent); }
button.danger:hover { border-color: var(--bad); color: var(--bad); }
#status { min-height: 1.4em; color: var(--dim); }
#status.error { color: var(--bad); }
#logs { display: none; }
#logs.open { display: block; }
#logs pre { margin: 0; padding: 10px 12px; max-height: 40vh; overflow: auto; background: var(--chip);
  border-radius: 8px; font: 12px/1.4 ui-monospace, monospace; white-space: pre-wrap; }
#events { list-style: none; padding: 0; margin: 0; color: var(--dim); font-size: 13px; }
#line:empty, #history:has(#events:empty) { display: none; }
.empty { color: var(--dim); padding: 16px 0; }
`

/** The page's program: the state stream folded as `domain/dashboard.ts` folds it, drawn with text nodes. */
const SCRIPT = `
"use strict"
const TOKEN = document.body.dataset.token
const $ = (id) => document.getElementById(id)
const el = (tag, props, ...children) => {
  const node = document.createElement(tag)
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "text") node.textContent = v
    else if (k === "class") node.className = v
    else if (k.startsWith("data-")) node.setAttribute(k, v)
    else node[k] = v
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c)
  return node
}
const GOOD = ["running", "healthy", "ready"]
const MOVING = ["starting", "queued", "pending", "restarting", "stopping", "suspending", "provisioning", "removing"]
const BAD = ["failed", "unhealthy", "exited"]
const tone = (s) => (GOOD.includes(s) ? "good" : MOVING.includes(s) ? "moving" : BAD.includes(s) ? "bad" : "idle")
const bytes = (n) => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]
  let u = 0
  while (n >= 1024 && u < units.length - 1) { n /= 1024; u++ }
  return (u === 0 || n >= 100 ? Math.round(n) : n.toFixed(1)) + " " + units[u]
}
const safeUrl = (url) => (typeof url === "string" && /^https?:\\/\\//.test(url) ? url : null)

let model = { worlds: [], line: [], machine: null, usage: new Map(), events: [] }
const byPlace = (a, b) =>
  a.status.project.localeCompare(b.status.project) || Number(b.status.main) - Number(a.status.main) ||
  a.status.name.localeCompare(b.status.name) || a.id - b.id

const apply = (m) => {
  switch (m._tag) {
    case "Snapshot":
      model = { worlds: m.worlds.slice().sort(byPlace), line: m.line, machine: m.machine,
        usage: new Map(m.usage.map((u) => [u.worldId, u])),
        events: m.worlds.flatMap((w) => w.status.events.map((event) => ({ world: w.status.name, event })))
          .sort((a, b) => a.event.at - b.event.at).slice(-50) }
      break
    case "WorldChanged":
      model.worlds = model.worlds.filter((w) => w.id !== m.world.id).concat([m.world]).sort(byPlace)
      break
    case "WorldGone":
      model.worlds = model.worlds.filter((w) => w.id !== m.id)
      model.usage.delete(m.id)
      break
    case "LineChanged":
      model.line = m.line
      break
    case "Readings":
      model.machine = m.machine
      model.usage = new Map(m.usage.map((u) => [u.worldId, u]))
      break
    case "EventAdded":
      model.events = model.events.concat([{ world: m.world, event: m.event }]).slice(-50)
      break
  }
}

let said = 0
const say = (text, error) => {
  $("status").textContent = text
  $("status").className = error ? "error" : ""
  // an outcome is news for a while; the table shows what is true after it
  const mine = ++said
  if (!error) setTimeout(() => { if (said === mine) $("status").textContent = "" }, 8000)
}

const act = async (world, action, service) => {
  if (action === "remove" && !confirm("Remove " + world.status.name + "? Its processes stop, its ports are released and its worktree is deleted.")) return
  say(action + " " + world.status.name + (service ? " " + service : "") + "…")
  try {
    const res = await fetch("/actions", {
      method: "POST",
      headers: { "content-type": "application/json", "x-berth-token": TOKEN },
      body: JSON.stringify({ world: world.id, action, service })
    })
    const body = await res.json().catch(() => ({}))
    if (res.ok) say(body.message || "done")
    else say(world.status.name + ": " + (body.error || res.status + " " + res.statusText), true)
  } catch (e) {
    say(world.status.name + ": " + e, true)
  }
}

let logSource = null
const follow = (world, service) => {
  if (logSource !== null) logSource.close()
  const pre = $("log-lines")
  pre.textContent = ""
  $("log-title").textContent = "log of " + service + " in " + world.status.name
  $("logs").className = "open"
  const url = "/logs?token=" + encodeURIComponent(TOKEN) + "&world=" + world.id + "&service=" + encodeURIComponent(service)
  logSource = new EventSource(url)
  logSource.onmessage = (e) => {
    const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4
    pre.append(document.createTextNode(JSON.parse(e.data) + "\\n"))
    while (pre.childNodes.length > 1000) pre.firstChild.remove()
    if (stick) pre.scrollTop = pre.scrollHeight
  }
}
$("log-close").addEventListener("click", () => {
  if (logSource !== null) logSource.close()
  logSource = null
  $("logs").className = ""
})

const button = (label, world, action, service, danger) => {
  const b = el("button", { text: label, type: "button", "data-action": action, class: danger ? "danger" : "" })
  b.addEventListener("click", () => (action === "logs" ? follow(world, service) : act(world, action, service)))
  return b
}

const draw = () => {
  const m = model.machine
  const running = model.worlds.filter((w) => w.status.state === "running").length
  $("summary").textContent = model.worlds.length + " world" + (model.worlds.length === 1 ? "" : "s") + ", " + running + " running" +
    (model.line.length > 0 ? ", " + model.line.length + " in line" : "")
  $("machine").textContent = m === null ? "" :
    m.running + "/" + m.reserves.maxParallel + " running · memory " + m.memAvailablePercent.toFixed(0) + "% free (reserve " +
    m.reserves.ramPercent + "%) · " + m.disks.map((d) => "disk " + bytes(d.freeBytes) + " free on " + d.path).join(", ") +
    " (reserve " + bytes(m.reserves.diskBytes) + ")"
  $("line").replaceChildren(...model.line.map((e) =>
    el("li", { text: "#" + e.position + " " + e.project + "/" + e.world + ": waiting for " + e.waitingFor })))
  $("events").replaceChildren(...model.events.slice(-8).reverse().map((x) =>
    el("li", { text: new Date(x.event.at).toLocaleTimeString() + " " + x.world + (x.event.service ? " " + x.event.service : "") +
      " " + x.event.kind + ": " + x.event.message })))
  const out = []
  if (model.worlds.length === 0) out.push(el("p", { class: "empty", text: "No worlds yet: berth up <branch> makes one." }))
  let project = null
  let table = null
  for (const w of model.worlds) {
    if (w.status.project !== project) {
      project = w.status.project
      out.push(el("h2", { text: project }))
      table = el("table", {}, el("tr", {}, ...["world / service", "state", "CPU", "memory", "where", ""].map((t) => el("th", { text: t }))))
      out.push(table)
    }
    const u = model.usage.get(w.id)
    const s = w.status
    const where = s.queue ? "#" + s.queue.position + " in line, waiting for " + s.queue.waitingFor : s.reason || s.path
    table.append(el("tr", { class: "world", "data-world": s.name, "data-project": s.project },
      el("td", { text: s.name }),
      el("td", { class: "state " + tone(s.state), text: s.state }),
      el("td", { class: "num", text: u && u.cpuPercent !== null ? u.cpuPercent.toFixed(1) + "%" : "" }),
      el("td", { class: "num", text: u ? bytes(u.rssBytes) : "" }),
      el("td", { class: "where", text: where }),
      el("td", {}, button("up", w, "up"), button("down", w, "down"), button("reload", w, "reload"),
        button("remove", w, "remove", undefined, true))))
    for (const svc of s.services) {
      const url = safeUrl(svc.url)
      table.append(el("tr", { class: "service", "data-world": s.name, "data-service": svc.name },
        el("td", { text: svc.name }),
        el("td", { class: "state " + tone(svc.state), text: svc.state }),
        el("td", { class: "num", text: svc.port === null ? "" : ":" + svc.port }),
        el("td", { class: "num", text: svc.restarts > 0 ? "↻" + svc.restarts : "" }),
        el("td", { class: "where" }, url === null ? (svc.url || "") : el("a", { href: url, text: url, target: "_blank", rel: "noopener" }),
          svc.reason ? el("span", { class: "bad", text: "  " + svc.reason }) : null),
        el("td", {}, svc.kind === "process" ? button("restart", w, "restart", svc.name) : null,
          button("logs", w, "logs", svc.name))))
    }
  }
  $("worlds").replaceChildren(...out)
}

let pending = false
const schedule = () => {
  if (pending) return
  pending = true
  requestAnimationFrame(() => { pending = false; draw() })
}
const connect = () => {
  const source = new EventSource("/events?token=" + encodeURIComponent(TOKEN))
  source.onopen = () => { $("conn").className = "live"; $("conn").textContent = "live" }
  source.onmessage = (e) => { apply(JSON.parse(e.data)); schedule() }
  source.onerror = () => {
    $("conn").className = "lost"
    $("conn").textContent = "reconnecting…"
    // refused for good: a new daemon, with a new token, answers now; the page comes again with it
    if (source.readyState === EventSource.CLOSED) setTimeout(() => location.reload(), 2000)
  }
}
connect()
`

/** The page, with this daemon's token (the actions' key) and a fresh nonce for its script and style. */
export const dashboardPage = (token: string, nonce: string): string => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>berth</title>
<style nonce="${escapeHtml(nonce)}">${STYLE}</style>
</head>
<body data-token="${escapeHtml(token)}">
<header><h1>berth</h1><span id="summary">connecting…</span><span id="machine"></span><span id="conn"></span></header>
<main>
<div id="status" role="status"></div>
<ul id="line"></ul>
<section id="worlds"></section>
<section id="logs"><h2><span id="log-title"></span> <button type="button" id="log-close">close</button></h2><pre id="log-lines"></pre></section>
<section id="history"><h2>events</h2><ul id="events"></ul></section>
</main>
<script nonce="${escapeHtml(nonce)}">${SCRIPT}</script>
</body>
</html>
`
