// kubedra ui: a read-only dashboard over the JSON API (/api). No framework, no build step.
// Every piece of cluster data reaches the page as text (textContent, attributes set one by
// one), never as HTML: object names and attribute strings are user input.
"use strict";

const HEATMAP_NODES = 200; // more nodes than this: one cell per node unless asked otherwise
const STATES = ["free", "allocated", "shared", "blocked"];

// --- DOM helpers ------------------------------------------------------------------------

function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "style") el.style.cssText = value; // CSSOM: allowed by the page's CSP
    else if (key === "text") el.textContent = value;
    else if (key === "on") for (const [ev, fn] of Object.entries(value)) el.addEventListener(ev, fn);
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function link(href, text) {
  return h("a", { href }, text);
}

function table(headers, rows) {
  return h("table", {},
    h("thead", {}, h("tr", {}, headers.map((t) => h("th", { text: t })))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c))))));
}

function select(name, values, current, onChange) {
  return h("label", {}, name + " ",
    h("select", { name, on: { change: (e) => onChange(e.target.value) } },
      h("option", { value: "" }, "all"),
      values.map((v) => h("option", { value: v, selected: v === current ? "selected" : null }, v))));
}

function pct(x) {
  return (100 * x).toFixed(1) + " %";
}

function claimHref(ref) {
  return "#/claims/" + ref.split("/").map(encodeURIComponent).join("/");
}

// --- routing and live updates -------------------------------------------------------------

function route() {
  const [path, search] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { view: parts[0] || "fleet", args: parts.slice(1), query: new URLSearchParams(search || "") };
}

function go(view, params) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v)).toString();
  location.hash = "#/" + view + (query ? "?" + query : "");
}

async function api(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

const state = { rendering: false, again: false, heatmap: null };

async function render() {
  if (state.rendering) { state.again = true; return; }
  state.rendering = true;
  const started = performance.now();
  const r = route();
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.view === r.view));
  const main = document.getElementById("main");
  try {
    const view = VIEWS[r.view] || VIEWS.fleet;
    const content = await view(r);
    main.replaceChildren(content);
    main.dataset.view = r.view;
  } catch (err) {
    main.replaceChildren(h("p", { class: "error", text: "error: " + err.message }));
  } finally {
    state.rendering = false;
    document.body.dataset.renderMs = (performance.now() - started).toFixed(0); // fetch + DOM
    document.body.dataset.rendered = String(Date.now());
  }
  if (state.again) { state.again = false; render(); }
}

function listen() {
  const live = document.getElementById("live");
  const events = new EventSource("/api/events");
  events.addEventListener("hello", (e) => {
    live.textContent = "live · v" + JSON.parse(e.data).version;
    live.classList.add("on");
  });
  events.addEventListener("change", (e) => {
    live.textContent = "live · v" + JSON.parse(e.data).version;
    live.classList.add("flash");
    setTimeout(() => live.classList.remove("flash"), 400);
    render();
    status();
  });
  events.onerror = () => { live.textContent = "reconnecting"; live.classList.remove("on"); };
}

async function status() {
  const s = await api("/api/status");
  document.getElementById("backend").textContent = s.backend;
  const banner = document.getElementById("banner");
  banner.hidden = !s.error;
  banner.textContent = s.error || "";
}

// --- fleet --------------------------------------------------------------------------------

