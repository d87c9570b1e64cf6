"""What cost estimates add to a 6144-device TPU compile-only result (target: at most 20 ms).

In process, like the kernel lab's worker does for a ``tpu:`` set: libtpu's compile-only topology for a
v5p 16x16x24 slice (6144 chips, the largest single slice), a mesh over it, a few programs compiled (never
run) — a reduction, a reshard, a matmul with a sharded contracting dimension, a full gather — and the
one serialiser (``read_collectives``) run on each HLO without a cost context and with one, the estimates
alone (``estimate_collective`` over the program's collectives) and the roofline: what a result gains is
the last two. Also: building the context once per device set (cached after). Medians of 5, one run, this
2-core machine (shared with other jobs: the serialiser columns vary by a few ms between runs).
Run: ``.venv/bin/python bench/bench_cost.py`` (needs the tpu extra).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["TPU_SKIP_MDS_QUERY"] = "1"
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

import jax
import jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.cost.collectives import estimate_collective
from sharding_core.cost.context import context_for
from sharding_core.cost.roofline import roofline
from sharding_core.devices import parse_devices
from sharding_core.hlo.collectives import device_assignment, read_collectives

DEVICES = "tpu:v5p:16x16x24"
ROUNDS = 5


def programs(mesh: Any) -> list[tuple[str, Callable[..., Any], list[Any], Any]]:
    def sds(shape: tuple[int, ...], spec: P) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, spec))

    return [
        ("sum over z", lambda x: x.sum(axis=1), [sds((4096, 6144), P(("x", "y"), "z"))], None),
        (
            "reshard P(('x','y'), 'z') → P('z', ('x','y'))",
            lambda x: x,
            [sds((6144, 6144), P(("x", "y"), "z"))],
            NamedSharding(mesh, P("z", ("x", "y"))),
        ),
        (
            "x @ w, contracting dim on y",
            lambda x, w: x @ w,
            [sds((12288, 4096), P(("x", "z"), "y")), sds((4096, 8192), P("y", None))],
            None,
        ),
        (
            "reshard P('x','y') → P('y','x')",
            lambda x: x,
            [sds((4096, 4096), P("x", "y"))],
            NamedSharding(mesh, P("y", "x")),
        ),
        ("all-gather to replicated", lambda x: x, [sds((6144, 1024), P(("x", "y", "z")))], NamedSharding(mesh, P())),
    ]


def median_ms(f: Callable[[], Any]) -> float:
    times = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    devset = parse_devices(DEVICES)
    tpu = topologies.get_topology_desc(platform="tpu", topology_name="v5p:16x16x24", chips_per_host_bounds=(2, 2, 1))
    by_id = {d.id: d for d in tpu.devices}
    sim = jax.make_mesh((16, 16, 24), ("x", "y", "z"), devices=devset.devices)
    ids = [[[d.id for d in row] for row in plane] for plane in sim.devices]
    mesh = jax.sharding.Mesh(
        [[[by_id[i] for i in row] for row in plane] for plane in ids], ("x", "y", "z"), axis_types=(AxisType.Auto,) * 3
    )
    t = time.perf_counter()
    context_for.cache.clear()  # type: ignore[attr-defined]
    ctx = context_for(devset)
    context_ms = (time.perf_counter() - t) * 1e3
    print(f"cost context for {DEVICES} ({len(devset)} devices): {context_ms:.1f} ms once per device set (cached after)")
    print()
    print("| program (6144 devices, compile-only) | collectives | groups | compile | serialiser | "
          "with estimates | of which estimates | roofline | estimates add |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for name, f, args, out in programs(mesh):
        jitted = jax.jit(f, out_shardings=out) if out is not None else jax.jit(f)
        t = time.perf_counter()
        compiled = jitted.lower(*args).compile()
        compile_s = time.perf_counter() - t
        text = compiled.as_text()
        assignment = [int(d.id) for d in device_assignment(compiled)]
        plain = median_ms(lambda: read_collectives(text, [assignment], ids, ("x", "y", "z")))  # noqa: B023
        with_est = median_ms(lambda: read_collectives(text, [assignment], ids, ("x", "y", "z"), ctx))  # noqa: B023
        colls = read_collectives(text, [assignment], ids, ("x", "y", "z"), ctx)
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        roof_ms = median_ms(
            lambda: roofline(
                {"flops": (cost or {}).get("flops"), "bytes_accessed": (cost or {}).get("bytes accessed")},  # noqa: B023
                {"peak_bytes": None},
                colls,  # noqa: B023
                ctx,
                "bfloat16",
                "bench",
            )
        )
        groups = sum(len(c["groups"] or c["pairs"] or []) for c in colls)
        estimates = median_ms(lambda: [estimate_collective(c, ctx) for c in colls])  # noqa: B023
        added = estimates + roof_ms
        worst = max(worst, added)
        print(f"| {name} | {len(colls)} | {groups} | {compile_s:.1f} s | {plain:.1f} ms | {with_est:.1f} ms | "
              f"{estimates:.1f} ms | {roof_ms:.2f} ms | {added:.1f} ms |")  # fmt: skip
    print()
    print(f"estimates add at most {worst:.1f} ms per result (target: 20 ms)")


if __name__ == "__main__":
    main()
