"""Distinct large requests cannot grow the server without bound.

Regression (issue 12): 400 distinct 16384-device layouts took a server from 193 to 2,135 MiB and it
never came back — JAX's own ``common_devices_indices_map`` cache kept 4096 entries of megabytes each.
Layouts now bypass that cache, and the domain's caches (layouts, device sets, meshes, topologies) are
bounded by bytes (setting ``max_cache_bytes``), so a real ``shardscope serve`` answering 1,000 distinct
16384-device layouts plateaus.
"""

from __future__ import annotations

import orjson
import pytest

from server.settings import Settings
from sharding_core.kernels.memory import resident_bytes
from tests.plugins.live import Server

pytestmark = pytest.mark.live  # a real server on a socket

MIB = 1024 * 1024
LAYOUTS = 1000


def body(i: int) -> dict[str, object]:
    return {
        "devices": "cpu:16384",
        "mesh": {"shape": [16384], "axis_names": ["x"], "order": "iota"},
        "spec": "P('x')",
        "shape": [16384 * i],
    }


def test_a_thousand_distinct_16384_device_layouts_plateau(server: Server) -> None:
    rss: dict[int, int] = {}
    start = resident_bytes(server.proc.pid)
    assert start is not None
    for i in range(1, LAYOUTS + 1):
        status, _, data = server.request(
            "POST", "/api/layout", orjson.dumps(body(i)), {"Content-Type": "application/json"}
        )
        assert status == 200 and len(orjson.loads(data)["shards"]) == 16384
        if i % 100 == 0:
            rss[i] = resident_bytes(server.proc.pid) or 0
    budget = Settings().max_cache_bytes
    # the second half adds (almost) nothing: the caches are full and evict by bytes
    assert rss[LAYOUTS] - rss[LAYOUTS // 2] < 48 * MIB, {k: v // MIB for k, v in rss.items()}
    # and the whole stays within the cache budget (plus JAX's and the allocator's own working set)
    assert max(rss.values()) - start < budget + 256 * MIB, {k: v // MIB for k, v in rss.items()}
    print(f"\nserver RSS (MiB): start {start // MIB} MiB, " + ", ".join(f"{k}: {v // MIB}" for k, v in rss.items()))
