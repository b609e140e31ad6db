"""A thin client of the Kubernetes REST API: TLS, credentials, rate limits, errors.

It moves bytes, nothing more: callers decode JSON straight into kubedra's models (faster
than any client's own models, see docs/decisions.md). What it owns is what every client
of the API server must get right:
- the API server's `Status` errors become kubedra's error types with the server's own
  message (and, for `Invalid`, every field path it names);
- one clear line for the failures a user can fix: the server unreachable, credentials
  rejected (401), a verb forbidden by RBAC (403), naming the server, verb and resource;
- client-side rate limiting (QPS and burst, a token bucket as client-go's), and retries
  of 429 / 5xx / `Retry-After` with backoff, for idempotent reads only;
- watch streams read line by line (one JSON event per line).
"""

from __future__ import annotations

import json
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import urllib3

from kubedra.cluster.kubeconfig import ClusterConfig
from kubedra.cluster.qps import DEFAULT_BURST as DEFAULT_BURST
from kubedra.cluster.qps import DEFAULT_QPS as DEFAULT_QPS
from kubedra.errors import (
    AlreadyExists,
    Conflict,
    KubedraError,
    NotFound,
    ObjectRef,
    Problem,
    StoreError,
    ValidationError,
)

JSON = "application/json"
DEFAULT_TIMEOUT = 30.0
USER_AGENT = "kubedra"


class ClusterError(KubedraError):
    """The API server cannot be used as asked: unreachable, credentials, permissions."""

    status: int | None = None  # the HTTP status of the answer, when there was one

    @property
    def indeterminate(self) -> bool:
        """Whether a write that failed so may have been done all the same (no answer, or
        the server failing): only reading the object back tells."""
        return self.status is None or self.status >= 500


class Unreachable(ClusterError):
    """No answer from the API server (connection refused, DNS, TLS, timeout)."""


class Unauthorized(ClusterError):
    """401: the server does not accept the credentials (expired or wrong token, cert)."""

    status = 401


class Forbidden(ClusterError):
    """403: authenticated, but RBAC (or admission) forbids this verb on this resource."""

    status = 403


class Expired(StoreError):
    """410 Gone: a watch or list asked for a resourceVersion the server compacted away."""


# Open connections kept for reuse (urllib3 makes them as needed; one the pool cannot keep is
# closed, and the next request pays a TCP and TLS handshake, the API server's CPU too). A
# scheduler uses this many at once: its binding threads (16), a watch per feed (about ten,
# each holding its connection) and its main loop; with room to spare.
POOL_SIZE = 64


@dataclass(frozen=True, slots=True)
class Request:
    """What a request was about, for error messages (kubectl's wording)."""

    verb: str  # get, list, watch, create, update, patch, delete
    resource: str  # e.g. resourceclaims.resource.k8s.io, pods/binding
    namespace: str = ""
    name: str = ""
    kind: str = ""

    def describe(self) -> str:
        where = f' in namespace "{self.namespace}"' if self.namespace else ""
        what = f' "{self.name}"' if self.name else ""
        return f"{self.verb} {self.resource}{what}{where}"


