// kubedra ui: the server renders every page with its data (src/kubedra/web/pages.py), so the
// first paint shows the cluster, with or without this script. The script keeps the page
// live (on each change it fetches the same URL and swaps in the server's <main>; a page
// showing device metrics, marked data-figures, also after each scrape), turns
// the filters' selects into links, and sends the earlier #/ links to their pages. It builds
// no HTML: cluster data only ever reaches the page as the server escaped it.
"use strict";

function legacyLink() {
  // #/fleet?class=x, #/claims/NS/NAME ... (the script-rendered dashboard's links) -> path
  if (!location.hash.startsWith("#/")) return false;
  location.replace("/" + location.hash.slice(2));
  return true;
}

function rendered(started) {
  document.body.dataset.renderMs = (performance.now() - started).toFixed(0); // fetch + swap
  document.body.dataset.rendered = String(Date.now());
}

// --- live updates -------------------------------------------------------------------------

const state = { refreshing: false, again: false };

async function refresh() {
  if (state.refreshing) { state.again = true; return; }
  state.refreshing = true;
  const started = performance.now();
  try {
    const response = await fetch(location.pathname + location.search, { headers: { Accept: "text/html" } });
    swap(new DOMParser().parseFromString(await response.text(), "text/html"));
  } catch (err) {
    const banner = document.getElementById("banner");
    banner.textContent = "could not refresh: " + err.message;
    banner.hidden = false;
  } finally {
    state.refreshing = false;
    rendered(started);
  }
  if (state.again) { state.again = false; refresh(); }
}

function swap(doc) {
  // the parsed document is inert (no script runs in it); its nodes move into this page
  const fresh = doc.getElementById("main");
  if (fresh) document.getElementById("main").replaceChildren(...fresh.childNodes);
  for (const id of ["banner", "backend"]) {
    const now = doc.getElementById(id);
    const here = document.getElementById(id);
    if (now && here) { here.textContent = now.textContent; here.hidden = now.hidden; }
  }
  document.title = doc.title;
  if (doc.body) document.body.dataset.version = doc.body.dataset.version || "";
}

function listen() {
  const live = document.getElementById("live");
  const events = new EventSource("/api/events");
  const show = (e) => {
    live.textContent = "live · v" + JSON.parse(e.data).version;
    live.classList.add("on");
  };
  events.addEventListener("hello", (e) => {
    show(e);
    // a change between the page's rendering and the stream's start: fetch it now
    if (JSON.parse(e.data).version !== Number(document.body.dataset.version)) refresh();
  });
  events.addEventListener("change", (e) => {
    show(e);
    live.classList.add("flash");
    setTimeout(() => live.classList.remove("flash"), 400);
    refresh();
  });
  events.addEventListener("metrics", () => {
    // a new round of device metrics: only the pages that show them are fetched again
    if (document.querySelector("#main [data-figures]")) refresh();
  });
  events.onerror = () => { live.textContent = "reconnecting"; live.classList.remove("on"); };
}

// --- filters ------------------------------------------------------------------------------

function filterChanged(event) {
  const select = event.target.closest("select[data-param]");
  if (!select) return;
  const target = new URL(location.href);
  if (select.value) target.searchParams.set(select.dataset.param, select.value);
  else target.searchParams.delete(select.dataset.param);
  if (select.dataset.drop) target.searchParams.delete(select.dataset.drop);
  location.assign(target);
}

if (!legacyLink()) {
  document.addEventListener("change", filterChanged);
  document.addEventListener("DOMContentLoaded", () => {
    rendered(performance.now());
    listen();
  });
}
