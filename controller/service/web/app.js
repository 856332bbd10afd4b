// The live view: draws the fabric plane by plane as SVG from /api/layout, then colours it from the
// snapshots and lists the events that /events streams (server-sent events). Read-only.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const MAX_EVENTS = 200;
const SKIP = new Set(["t", "mono_ns", "kind", "pid", "t_mono_ns"]);

function el(tag, attrs, parent, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

function html(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

const items = { links: new Map(), ports: new Map(), switches: new Map() };

function drawPlane(plane) {
  const portW = 64, leafMin = 128, pad = 24;
  const leafW = plane.leaves.map(l => Math.max(leafMin, l.ports.length * portW));
  const width = Math.max(leafW.reduce((a, b) => a + b, 0), plane.spines.length * 140) + 2 * pad;
  const ySpine = 48, yLeaf = 190, yHost = 300, height = 340;
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "plane", "data-plane": plane.plane });
  el("text", { x: 12, y: 20, class: "plane-title" }, svg, `plane ${plane.plane}`);
  const spineX = new Map(), leafX = new Map();
  plane.spines.forEach((s, i) => spineX.set(s, pad + (width - 2 * pad) * (i + 0.5) / plane.spines.length));
  let x = pad + (width - 2 * pad - leafW.reduce((a, b) => a + b, 0)) / 2;
  plane.leaves.forEach((l, i) => { leafX.set(l.name, x + leafW[i] / 2); x += leafW[i]; });
  const links = el("g", {}, svg), nodes = el("g", {}, svg);
  for (const ln of plane.links) {
    const x1 = leafX.get(ln.t0), x2 = spineX.get(ln.t1);
    const line = el("line", { x1, y1: yLeaf - 14, x2, y2: ySpine + 14, class: "link state-up", "data-link": ln.key }, links);
    const title = el("title", {}, line, ln.key);
    const mx = x1 + (x2 - x1) * 0.35, my = yLeaf - 14 + (ySpine - yLeaf + 28) * 0.35;
    const who = el("text", { x: mx, y: my - 4, class: "who", "data-who": ln.key }, links, "");
    items.links.set(ln.key, { line, title, who, ln });
  }
  for (const s of plane.spines) switchBox(nodes, s, spineX.get(s), ySpine);
  for (const l of plane.leaves) {
    const lx = leafX.get(l.name);
    l.ports.forEach((p, k) => {
      const hx = lx + (k - (l.ports.length - 1) / 2) * portW;
      const line = el("line", { x1: lx, y1: yLeaf + 14, x2: hx, y2: yHost - 12, class: "hostport state-up", "data-port": p.key }, links);
      const title = el("title", {}, line, p.key);
      el("text", { x: hx + (lx - hx) * 0.25 + 10, y: yLeaf + 34, class: "portno" }, links, String(p.port));
      const g = el("g", { class: "host" }, nodes);
      el("rect", { x: hx - 24, y: yHost - 12, width: 48, height: 22, rx: 4 }, g);
      el("text", { x: hx, y: yHost + 3 }, g, p.host || `port ${p.port}`);
      const who = el("text", { x: hx, y: yHost + 26, class: "who", "data-who": p.key }, links, "");
      items.ports.set(p.key, { line, title, who, p });
    });
    switchBox(nodes, l.name, lx, yLeaf);
  }
  return svg;
}

function switchBox(parent, name, x, y) {
  const g = el("g", { class: "switch state-up", "data-switch": name }, parent);
  el("rect", { x: x - 50, y: y - 14, width: 100, height: 28, rx: 5 }, g);
  el("text", { x, y: y + 4 }, g, name);
  const title = el("title", {}, g, name);
  items.switches.set(name, { g, title });
}

function probesText(p) {
  if (!p) return "probes: no controller view";
  let t = `probes ${p.sent - p.lost}/${p.sent} back`;
  if (p.delay_ms !== null && p.delay_ms !== undefined) t += `, delay ${p.delay_ms.toFixed(2)} ms`;
  if (p.reason) t += ` (${p.reason})`;
  return t;
}

function stateText(s) {
  if (s.state === "failed") return `FAILED (${s.why}, by the ${s.recorded_by})` + (s.applied === false ? ", not applied yet" : "");
  if (s.state === "down") return `DOWN: ${s.why}`;
  return "up";
}

function paint(item, s, base) {
  const cls = `${base} state-${s.state}` + (s.recorded_by ? ` by-${s.recorded_by}` : "");
  item.line.setAttribute("class", cls);
  item.line.dataset.state = s.state;
  item.line.dataset.by = s.recorded_by || "";
  item.title.textContent = `${item.line.dataset.link || item.line.dataset.port}: ${stateText(s)}; ${probesText(s.probes)}`;
  item.who.textContent = s.state === "failed" ? s.recorded_by : s.state === "down" ? "probes fail" : "";
  item.who.setAttribute("class", `who state-${s.state}`);
}