class RateLimiter:
    """A token bucket: `burst` requests at once, then `qps` per second (client-go's)."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, max(1, burst)
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def wait(self) -> None:
        if self.qps <= 0:
            return  # unlimited, as client-go with QPS < 0
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1
            delay = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if delay:
            time.sleep(delay)


class ApiClient:
    """Requests to one API server with one identity; thread-safe (one pool per client)."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 4,
    ) -> None:
        self.config = config
        self.server = config.server
        self.timeout = timeout
        self.retries = retries
        self.limiter = RateLimiter(qps, burst)
        # Told of every failed request (its status; None when the server did not answer),
        # e.g. to count API errors in metrics.
        self.on_error: Callable[[Request, int | None], None] | None = None
        parts = urlsplit(config.server)
        if parts.scheme not in ("https", "http"):
            raise ClusterError(f"API server {config.server}: the URL must start with https://")
        self._base_path = parts.path.rstrip("/")
        pool_args: dict[str, Any] = {"maxsize": POOL_SIZE, "block": False, "retries": False}
        if parts.scheme == "https":
            pool_args["ssl_context"] = _ssl_context(config)
            if config.tls_server_name:
                pool_args["server_hostname"] = config.tls_server_name
            if config.insecure:
                pool_args["assert_hostname"] = False
        self._pool = urllib3.connection_from_url(f"{parts.scheme}://{parts.netloc}", **pool_args)

    def close(self) -> None:
        self._pool.close()

    # --- requests -------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        about: Request,
        *,
        query: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> bytes:
        """One request; returns the body of a 2xx answer, raises a kubedra error otherwise."""
        url = self._url(path, query)
        attempt = 0
        while True:
            self.limiter.wait()
            response = self._send(method, url, about, body, content_type, timeout)
            status = response.status
            data = response.data
            if status < 300:
                return bytes(data)
            retry_after = _retry_after(response.headers.get("Retry-After"))
            retriable = status == 429 or (status >= 500 and method == "GET")
            if status == 401 and self.config.credentials.exec_plugin and attempt == 0:
                self.config.credentials.forget_token()  # a plugin token may have expired
                retriable = True
            if retriable and attempt < self.retries:
                time.sleep(retry_after if retry_after is not None else 0.2 * 2**attempt)
                attempt += 1
                continue
            raise self._error(status, data, about)

    def stream(
        self,
        path: str,
        about: Request,
        *,
        query: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Iterator[bytes]:
        """The events of a watch, one JSON object per line (undecoded), until the server
        ends the stream (its timeout), the read times out, or the caller stops iterating."""
        self.limiter.wait()
        response = self._send(
            "GET", self._url(path, query), about, None, JSON, timeout, stream=True
        )
        try:
            if response.status >= 300:
                raise self._error(response.status, response.read(), about)
            buffer = b""
            for chunk in response.stream(64 * 1024, decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield line
        except (urllib3.exceptions.ProtocolError, urllib3.exceptions.ReadTimeoutError):
            return  # the stream ended early: the caller resumes from its last resourceVersion
        finally:
            response.release_conn()

    # --- internals ------------------------------------------------------------------

    def _url(self, path: str, query: Mapping[str, str] | None) -> str:
        url = self._base_path + path
        return f"{url}?{urlencode(query)}" if query else url

    def _send(
        self,
        method: str,
        url: str,
        about: Request,
        body: bytes | None,
        content_type: str,
        timeout: float | None,
        stream: bool = False,
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": JSON, "User-Agent": USER_AGENT}
        if body is not None:
            headers["Content-Type"] = content_type
        authorization = self.config.credentials.authorization()
        if authorization:
            headers["Authorization"] = authorization
        limit = self.timeout if timeout is None else timeout
        try:
            return self._pool.urlopen(
                method,
                url,
                body=body,
                headers=headers,
                timeout=urllib3.Timeout(connect=min(10.0, limit), read=limit),
                preload_content=not stream,
                redirect=False,
            )
        except urllib3.exceptions.HTTPError as err:
            if self.on_error is not None:
                self.on_error(about, None)
            reason = getattr(err, "reason", None) or err
            raise Unreachable(
                f"cannot reach the API server {self.server} ({about.describe()}): {_short(reason)}"
            ) from None

    def _error(self, status: int, data: bytes, about: Request) -> KubedraError:
        body = _status_body(data)
        message = str(body.get("message") or data[:200].decode(errors="replace").strip())
        reason = str(body.get("reason") or "")
        if self.on_error is not None:
            self.on_error(about, status)
        if status == 401:
            who = f' (context "{self.config.context}")' if self.config.context else ""
            return Unauthorized(
                f"the API server {self.server} rejected the credentials{who} for "
                f"{about.describe()}: 401 Unauthorized (token expired or invalid?)"
            )
        if status == 403:
            return Forbidden(f"{self.server}: {about.describe()}: forbidden: {message}")
        if status == 404:
            return NotFound(message)
        if status == 409:
            return AlreadyExists(message) if reason == "AlreadyExists" else Conflict(message)
        if status == 410:
            return Expired(message)
        if status == 422 or reason == "Invalid":
            return _invalid(body, message, about)
        failed = ClusterError(f"{self.server}: {about.describe()}: {status} {reason}: {message}")
        failed.status = status
        return failed


def _invalid(body: Mapping[str, Any], message: str, about: Request) -> ValidationError:
    """An `Invalid` Status as kubedra problems: one per cause, with the server's path."""
    details = body.get("details") or {}
    kind = str(details.get("kind") or about.kind)
    ref = ObjectRef(kind, about.namespace, str(details.get("name") or about.name))
    causes = details.get("causes") or []
    problems = [
        Problem(str(c.get("message") or c.get("reason") or ""), str(c.get("field") or ""), ref)
        for c in causes
        if isinstance(c, dict)
    ]
    return ValidationError(problems or [Problem(message, "", ref)])


def _status_body(data: bytes) -> dict[str, Any]:
    try:
        body = json.loads(data)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _retry_after(value: str | None) -> float | None:
    try:
        return min(float(value), 10.0) if value else None
    except ValueError:
        return None


def _short(reason: object) -> str:
    text = str(reason)
    for known in ("Connection refused", "Name or service not known", "timed out"):
        if known in text:
            return known.lower()
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "TLS certificate not trusted (certificate-authority in the kubeconfig?)"
    return text.rsplit(": ", 1)[-1][:200]


def _ssl_context(config: ClusterConfig) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if config.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif config.ca_data:
        context.load_verify_locations(cadata=config.ca_data.decode())
    creds = config.credentials
    if creds.client_cert and creds.client_key:
        _load_client_cert(context, creds.client_cert, creds.client_key)
    return context


def _load_client_cert(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl loads certificates only from files: write them privately, load, remove."""
    with tempfile.TemporaryDirectory(prefix="kubedra-tls-") as folder:
        paths = []
        for name, data in (("tls.crt", cert), ("tls.key", key)):
            path = os.path.join(folder, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            paths.append(path)
        try:
            context.load_cert_chain(paths[0], paths[1])
        except ssl.SSLError as err:
            raise ClusterError(f"client certificate or key unusable: {err}") from None
