"""The dashboard's routes: the pages, their static files, the figures and the JSON API.

Independent of the HTTP server: `App.get(path, query)` answers a GET with a `Response`.
The pages (/fleet, /workloads, /claims/NS/NAME, /pending, /fragmentation; / is the fleet)
are HTML rendered here with their data (`pages`), so the first paint shows the cluster;
the JSON API serves the same views. Every answer is computed from the mirror's current
snapshot, once per version (the cache is dropped when the cluster changes), one at a
time: two browsers asking for the fleet of a 1,000-node cluster cost one computation. A
view reads only the parameters `PARAMETERS` (pages: `PAGE_PARAMETERS`) gives it; the
cache is keyed by those, normalised, and bounded (`cache`). `ROUTES` documents the API
(it is also served at /api).

With device metrics (`kubedra ui --device-metrics URL`), the views that show each device's
utilization beside its allocation (`FIGURES`: the fleet, a claim) add the scraper's last
round to the cluster's view; they are cached in a cache of their own, dropped at every
round or change, so the other views' answers (explanations: the costly ones) are kept.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import msgspec

from kubedra.api.core import Pod
from kubedra.errors import KubedraError, NotFound
from kubedra.web import pages
from kubedra.web.cache import ResponseCache
from kubedra.web.devicemetrics import Scraper, claim_with_figures, fleet_with_figures
from kubedra.web.facts import Facts
from kubedra.web.fleet import fleet_view
from kubedra.web.fragmentation import History, figures, measure
from kubedra.web.html import Markup
from kubedra.web.mirror import Mirror
from kubedra.web.pending import DEFAULT_LIMIT, explain_pod, pending_view
from kubedra.web.workloads import claim_view, claims_view, pods_view

JSON = "application/json"
HTML = "text/html; charset=utf-8"
STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
_FIGURE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.png$")
MAX_LIMIT = 1000  # pending pods explained in one answer (each runs the allocator per node)
_LIMIT = re.compile(r"[0-9]{1,4}")

# view -> the query parameters it reads; any other is ignored, and an empty one is absent
PARAMETERS: dict[str, tuple[str, ...]] = {
    "status": (),
    "fleet": ("class", "pod"),
    "claims": ("namespace", "status"),
    "pods": ("namespace", "status"),
    "pending": ("limit",),
    "fragmentation": (),
}
# page -> the query parameters it reads (as above: others ignored, the cache keyed by these)
PAGE_PARAMETERS: dict[str, tuple[str, ...]] = {
    "fleet": ("class", "mode", "pod"),
    "workloads": ("claims", "namespace", "pods"),
    "claim": (),
    "pending": ("pod",),
    "fragmentation": (),
}
FLEET_MODES = ("heat", "devices")  # `mode=`: the heat map or every device (else: by size)
# views and pages that show device metrics: (kind, number of path arguments)
FIGURES = {("fleet", 0), ("claims", 2), ("page", "fleet"), ("page", "claim")}
FIGURES_CACHE = (16 * 1024 * 1024, 64)  # bytes, entries: a few fleets between two rounds

# path pattern -> what it returns (the documentation served at /api, and in the README)
ROUTES = {
    "/api/status": "version of the cluster state, the backend, a watch error if any",
    "/api/fleet?class=NAME&pod=NS/NAME": (
        "nodes grouped by hardware, each device with its state (free, allocated, shared, "
        "blocked), fill, taints, health (faults from its driver's health taints) and "
        "holders; with class= or pod=, whether each is admitted; with `kubedra ui "
        "--device-metrics`, each device's utilization, memory and temperature (`metrics`) "
        "and the endpoints scraped (`deviceMetrics`)"
    ),
    "/api/claims?namespace=NS&status=S": "claims (status pending|allocated|reserved|deleting)",
    "/api/claims/NS/NAME": (
        "a claim's requests, allocated devices with attributes, health and metrics, its pods"
    ),
    "/api/pods?namespace=NS&status=S": "pods (status pending|bound|running|succeeded|...)",
    "/api/pending?limit=N": "pending pods; the first N (25) with kubedra's explanation",
    "/api/pending/NS/NAME": (
        "one pending pod's `kubedra explain`: node groups, blockers, hints, and the unhealthy "
        "devices its requests would take"
    ),
    "/api/fragmentation": "FGD fragmentation and allocation ratio now, their history, figures",
    "/api/events": (
        "server-sent events: `change` with the new version, `metrics` after a round of "
        "device metrics, at most one a second"
    ),
}


# the pages (HTML, whole on arrival; the same views as the JSON), in the /api index too
PAGES = {
    "/ or /fleet?class=NAME&pod=NS/NAME&mode=heat|devices": (
        "the fleet: accelerators, MIG partitions and NICs counted; devices or a heat map"
    ),
    "/workloads?namespace=NS&claims=S&pods=S": "claims and pods (/claims too)",
    "/claims/NS/NAME": "a claim: requests, allocated devices with attributes, pods",
    "/pending?pod=NS/NAME": "pending pods with kubedra's explanation (one pod with pod=)",
    "/fragmentation": "FGD fragmentation and allocation now and over time, simulator figures",
}


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


def json_response(data: Any, status: int = 200) -> Response:
    return Response(status, JSON, msgspec.json.encode(data))


def error(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


class App:
    """Answers the dashboard's GETs from a mirror of the cluster."""

    def __init__(
        self,
        mirror: Mirror,
        *,
        strict: bool = False,
        backend: str = "",
        figures_dir: Path | None = None,
        history_interval: float = 2.0,
        device_metrics: Scraper | None = None,
    ) -> None:
        self.mirror = mirror
        self.device_metrics = device_metrics
        self.strict = strict
        self.backend = backend
        self.figures_dir = figures_dir
        self.history = History(lambda: measure(self.facts()), interval=history_interval)
        self._facts: Facts | None = None
        self._last_fleet: tuple[tuple[int, str, str], dict[str, Any]] | None = None
        self.cache: ResponseCache[Response] = ResponseCache()
        # the views with device metrics, at (cluster version, scrape round): see `_cache_for`
        self.figures_cache: ResponseCache[Response] = ResponseCache(*FIGURES_CACHE)
        self._figures_key: tuple[int, int] = (-1, -1)
        self._figures_version = 0
        self._last_figured: tuple[tuple[object, ...], dict[str, Any]] | None = None
        self._lock = threading.Lock()
        self._pages: dict[str, Callable[[list[str], Mapping[str, str]], Markup]] = {
            "fleet": self._fleet_page,
            "workloads": self._workloads_page,
            "claim": self._claim_page,
            "pending": self._pending_page,
            "fragmentation": self._fragmentation_page,
        }
        self._views: dict[str, Callable[[list[str], Mapping[str, str]], Any]] = {
            "status": self._status,
            "fleet": self._fleet,
            "claims": self._claims,
            "pods": self._pods,
            "pending": self._pending,
            "fragmentation": self._fragmentation,
        }

    # --- state ----------------------------------------------------------------------------

    def facts(self) -> Facts:
        """The facts of the current snapshot (callers hold the lock)."""
        snapshot = self.mirror.snapshot()
        if self._facts is None or self._facts.version != snapshot.version:
            self._facts = Facts(snapshot, self.strict, previous=self._facts)
        return self._facts

    def sample_history(self) -> None:
        with self._lock:
            self.history.record()

    # --- routing --------------------------------------------------------------------------

    def get(self, path: str, query: Mapping[str, str]) -> Response:
        """Answer a GET of `path` (as sent: each segment is percent-decoded on its own, so
        an object name may hold any character, a slash included)."""
        if not path.startswith("/"):  # `*` or an absolute URL: not a page of this server
            return error(400, f"not a path: {path[:100]!r}")
        parts = [unquote(p) for p in path.split("/")[1:]]
        page = _page_name(parts)
        if page is not None:
            return self._page(page, parts[1:], query)
        if len(parts) == 2 and parts[0] == "static":
            return _static(parts[1])
        if len(parts) == 2 and parts[0] == "figures":
            return self._figure(parts[1])
        if parts[0] != "api":
            return error(404, f"no such page: {path}")
        if parts[1:] in ([], [""]):
            return json_response({"routes": ROUTES, "pages": PAGES})
        view = self._views.get(parts[1])
        if view is None:
            return error(404, f"no such page: {path}")
        return self._json(parts[1], view, parts[2:], query)

    def _json(
        self,
        name: str,
        view: Callable[[list[str], Mapping[str, str]], Any],
        args: list[str],
        query: Mapping[str, str],
    ) -> Response:
        try:
            params = _normalised(name, query)
        except ValueError as err:
            return error(400, str(err))
        key = (name, *args, "?", *(f"{k}={v}" for k, v in params.items()))
        with self._lock:
            cache, version = self._cache_for((name, len(args)))
            cached = cache.get(version, key)
            if cached is not None:
                return cached
            try:
                response = json_response(view(args, params))
            except NotFound as err:
                return error(404, str(err))
            except (KubedraError, ValueError) as err:
                return error(400, str(err))
            cache.put(version, key, response)
            return response

    def _page(self, name: str, args: list[str], query: Mapping[str, str]) -> Response:
        """A whole HTML page: the view rendered with its data (cached like the JSON, by
        version and the parameters it reads), in the frame of the current status."""
        params = {k: query[k] for k in PAGE_PARAMETERS[name] if query.get(k)}
        if params.get("mode") not in (None, *FLEET_MODES):
            del params["mode"]  # an unknown mode: the default for the fleet's size
        key = ("page", name, *args, "?", *(f"{k}={v}" for k, v in params.items()))
        with self._lock:
            cache, version = self._cache_for(("page", name))
            status = self._status([], {})
            cached = cache.get(version, key)
            if cached is None:
                code = 200
                try:
                    main = self._pages[name](args, params)
                except NotFound as err:
                    code, main = 404, pages.not_found(str(err))
                except (KubedraError, ValueError) as err:
                    code, main = 400, pages.not_found(str(err))
                cached = Response(code, HTML, main.encode())
                cache.put(version, key, cached)
        main = Markup(cached.body.decode())  # rendered by `pages`: escaped there
        body = pages.layout(name, main, status, _title(name, args))
        return Response(cached.status, HTML, body)

    def _cache_for(self, kind: tuple[str, object]) -> tuple[ResponseCache[Response], int]:
        """Where an answer is cached, and at which version (lock held): the cluster's
        version; for a view with device metrics, a number for the pair (cluster version,
        scrape round), so each round or change drops those answers and only those."""
        if self.device_metrics is None or kind not in FIGURES:
            return self.cache, self.mirror.version
        key = (self.mirror.version, self.device_metrics.generation)
        if key != self._figures_key:
            self._figures_key, self._figures_version = key, self._figures_version + 1
        return self.figures_cache, self._figures_version

    # --- views with arguments -------------------------------------------------------------

    def _status(self, args: list[str], query: Mapping[str, str]) -> dict[str, Any]:
        _no_args(args)
        return {
            "version": self.mirror.version,
            "backend": self.backend,
            "error": self.mirror.error,
            "readOnly": True,
        }

    def _fleet(self, args: list[str], query: Mapping[str, str]) -> dict[str, Any]:
        """The fleet view; the last one is kept for its version and filter, so the page in
        the other mode (heat map, devices) and the JSON are rendered from it, not again."""
        _no_args(args)
        facts = self.facts()
        key = (facts.version, query.get("class", ""), query.get("pod", ""))
        if self._last_fleet is None or self._last_fleet[0] != key:
            self._last_fleet = (key, fleet_view(facts, key[1], key[2]))
        view = self._last_fleet[1]
        if self.device_metrics is None:
            return {**view, "deviceMetrics": None}
        scraped = self.device_metrics.snapshot()
        figured = (*key, scraped.generation)
        if self._last_figured is None or self._last_figured[0] != figured:
            self._last_figured = (figured, fleet_with_figures(view, scraped, time.time()))
        return self._last_figured[1]

    def _pods(self, args: list[str], query: Mapping[str, str]) -> dict[str, Any]:
        _no_args(args)
        return pods_view(self.facts(), query.get("namespace", ""), query.get("status", ""))

    def _claims(self, args: list[str], query: Mapping[str, str]) -> dict[str, Any]:
        if len(args) == 2:
            claim = claim_view(self.facts(), args[0], args[1])
            if self.device_metrics is None:
                return {**claim, "deviceMetrics": None}
            return claim_with_figures(claim, self.device_metrics.snapshot(), time.time())
        _no_args(args)
        return claims_view(self.facts(), query.get("namespace", ""), query.get("status", ""))

    def _pending(self, args: list[str], query: Mapping[str, str]) -> dict[str, Any]:
        facts = self.facts()
        if len(args) == 2:
            return explain_pod(facts, facts.scheduler.store.get(Pod, args[1], args[0]))
        _no_args(args)
        return pending_view(facts, int(query.get("limit", DEFAULT_LIMIT)))

    def _fragmentation(self, args: list[str], query: Mapping[str, str]) -> dict[str, Any]:
        _no_args(args)
        return {
            "now": measure(self.facts()),
            "history": self.history.points(),
            "figures": figures(self.figures_dir),
        }

    # --- pages ----------------------------------------------------------------------------

    def _fleet_page(self, args: list[str], params: Mapping[str, str]) -> Markup:
        _no_args(args)
        return pages.fleet_page(self._fleet([], params), params)

    def _workloads_page(self, args: list[str], params: Mapping[str, str]) -> Markup:
        _no_args(args)
        namespace = params.get("namespace", "")
        claims = claims_view(self.facts(), namespace, params.get("claims", ""))
        pods = pods_view(self.facts(), namespace, params.get("pods", ""))
        return pages.workloads_page(claims, pods, params)

    def _claim_page(self, args: list[str], params: Mapping[str, str]) -> Markup:
        return pages.claim_page(self._claims(args, params))

    def _pending_page(self, args: list[str], params: Mapping[str, str]) -> Markup:
        _no_args(args)
        pod = params.get("pod", "")
        if not pod:
            return pages.pending_page(self._pending([], {}))
        namespace, _, name = pod.rpartition("/")
        explained = self._pending([namespace or "default", name], {})
        return pages.pending_page({"total": 1, "explained": 1, "pods": [explained]})

    def _fragmentation_page(self, args: list[str], params: Mapping[str, str]) -> Markup:
        data = self._fragmentation(args, params)
        history, now = data["history"], data["now"]
        if not history or history[-1]["version"] != now["version"]:
            # not sampled yet (the sampler runs after each change): the state shown now
            point = {k: now[k] for k in ("version", "fragmentation", "allocation")}
            history = [*history, {"time": time.time(), **point}]
        return pages.fragmentation_page({**data, "history": history})

    def _figure(self, name: str) -> Response:
        folder = self.figures_dir
        if folder is None or not _FIGURE_NAME.match(name) or not (folder / name).is_file():
            return error(404, f"no such figure: {name}")
        return Response(200, "image/png", (folder / name).read_bytes())


