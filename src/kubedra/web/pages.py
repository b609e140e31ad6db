"""The dashboard's pages as HTML, rendered here from the views' JSON (one renderer).

Every page is whole on arrival: a screenshot, a slow link or a reader without JavaScript
sees the cluster, not "connecting". The script (static/app.js) only keeps the page live
(on a change it fetches the same URL and swaps `<main>`) and turns the filters' selects
into links. Nothing here needs inline script or style attributes (the CSP forbids both):
colours and fills are classes of app.css, the chart is SVG with presentation attributes.
All text is escaped (`kubedra.web.html`): object names are user input.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kubedra.web.html import Markup, path, tag, url

HEATMAP_NODES = 200  # above this, the fleet is a heat map (one cell per node) unless asked
HEAT_STEPS = 8  # fill classes h1..h8: any use is h1 at least (1 of 8 GPUs is not "empty")
SHARED_STEPS = 10  # a shared device's fill classes f0..f10
UTIL_STEPS = 10  # a device's utilization bar u0..u10: any use is u1 at least
ACCELERATOR_KINDS = ("gpu", "mig", "tpu")
DEVICE_STATES = ("free", "allocated", "shared", "blocked")
NAV = (
    ("fleet", "/fleet", "Fleet"),
    ("workloads", "/workloads", "Claims & pods"),
    ("pending", "/pending", "Pending"),
    ("fragmentation", "/fragmentation", "Fragmentation"),
)
TITLES = {
    "fleet": "Fleet",
    "workloads": "Claims & pods",
    "claim": "Claim",
    "pending": "Pending",
    "fragmentation": "Fragmentation",
}


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


# --- the frame ----------------------------------------------------------------------------


def layout(view: str, main: Markup, status: Mapping[str, Any], title: str = "") -> bytes:
    """The whole document: header with the version the page shows, the view, the footer.
    `status` is /api/status's answer."""
    active = "workloads" if view == "claim" else view
    nav = [
        tag(
            "a",
            {"href": href, "data-view": name, "class": "active" if name == active else None},
            label,
        )
        for name, href, label in NAV
    ]
    error = status.get("error")
    version = status["version"]
    page = Markup(
        "<!doctype html>\n"
        + tag(
            "html",
            {"lang": "en"},
            tag(
                "head",
                {},
                tag("meta", {"charset": "utf-8"}),
                tag("meta", {"name": "viewport", "content": "width=device-width, initial-scale=1"}),
                tag("title", {}, f"kubedra · {title or TITLES.get(view, view)}"),
                tag("link", {"rel": "icon", "href": "data:,"}),
                tag("link", {"rel": "stylesheet", "href": "/static/app.css"}),
                tag("script", {"src": "/static/app.js", "defer": True}),
            ),
            tag(
                "body",
                {"data-view": view, "data-version": version},
                tag(
                    "header",
                    {},
                    tag("a", {"class": "brand", "href": "/"}, "kubedra"),
                    tag("nav", {}, nav),
                    tag(
                        "span",
                        {
                            "id": "live",
                            "class": "live",
                            "title": "the cluster's state at this version; the page "
                            "follows the store's watch while open",
                        },
                        f"v{version}",
                    ),
                ),
                tag("div", {"id": "banner", "class": "banner", "hidden": not error}, error or ""),
                tag("main", {"id": "main", "data-view": view, "aria-live": "polite"}, main),
                tag(
                    "footer",
                    {},
                    "read-only · ",
                    tag("a", {"href": "/api"}, "JSON API"),
                    " · ",
                    tag("span", {"id": "backend"}, status.get("backend", "")),
                ),
            ),
        )
        + "\n"
    )
    return page.encode()


def not_found(message: str) -> Markup:
    return tag("p", {"class": "error"}, message)


# --- small pieces -------------------------------------------------------------------------


def link(href: str, text: object, **attrs: str) -> Markup:
    return tag("a", {"href": href, **attrs}, text)


def claim_href(ref: str) -> str:
    """A claim's page from `namespace/name` (the name may hold a slash: split once)."""
    namespace, _, name = ref.partition("/")
    return path("claims", namespace, name)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> Markup:
    return tag(
        "table",
        {},
        tag("thead", {}, tag("tr", {}, [tag("th", {}, h) for h in headers])),
        tag("tbody", {}, [tag("tr", {}, [tag("td", {}, c) for c in row]) for row in rows]),
    )


def select(label: str, param: str, values: Sequence[str], current: str, drop: str = "") -> Markup:
    """A filter: the script turns a choice into the page's URL with `param` set (and `drop`
    removed); without script the page still shows the filter in force."""
    return tag(
        "label",
        {},
        label + " ",
        tag(
            "select",
            {"name": label, "data-param": param, "data-drop": drop or None},
            tag("option", {"value": ""}, "all"),
            [tag("option", {"value": v, "selected": v == current}, v) for v in values],
        ),
    )


