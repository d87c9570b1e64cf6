"""Distinct large requests cannot grow the server without bound.

Regression (issue 12): 400 distinct 16384-device layouts took a server from 193 to 2,135 MiB (about 5 MiB a
layout) and it never came back — JAX's own ``common_devices_indices_map`` cache kept 4096 entries of megabytes each.
Layouts now bypass that cache, and the domain's caches (layouts, device sets, meshes, topologies) are
bounded by bytes (setting ``max_cache_bytes``), so a real ``shardscope serve`` answering 200 distinct 16384-device
layouts plateaus: with a 64 MiB budget (a quarter of the default, so the caches are full by the 50th; 1,000 layouts
at the default took two minutes of the suite) the second hundred adds almost nothing, where the regression would
have added about 500 MiB.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from sharding_core.kernels.memory import resident_bytes
from tests.plugins.live import Server, start, stop

pytestmark = pytest.mark.live  # a real server on a socket

MIB = 1024 * 1024
LAYOUTS = 200
BUDGET = 64 * MIB


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp: Path = tmp_path_factory.mktemp("bounded")
    srv = start(tmp / "links.db", tmp / "server.log", {"max_cache_bytes": BUDGET})
    try:
        yield srv
    finally:
        stop(srv)


def body(i: int) -> dict[str, object]:
    return {
        "devices": "cpu:16384",
        "mesh": {"shape": [16384], "axis_names": ["x"], "order": "iota"},
        "spec": "P('x')",
        "shape": [16384 * i],
    }


def test_distinct_16384_device_layouts_plateau(server: Server) -> None:
    rss: dict[int, int] = {}
    start = resident_bytes(server.proc.pid)
    assert start is not None
    for i in range(1, LAYOUTS + 1):
        status, _, data = server.request(
            "POST", "/api/layout", orjson.dumps(body(i)), {"Content-Type": "application/json"}
        )
        assert status == 200 and len(orjson.loads(data)["shards"]) == 16384
        if i % 50 == 0:
            rss[i] = resident_bytes(server.proc.pid) or 0
    budget = BUDGET
    # the second half adds (almost) nothing: the caches are full and evict by bytes
    assert rss[LAYOUTS] - rss[LAYOUTS // 2] < 48 * MIB, {k: v // MIB for k, v in rss.items()}
    # and the whole stays within the cache budget (plus JAX's and the allocator's own working set)
    assert max(rss.values()) - start < budget + 256 * MIB, {k: v // MIB for k, v in rss.items()}
    print(f"\nserver RSS (MiB): start {start // MIB} MiB, " + ", ".join(f"{k}: {v // MIB}" for k, v in rss.items()))
