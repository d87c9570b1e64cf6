"""The cost model's accuracy against published measurements, the refit of a GPU profile, and what estimates
add to a 6144-device TPU compile-only result.

1. **Accuracy** (no libtpu needed): every row of ``sharding_core/cost/measurements.py`` (published
   measurements, each with its source and split) with its measured time, the **bound** (spec sheet) and the
   **expected** time (fitted on the training split), its error and its error left out by source; per fabric the
   in-sample, held-out and leave-one-source-out |error| and the share predicted above measured; the replicated
   rows counted once; the profiles and how long a refit takes. Goals (issue 31): held-out median ≤ 15 %, each
   fabric between 30 % and 70 % of its rows predicted above measured.
2. **Refit**: ``fit_nccl_tests`` on an ``all_reduce_perf`` output of 32 sizes (8 B – 16 GiB), median of 5
   (goal: under a second).
3. **Speed** (needs the tpu extra): libtpu's compile-only topology for a v5p 16x16x24 slice (6144 chips), a few
   programs compiled (never run), the reader (facts: collectives with their loop facts) and what a result
   gains when it is read: the estimates and the roofline (target: at most 20 ms).

Medians of 5, one run, this 2-core machine (shared with other jobs). Run: ``.venv/bin/python bench/bench_cost.py``.
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

from sharding_core.cost import accuracy
from sharding_core.cost import efficiency as ef
from sharding_core.cost.annotate import with_estimates
from sharding_core.cost.context import context_for
from sharding_core.cost.roofline import roofline
from sharding_core.devices import parse_devices
from sharding_core.hlo.collectives import device_assignment, read_collectives
from sharding_core.hlo.program import program_facts
from sharding_core.program.targets import libtpu_available

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


def scoreboard() -> None:
    t = time.perf_counter()
    result = accuracy.evaluate()
    took = time.perf_counter() - t
    refit_ms = median_ms(accuracy.refit)
    print(
        f"1. published measurements ({len(result['rows'])} rows from {len(result['sources'])} sources; evaluated "
        f"with leave-one-source-out refits in {took:.1f} s; one refit of the training split: {refit_ms:.0f} ms)"
    )
    print()
    print(accuracy.markdown_table(result))
    print("\ncounted once (the Ironwood guide's 2x2x2 rows, the same collective as its 2x2x1 rows):")
    for r in result["replicates"]:
        print(f"  {r['name']}: measured {r['measured_seconds'] * 1e6:.1f} us, expected {rel_us(r)}")
    print("\nprofiles (fitted on the training split):\n")
    print(accuracy.profiles_table())


def rel_us(r: dict[str, Any]) -> str:
    return f"{r['expected_seconds'] * 1e6:.1f} us ({ef.rel(r['expected_error'])})"


def refit() -> None:
    from tests.test_cost_measured import nccl_output

    sizes = [8 << k for k in range(32)]  # 8 B ... 16 GiB, as all_reduce_perf -b 8 -e 16G -f 2 prints them
    text = nccl_output([(size, 20.0 + size / 3.0e5) for size in sizes])
    ms = median_ms(lambda: ef.fit_nccl_tests(text))
    print(f"\n2. refit of a GPU profile from all_reduce_perf output ({len(sizes)} rows): {ms:.0f} ms (goal: < 1 s)")


def speed() -> None:
    if not libtpu_available():
        print("\n3. speed: skipped (the tpu extra is not installed)")
        return
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
    print(f"\n3. cost context for {DEVICES} ({len(devset)} devices): {context_ms:.1f} ms once per device set (cached)")
    print()
    print("| program (6144 devices, compile-only) | collectives | groups | compile | reader (facts) | "
          "estimates | roofline | estimates add |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for name, f, args, out in programs(mesh):
        jitted = jax.jit(f, out_shardings=out) if out is not None else jax.jit(f)
        t = time.perf_counter()
        compiled = jitted.lower(*args).compile()
        compile_s = time.perf_counter() - t
        text = compiled.as_text()
        assignment = [int(d.id) for d in device_assignment(compiled)]
        reader = median_ms(lambda: read_collectives(text, [assignment], ids, ("x", "y", "z")))  # noqa: B023
        colls = read_collectives(text, [assignment], ids, ("x", "y", "z"))
        estimates = median_ms(lambda: with_estimates(colls, ctx))  # noqa: B023
        estimated = with_estimates(colls, ctx)
        facts = program_facts(text)
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        figures = {"flops_xla": (cost or {}).get("flops"), "bytes_accessed": (cost or {}).get("bytes accessed"),
                   "flops": facts.corrected_flops((cost or {}).get("flops")),
                   "matmul_traffic_bytes": facts.matmul_traffic()}  # fmt: skip
        roof_ms = median_ms(lambda: roofline(figures, {}, estimated, ctx, "bfloat16", "bench"))  # noqa: B023
        groups = sum(len(c["groups"] or c["pairs"] or []) for c in colls)
        added = estimates + roof_ms
        worst = max(worst, added)
        print(f"| {name} | {len(colls)} | {groups} | {compile_s:.1f} s | {reader:.1f} ms | {estimates:.1f} ms | "
              f"{roof_ms:.2f} ms | {added:.1f} ms |")  # fmt: skip
    print()
    print(f"estimates add at most {worst:.1f} ms per result (target: 20 ms)")


def main() -> None:
    scoreboard()
    refit()
    speed()


if __name__ == "__main__":
    main()