function render(snap) {
  document.getElementById("topology").textContent = `${snap.topology} (${snap.program})`;
  for (const [key, s] of Object.entries(snap.links)) { const it = items.links.get(key); if (it) paint(it, s, "link"); }
  for (const [key, s] of Object.entries(snap.host_ports)) { const it = items.ports.get(key); if (it) paint(it, s, "hostport"); }
  for (const [name, s] of Object.entries(snap.switches)) {
    const it = items.switches.get(name); if (!it) continue;
    it.g.setAttribute("class", `switch state-${s.state}` + (s.recorded_by ? ` by-${s.recorded_by}` : ""));
    const role = snap.controller && snap.controller.switches[name];
    it.title.textContent = `${name}: ${s.state === "failed" ? "FAILED (by the " + s.recorded_by + ")" : "up"}` + (role ? `; controller ${role}` : "");
  }
  renderController(snap);
  const fl = document.getElementById("failures"); fl.replaceChildren();
  if (snap.state_error) fl.appendChild(html("li", snap.state_error, "bad"));
  if (snap.store_problem) fl.appendChild(html("li", `store: ${snap.store_problem}`, "bad"));
  if (!snap.failures.length && !snap.state_error) fl.appendChild(html("li", "none", "ok"));
  for (const f of snap.failures) {
    const li = html("li", `${f.what} `); li.appendChild(html("span", f.by, `by by-${f.by}-tag`)); fl.appendChild(li);
  }
  const un = document.getElementById("unreachable"); un.replaceChildren();
  for (const [plane, list] of Object.entries(snap.unreachable)) {
    const p = html("div", `plane ${plane}: ` + (list.length ? `${list.length} unreachable` : "every destination reachable"), list.length ? "bad" : "ok");
    p.dataset.plane = plane; un.appendChild(p);
    if (list.length) { const ul = html("ul"); for (const u of list) ul.appendChild(html("li", u)); un.appendChild(ul); }
  }
  renderPaths(snap.paths);
}

function renderController(snap) {
  const box = document.getElementById("controller"); box.replaceChildren();
  const c = snap.controller;
  if (!c) {
    box.appendChild(html("span", `no controller running on ${snap.state_file} (no live controller's view there): showing the recorded failures only; probe health and path rates need 'fabricctl run'`, "bad"));
    return;
  }
  const n = Object.keys(c.switches).length;
  box.appendChild(html("span", `controller ${c.host ? "leader " + c.host + " " : ""}pid ${c.pid}, election id ${c.election_id}: primary on ${c.primary_on}/${n}, backup on ${c.backup_on}, down on ${c.down_on}` +
    (c.age_s !== null ? `; status ${c.age_s.toFixed(1)} s old` : "") +
    (c.probe_timeout_ms ? `; probe timeout ${c.probe_timeout_ms} ms` : "") +
    (c.rss_kb ? `; RSS ${(c.rss_kb / 1024).toFixed(1)} MiB` : "") +
    (c.pending && c.pending.length ? `; pending full reconcile: ${c.pending.join(", ")}` : ""), c.primary_on === n ? "ok" : "bad"));
}

function renderPaths(paths) {
  document.getElementById("paths-note").textContent = paths.note;
  const body = document.querySelector("#paths tbody"); body.replaceChildren();
  for (const r of paths.rows) {
    const tr = html("tr");
    tr.append(html("td", r.switch), html("td", String(r.plane)), html("td", r.spine), html("td", r.segments),
      html("td", String(r.packets), "num"), html("td", r.rate_pps === null || r.rate_pps === undefined ? "-" : r.rate_pps.toFixed(1), "num"));
    body.appendChild(tr);
  }
}

function addEvent(ev) {
  const body = document.querySelector("#events tbody");
  const t = new Date(ev.t * 1000);
  const when = t.toLocaleTimeString([], { hour12: false }) + "." + String(t.getMilliseconds()).padStart(3, "0");
  const rest = Object.entries(ev).filter(([k]) => !SKIP.has(k))
    .map(([k, v]) => `${k}=${typeof v === "object" && v !== null ? JSON.stringify(v) : v}`).join(" ");
  const tr = html("tr", undefined, `kind-${ev.kind}`);
  tr.append(html("td", when), html("td", ev.kind), html("td", rest));
  body.insertBefore(tr, body.firstChild);
  while (body.children.length > MAX_EVENTS) body.removeChild(body.lastChild);
}

function setConn(text, cls) { const c = document.getElementById("conn"); c.textContent = text; c.className = `conn ${cls}`; }

async function start() {
  const layout = await (await fetch("/api/layout")).json();
  const planes = document.getElementById("planes");
  for (const p of layout.planes) planes.appendChild(drawPlane(p));
  const source = new EventSource("/events");
  source.addEventListener("open", () => setConn("live", "conn-live"));
  source.addEventListener("error", () => setConn("reconnecting", "conn-lost"));
  source.addEventListener("snapshot", e => { render(JSON.parse(e.data)); document.body.dataset.snapshots = String(Number(document.body.dataset.snapshots || 0) + 1); });
  source.addEventListener("fabric", e => addEvent(JSON.parse(e.data)));
}

start().catch(err => setConn(`error: ${err}`, "conn-lost"));