def _normalised(view: str, query: Mapping[str, str]) -> dict[str, str]:
    """The parameters `view` reads, sorted, empty ones dropped, `limit` checked and in its
    canonical form (`025` is `25`): what the answer depends on, hence the cache key."""
    params = {k: query[k] for k in sorted(PARAMETERS[view]) if query.get(k)}
    if "limit" in params:
        limit = params["limit"]
        if not _LIMIT.fullmatch(limit) or int(limit) > MAX_LIMIT:
            shown = limit if len(limit) <= 20 else limit[:20] + "..."
            raise ValueError(f"limit={shown!r}: expected a number of pods from 0 to {MAX_LIMIT}")
        params["limit"] = str(int(limit))
    return params


def _page_name(parts: list[str]) -> str | None:
    """The page a path names, or None: / and /index.html are the fleet, /claims alone the
    claims and pods, /claims/NS/NAME a claim."""
    if parts in ([""], ["index.html"]):
        return "fleet"
    if parts[0] == "claims":
        return "claim" if len(parts) > 1 else "workloads"
    return parts[0] if parts[0] in PAGE_PARAMETERS else None


def _title(page: str, args: list[str]) -> str:
    if page == "claim" and len(args) == 2:
        return f"claim {args[0]}/{args[1]}"
    return pages.TITLES[page]


def _no_args(args: list[str]) -> None:
    if args:
        raise NotFound(f"no such page: {'/'.join(args)}")


def _static(name: str) -> Response:
    """app.js and app.css (the pages are rendered, not static)."""
    if name not in STATIC:
        return error(404, f"no such file: {name}")
    body = resources.files("kubedra.web").joinpath("static", name).read_bytes()
    return Response(200, STATIC[name], body)
