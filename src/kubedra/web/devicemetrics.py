"""Each device's utilization, memory and temperature, scraped from the node drivers' /metrics.

`kubedra ui --device-metrics URL` (repeatable) names the drivers' metrics endpoints
(`kubedra driver run --metrics-port P`: http://NODE:P/metrics). A thread scrapes every one
of them each `interval` seconds, all at once, each bounded by `timeout` seconds and
`MAX_BYTES`, and parses the answer with prometheus_client's text parser; each endpoint's
figures are replaced whole by its next good scrape, so what is held is one small table per
endpoint, never a history. A page never waits for a scrape: it reads the last round's
`FiguresSnapshot`. A failed scrape keeps the endpoint's last figures, shown as stale with
their age, and says why; an endpoint never scraped has none.

Devices are matched to the store's by (driver, pool, device), the labels the driver puts on
every series (`kubedra.driver.devicemetrics`). A device shared by several pods has one
series per pod, all with the same figures: the first is taken.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

INTERVAL = 5.0  # seconds between scrapes (the driver samples its devices every 5 s)
TIMEOUT = 2.0  # seconds one scrape may take (connect, and between reads)
MAX_BYTES = 8 * 1024 * 1024  # an answer larger than this is refused (a node's: a few kB)
MAX_DEVICES = 4096  # devices kept per endpoint (a node has 8 GPUs, or 8 x 7 MIG devices)
STALE_ROUNDS = 3  # figures older than this many intervals are stale even without an error
WORKERS = 8  # endpoints scraped at once

# series name -> the figure it gives
SERIES = {
    "kubedra_device_utilization_ratio": "utilization",
    "kubedra_device_memory_utilization_ratio": "memory_utilization",
    "kubedra_device_memory_used_bytes": "memory_used",
    "kubedra_device_memory_total_bytes": "memory_total",
    "kubedra_device_temperature_celsius": "temperature",
    "kubedra_device_power_watts": "power",
}

_WANTED = tuple(f"{name}{end}" for name in SERIES for end in ("{", " "))
DeviceKey = tuple[str, str, str]  # (driver, pool, device)


@dataclass(frozen=True, slots=True)
class Figures:
    """One device's figures from its driver's last sample (None: not reported, e.g. a MIG
    device has no utilization or temperature of its own)."""

    node: str = ""
    utilization: float | None = None  # 0..1
    memory_utilization: float | None = None  # 0..1
    memory_used: float | None = None  # bytes
    memory_total: float | None = None  # bytes
    temperature: float | None = None  # °C
    power: float | None = None  # W


@dataclass(frozen=True)
class Endpoint:
    """What one endpoint gave: the figures of its last good scrape, and how the last try
    went."""

    url: str
    devices: Mapping[DeviceKey, Figures] = field(default_factory=dict)
    scraped_at: float = 0.0  # time.time() of the last good scrape; 0: none yet
    tried_at: float = 0.0  # time.time() of the last try; 0: none yet
    error: str | None = None  # why the last try failed; None: it worked (or none yet)
    seconds: float = 0.0  # how long the last try took

    def age(self, now: float) -> float | None:
        """Seconds since the figures were scraped (None: never)."""
        return max(0.0, now - self.scraped_at) if self.scraped_at else None

    def stale(self, now: float, interval: float) -> bool:
        """The figures are not current: the last try failed, or none worked for a while."""
        age = self.age(now)
        return self.error is not None or (age is not None and age > STALE_ROUNDS * interval)

    def json(self, now: float, interval: float) -> dict[str, Any]:
        age = self.age(now)
        return {
            "url": self.url,
            "ok": self.tried_at > 0 and self.error is None,
            "stale": self.stale(now, interval),
            "error": self.error,
            "devices": len(self.devices),
            "age": None if age is None else round(age, 1),
            "scrapedAt": self.scraped_at or None,
            "triedAt": self.tried_at or None,
        }


@dataclass(frozen=True)
class FiguresSnapshot:
    """Every endpoint's state after one round, and each device's figures with the endpoint
    they came from (the first endpoint that has the device, in the order given)."""

    generation: int
    interval: float
    endpoints: tuple[Endpoint, ...]
    devices: Mapping[DeviceKey, tuple[Figures, Endpoint]]

    def status(self, now: float) -> dict[str, Any]:
        """The endpoints for /api/fleet's `deviceMetrics`."""
        return {
            "interval": self.interval,
            "endpoints": [e.json(now, self.interval) for e in self.endpoints],
        }

    def device(self, driver: str, pool: str, name: str, now: float) -> dict[str, Any] | None:
        """A device's figures as JSON, with their age and whether they are stale; None when
        no endpoint reports it."""
        found = self.devices.get((driver, pool, name))
        if found is None:
            return None
        figures, endpoint = found
        age = endpoint.age(now)
        return {
            "utilization": _rounded(figures.utilization, 3),
            "memoryUtilization": _rounded(figures.memory_utilization, 3),
            "memoryUsedBytes": _whole(figures.memory_used),
            "memoryTotalBytes": _whole(figures.memory_total),
            "temperatureCelsius": _rounded(figures.temperature, 1),
            "powerWatts": _rounded(figures.power, 1),
            "age": None if age is None else round(age, 1),
            "stale": endpoint.stale(now, self.interval),
            "source": endpoint.url,
        }


