"""Shared test set-up: JAX on CPU with 8 forced devices, fixed once per test process, and one factory for
in-process clients of the app (``make_client(**create_app options)``; ``client`` is the default one).

Simulated device sets need no devices at all; the 8 real CPU devices back the ``local`` set and
tests that compare against arrays JAX actually places. Live servers and Chromium come from the
plugins in ``tests/plugins``. Markers: ``slow`` (a real server, worker processes or a browser:
``pytest -m "not slow"`` is the fast inner loop) and ``tpu`` (the optional libtpu extra).
"""

from __future__ import annotations

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

pytest_plugins = ["tests.plugins.live", "tests.plugins.browser", "tests.plugins.postgres"]

ClientFactory = Callable[..., TestClient]


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
