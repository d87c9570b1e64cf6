"""A least-recently-used cache bounded by bytes, not entries: the domain's caches of layouts, meshes and
device sets hold values whose size grows with the device count (one 16384-device layout is megabytes),
so a count bound alone would let a few thousand distinct large requests hold gigabytes."""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, ParamSpec, TypeVar

V = TypeVar("V")
P = ParamSpec("P")


class BoundedCache(Generic[V]):
    """Values by key, least recently used out first once ``max_bytes`` (by ``size_of``) is exceeded.

    Thread-safe. A value larger than the whole budget is returned but never kept. ``max_bytes`` can be
    changed at any time (:meth:`resize`); ``clear`` empties it.
    """

    def __init__(self, max_bytes: int, size_of: Callable[[V], int]) -> None:
        self.max_bytes = max_bytes
        self.size_of = size_of
        self._items: collections.OrderedDict[Hashable, tuple[V, int]] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: Hashable, value: V) -> V:
        size = max(1, self.size_of(value))
        with self._lock:
            if key in self._items:
                return self._items[key][0]
            if size <= self.max_bytes:
                self._items[key] = (value, size)
                self._bytes += size
                self._evict()
        return value

    def resize(self, max_bytes: int) -> None:
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._items:
            _, (_, size) = self._items.popitem(last=False)
            self._bytes -= size

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)


def bounded_cache(name: str, size_of: Callable[[Any], int]) -> Callable[[Callable[P, V]], Callable[P, V]]:
    """Decorates a function of hashable arguments with a :class:`BoundedCache` (``.cache``) that takes
    ``name``'s share of the domain's cache budget.

    Exceptions and None results are not cached (a refused request is refused again, cheaply).
    """

    def wrap(f: Callable[P, V]) -> Callable[P, V]:
        cache: BoundedCache[V] = BoundedCache(0, size_of)
        register(name, cache)

        @functools.wraps(f)
        def cached(*args: P.args, **kwargs: P.kwargs) -> V:
            key = (args, tuple(sorted(kwargs.items())))
            hit = cache.get(key)
            if hit is not None:
                return hit
            value = f(*args, **kwargs)
            # None (nothing to keep, e.g. no torus for a CPU set) would take budget and never hit: not kept
            return value if value is None else cache.put(key, value)

        cached.cache = cache  # type: ignore[attr-defined]
        return cached

    return wrap


MAX_CACHE_BYTES = 256 * 1024 * 1024
"""What the domain's caches may hold in all (setting max_cache_bytes), shared out by :data:`SHARES`."""

SHARES: dict[str, float] = {"layouts": 0.5, "device_sets": 0.2, "meshes": 0.15, "topologies": 0.15}
"""Each registered cache's share of the budget."""

_REGISTRY: dict[str, list[BoundedCache[Any]]] = {}


def register(name: str, cache: BoundedCache[Any]) -> BoundedCache[Any]:
    """Puts a cache under the shared budget: the caches of one ``name`` split its share of
    :data:`MAX_CACHE_BYTES` (or of :func:`configure`'s total) evenly."""
    _REGISTRY.setdefault(name, []).append(cache)
    _apply(name)
    return cache


def _apply(name: str) -> None:
    caches = _REGISTRY[name]
    for c in caches:
        c.resize(int(MAX_CACHE_BYTES * SHARES[name]) // len(caches))


def configure(total_bytes: int) -> None:
    """Resizes every registered cache to its share of ``total_bytes`` (the server's max_cache_bytes)."""
    global MAX_CACHE_BYTES
    MAX_CACHE_BYTES = total_bytes
    for name in _REGISTRY:
        _apply(name)


def usage() -> dict[str, dict[str, int]]:
    """Bytes, entries and budget held under each name."""
    return {
        name: {
            "bytes": sum(c.bytes for c in caches),
            "entries": sum(len(c) for c in caches),
            "max_bytes": sum(c.max_bytes for c in caches),
        }
        for name, caches in _REGISTRY.items()
    }