class Scraper:
    """Scrapes `urls` every `interval` seconds in a thread of its own (`start`/`stop`);
    `snapshot()` is the last round's figures, `generation` counts the rounds."""

    def __init__(
        self,
        urls: Sequence[str],
        interval: float = INTERVAL,
        timeout: float = TIMEOUT,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        for url in urls:
            check_url(url)
        self.urls = tuple(dict.fromkeys(urls))  # once each, in the order given
        self.interval, self.timeout, self.max_bytes = interval, timeout, max_bytes
        self._endpoints = tuple(Endpoint(url) for url in self.urls)
        self._running: dict[str, Future[Endpoint]] = {}  # url -> its try still under way
        self._generation = 0
        self._snapshot: FiguresSnapshot | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ui-device-metrics", daemon=True)
        self._pool = ThreadPoolExecutor(
            min(WORKERS, max(1, len(self.urls))), thread_name_prefix="ui-scrape"
        )
        # no proxy from the environment: a node's metrics port is reached directly
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    @property
    def generation(self) -> int:
        """Rounds done (a page showing figures is stale once this moves)."""
        with self._changed:
            return self._generation

    def start(self) -> Scraper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(self.timeout * 2 + 5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def snapshot(self) -> FiguresSnapshot:
        """The last round's figures; the same object until the next round."""
        with self._changed:
            if self._snapshot is None:
                devices: dict[DeviceKey, tuple[Figures, Endpoint]] = {}
                for endpoint in self._endpoints:
                    for key, figures in endpoint.devices.items():
                        devices.setdefault(key, (figures, endpoint))
                self._snapshot = FiguresSnapshot(
                    self._generation, self.interval, self._endpoints, devices
                )
            return self._snapshot

    def scrape(self) -> None:
        """One round now: every endpoint at once, the round bounded by the timeout (a try
        that outlives it, stuck in a name lookup say, is waited for by the next round, not
        tried again beside it)."""
        endpoints = self._endpoints
        tries: list[Future[Endpoint]] = []
        for endpoint in endpoints:
            running = self._running.get(endpoint.url)
            if running is None:
                running = self._running[endpoint.url] = self._pool.submit(self._scrape, endpoint)
            tries.append(running)
        wait(tries, timeout=2 * self.timeout + 1)
        done = []
        for endpoint, running in zip(endpoints, tries, strict=True):
            if running.done():
                del self._running[endpoint.url]
                done.append(running.result())
            else:
                late = f"no answer within {2 * self.timeout + 1:g} s"
                done.append(dataclasses.replace(endpoint, tried_at=time.time(), error=late))
        with self._changed:
            self._endpoints = tuple(done)
            self._generation += 1
            self._snapshot = None
            self._changed.notify_all()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            with contextlib.suppress(RuntimeError):  # the pool shut down: stopping
                self.scrape()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def _scrape(self, previous: Endpoint) -> Endpoint:
        """The endpoint after one try: new figures, or the previous ones and why not."""
        started, now = time.monotonic(), time.time()
        try:
            text = self._fetch(previous.url)
            devices = parse(text)
        except Exception as err:  # any failure is the endpoint's state, never the page's
            return Endpoint(
                previous.url,
                previous.devices,
                previous.scraped_at,
                now,
                why(err, self.timeout),
                time.monotonic() - started,
            )
        return Endpoint(previous.url, devices, now, now, None, time.monotonic() - started)

    def _fetch(self, url: str) -> str:
        """The answer's text: at most `max_bytes`, within about `timeout` seconds (each read
        waits at most that, and none starts past it)."""
        deadline = time.monotonic() + self.timeout
        request = urllib.request.Request(
            url, headers={"Accept": "text/plain;version=0.0.4", "User-Agent": "kubedra-ui"}
        )
        chunks: list[bytes] = []
        size = 0
        with self._opener.open(request, timeout=self.timeout) as answer:
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"took longer than {self.timeout:g} s")
                chunk = answer.read1(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > self.max_bytes:
                    raise ValueError(f"answer larger than {self.max_bytes:,} bytes")
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")


def check_url(url: str) -> str:
    """An http(s) URL with a host, else ValueError (a file: URL would read local files)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{url!r}: expected an http:// or https:// URL, e.g. http://NODE:PORT/metrics"
        )
    return url


def parse(text: str, max_devices: int = MAX_DEVICES) -> dict[DeviceKey, Figures]:
    """The devices' figures in a Prometheus text exposition: (driver, pool, device) ->
    Figures, from the series `SERIES` names (others ignored). ValueError if unreadable.
    Only those series' lines reach the parser (a driver's /metrics is mostly other series:
    its histograms' buckets), which makes a scrape several times cheaper."""
    wanted = "\n".join(line for line in text.splitlines() if line.startswith(_WANTED))
    found: dict[DeviceKey, dict[str, Any]] = {}
    for family in text_string_to_metric_families(wanted):
        for sample in family.samples:
            figure = SERIES.get(sample.name)
            labels = sample.labels
            key = (labels.get("driver", ""), labels.get("pool", ""), labels.get("device", ""))
            if figure is None or not all(key) or not math.isfinite(sample.value):
                continue
            device = found.get(key)
            if device is None:
                if len(found) >= max_devices:
                    continue
                device = found[key] = {"node": labels.get("node", "")}
            device.setdefault(figure, float(sample.value))  # one series per pod: the first
    return {key: Figures(**figures) for key, figures in found.items()}


def why(err: BaseException, timeout: float) -> str:
    """A failed scrape in a few words."""
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP {err.code} {err.reason}".strip()
    if isinstance(err, urllib.error.URLError):
        reason = err.reason
        if isinstance(reason, TimeoutError | socket.timeout):
            return f"no answer within {timeout:g} s"
        return str(getattr(reason, "strerror", None) or reason)
    if isinstance(err, TimeoutError | socket.timeout):
        return f"no answer within {timeout:g} s"
    if isinstance(err, ConnectionError | HTTPException):
        return f"connection failed: {err.__class__.__name__}"
    if isinstance(err, ValueError):
        return f"unreadable: {err}"[:200]
    return f"{err.__class__.__name__}: {err}"[:200]


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def fleet_with_figures(
    view: Mapping[str, Any], scraped: FiguresSnapshot, now: float
) -> dict[str, Any]:
    """The fleet view with each device's figures (`metrics`: None when no endpoint reports
    it) and the endpoints' state (`deviceMetrics`); the view itself is left as it is."""
    groups = []
    for group in view["groups"]:
        nodes = []
        for node in group["nodes"]:
            devices = [
                {**d, "metrics": scraped.device(d["driver"], d["pool"], d["name"], now)}
                for d in node["devices"]
            ]
            nodes.append({**node, "devices": devices})
        groups.append({**group, "nodes": nodes})
    return {**view, "groups": groups, "deviceMetrics": scraped.status(now)}


def claim_with_figures(
    view: Mapping[str, Any], scraped: FiguresSnapshot, now: float
) -> dict[str, Any]:
    """A claim's view with the figures of each device it was given, as the fleet's."""
    devices = [
        {**d, "metrics": scraped.device(d["driver"], d["pool"], d["name"], now)}
        for d in view["devices"]
    ]
    return {**view, "devices": devices, "deviceMetrics": scraped.status(now)}