async function fleetView(r) {
  const cls = r.query.get("class") || "";
  const pod = r.query.get("pod") || "";
  const params = new URLSearchParams(Object.entries({ class: cls, pod }).filter(([, v]) => v));
  const data = await api("/api/fleet?" + params);
  const s = data.summary;
  const heat = state.heatmap === null ? s.nodes > HEATMAP_NODES : state.heatmap;
  const filter = data.filter;
  const toolbar = h("div", { class: "toolbar" },
    select("DeviceClass", data.classes, cls, (v) => go("fleet", { class: v })),
    pod ? h("span", {}, "refused devices of ", h("b", { text: pod }), " ", link("#/fleet", "clear")) : null,
    h("button", { id: "mode", on: { click: () => { state.heatmap = !heat; render(); } } },
      heat ? "show devices" : "heat map"),
    h("div", { class: "legend" }, STATES.map((st) => h("span", {}, h("i", { style: "background:var(--" + st + ")" }), st)),
      h("span", {}, h("i", { style: "background:var(--tainted)" }), "tainted")));
  const summary = h("div", { class: "summary", id: "fleet-summary" },
    h("span", {}, h("b", { text: s.nodes }), " nodes"),
    h("span", {}, h("b", { text: s.devices }), " devices"),
    STATES.map((st) => h("span", { "data-count": st }, h("b", { text: s[st] }), " " + st)),
    h("span", { "data-count": "tainted" }, h("b", { text: s.tainted }), " tainted"),
    filter ? h("span", { "data-count": "admitted" }, h("b", { text: s.admitted }), " admitted by " + filter.label) : null);
  const problems = filter && (filter.error || filter.deviceErrors) ? h("p", { class: "error", id: "filter-error",
    text: filter.error || "the selectors failed at run time on " + filter.deviceErrors + " device(s): not admitted" }) : null;
  const body = h("div", { class: "fleet" + (filter ? " filtered" : "") },
    data.groups.map((g) => h("section", { class: "group" },
      h("h2", {}, g.name + " ", h("span", { class: "muted", text: "(" + g.nodes.length + ")" })),
      heat ? heatmap(g.nodes, filter) : h("div", { class: "nodes" }, g.nodes.map(nodeBlock)))));
  return h("div", {}, toolbar, summary, problems, body);
}

function deviceTitle(d) {
  const parts = [d.name, d.product, d.kind, d.state];
  if (d.state === "shared") parts.push(pct(d.fill) + " used");
  if (d.holders.length) parts.push("held by " + d.holders.join(", "));
  if (d.taints.length) parts.push("taints: " + d.taints.join(", "));
  return parts.filter(Boolean).join(" · ");
}

function deviceCell(d) {
  const classes = ["dev", d.kind, d.state];
  if (d.tainted) classes.push("tainted");
  if (d.admitted !== null) classes.push(d.admitted ? "admitted" : "rejected");
  const style = d.state === "shared" ? "opacity:" + (0.35 + 0.65 * d.fill).toFixed(2) : null;
  const cell = h("div", { class: classes.join(" "), title: deviceTitle(d), style,
    "data-device": d.driver + "/" + d.pool + "/" + d.name, "data-state": d.state });
  if (d.holders.length === 1) cell.addEventListener("click", () => { location.hash = claimHref(d.holders[0]); });
  return cell;
}

function nodeBlock(node) {
  const peripheral = (d) => (d.kind === "nic" || d.kind === "device" ? 1 : 0);
  const loose = node.devices.filter((d) => !d.parent).sort((a, b) => peripheral(a) - peripheral(b));
  const parents = new Map();
  for (const d of node.devices.filter((d) => d.parent)) {
    if (!parents.has(d.parent)) parents.set(d.parent, []);
    parents.get(d.parent).push(d);
  }
  const parts = [...parents].map(([key, devs]) => h("div", {
    class: "part", title: key.split("/").pop() + " · " + pct(node.partitions[key] || 0) + " used",
  }, devs.map(deviceCell)));
  return h("div", { class: "node", "data-node": node.name },
    h("div", { class: "label", title: node.name, text: node.name }),
    node.problems.length ? h("div", { class: "error", text: node.problems.join("; ") }) : null,
    h("div", { class: "devs" }, loose.map(deviceCell), parts));
}

function heatColour(fill) {
  const light = 85 - 55 * fill; // free: light green, full: deep blue
  const hue = 140 + 80 * fill;
  return "hsl(" + hue.toFixed(0) + ", 60%, " + light.toFixed(0) + "%)";
}

function heatmap(nodes, filter) {
  return h("div", { class: "heat" }, nodes.map((n) => {
    const tainted = n.devices.some((d) => d.tainted);
    const admitted = n.devices.some((d) => d.admitted);
    const classes = ["cell"];
    if (tainted) classes.push("tainted");
    if (filter) classes.push(admitted ? "admitted" : "rejected");
    return h("div", { class: classes.join(" "), "data-node": n.name, "data-fill": n.fill,
      style: "background:" + heatColour(n.fill), title: n.name + " · " + pct(n.fill) + " held" });
  }));
}

// --- claims and pods ------------------------------------------------------------------------

function badge(status) {
  return h("span", { class: "badge " + status, text: status });
}

