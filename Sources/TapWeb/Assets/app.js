// 3dstape web inspector: a single page over the JSON API under /api.
// Every value from a session reaches the page as text (textContent, setAttribute on SVG geometry only); nothing
// from a session is ever parsed as HTML. The Content-Security-Policy forbids inline script besides.
"use strict";

const ROW = 24;          // timeline row height, px
const PAGE = 100;        // rows per API page
const POLL_MS = 500;     // live mode: how often the page asks for new exchanges

let glossary = { elements: {}, values: {} };
let stopView = () => {}; // cleans up the current view (timers, listeners)

// ---------- small helpers ----------

/** An element with attributes (strings) and children (nodes or strings, strings become text nodes). */
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "onclick") e.addEventListener("click", v);
    else if (k === "onchange") e.addEventListener("change", v);
    else if (k === "oninput") e.addEventListener("input", v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

async function api(path) {
  const r = await fetch("/api/" + path, { headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => ({ error: "HTTP " + r.status }));
  if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
  return body;
}

const enc = encodeURIComponent;
function setMain(...nodes) {
  const m = document.getElementById("main");
  m.replaceChildren(...nodes.flat().filter(n => n !== null && n !== undefined && n !== false));
  return m;
}
function crumbs(...items) {
  document.getElementById("crumbs").replaceChildren(...items.map(([text, href]) => href ? el("a", { href }, text) : el("span", {}, text)));
}
function status(text) { document.getElementById("status").textContent = text || ""; }
function fail(e) { setMain(el("p", { class: "error" }, String(e.message || e))); }
function ms(v) { return v === null || v === undefined ? "-" : (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + " ms"; }
function isMasked(s) { return typeof s === "string" && /\*{3}/.test(s); }
function sessionTabs(name, active) {
  const tabs = [["timeline", "#/s/" + enc(name)], ["transactions", "#/s/" + enc(name) + "/tx"], ["validation", "#/s/" + enc(name) + "/validation"]];
  return el("div", { class: "tabs" }, tabs.map(([t, h]) => el("a", { href: h, class: t === active ? "active" : null, id: "tab-" + t }, t)));
}
function messageBadges(messages) {
  const req = messages.filter(m => m.direction === "request"), res = messages.filter(m => m.direction === "response");
  const badge = m => el("span", { class: "badge" + (m.encrypted ? " enc" : "") + (m.type === "Erro" || m.error_code ? " err" : "") },
    (m.type || "?") + (m.trans_status ? " " + m.trans_status : "") + (m.error_code ? " " + m.error_code : "") + (m.encrypted ? " (JWE)" : ""));
  const out = [];
  req.forEach(m => out.push(badge(m)));
  if (res.length) { out.push("→ "); res.forEach(m => out.push(badge(m))); }
  return out;
}

// ---------- sessions ----------

async function sessionsView() {
  crumbs(["sessions"]);
  const data = await api("sessions");
  const cols = [["name", "file"], ["label", "label"], ["created", "created"], ["exchanges", "exchanges", true], ["transactions", "3DS tx", true],
                ["outcome", "outcome"], ["duration_s", "duration", true], ["kind", "kind"]];
  const rows = data.sessions.map(s => Object.assign({ kind: s.replay ? "replay" : "recording" }, s));
  let sortKey = "name", asc = true;
  const table = el("table", { id: "sessions" });
  function render() {
    rows.sort((a, b) => {
      const x = a[sortKey], y = b[sortKey];
      const c = (typeof x === "number" && typeof y === "number") ? x - y : String(x ?? "").localeCompare(String(y ?? ""));
      return asc ? c : -c;
    });
    const head = el("tr", {}, cols.map(([k, label, num]) => el("th", {
      class: "sortable" + (k === sortKey ? (asc ? " sorted-asc" : " sorted-desc") : "") + (num ? " num" : ""), "data-key": k,
      onclick: () => { if (sortKey === k) asc = !asc; else { sortKey = k; asc = true; } render(); } }, label)));
    const body = rows.map(s => el("tr", { class: "link session-row", "data-name": s.name, onclick: () => { location.hash = "#/s/" + enc(s.name); } },
      el("td", {}, el("a", { href: "#/s/" + enc(s.name) }, s.name)), el("td", {}, s.label), el("td", {}, s.created),
      el("td", { class: "num" }, s.exchanges), el("td", { class: "num" }, s.transactions), el("td", {}, s.outcome),
      el("td", { class: "num" }, s.duration_s === null ? "-" : s.duration_s.toFixed(2) + " s"), el("td", {}, s.kind)));
    table.replaceChildren(head, ...body);
  }
  render();
  const a = el("select", { id: "diff-a" }, rows.map(s => el("option", { value: s.name }, s.name)));
  const b = el("select", { id: "diff-b" }, rows.map(s => el("option", { value: s.name }, s.name)));
  if (rows.length > 1) b.selectedIndex = 1;
  const diff = el("p", {}, "Compare two sessions: ", a, " with ", b, " ",
    el("button", { id: "diff-go", onclick: () => { location.hash = "#/diff/" + enc(a.value) + "/" + enc(b.value); } }, "diff"));
  const problems = data.problems.length ? el("p", { class: "error" }, "Skipped: " + data.problems.map(p => p.name + ": " + p.error).join("; ")) : null;
  setMain(el("h2", {}, "Sessions"), rows.length ? table : el("p", { class: "muted" }, "No session files here."), problems, rows.length ? diff : null);
}

// ---------- timeline ----------

async function timelineView(name) {
  crumbs(["sessions", "#/"], [name]);
  const head = await api("sessions/" + enc(name));
  const filter = { type: "", status: "", host: "", errors: false, q: "" };
  let total = head.exchanges, lastID = head.last_id, generation = 0;
  const pages = new Map(); // page index → rows, for the current filter
  const loading = new Set();
  let t0 = null;

  const typeSel = el("select", { id: "f-type", onchange: () => { filter.type = typeSel.value; reset(); } }, el("option", { value: "" }, "any message"));
  const statusSel = el("select", { id: "f-status", onchange: () => { filter.status = statusSel.value; reset(); } }, el("option", { value: "" }, "any transStatus"));
  const hostSel = el("select", { id: "f-host", onchange: () => { filter.host = hostSel.value; reset(); } }, el("option", { value: "" }, "any host"));
  const errors = el("input", { type: "checkbox", id: "f-errors", onchange: () => { filter.errors = errors.checked; reset(); } });
  let searchTimer = null;
  const search = el("input", { type: "search", id: "f-search", placeholder: "URL, transaction ID, message type, #", oninput: () => {
    clearTimeout(searchTimer); searchTimer = setTimeout(() => { filter.q = search.value; reset(); }, 250); } });
  const live = el("input", { type: "checkbox", id: "live", checked: true });
  const count = el("span", { id: "count", class: "muted" });
  const legend = el("span", { class: "legend" }, ["connect", "tls", "send", "wait", "receive"].map(p => el("span", {}, el("i", { class: p }), p)));
  const box = el("div", { id: "timeline" });
  const spacer = el("div", { class: "spacer" });
  const headRow = el("div", { class: "xhead" }, ["#", "time", "method", "URL", "3DS messages", "status", "duration", "waterfall"].map(t => el("span", {}, t)));
  box.append(headRow, spacer);

  setMain(el("h2", {}, name + (head.replay ? " (replay)" : "")),
    head.recording ? el("p", { class: "replay" }, "A replay of ", el("a", { href: "#/s/" + enc(head.recording) }, head.recording),
      "; each answer names the recorded exchange it came from.") : null,
    sessionTabs(name, "timeline"),
    el("p", { class: "downloads" }, "Download: ", el("a", { href: "/api/sessions/" + enc(name) + "/session.har", download: "" }, "HAR"),
      " (Chrome DevTools, Charles, mitmproxy) · ", el("a", { href: "/api/sessions/" + enc(name) + "/session.mmd", download: "" }, "Mermaid")),
    el("div", { class: "filters" }, typeSel, statusSel, hostSel, el("label", {}, errors, " errors only"), search,
      el("label", {}, live, " live"), count), legend, box);

  api("sessions/" + enc(name) + "/facets").then(f => {
    f.types.forEach(t => typeSel.append(el("option", { value: t }, t)));
    f.statuses.forEach(t => statusSel.append(el("option", { value: t }, t + (glossary.values.transStatus?.[t] ? " – " + glossary.values.transStatus[t] : ""))));
    f.hosts.forEach(t => hostSel.append(el("option", { value: t }, t)));
  }).catch(() => {});

  function query(page) {
    const p = new URLSearchParams({ offset: page * PAGE, limit: PAGE });
    if (filter.type) p.set("type", filter.type);
    if (filter.status) p.set("status", filter.status);
    if (filter.host) p.set("host", filter.host);
    if (filter.errors) p.set("errors", "1");
    if (filter.q) p.set("q", filter.q);
    return "sessions/" + enc(name) + "/exchanges?" + p.toString();
  }
  function reset() { generation++; pages.clear(); loading.clear(); box.scrollTop = 0; load(0); }
  async function load(page) {
    if (pages.has(page) || loading.has(page)) return;
    loading.add(page);
    const g = generation;
    try {
      const data = await api(query(page));
      if (g !== generation) return;
      pages.set(page, data.rows);
      total = data.total;
      if (t0 === null && data.rows.length) t0 = data.rows[0].start;
      render();
    } catch (e) { status(String(e.message || e)); } finally { loading.delete(page); }
  }
  function render() {
    spacer.style.height = (total * ROW + ROW) + "px";
    count.textContent = total + " exchange" + (total === 1 ? "" : "s");
    const first = Math.max(0, Math.floor(box.scrollTop / ROW) - 5);
    const last = Math.min(total, first + Math.ceil(box.clientHeight / ROW) + 10);
    for (let p = Math.floor(first / PAGE); p <= Math.floor(Math.max(first, last - 1) / PAGE); p++) if (!pages.has(p)) load(p);
    const visible = [];
    for (let i = first; i < last; i++) { const r = pages.get(Math.floor(i / PAGE))?.[i % PAGE]; if (r) visible.push([i, r]); }
    // The waterfall's scale: the time the visible rows span.
    let lo = Infinity, hi = -Infinity;
    for (const [, r] of visible) { lo = Math.min(lo, r.start); hi = Math.max(hi, r.start + (r.duration_ms || 0) / 1000); }
    const span = Math.max(hi - lo, 0.001);
    box.querySelectorAll(".xrow").forEach(e => e.remove());
    for (const [i, r] of visible) box.append(rowElement(i, r, lo, span));
  }
  function rowElement(i, r, lo, span) {
    const url = (() => { try { const u = new URL(r.url); return u.host + u.pathname; } catch { return r.url; } })();
    const bad = r.error || r.client_aborted || (r.status && r.status >= 400);
    const wf = svg("svg", { width: 250, height: 14, class: "waterfall" });
    const W = 250;
    let x = (r.start - lo) / span * W;
    const tip = [];
    for (const [phase, v] of Object.entries(r.phases)) {
      const w = v / 1000 / span * W;
      if (v > 0) {
        const rect = svg("rect", { x: x.toFixed(2), y: 2, width: Math.max(w, 0.8).toFixed(2), height: 10, class: "phase-" + phase });
        wf.append(rect);
      }
      tip.push(phase + " " + v.toFixed(3) + " ms");
      x += w;
    }
    const title = svg("title", {}); title.textContent = tip.join(", "); wf.append(title);
    const faults = r.replay && r.replay.faults ? el("span", { class: "badge fault" }, r.replay.faults) : null;
    const miss = r.replay && r.replay.miss ? el("span", { class: "badge err" }, "miss") : null;
    const tunnel = r.tunnel ? el("span", { class: "badge", title: "passed through without interception" }, "tunnel" + (r.tunnel.sni ? " · SNI " + r.tunnel.sni : "")) : null;
    const row = el("div", { class: "xrow", "data-id": r.id, onclick: () => { location.hash = "#/s/" + enc(name) + "/x/" + r.id; } },
      el("span", { class: "mono" }, "#" + r.id),
      el("span", { class: "mono muted" }, t0 === null ? "" : "+" + ((r.start - t0) * 1000).toFixed(0) + " ms"),
      el("span", {}, r.method),
      el("span", { class: "mono", title: r.url }, url),
      el("span", { class: "types" }, messageBadges(r.messages), faults, miss, tunnel),
      el("span", { class: bad ? "status-bad" : "status-ok" }, r.status ?? (r.error ? "error" : "-")),
      el("span", { class: "num" }, ms(r.duration_ms)),
      el("span", {}, wf));
    row.style.top = (ROW + i * ROW) + "px"; // CSSOM, which the Content-Security-Policy allows (a style attribute it would not)
    return row;
  }
  box.addEventListener("scroll", render);
  window.addEventListener("resize", render);
  load(0);
  render();

  // Live: ask for the newest id; when it moves, drop the cached pages and draw again (following the end if there).
  const timer = setInterval(async () => {
    if (!live.checked) return;
    try {
      const h = await api("sessions/" + enc(name));
      if (h.last_id !== lastID || h.exchanges !== total && !filter.type && !filter.status && !filter.host && !filter.errors && !filter.q) {
        const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - ROW * 2;
        lastID = h.last_id;
        generation++; pages.clear(); loading.clear();
        const lastPage = Math.floor(Math.max(0, h.exchanges - 1) / PAGE);
        await load(Math.floor(box.scrollTop / ROW / PAGE));
        if (atEnd) { await load(lastPage); box.scrollTop = box.scrollHeight; }
        status("live: " + h.exchanges + " exchanges");
      }
    } catch (e) { status("live: " + (e.message || e)); }
  }, POLL_MS);
  stopView = () => { clearInterval(timer); window.removeEventListener("resize", render); };
}

// ---------- one exchange ----------

function valueCell(key, v) {
  const meaning = glossary.values[key]?.[typeof v === "string" ? v : ""];
  const text = typeof v === "string" ? v : JSON.stringify(v);
  return el("td", { class: "value mono" + (isMasked(text) ? " masked-cell" : ""), title: meaning || null },
    isMasked(text) ? el("span", { class: "masked" }, text) : text);
}

/** A JSON object as a key/value table (nested objects and arrays as nested tables), with the glossary on hover. */
function kvTable(obj) {
  const t = el("table", { class: "kv" });
  const entries = Array.isArray(obj) ? obj.map((v, i) => [String(i), v]) : Object.entries(obj);
  for (const [k, v] of entries) {
    const nested = v !== null && typeof v === "object";
    t.append(el("tr", { "data-key": k }, el("td", { class: "key mono", title: glossary.elements[k] || null }, k),
      nested ? el("td", {}, kvTable(v)) : valueCell(k, v)));
  }
  return t;
}

function headersTable(headers) {
  return el("table", { class: "kv headers" }, headers.map(([n, v]) => el("tr", {}, el("td", { class: "mono" }, n),
    el("td", { class: "mono" }, isMasked(v) ? el("span", { class: "masked" }, v) : v))));
}

function bodyBlock(body) {
  if (body === null || body === undefined || body === "") return el("p", { class: "muted" }, "(empty)");
  return el("pre", { class: "body" }, typeof body === "string" ? body : JSON.stringify(body, null, 2));
}

async function exchangeView(name, id) {
  crumbs(["sessions", "#/"], [name, "#/s/" + enc(name)], ["#" + id]);
  const [x, head] = await Promise.all([api("sessions/" + enc(name) + "/exchanges/" + enc(id)), api("sessions/" + enc(name))]);
  const phases = Object.entries(x.phases).map(([k, v]) => k + " " + ms(v)).join(" · ");
  const recorded = x.replay && x.replay.recorded_exchange !== null
    ? (head.recording ? el("a", { href: "#/s/" + enc(head.recording) + "/x/" + x.replay.recorded_exchange, id: "recorded-link" },
        "recorded exchange #" + x.replay.recorded_exchange + " of " + head.recording) : "recorded exchange #" + x.replay.recorded_exchange)
    : "no recorded answer";
  const replay = x.replay ? el("p", { class: "replay", id: "replay-info" }, "Replayed: answer from ", recorded,
    (x.replay.matched_by ? " (matched by " + x.replay.matched_by + ")" : "")
    + (x.replay.scheduled_delay_ms !== null ? " · scheduled delay " + ms(x.replay.scheduled_delay_ms) : "")
    + (x.replay.actual_delay_ms !== null ? " · actual " + ms(x.replay.actual_delay_ms) : "")
    + (x.replay.faults ? " · fault " + x.replay.faults : "") + (x.replay.miss ? " · miss: " + x.replay.miss : "")) : null;
  const tunnel = x.tunnel ? el("p", { class: "tunnel", id: "tunnel-info" }, "Tunnelled without interception (" + (x.tunnel.decided_by || "-") + "): "
    + "SNI " + (x.tunnel.sni || "none") + " · ALPN offered " + (x.tunnel.alpn_offered ? x.tunnel.alpn_offered.join(", ") : "none")
    + " · " + x.tunnel.bytes_up + " B up · " + x.tunnel.bytes_down + " B down" + (x.tunnel.ended ? " · " + x.tunnel.ended : "")) : null;
  const messages = x.messages.filter(m => m.type).map(m => el("div", { class: "msg", "data-type": m.type, "data-direction": m.direction },
    el("h4", {}, m.direction + " · " + m.type + " · " + m.location + (m.decryption ? " · " + m.decryption : "")),
    m.encrypted ? el("p", { class: "muted" }, "Still encrypted" + (m.decryption ? ": " + m.decryption : "") + ". Record with key substitution or a key log to see it in clear.")
      : (m.json && typeof m.json === "object" ? kvTable(m.json) : bodyBlock(m.json)),
    Object.entries(m.decoded || {}).map(([element, d]) => el("div", { class: "decoded", "data-element": element },
      el("h5", {}, element + " · " + d.kind.toUpperCase() + (d.payload ? " decoded" : "") + (d.verified === true ? " · signature verified" : "")
        + (d.error && !(d.kind === "jwe" && !d.payload) ? " · " + d.error : "")),
      d.header ? el("div", {}, el("span", { class: "muted" }, "header"), kvTable(d.header)) : null,
      d.payload && typeof d.payload === "object" ? el("div", {}, el("span", { class: "muted" }, "payload"), kvTable(d.payload)) : null,
      d.kind === "jwe" && !d.payload ? el("p", { class: "muted" }, "Encrypted for the DS; the inspector holds no key. "
        + "'3dstape decode --key' opens it with the DS's private key.") : null,
      (d.notes || []).map(n => el("p", { class: "muted" }, n))))));
  const nav = el("p", {}, el("a", { href: "#/s/" + enc(name) + "/x/" + (Number(id) - 1), id: "prev" }, "← previous"), " · ",
    el("a", { href: "#/s/" + enc(name) + "/x/" + (Number(id) + 1), id: "next" }, "next →"));
  api("sessions/" + enc(name) + "/transactions?exchange=" + enc(id)).then(d => d.transactions.forEach(t => nav.append(" · ",
    el("a", { href: "#/s/" + enc(name) + "/t/" + t.n, class: "tx-link" }, "transaction " + t.n + " (" + t.channel + ", " + t.outcome + "): sequence diagram")))).catch(() => {});
  const c = x.connection;
  const conn = c ? el("p", { class: "muted", id: "connection" }, "connection #" + c.id + " from " + c.client
    + (c.tls ? " · " + c.tls + (c.sni ? " · SNI " + c.sni : "") + (c.alpn ? " · ALPN " + c.alpn : "") : " · plain HTTP from the client")
    + (x.upstream ? " · upstream " + x.upstream : "")) : null;
  setMain(el("h2", {}, x.method + " " + x.url),
    el("p", {}, "status ", el("b", {}, x.status ?? "none"), " · ", ms(x.duration_ms), " · ", phases,
      x.error ? el("span", { class: "error" }, " · " + x.error) : null), conn, replay, tunnel, nav,
    el("h3", {}, "3DS messages"), messages.length ? messages : el("p", { class: "muted" }, "No 3DS message in this exchange."),
    el("h3", {}, "Request headers"), headersTable(x.request.headers), el("h3", {}, "Request body"), bodyBlock(x.request.body),
    el("h3", {}, "Response headers"), headersTable(x.response.headers), el("h3", {}, "Response body"), bodyBlock(x.response.body));
}

// ---------- transactions ----------

async function transactionsView(name) {
  crumbs(["sessions", "#/"], [name, "#/s/" + enc(name)], ["transactions"]);
  const data = await api("sessions/" + enc(name) + "/transactions?limit=2000");
  const rows = data.transactions.map(t => el("tr", { class: "link tx-row", "data-n": t.n, onclick: () => { location.hash = "#/s/" + enc(name) + "/t/" + t.n; } },
    el("td", { class: "num" }, t.n), el("td", {}, t.channel), el("td", {}, t.version ?? "-"), el("td", { class: "mono" }, t.shape),
    el("td", { title: glossary.values.transStatus?.[t.outcome] || null }, t.outcome), el("td", { class: "mono muted" }, t.key)));
  setMain(el("h2", {}, name), sessionTabs(name, "transactions"),
    el("p", { class: "muted" }, data.total + " transactions" + (data.total > data.transactions.length ? " (first " + data.transactions.length + " shown)" : "")),
    el("table", { id: "transactions" }, el("tr", {}, ["#", "channel", "version", "messages", "outcome", "threeDSServerTransID"].map(h => el("th", {}, h))), rows));
}

async function transactionView(name, n) {
  crumbs(["sessions", "#/"], [name, "#/s/" + enc(name)], ["transactions", "#/s/" + enc(name) + "/tx"], ["#" + n]);
  const base = "sessions/" + enc(name) + "/transactions/" + enc(n);
  const [data, svgText] = await Promise.all([api(base), fetch("/api/" + base + "/diagram.svg").then(r => r.ok ? r.text() : Promise.reject(new Error("HTTP " + r.status)))]);
  const doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
  const holder = el("div", { id: "diagram" });
  if (doc.documentElement.nodeName === "svg" && !doc.querySelector("parsererror")) {
    const node = document.importNode(doc.documentElement, true);
    node.querySelectorAll("script, foreignObject").forEach(e => e.remove()); // the server draws none; belt and braces
    node.querySelectorAll("g.message").forEach(g => g.addEventListener("click", () => { location.hash = "#/s/" + enc(name) + "/x/" + g.getAttribute("data-exchange"); }));
    holder.append(node);
  } else holder.append(el("p", { class: "error" }, "The diagram could not be read."));
  const arrows = data.items.filter(i => i.kind);
  const table = el("table", { id: "steps" }, el("tr", {}, ["exchange", "from", "to", "message", "timing", "replay"].map(h => el("th", {}, h))),
    arrows.map(a => el("tr", { class: "link", onclick: () => { location.hash = "#/s/" + enc(name) + "/x/" + a.exchange; } },
      el("td", { class: "num" }, "#" + a.exchange), el("td", {}, a.from), el("td", {}, a.to), el("td", {}, a.label), el("td", {}, a.timing),
      el("td", { class: "replay" }, a.replay ?? ""))));
  setMain(el("h2", {}, "Transaction " + n), sessionTabs(name, "transactions"),
    el("p", { class: "downloads" }, el("a", { href: "/api/" + base + "/diagram.svg", download: "transaction-" + n + ".svg" }, "Download the diagram (SVG)")),
    holder, el("h3", {}, "Steps"), table);
}

// ---------- validation and diff ----------

async function validationView(name) {
  crumbs(["sessions", "#/"], [name, "#/s/" + enc(name)], ["validation"]);
  const data = await api("sessions/" + enc(name) + "/validation");
  const rows = data.findings.map(f => el("tr", { class: "link finding", onclick: () => { location.hash = "#/s/" + enc(name) + "/x/" + f.exchange; } },
    el("td", { class: f.severity === "error" ? "error" : "" }, f.severity), el("td", { class: "num" }, "#" + f.exchange), el("td", {}, f.message),
    el("td", { class: "mono" }, f.pointer), el("td", { class: "mono" }, f.rule), el("td", {}, f.detail)));
  setMain(el("h2", {}, name), sessionTabs(name, "validation"),
    el("p", { id: "validation-summary" }, data.errors + " errors, " + data.warnings + " warnings"),
    rows.length ? el("table", { id: "findings" }, el("tr", {}, ["severity", "exchange", "message", "element", "rule", "detail"].map(h => el("th", {}, h))), rows)
      : el("p", { class: "muted" }, "Every 3DS message follows the rules 3dstape checks."));
}

async function diffView(a, b) {
  crumbs(["sessions", "#/"], ["diff " + a + " ↔ " + b]);
  const d = await api("diff?a=" + enc(a) + "&b=" + enc(b));
  const link = (session, id) => id === null ? "" : el("a", { href: "#/s/" + enc(session) + "/x/" + id }, "#" + id);
  const rows = d.changes.map(c => el("tr", { class: "change", "data-kind": c.kind },
    el("td", {}, c.kind), el("td", { class: "num" }, (c.transaction_a ?? "-") + " ↔ " + (c.transaction_b ?? "-")),
    el("td", {}, link(a, c.exchange_a), " ", link(b, c.exchange_b)), el("td", {}, c.message ?? ""),
    el("td", { class: "mono", title: glossary.elements[(c.element || "").split("/").pop()] || null }, c.element ?? ""),
    el("td", { class: "mono" }, c.a ?? ""), el("td", { class: "mono" }, c.b ?? "")));
  setMain(el("h2", {}, a + " ↔ " + b),
    el("p", { id: "diff-summary" }, d.paired + " transactions paired (" + d.transactions_a + " in " + a + ", " + d.transactions_b + " in " + b + "), "
      + (d.changes.length ? d.changes.length + " differences" : "no differences")
      + " (what differs on every run — transaction IDs, keys, sdkEncData, dates — is not compared)"),
    d.changes.length ? el("table", { id: "changes" },
      el("tr", {}, ["kind", "transactions", "exchanges", "message", "element", a, b].map(h => el("th", {}, h))), rows) : null);
}

// ---------- routing ----------

async function route() {
  stopView(); stopView = () => {};
  status("");
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "s" && parts[1]) {
      if (parts[2] === "x" && parts[3]) return await exchangeView(parts[1], parts[3]);
      if (parts[2] === "tx") return await transactionsView(parts[1]);
      if (parts[2] === "t" && parts[3]) return await transactionView(parts[1], parts[3]);
      if (parts[2] === "validation") return await validationView(parts[1]);
      return await timelineView(parts[1]);
    }
    if (parts[0] === "diff" && parts[1] && parts[2]) return await diffView(parts[1], parts[2]);
    return await sessionsView();
  } catch (e) { fail(e); }
}

window.addEventListener("hashchange", route);
api("glossary").then(g => { glossary = g; }).catch(() => {}).finally(route);