def badge(status: str) -> Markup:
    return tag("span", {"class": f"badge {status}"}, status)


def muted(text: object) -> Markup:
    return tag("span", {"class": "muted"}, text)


def count(
    key: str, value: int, label: str, title: str | None = None, cls: str | None = None
) -> Markup:
    return tag(
        "span",
        {"data-count": key, "title": title, "class": cls},
        tag("b", {}, f"{value:,}"),
        " " + label,
    )


def ago(seconds: float) -> str:
    """An age for people: 4 s, 3 min, 2 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


def gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB"


def figures_text(m: Mapping[str, Any]) -> str:
    """A device's figures in one line: utilization, memory used of total, temperature,
    power; and how old they are when the last scrape of its driver failed."""
    parts = []
    if m["utilization"] is not None:
        parts.append(f"utilization {100 * m['utilization']:.0f} %")
    used, total = m["memoryUsedBytes"], m["memoryTotalBytes"]
    if used is not None and total:
        parts.append(f"memory {gib(used)} of {gib(total)}")
    elif used is not None:
        parts.append(f"memory {gib(used)} used")
    if m["temperatureCelsius"] is not None:
        parts.append(f"{m['temperatureCelsius']:.0f} °C")
    if m["powerWatts"] is not None:
        parts.append(f"{m['powerWatts']:.0f} W")
    if m["stale"]:
        age = m["age"]
        parts.append("stale: " + (f"figures {ago(age)} old" if age is not None else "no figures"))
    return " · ".join(parts) or "no figures reported"


def util_step(value: float) -> int:
    """0 for an idle device, else 1..UTIL_STEPS: tenths busy, rounded up (any use shows)."""
    if value <= 0:
        return 0
    return min(UTIL_STEPS, max(1, math.ceil(value * UTIL_STEPS - 1e-9)))


def health_badge(healthy: bool | None, faults: Sequence[str]) -> Markup:
    """healthy, or unhealthy with the faults its health taints say."""
    if healthy is None:
        return tag("span", {"class": "badge", "data-health": "unknown"}, "not published now")
    if healthy:
        return tag("span", {"class": "badge healthy", "data-health": "healthy"}, "healthy")
    return tag(
        "span",
        {"class": "badge unhealthy", "data-health": "unhealthy"},
        "unhealthy: " + ", ".join(faults),
    )


# --- fleet --------------------------------------------------------------------------------


def fleet_page(data: Mapping[str, Any], params: Mapping[str, str]) -> Markup:
    s = data["summary"]
    mode = params.get("mode") or ("heat" if s["nodes"] > HEATMAP_NODES else "devices")
    heat = mode == "heat"
    cls, pod = params.get("class", ""), params.get("pod", "")
    kept = {"class": cls, "pod": pod, "mode": params.get("mode", "")}
    filt = data["filter"]
    toolbar = tag(
        "div",
        {"class": "toolbar"},
        select("DeviceClass", "class", data["classes"], cls, drop="pod"),
        pod
        and tag(
            "span",
            {},
            "refused devices of ",
            tag("b", {}, pod),
            " ",
            link(url("/fleet", {"mode": kept["mode"]}), "clear"),
        ),
        link(
            url("/fleet", {**kept, "mode": "devices" if heat else "heat"}),
            "show devices" if heat else "heat map",
            id="mode",
            **{"class": "button"},
        ),
        heat_legend() if heat else state_legend(bool(data.get("deviceMetrics"))),
    )
    problems = None
    if filt and (filt["error"] or filt["deviceErrors"]):
        problems = tag(
            "p",
            {"class": "error", "id": "filter-error"},
            filt["error"]
            or f"the selectors failed at run time on {filt['deviceErrors']} device(s): "
            "not admitted",
        )
    body = tag(
        "div",
        {"class": "fleet" + (" filtered" if filt else "")},
        [
            tag(
                "section",
                {"class": "group"},
                tag("h2", {}, g["name"] + " ", muted(group_count(g["nodes"], heat))),
                heatmap(g["nodes"], bool(filt))
                if heat
                else tag("div", {"class": "nodes"}, [node_block(n) for n in g["nodes"]]),
            )
            for g in data["groups"]
        ],
    )
    return tag(
        "div",
        {},
        toolbar,
        fleet_summary(s, filt),
        figures_note(data.get("deviceMetrics")),
        problems,
        body,
    )


def figures_note(scraped: Mapping[str, Any] | None) -> Markup:
    """Where the devices' utilization comes from: each endpoint scraped and how its last
    scrape went (stale: the last figures' age and why); or, without endpoints, how to
    name them. `data-figures`: the page follows the scrapes (app.js)."""
    if scraped is None:
        return tag(
            "p",
            {"class": "note muted", "id": "device-metrics"},
            "Utilization, memory and temperature: not shown. Start the dashboard with ",
            tag("code", {}, "--device-metrics http://NODE:PORT/metrics"),
            " for each node driver (",
            tag("code", {}, "kubedra driver run --metrics-port PORT"),
            ") to show them beside each device.",
        )
    endpoints = scraped["endpoints"]
    answering = [e for e in endpoints if e["ok"] and not e["stale"]]
    items = []
    if answering:  # in one: a cluster has many nodes, these need no attention
        ages = sorted(e["age"] or 0.0 for e in answering)
        young, old = ago(ages[0]), ago(ages[-1])
        age = young if young == old else f"{young} to {old}"
        named = answering[0]["url"] if len(answering) == 1 else f"{len(answering)} endpoints"
        items.append(
            tag(
                "span",
                {
                    "class": "endpoint ok",
                    "data-state": "ok",
                    "data-endpoint": answering[0]["url"] if len(answering) == 1 else None,
                    "title": "\n".join(f"{e['url']}: {e['devices']} devices" for e in answering),
                },
                tag("code", {}, named) if len(answering) == 1 else named,
                f": {sum(e['devices'] for e in answering):,} devices, {age} ago",
            )
        )
    for e in endpoints:  # each that needs attention, by name
        if e in answering:
            continue
        if not e["triedAt"]:
            state, says = "waiting", "not scraped yet"
        elif e["age"] is None:
            state, says = "stale", f"no figures: {e['error'] or 'not scraped yet'}"
        else:
            why = f": {e['error']}" if e["error"] else ""
            state, says = "stale", f"stale, figures {ago(e['age'])} old{why}"
        items.append(
            tag(
                "span",
                {"class": f"endpoint {state}", "data-endpoint": e["url"], "data-state": state},
                tag("code", {}, e["url"]),
                " " + says,
            )
        )
    return tag(
        "div",
        {"class": "note", "id": "device-metrics", "data-figures": True},
        muted(
            f"Device metrics every {scraped['interval']:g} s from {len(endpoints)} driver "
            f"endpoint{'' if len(endpoints) == 1 else 's'}:"
        ),
        items,
    )


def fleet_summary(s: Mapping[str, Any], filt: Mapping[str, Any] | None) -> Markup:
    """The counts an operator reads: accelerators (a MIG-capable GPU once) by state, MIG
    partitions in use, NICs in use; with a filter, the devices it admits."""
    a = s["accelerators"]
    kinds = ", ".join(
        f"{a[k]:,} {name}{'' if a[k] == 1 else 's'}"
        for k, name in (("gpu", "GPU"), ("tpu", "TPU"))
        if a[k]
    )
    items = [
        count("nodes", s["nodes"], "nodes"),
        tag(
            "span",
            {
                "data-count": "accelerators",
                "title": "GPUs and TPUs; a GPU split into MIG partitions counts once",
            },
            tag("b", {}, f"{a['total']:,}"),
            " accelerators" + (f" ({kinds})" if kinds else "") + ":",
        ),
        count("allocated", a["allocated"], "allocated", "held whole by a claim"),
        count("partial", a["partial"], "partly used", "MIG partitions or shares of it held"),
        count("free", a["free"], "free"),
        count("tainted", a["tainted"], "tainted", "a NoSchedule or NoExecute taint"),
        count(
            "unhealthy",
            a["unhealthy"],
            "unhealthy",
            "a health taint from its driver: GPU lost, Xid, ECC, thermal or power",
            "bad" if a["unhealthy"] else None,
        ),
    ]
    if s["partitionsInUse"] or s["partitionable"]:
        items.append(
            count(
                "partitions",
                s["partitionsInUse"],
                "MIG partitions in use",
                f"on {s['partitionable']:,} MIG-capable GPU(s)",
            )
        )
    nics = s["nics"]
    if nics["total"]:
        items.append(
            tag(
                "span",
                {"data-count": "nics"},
                tag("b", {}, f"{nics['inUse']:,}"),
                " of ",
                tag("b", {}, f"{nics['total']:,}"),
                " NICs in use",
            )
        )
    if filt:
        items.append(count("admitted", s["admitted"], f"devices admitted by {filt['label']}"))
    return tag("div", {"class": "summary", "id": "fleet-summary"}, items)


def group_count(nodes: Sequence[Mapping[str, Any]], heat: bool) -> str:
    if not heat or not nodes:
        return f"({len(nodes)})"
    fill = sum(n["fill"] for n in nodes) / len(nodes)
    return f"({len(nodes)} node{'' if len(nodes) == 1 else 's'} · {pct(fill)} held)"


def state_legend(figures: bool = False) -> Markup:
    return tag(
        "div",
        {"class": "legend"},
        [tag("span", {}, tag("i", {"class": f"swatch {st}"}), st) for st in DEVICE_STATES],
        tag("span", {}, tag("i", {"class": "swatch tainted"}), "tainted"),
        tag("span", {}, tag("i", {"class": "swatch unhealthy"}), "unhealthy"),
        figures and tag("span", {}, tag("i", {"class": "swatch utilization"}), "utilization"),
    )


def heat_legend() -> Markup:
    """A fill scale: free, then eighths of the node's accelerators held, to all."""
    steps = [
        tag(
            "i",
            {
                "class": f"swatch h{k}",
                "title": f"up to {k}/{HEAT_STEPS} of the node's accelerators held",
            },
        )
        for k in range(1, HEAT_STEPS + 1)
    ]
    return tag(
        "div",
        {"class": "legend scale"},
        tag("span", {}, tag("i", {"class": "swatch h0"}), "free"),
        tag("span", {}, "held: 1/8 ", tag("span", {"class": "ramp"}, steps), " all"),
        tag("span", {}, tag("i", {"class": "swatch tainted-outline"}), "tainted"),
        tag("span", {}, tag("i", {"class": "swatch unhealthy-dot"}), "unhealthy"),
    )


def heat_step(fill: float) -> int:
    """0 for a free node, else 1..HEAT_STEPS: eighths held, rounded up (any use shows)."""
    if fill <= 0:
        return 0
    return min(HEAT_STEPS, max(1, math.ceil(fill * HEAT_STEPS - 1e-9)))


def heatmap(nodes: Sequence[Mapping[str, Any]], filtered: bool) -> Markup:
    cells = []
    for n in nodes:
        classes = ["cell", f"h{heat_step(n['fill'])}"]
        if any(d["tainted"] for d in n["devices"]):
            classes.append("tainted")
        faults = sorted({f for d in n["devices"] for f in d["faults"]})
        if faults:
            classes.append("unhealthy")
        if filtered:
            classes.append("admitted" if any(d["admitted"] for d in n["devices"]) else "rejected")
        if n["accelerators"]:
            held = (
                f"{n['inUse']} of {n['accelerators']} accelerators in use · {pct(n['fill'])} held"
            )
        else:
            held = f"no accelerators · {pct(n['fill'])} of its devices held"
        if faults:
            held += f" · {n.get('unhealthy', 0)} unhealthy: {', '.join(faults)}"
        busy = [
            m["utilization"]
            for d in n["devices"]
            if (m := d.get("metrics")) and m["utilization"] is not None and d["parent"] is None
        ]
        if busy:
            held += f" · utilization {pct(sum(busy) / len(busy))} on average"
        cells.append(
            tag(
                "div",
                {
                    "class": " ".join(classes),
                    "data-node": n["name"],
                    "data-fill": n["fill"],
                    "title": f"{n['name']} · {held}",
                },
            )
        )
    return tag("div", {"class": "heat"}, cells)


def device_title(d: Mapping[str, Any]) -> str:
    parts = [d["name"], d["product"], d["kind"], d["state"]]
    if d["state"] == "shared":
        parts.append(pct(d["fill"]) + " used")
    if d["holders"]:
        parts.append("held by " + ", ".join(d["holders"]))
    if not d["healthy"]:
        parts.append("unhealthy: " + ", ".join(d["faults"]))
    if d["taints"]:
        parts.append("taints: " + ", ".join(d["taints"]))
    if "metrics" in d:  # device metrics are scraped
        if d["metrics"] is not None:
            parts.append(figures_text(d["metrics"]))
        elif d["kind"] in ACCELERATOR_KINDS:
            parts.append("no device metrics")
    return " · ".join(p for p in parts if p)


def utilization_bar(d: Mapping[str, Any]) -> Markup | None:
    """A bar along the tile's foot, as long as the device is busy (grey when stale)."""
    m = d.get("metrics")
    if m is None or m["utilization"] is None:
        return None
    step = util_step(m["utilization"])
    return tag(
        "i",
        {
            "class": f"util u{step}" + (" stale" if m["stale"] else ""),
            "data-utilization": m["utilization"],
        },
    )


def device_cell(d: Mapping[str, Any]) -> Markup:
    classes = ["dev", d["kind"], d["state"]]
    if d["tainted"]:
        classes.append("tainted")
    if not d["healthy"]:
        classes.append("unhealthy")
    if d["admitted"] is not None:
        classes.append("admitted" if d["admitted"] else "rejected")
    if d["state"] == "shared":
        classes.append(f"f{round(d['fill'] * SHARED_STEPS)}")
    attrs = {
        "class": " ".join(classes),
        "title": device_title(d),
        "data-device": f"{d['driver']}/{d['pool']}/{d['name']}",
        "data-state": d["state"],
        "data-health": "healthy" if d["healthy"] else "unhealthy",
    }
    bar = utilization_bar(d)
    if len(d["holders"]) == 1:  # one claim holds it: its page is one click away
        return tag("a", {**attrs, "href": claim_href(d["holders"][0])}, bar)
    return tag("div", attrs, bar)


def node_block(node: Mapping[str, Any]) -> Markup:
    devices = node["devices"]
    loose = sorted(
        (d for d in devices if not d["parent"]), key=lambda d: d["kind"] in ("nic", "device")
    )
    parents: dict[str, list[Mapping[str, Any]]] = {}
    for d in devices:
        if d["parent"]:
            parents.setdefault(d["parent"], []).append(d)
    parts = [
        tag(
            "div",
            {
                "class": "part" + ("" if all(d["healthy"] for d in devs) else " unhealthy"),
                "title": f"{key.rsplit('/', 1)[-1]} · {pct(node['partitions'].get(key, 0))} used",
            },
            [device_cell(d) for d in devs],
        )
        for key, devs in parents.items()
    ]
    return tag(
        "div",
        {"class": "node", "data-node": node["name"]},
        tag("div", {"class": "label", "title": node["name"]}, node["name"]),
        node["problems"] and tag("div", {"class": "error"}, "; ".join(node["problems"])),
        tag("div", {"class": "devs"}, [device_cell(d) for d in loose], parts),
    )


# --- claims and pods ----------------------------------------------------------------------


def workloads_page(
    claims: Mapping[str, Any], pods: Mapping[str, Any], params: Mapping[str, str]
) -> Markup:
    namespaces = sorted({*claims["namespaces"], *pods["namespaces"]})
    claim_rows = [
        [
            c["namespace"],
            link(claim_href(f"{c['namespace']}/{c['name']}"), c["name"]),
            [
                badge(c["status"]),
                c["extendedResources"]
                and [
                    " ",
                    tag(
                        "span",
                        {
                            "class": "badge extended",
                            "title": "made by the scheduler for the pod's extended resources",
                        },
                        "extended resources",
                    ),
                ],
            ],
            ", ".join(c["requests"]),
            [tag("div", {}, tag("code", {}, d)) for d in c["devices"]],
            ", ".join(c["pods"]),
        ]
        for c in claims["claims"]
    ]
    pod_rows = []
    for p in pods["pods"]:
        key = f"{p['namespace']}/{p['name']}"
        says: object = p["message"]
        if p["status"] == "pending":
            says = link(url("/pending", {"pod": key}), p["message"] or "explain")
        pod_rows.append(
            [
                p["namespace"],
                p["name"],
                badge(p["status"]),
                p["node"] or "",
                [tag("div", {}, link(claim_href(f"{p['namespace']}/{c}"), c)) for c in p["claims"]],
                says,
            ]
        )
    return tag(
        "div",
        {},
        tag(
            "div",
            {"class": "toolbar"},
            select("namespace", "namespace", namespaces, params.get("namespace", "")),
        ),
        tag("h2", {}, "ResourceClaims ", muted(f"({len(claims['claims'])})")),
        tag(
            "div",
            {"class": "toolbar"},
            select("status", "claims", claims["statuses"], params.get("claims", "")),
        ),
        table(["namespace", "name", "status", "requests", "devices", "pods"], claim_rows),
        tag("h2", {}, "Pods ", muted(f"({len(pods['pods'])})")),
        tag(
            "div",
            {"class": "toolbar"},
            select("status", "pods", pods["statuses"], params.get("pods", "")),
        ),
        table(["namespace", "name", "status", "node", "claims", "scheduler says"], pod_rows),
    )


def claim_page(c: Mapping[str, Any]) -> Markup:
    request_rows = [
        [
            q["name"],
            o["name"] if q["firstAvailable"] else "",
            o["deviceClassName"],
            o["allocationMode"],
            o["count"],
            [tag("div", {}, tag("code", {}, s)) for s in o["selectors"]],
            [tag("div", {}, f"{k}: {v}") for k, v in o["capacity"].items()],
        ]
        for q in c["requests"]
        for o in q["options"]
    ]
    devices = [
        tag(
            "div",
            {"class": "card device"},
            tag(
                "div",
                {},
                tag("b", {}, d["device"]),
                " for request ",
                tag("code", {}, d["request"]),
                f" on node {d['node']}" if d["node"] else "",
                " ",
                health_badge(d["healthy"], d["faults"]),
            ),
            device_figures(d, c.get("deviceMetrics") is not None),
            d["shareID"]
            and tag(
                "div",
                {"class": "muted"},
                f"share {d['shareID']} · {format_capacity(d['consumedCapacity'])}",
            ),
            table(
                ["attribute", "value"],
                [[k, tag("code", {}, format_value(v))] for k, v in d["attributes"].items()],
            ),
            table(["capacity", "value"], [[k, v] for k, v in d["capacity"].items()]),
        )
        for d in c["devices"]
    ]
    pods = [link(url("/pending", {"pod": f"{c['namespace']}/{p}"}), p) for p in c["pods"]]
    return tag(
        "div",
        {"class": "claim"},
        tag("h2", {}, f"ResourceClaim {c['namespace']}/{c['name']} ", badge(c["status"])),
        c["extendedResources"]
        and tag(
            "p",
            {"class": "muted"},
            "made by the scheduler for the extended resources of pod(s) "
            + (", ".join(c["pods"]) or "gone"),
        ),
        tag("h3", {}, "Requests"),
        table(
            ["request", "option", "class", "mode", "count", "selectors", "capacity"], request_rows
        ),
        c["constraints"]
        and table(
            ["constraint requests", "matchAttribute", "distinctAttribute"],
            [
                [", ".join(k["requests"]), k["matchAttribute"] or "", k["distinctAttribute"] or ""]
                for k in c["constraints"]
            ],
        ),
        tag("h3", {}, "Allocated devices"),
        devices or tag("p", {"class": "muted"}, "none: the claim is not allocated"),
        tag("h3", {}, "Pods"),
        table(
            ["reserved for", "uid"],
            [[f"{x['resource']}/{x['name']}", tag("code", {}, x["uid"])] for x in c["reservedFor"]],
        ),
        tag("p", {"class": "muted"}, "pods using this claim: ", _joined(pods) or "none"),
    )


def device_figures(d: Mapping[str, Any], scraped: bool) -> Markup | None:
    """A claimed device's utilization (a meter), memory, temperature and power, with where
    they come from; None without device metrics."""
    if not scraped:
        return None
    m = d.get("metrics")
    if m is None:
        return tag(
            "div",
            {"class": "figures-line muted", "data-figures": True},
            "no device metrics: no endpoint given reports this device",
        )
    meter = None
    if m["utilization"] is not None:
        meter = tag(
            "meter",
            {"min": 0, "max": 1, "value": m["utilization"], "title": "utilization"},
        )
    source = f"from {m['source']}" + (f", {ago(m['age'])} ago" if m["age"] is not None else "")
    return tag(
        "div",
        {"class": "figures-line" + (" stale" if m["stale"] else ""), "data-figures": True},
        meter,
        " ",
        figures_text(m),
        " ",
        muted(f"({source})"),
    )


def _joined(items: Sequence[Markup]) -> list[object]:
    out: list[object] = []
    for i, item in enumerate(items):
        out += [", "] if i else []
        out.append(item)
    return out


def format_value(value: object) -> str:
    """An attribute's value as JSON would show it (strings quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def format_capacity(consumed: Mapping[str, str]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in consumed.items())


# --- pending ------------------------------------------------------------------------------


def pending_page(data: Mapping[str, Any]) -> Markup:
    total, explained = data["total"], data["explained"]
    return tag(
        "div",
        {},
        tag("h2", {}, "Pending pods ", muted(f"({total})")),
        None if total else tag("p", {"class": "muted"}, "No pod is waiting."),
        [gang_card(g) for g in data.get("gangs") or ()],
        [pending_card(p) for p in data["pods"]],
        total > explained
        and tag(
            "p",
            {"class": "muted"},
            f"{total - explained} more not explained here: open one to see why",
        ),
    )


GANG_PODS_SHOWN = 8  # pending pods named on a gang's card (the rest counted)


def gang_card(g: Mapping[str, Any]) -> Markup:
    """A gang's pending pods as one card: `kubedra explain podgroup`'s verdict in one line,
    how many pods it has of its minCount, the pods (each linked to its own explanation)."""
    key = f"{g['namespace']}/{g['name']}"
    members, pending = len(g["members"]), g["pending"]
    counts = (
        f"{members} pod(s), minCount {g['minCount']}"
        + (f", in one {g['topologyKey']}" if g.get("topologyKey") else "")
        if g["minCount"]
        else f"{members} pod(s), no PodGroup"
    )
    more = len(pending) - GANG_PODS_SHOWN
    return tag(
        "div",
        {"class": "card pending gang", "data-podgroup": key, "data-state": g["state"]},
        tag("div", {}, tag("b", {}, f"PodGroup {key}"), " ", muted(f"— {counts}")),
        tag("p", {"class": "gang-reason"}, g["verdict"]),
        tag(
            "div",
            {},
            f"pending: {len(pending)} · ",
            [
                [", " if i else None, link(url("/pending", {"pod": f"{g['namespace']}/{n}"}), n)]
                for i, n in enumerate(pending[:GANG_PODS_SHOWN])
            ],
            more > 0 and muted(f" and {more} more"),
        ),
        g.get("condition") and tag("div", {}, muted(g["condition"])),
    )


def pending_card(p: Mapping[str, Any]) -> Markup:
    key = f"{p['namespace']}/{p['name']}"
    groups = p.get("groups")
    hints = p.get("whatWouldFit") or []
    return tag(
        "div",
        {"class": "card pending", "data-pod": key},
        tag("div", {}, tag("b", {}, key), " ", p["message"] and muted("— " + p["message"])),
        tag(
            "div",
            {},
            link(url("/fleet", {"pod": key}), "devices it asks for, and which it was refused"),
            None if groups is not None else [" · ", link(url("/pending", {"pod": key}), "explain")],
        ),
        p.get("error") and tag("p", {"class": "error"}, p["error"]),
        unhealthy_list(p.get("unhealthyDevices") or []),
        [group_outcome(g) for g in groups or ()],
        hints
        and tag(
            "div",
            {"class": "hints"},
            tag("b", {}, "what would make it fit:"),
            [tag("div", {"class": "hint"}, h) for h in hints],
        ),
    )


UNHEALTHY_SHOWN = 12  # unhealthy devices named on a pending pod's card (the rest counted)


def unhealthy_list(devices: Sequence[Mapping[str, Any]]) -> Markup | None:
    """The unhealthy devices a pending pod's requests would take, with their faults."""
    if not devices:
        return None
    more = len(devices) - UNHEALTHY_SHOWN
    return tag(
        "div",
        {"class": "unhealthy-devices"},
        f"unhealthy device{'' if len(devices) == 1 else 's'} it could use otherwise: ",
        [
            tag(
                "span",
                {
                    "class": "badge unhealthy",
                    "data-device": d["device"],
                    "data-health": "unhealthy",
                    "title": f"{d['device']} on {d['node']} · {d['state']}",
                },
                f"{d['name']} on {d['node']}: {', '.join(d['faults'])}",
            )
            for d in devices[:UNHEALTHY_SHOWN]
        ],
        more > 0 and muted(f" and {more} more"),
    )


def group_outcome(g: Mapping[str, Any]) -> Markup:
    nodes = g["nodes"]
    shown = ", ".join(nodes[:4]) + (", …" if len(nodes) > 4 else "")
    return tag(
        "div",
        {"class": "group-outcome"},
        tag(
            "div",
            {},
            tag("b", {}, f"{len(nodes)} node(s)"),
            " ",
            muted(shown),
            ": ",
            "fits" if g["fits"] else tag("span", {"class": "blocker"}, g["blocker"]),
        ),
        [
            tag(
                "div",
                {"class": "funnel"},
                tag(
                    "span",
                    {},
                    f"{f['request']} (need {'all' if f['mode'] == 'All' else f['wanted']}):",
                ),
                [
                    tag(
                        "span",
                        {"class": "stage short" if stage == f["bottleneck"] else "stage"},
                        f"{n} {stage}",
                    )
                    for stage, n in f["funnel"].items()
                ],
            )
            for f in g["requests"]
        ],
    )


# --- fragmentation ------------------------------------------------------------------------


def fragmentation_page(data: Mapping[str, Any]) -> Markup:
    now = data["now"]
    figures = data["figures"]
    return tag(
        "div",
        {},
        tag(
            "div",
            {"class": "metrics"},
            tag(
                "div",
                {},
                tag("div", {"class": "big", "id": "alloc-now"}, pct(now["allocation"])),
                f"allocated of {now['accelerators']:,} accelerators",
            ),
            tag(
                "div",
                {},
                tag("div", {"class": "big", "id": "frag-now"}, pct(now["fragmentation"])),
                "fragmented (FGD): free capacity the pods' task types cannot use",
            ),
        ),
        tag("h2", {}, "Allocation and fragmentation over time"),
        chart(data["history"]),
        tag("h2", {}, "Most fragmented nodes"),
        table(
            ["node", "fragmented"],
            [[n["name"], pct(n["fragmentation"])] for n in now["mostFragmented"]],
        ),
        tag("h2", {}, "Workload mix (task types of the pods)"),
        table(
            ["devices", "milli each", "CPU milli", "share"],
            [[m["devices"], m["milli"], m["cpuMilli"], pct(m["share"])] for m in now["mix"]],
        ),
        figures
        and [
            tag("h2", {}, "Simulator results (docs/results.md)"),
            tag(
                "div",
                {"class": "figures"},
                [
                    tag(
                        "figure",
                        {},
                        tag(
                            "img",
                            {
                                "src": path("figures", f["name"]),
                                "alt": f["title"],
                                "loading": "lazy",
                            },
                        ),
                        tag("figcaption", {"class": "muted"}, f["title"]),
                    )
                    for f in figures
                ],
            ),
        ],
    )


# Tick spacings for the time axis (seconds): the first that gives at most MAX_TICKS.
_TICK_STEPS = (
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    21600,
    43200,
    86400,
)
MAX_TICKS = 6
MIN_SPAN = 60.0  # seconds the time axis spans at least (one sample: the minute before it)


def time_ticks(t0: float, t1: float) -> list[float]:
    """Round times between t0 and t1 (at most MAX_TICKS, local clock)."""
    span = max(t1 - t0, 1.0)
    step = next((s for s in _TICK_STEPS if span / s <= MAX_TICKS), _TICK_STEPS[-1])
    offset = time.localtime(t0).tm_gmtoff
    first = math.ceil((t0 + offset) / step) * step - offset
    return [first + i * step for i in range(int((t1 - first) // step) + 1)]


def clock(t: float, step: float) -> str:
    return time.strftime("%H:%M:%S" if step < 60 else "%H:%M", time.localtime(t))


def chart(points: Sequence[Mapping[str, Any]], width: int = 720, height: int = 210) -> Markup:
    """Allocation (blue) and fragmentation (red), 0-100 %, against the server's clock."""
    left, right, top, bottom = 44, 16, 26, 36
    inner_w, inner_h = width - left - right, height - top - bottom
    parts: list[Markup] = []

    def text(x: float, y: float, value: str, anchor: str = "start", **attrs: str) -> None:
        parts.append(
            tag(
                "text",
                {
                    "x": f"{x:.1f}",
                    "y": f"{y:.1f}",
                    "font-size": "11",
                    "text-anchor": anchor,
                    **attrs,
                },
                value,
            )
        )

    def y_of(v: float) -> float:
        return top + inner_h * (1 - min(max(v, 0.0), 1.0))

    for frac in (0, 0.25, 0.5, 0.75, 1):
        y = y_of(frac)
        parts.append(
            tag(
                "line",
                {
                    "x1": left,
                    "x2": width - right,
                    "y1": f"{y:.1f}",
                    "y2": f"{y:.1f}",
                    "stroke": "#e3e6eb",
                },
            )
        )
        text(left - 6, y + 4, f"{frac:.0%}".replace("%", " %"), "end")
    if points:
        t1 = float(points[-1]["time"])
        t0 = min(float(points[0]["time"]), t1 - MIN_SPAN)

        def x_of(t: float) -> float:
            return left + inner_w * (t - t0) / (t1 - t0)

        ticks = time_ticks(t0, t1)
        step = ticks[1] - ticks[0] if len(ticks) > 1 else MIN_SPAN
        for t in ticks:
            x = x_of(t)
            parts.append(
                tag(
                    "line",
                    {
                        "x1": f"{x:.1f}",
                        "x2": f"{x:.1f}",
                        "y1": top + inner_h,
                        "y2": top + inner_h + 4,
                        "stroke": "#6b7280",
                    },
                )
            )
            text(x, top + inner_h + 16, clock(t, step), "middle")
        for key, colour in (("allocation", "#2f6fdb"), ("fragmentation", "#e5484d")):
            xy = [(x_of(p["time"]), y_of(p[key])) for p in points]
            if len(xy) == 1:  # one sample so far: the level it has held
                xy = [(left, xy[0][1]), xy[0]]
            parts.append(
                tag(
                    "polyline",
                    {
                        "points": " ".join(f"{x:.1f},{y:.1f}" for x, y in xy),
                        "fill": "none",
                        "stroke": colour,
                        "stroke-width": "2",
                        "data-series": key,
                    },
                )
            )
    else:
        text(left + inner_w / 2, top + inner_h / 2, "no sample yet", "middle")
    parts.append(
        tag(
            "line",
            {
                "x1": left,
                "x2": width - right,
                "y1": top + inner_h,
                "y2": top + inner_h,
                "stroke": "#6b7280",
            },
        )
    )
    text(left + inner_w / 2, height - 4, "time (the server's clock)", "middle", fill="#6b7280")
    text(left, 16, "— allocated", fill="#2f6fdb")
    text(left + 90, 16, "— fragmented (FGD)", fill="#e5484d")
    return tag(
        "svg",
        {
            "class": "chart",
            "xmlns": "http://www.w3.org/2000/svg",
            "width": width,
            "height": height,
            "viewBox": f"0 0 {width} {height}",
            "role": "img",
            "aria-label": "allocation and fragmentation over time",
        },
        parts,
    )