async function workloadsView(r) {
  const ns = r.query.get("namespace") || "";
  const cs = r.query.get("claims") || "";
  const ps = r.query.get("pods") || "";
  const q = (st) => new URLSearchParams(Object.entries({ namespace: ns, status: st }).filter(([, v]) => v));
  const [claims, pods] = await Promise.all([api("/api/claims?" + q(cs)), api("/api/pods?" + q(ps))]);
  const set = (key) => (v) => go("workloads", { namespace: ns, claims: cs, pods: ps, [key]: v });
  const namespaces = [...new Set([...claims.namespaces, ...pods.namespaces])].sort();
  return h("div", {},
    h("div", { class: "toolbar" }, select("namespace", namespaces, ns, set("namespace"))),
    h("h2", {}, "ResourceClaims ", h("span", { class: "muted", text: "(" + claims.claims.length + ")" })),
    h("div", { class: "toolbar" }, select("status", claims.statuses, cs, set("claims"))),
    table(["namespace", "name", "status", "requests", "devices", "pods"], claims.claims.map((c) => [
      c.namespace, link(claimHref(c.namespace + "/" + c.name), c.name), badge(c.status),
      c.requests.join(", "), c.devices.map((d) => h("div", {}, h("code", { text: d }))), c.pods.join(", "),
    ])),
    h("h2", {}, "Pods ", h("span", { class: "muted", text: "(" + pods.pods.length + ")" })),
    h("div", { class: "toolbar" }, select("status", pods.statuses, ps, set("pods"))),
    table(["namespace", "name", "status", "node", "claims", "scheduler says"], pods.pods.map((p) => [
      p.namespace, p.name, badge(p.status), p.node || "", p.claims.map((c) => h("div", {}, link(claimHref(p.namespace + "/" + c), c))),
      p.status === "pending" ? link("#/pending?pod=" + encodeURIComponent(p.namespace + "/" + p.name), p.message || "explain") : p.message,
    ])));
}

