"""Shared test set-up: JAX on CPU with 8 forced devices, fixed once per test process, and one factory for
in-process clients of the app (``make_client(**create_app options)``; ``client`` is the default one).

Simulated device sets need no devices at all; the 8 real CPU devices back the ``local`` set and
tests that compare against arrays JAX actually places. Live servers and Chromium come from the
plugins in ``tests/plugins``. Markers: the tiers ``browser`` (Chromium against a real server or notebook),
``workers`` (worker processes or subprocesses) and ``live`` (a real server on a socket), each runnable alone
(``pytest -m live``); ``slow``, set here on every test of a tier (``pytest -m "not slow"`` is the fast inner
loop); ``tpu`` and ``gpu`` (the optional libtpu and GPU-compiler extras)."""

from __future__ import annotations

import collections
import os

os.environ["JAX_PLATFORMS"] = "cpu"
# libtpu (the tpu extra, for compile-only topologies) must never query a cloud metadata server.
os.environ["TPU_SKIP_MDS_QUERY"] = "1"

from collections.abc import Callable, Iterator
from typing import Any

import jax
import pytest
from fastapi.testclient import TestClient

from server.app import create_app
from tests.helpers import BASE

jax.config.update("jax_num_cpu_devices", 8)

pytest_plugins = [
    "tests.plugins.live",
    "tests.plugins.browser",
    "tests.plugins.postgres",
    "tests.plugins.newest_jax",
    "tests.plugins.cputime",
]

ClientFactory = Callable[..., TestClient]
TIERS = ("browser", "workers", "live")


# Seconds each of the longest modules took on the two-core machine (a fresh clone's `make test`, read with
# SHARDSCOPE_TEST_CPU: tests/plugins/cputime.py). pytest-xdist hands out whole modules (`--dist loadfile`); by
# default it starts with the modules of most tests, so these few-test, many-minute modules went last and one
# worker ran the decoder's compiles alone for three minutes at the end. They go first, longest first; a stale
# figure only changes the order, never what runs.
LONG_MODULES = {
    "tests/test_mcp_tasks.py": 317, "tests/test_load.py": 224, "tests/test_planning.py": 165,
    "tests/test_findings_fix.py": 148, "tests/test_plan_browser.py": 146, "tests/test_reliability.py": 136,
    "tests/test_why_browser.py": 91, "tests/test_memory_timeline.py": 85, "tests/test_findings.py": 84,
    "tests/test_views_browser.py": 72, "tests/test_panels_browser.py": 72, "tests/test_screens_browser.py": 68,
    "tests/test_notebook_browser.py": 66, "tests/test_grid_browser.py": 63, "tests/test_snapshots_browser.py": 62,
    "tests/test_kernels_pool.py": 62, "tests/test_notebook_marimo.py": 60, "tests/test_kernels_api.py": 59,
    "tests/test_api_schema.py": 58, "tests/test_browser.py": 55,
}  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    """xdist keeps the modules in the order collection leaves them (see LONG_MODULES)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test of a tier is also ``slow`` (the fast inner loop leaves the tiers out); a test marked ``slow``
    alone is refused, so each new slow test says which tier it belongs to. Two tests with one node id are refused
    too: pytest-xdist schedules by node id and would run one of them, silently (schemathesis's 22 once shared one:
    ``make test``'s two workers ran 1846 of 1867 tests and said nothing)."""
    shared = sorted(k for k, n in collections.Counter(item.nodeid for item in items).items() if n > 1)
    if shared:
        raise pytest.UsageError(f"tests sharing a node id (pytest-xdist runs one of each): {', '.join(shared[:5])}")
    untiered = [item.nodeid for item in items if item.get_closest_marker("slow") and not _tier(item)]
    if untiered:
        raise pytest.UsageError(f"marked slow without a tier ({', '.join(TIERS)}): {', '.join(untiered[:5])}")
    for item in items:
        if _tier(item):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: -LONG_MODULES.get(item.nodeid.split("::", 1)[0], 0))  # stable: the rest as collected


def _tier(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(tier) for tier in TIERS)


@pytest.fixture(scope="module")
def make_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientFactory]:
    """Makes in-process clients of fresh apps (each with its own store), closed when the module ends.

    Keyword arguments go to :func:`server.app.create_app` (``settings=``, ``token=``, ``kernel_pool=``,
    ``bind_host=``, ...); ``base_url`` to the client; ``db`` names the store (default: a new SQLite file).
    """
    opened: list[TestClient] = []

    def make(
        *, base_url: str = BASE, bind_host: str = "127.0.0.1", db: str | None = None, **options: Any
    ) -> TestClient:
        db = db or str(tmp_path_factory.mktemp("app") / "links.db")
        c = TestClient(create_app(db, bind_host, **options), base_url=base_url)
        c.__enter__()
        opened.append(c)
        return c

    yield make
    for c in reversed(opened):
        c.__exit__(None, None, None)


@pytest.fixture(scope="module")
def client(make_client: ClientFactory) -> TestClient:
    """A client of the app with default settings."""
    return make_client()
