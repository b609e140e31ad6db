"""The JSON views' answers at one cluster version, bounded in bytes and in entries.

A view is computed once per cluster version and then served from memory; the key is the
view, its path arguments and the normalised parameters it reads, so a junk parameter
(`?x=1`, `?_=timestamp`) shares the entry of the plain URL. Distinct legitimate values
(`?class=` every name, `/api/claims/NS/NAME` every claim) still make distinct entries: the
least recently used go first once `max_bytes` or `max_entries` is reached, so any number of
requests holds at most that much (unbounded, 20,000 distinct query strings took a 6-node
dashboard from 47 MB to 2.5 GB).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Protocol, TypeVar

MAX_BYTES = 64 * 1024 * 1024  # a 1,000-node fleet is 2.7 MB: about 20 such views
MAX_ENTRIES = 256


class Sized(Protocol):
    @property
    def body(self) -> bytes: ...


R = TypeVar("R", bound=Sized)


class ResponseCache(Generic[R]):
    """Least-recently-used answers of one version; a newer version empties it (callers
    serialise access: `App` holds its lock)."""

    def __init__(self, max_bytes: int = MAX_BYTES, max_entries: int = MAX_ENTRIES) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.bytes = 0
        self._version = -1
        self._entries: OrderedDict[tuple[str, ...], R] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, version: int, key: tuple[str, ...]) -> R | None:
        if not self._at(version):
            return None
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, version: int, key: tuple[str, ...], response: R) -> None:
        """Keep `response` unless it is of an older version or alone over the byte budget;
        evict the least recently used to make room."""
        size = len(response.body)
        if not self._at(version) or size > self.max_bytes or key in self._entries:
            return
        self._entries[key] = response
        self.bytes += size
        while self.bytes > self.max_bytes or len(self._entries) > self.max_entries:
            _, evicted = self._entries.popitem(last=False)
            self.bytes -= len(evicted.body)

    def _at(self, version: int) -> bool:
        """Whether `version` is the cache's; a newer one empties it first, an older one
        (an answer computed before the last change) is not."""
        if version > self._version:
            self._entries.clear()
            self.bytes, self._version = 0, version
        return version == self._version