async function claimView(r) {
  const [ns, name] = r.args;
  const c = await api("/api/claims/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name));
  return h("div", { class: "claim" },
    h("h2", {}, "ResourceClaim " + c.namespace + "/" + c.name + " ", badge(c.status)),
    h("h3", { text: "Requests" }),
    table(["request", "option", "class", "mode", "count", "selectors", "capacity"], c.requests.flatMap((q) => q.options.map((o) => [
      q.name, q.firstAvailable ? o.name : "", o.deviceClassName, o.allocationMode, o.count,
      o.selectors.map((s) => h("div", {}, h("code", { text: s }))),
      Object.entries(o.capacity).map(([k, v]) => h("div", { text: k + ": " + v })),
    ]))),
    c.constraints.length ? table(["constraint requests", "matchAttribute", "distinctAttribute"],
      c.constraints.map((k) => [k.requests.join(", "), k.matchAttribute || "", k.distinctAttribute || ""])) : null,
    h("h3", { text: "Allocated devices" }),
    c.devices.length ? c.devices.map((d) => h("div", { class: "card device" },
      h("div", {}, h("b", { text: d.device }), " for request ", h("code", { text: d.request }), d.node ? " on node " + d.node : ""),
      d.shareID ? h("div", { class: "muted", text: "share " + d.shareID + " · " + JSON.stringify(d.consumedCapacity) }) : null,
      table(["attribute", "value"], Object.entries(d.attributes).map(([k, v]) => [k, h("code", { text: JSON.stringify(v) })])),
      table(["capacity", "value"], Object.entries(d.capacity).map(([k, v]) => [k, v])),
    )) : h("p", { class: "muted", text: "none: the claim is not allocated" }),
    h("h3", { text: "Pods" }),
    table(["reserved for", "uid"], c.reservedFor.map((x) => [x.resource + "/" + x.name, h("code", { text: x.uid })])),
    h("p", { class: "muted" }, "pods naming this claim: " + (c.pods.join(", ") || "none")));
}

// --- pending --------------------------------------------------------------------------------

async function pendingView(r) {
  const only = r.query.get("pod");
  let data;
  if (only) {
    const [ns, name] = only.split("/");
    data = { total: 1, explained: 1, pods: [await api("/api/pending/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name))] };
  } else {
    data = await api("/api/pending");
  }
  return h("div", {},
    h("h2", {}, "Pending pods ", h("span", { class: "muted", text: "(" + data.total + ")" })),
    data.total ? null : h("p", { class: "muted", text: "No pod is waiting." }),
    data.pods.map(pendingCard),
    data.total > data.explained ? h("p", { class: "muted", text: (data.total - data.explained) + " more not explained here: open one to see why" }) : null);
}

function pendingCard(p) {
  const key = p.namespace + "/" + p.name;
  return h("div", { class: "card pending", "data-pod": key },
    h("div", {}, h("b", { text: key }), " ", p.message ? h("span", { class: "muted", text: "— " + p.message }) : null),
    h("div", {}, link("#/fleet?pod=" + encodeURIComponent(key), "devices it asks for, and which it was refused"),
      p.groups ? null : [" · ", link("#/pending?pod=" + encodeURIComponent(key), "explain")]),
    p.error ? h("p", { class: "error", text: p.error }) : null,
    (p.groups || []).map((g) => h("div", { class: "group-outcome" },
      h("div", {}, h("b", { text: g.nodes.length + " node(s)" }), " ",
        h("span", { class: "muted", text: g.nodes.slice(0, 4).join(", ") + (g.nodes.length > 4 ? ", …" : "") }), ": ",
        g.fits ? "fits" : h("span", { class: "blocker", text: g.blocker })),
      g.requests.map((f) => h("div", { class: "funnel" },
        h("span", { text: f.request + " (need " + (f.mode === "All" ? "all" : f.wanted) + "):" }),
        Object.entries(f.funnel).map(([stage, count]) => h("span", { class: "stage" + (stage === f.bottleneck ? " short" : ""), text: count + " " + stage })))))),
    (p.whatWouldFit || []).length ? h("div", { class: "hints" }, h("b", { text: "what would make it fit:" }),
      p.whatWouldFit.map((hint) => h("div", { class: "hint", text: hint }))) : null);
}

// --- fragmentation --------------------------------------------------------------------------

async function fragmentationView() {
  const data = await api("/api/fragmentation");
  const now = data.now;
  return h("div", {},
    h("div", { class: "metrics" },
      h("div", {}, h("div", { class: "big", id: "frag-now", text: pct(now.fragmentation) }), "fragmented (FGD) of " + now.accelerators + " accelerators"),
      h("div", {}, h("div", { class: "big", id: "alloc-now", text: pct(now.allocation) }), "allocated")),
    h("h2", { text: "Over time" }),
    chart(data.history),
    h("h2", { text: "Most fragmented nodes" }),
    table(["node", "fragmented"], now.mostFragmented.map((n) => [n.name, pct(n.fragmentation)])),
    h("h2", { text: "Workload mix (task types of the pods)" }),
    table(["devices", "milli each", "CPU milli", "share"], now.mix.map((m) => [m.devices, m.milli, m.cpuMilli, pct(m.share)])),
    data.figures.length ? [h("h2", { text: "Simulator results (docs/results.md)" }),
      h("div", { class: "figures" }, data.figures.map((f) => h("figure", {},
        h("img", { src: "/figures/" + encodeURIComponent(f.name), alt: f.title, loading: "lazy" }),
        h("figcaption", { class: "muted", text: f.title }))))] : null);
}

function chart(points) {
  const ns = "http://www.w3.org/2000/svg";
  const width = 720, height = 180, pad = 30;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const line = (key, colour) => {
    if (!points.length) return;
    const t0 = points[0].time, span = Math.max(points[points.length - 1].time - t0, 1);
    const y = (p) => height - pad - (height - 2 * pad) * p[key];
    const xy = points.length === 1 // one sample so far: a level line across the chart
      ? [[pad, y(points[0])], [width - pad, y(points[0])]]
      : points.map((p) => [pad + (width - 2 * pad) * ((p.time - t0) / span), y(p)]);
    const path = document.createElementNS(ns, "polyline");
    path.setAttribute("points", xy.map((p) => p.join(",")).join(" "));
    path.setAttribute("fill", "none");
    path.setAttribute("stroke", colour);
    path.setAttribute("stroke-width", "2");
    path.setAttribute("data-series", key);
    svg.append(path);
  };
  const text = (x, y, value) => {
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", x); t.setAttribute("y", y); t.setAttribute("font-size", "11");
    t.textContent = value;
    svg.append(t);
  };
  text(4, pad, "100 %"); text(4, height - pad, "0 %");
  text(width - 260, 16, "— allocated (blue)   — fragmented (red)");
  line("allocation", "#2f6fdb");
  line("fragmentation", "#e5484d");
  return svg;
}

const VIEWS = {
  fleet: fleetView,
  workloads: workloadsView,
  claims: (r) => (r.args.length === 2 ? claimView(r) : workloadsView(r)),
  pending: pendingView,
  fragmentation: fragmentationView,
};

window.addEventListener("hashchange", render);
document.addEventListener("DOMContentLoaded", () => { render(); listen(); status(); });
