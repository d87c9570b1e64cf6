"""The byte-bounded caches (sharding_core/cache.py) at their budget and one past, and the shared budget."""

from __future__ import annotations

import pytest

from sharding_core import cache
from sharding_core.cache import BoundedCache, bounded_cache


def test_held_at_the_budget_and_one_past() -> None:
    c: BoundedCache[bytes] = BoundedCache(100, len)
    c.put("a", b"a" * 60)
    c.put("b", b"b" * 40)
    assert c.bytes == 100 and len(c) == 2  # at the budget: both kept
    assert c.get("a") == b"a" * 60  # now the most recently used
    c.put("c", b"c")  # one byte past: the least recently used ("b") goes
    assert c.get("b") is None and c.get("a") is not None and c.get("c") == b"c" and c.bytes == 61


def test_a_value_larger_than_the_budget_is_returned_not_kept() -> None:
    c: BoundedCache[bytes] = BoundedCache(10, len)
    assert c.put("big", b"x" * 11) == b"x" * 11
    assert len(c) == 0 and c.bytes == 0
    assert c.put("fits", b"x" * 10) and c.bytes == 10


def test_resize_evicts_down_to_the_new_budget() -> None:
    c: BoundedCache[bytes] = BoundedCache(100, len)
    for k in "abcd":
        c.put(k, k.encode() * 25)
    c.resize(50)
    assert c.bytes == 50 and [k for k in "abcd" if c.get(k) is not None] == ["c", "d"]


def test_the_decorator_keeps_neither_exceptions_nor_none() -> None:
    calls: list[int] = []

    @bounded_cache("topologies", lambda v: 8)
    def f(x: int) -> int | None:
        calls.append(x)
        if x < 0:
            raise ValueError(x)
        return None if x == 0 else x

    assert f(1) == 1 and f(1) == 1 and calls == [1]  # kept
    assert f(0) is None and f(0) is None and calls == [1, 0, 0]  # None: recomputed, takes no budget
    for _ in range(2):
        with pytest.raises(ValueError):
            f(-1)
    assert calls == [1, 0, 0, -1, -1]
    assert f.cache.bytes == 8  # type: ignore[attr-defined]


def test_configure_shares_the_total_between_the_registered_caches() -> None:
    was = cache.MAX_CACHE_BYTES
    try:
        cache.configure(1000)
        usage = cache.usage()
        assert usage["layouts"]["max_bytes"] == pytest.approx(1000 * cache.SHARES["layouts"], abs=len(usage))
        assert sum(u["max_bytes"] for u in usage.values()) <= 1000
    finally:
        cache.configure(was)
