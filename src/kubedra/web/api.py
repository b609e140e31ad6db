"""The dashboard's routes: the page, its static files, the figures and the JSON API.

Independent of the HTTP server: `App.get(path, query)` answers a GET with a `Response`.
Every JSON view is computed from the mirror's current snapshot, once per version (the
cache is dropped when the cluster changes), one view at a time: two browsers asking for
the fleet of a 1,000-node cluster cost one computation. A view reads only the parameters
`PARAMETERS` gives it; the cache is keyed by those, normalised, and bounded (`cache`).
`ROUTES` documents the API (it is also served at /api).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import msgspec

from kubedra.api.core import Pod
from kubedra.errors import KubedraError, NotFound
from kubedra.web.cache import ResponseCache
from kubedra.web.facts import Facts
from kubedra.web.fleet import fleet_view
from kubedra.web.fragmentation import History, figures, measure
from kubedra.web.mirror import Mirror
from kubedra.web.pending import DEFAULT_LIMIT, explain_pod, pending_view
from kubedra.web.workloads import claim_view, claims_view, pods_view

JSON = "application/json"
STATIC = {
    "index.html": "text/html; charset=utf-8",
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

# path pattern -> what it returns (the documentation served at /api, and in the README)
ROUTES = {
    "/api/status": "version of the cluster state, the backend, a watch error if any",
    "/api/fleet?class=NAME&pod=NS/NAME": (
        "nodes grouped by hardware, each device with its state (free, allocated, shared, "
        "blocked), fill, taints and holders; with class= or pod=, whether each is admitted"
    ),
    "/api/claims?namespace=NS&status=S": "claims (status pending|allocated|reserved|deleting)",
    "/api/claims/NS/NAME": "a claim's requests, allocated devices with attributes, its pods",
    "/api/pods?namespace=NS&status=S": "pods (status pending|bound|running|succeeded|...)",
    "/api/pending?limit=N": "pending pods; the first N (25) with kubedra's explanation",
    "/api/pending/NS/NAME": "one pending pod's `kubedra explain`: node groups, blockers, hints",
    "/api/fragmentation": "FGD fragmentation and allocation ratio now, their history, figures",
    "/api/events": "server-sent events: `change` with the new version, at most once a second",
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
    ) -> None:
        self.mirror = mirror
        self.strict = strict
        self.backend = backend
        self.figures_dir = figures_dir
        self.history = History(lambda: measure(self.facts()), interval=history_interval)
        self._facts: Facts | None = None
        self.cache: ResponseCache[Response] = ResponseCache()
        self._lock = threading.Lock()
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
        if parts in ([""], ["index.html"]):
            return _static("index.html")
        if len(parts) == 2 and parts[0] == "static":
            return _static(parts[1])
        if len(parts) == 2 and parts[0] == "figures":
            return self._figure(parts[1])
        if parts[0] != "api":
            return error(404, f"no such page: {path}")
        if parts[1:] in ([], [""]):
            return json_response({"routes": ROUTES})
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
            version = self.mirror.version
            cached = self.cache.get(version, key)
            if cached is not None:
                return cached
            try:
                response = json_response(view(args, params))
            except NotFound as err:
                return error(404, str(err))
            except (KubedraError, ValueError) as err:
                return error(400, str(err))
            self.cache.put(version, key, response)
            return response

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
        _no_args(args)
        return fleet_view(self.facts(), query.get("class", ""), query.get("pod", ""))

    def _pods(self, args: list[str], query: Mapping[str, str]) -> dict[str, Any]:
        _no_args(args)
        return pods_view(self.facts(), query.get("namespace", ""), query.get("status", ""))

    def _claims(self, args: list[str], query: Mapping[str, str]) -> dict[str, Any]:
        if len(args) == 2:
            return claim_view(self.facts(), args[0], args[1])
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


def _no_args(args: list[str]) -> None:
    if args:
        raise NotFound(f"no such page: {'/'.join(args)}")


def _static(name: str) -> Response:
    if name not in STATIC:
        return error(404, f"no such file: {name}")
    body = resources.files("kubedra.web").joinpath("static", name).read_bytes()
    return Response(200, STATIC[name], body)
