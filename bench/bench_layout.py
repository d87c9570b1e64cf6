"""Layout computation + JSON vs ``jax.debug.visualize_sharding`` and treescope, in one run.

For each size, the same ``NamedSharding`` on simulated devices is turned into:
  * shardscope: ``Layout.from_named(...)`` + its JSON text (``layout.json_text``, what the server
    sends) — cold (a new array shape,
    so no layout cache hit; JAX's mesh cache is warm as in a running server) and warm (cached);
  * ``jax.debug.visualize_sharding(shape, sharding, use_color=False)`` printed to a buffer;
  * treescope's ``render_sharding_info`` (what ``treescope.render_array_sharding`` draws) rendered
    to HTML, fed the same sharding info its JAX adapter builds.
Prints a markdown table of medians and the ratios. Run: ``make bench`` or
``.venv/bin/python bench/bench_layout.py``.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from treescope import lowering, ndarray_adapters
from treescope._internal.api import arrayviz

from sharding_core.devices import parse_devices
from sharding_core.layout import Layout
from sharding_core.mesh import MeshSpec, build_mesh

CASES = [
    # (label, devices, mesh shape, mesh order)
    ("8", "cpu:8", (2, 4), "make_mesh"),
    ("256", "tpu:v5e:16x16", (16, 16), "make_mesh"),
    ("4096", "tpu:v4:16x16x16", (64, 64), "iota"),
    ("6144", "tpu:v5p:16x16x24", (96, 64), "iota"),
]


def _median_ms(fn: Callable[[int], object], repeat: int) -> float:
    times = []
    for i in range(repeat):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def measure(devices: str, mesh_shape: tuple[int, int], order: str) -> tuple[float, float, float, float, int]:
    ds = parse_devices(devices)
    mesh_spec = MeshSpec(mesh_shape, ("x", "y"), order=order)
    sharding = NamedSharding(build_mesh(ds, mesh_spec), P("x", "y"))
    base = (mesh_shape[0] * 8, mesh_shape[1] * 8)
    repeat = 30 if len(ds) <= 256 else 10

    def shape(i: int) -> tuple[int, int]:
        return (base[0] * (1000 + i), base[1])  # a shape never seen: no layout cache hit

    def ours_cold(i: int) -> None:
        Layout.from_named(ds, mesh_spec, P("x", "y"), shape(i)).json_text.encode()

    def ours_warm(i: int) -> None:
        Layout.from_named(ds, mesh_spec, P("x", "y"), base).json_text.encode()

    def visualize(i: int) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            jax.debug.visualize_sharding(shape(i), sharding, use_color=False)

    def treescope_html(i: int) -> None:
        info = ndarray_adapters.ShardingInfo(
            shard_shape=sharding.shard_shape(shape(i)),
            device_index_to_shard_slices={d.id: s for d, s in sharding.devices_indices_map(shape(i)).items()},
            device_type=ds.platform.upper(),
            fully_replicated=sharding.is_fully_replicated,
        )
        axes = [ndarray_adapters.PositionalAxisInfo(k, n) for k, n in enumerate(shape(i))]
        fig = arrayviz.render_sharding_info(axes, info)
        lowering.render_to_html_as_root(fig.treescope_part, compressed=True)

    ours_cold(9999)
    cold = _median_ms(ours_cold, repeat)
    warm = _median_ms(ours_warm, repeat)
    vis = _median_ms(visualize, max(3, repeat // 3))
    tsc = _median_ms(treescope_html, max(3, repeat // 3))
    size = len(Layout.from_named(ds, mesh_spec, P("x", "y"), base).json_text.encode())
    return cold, warm, vis, tsc, size


def main() -> None:
    rows = [(label, devices, *measure(devices, mesh_shape, order)) for label, devices, mesh_shape, order in CASES]
    print(f"jax {jax.__version__}, {os.cpu_count()} CPUs; medians in ms")
    print()
    print(
        "| devices | set | shardscope cold | shardscope cached | visualize_sharding | treescope | "
        "vs visualize | vs treescope | JSON size |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, devices, cold, warm, vis, tsc, size in rows:
        print(
            f"| {label} | `{devices}` | {cold:.2f} | {warm:.3f} | {vis:.1f} | {tsc:.1f} | "
            f"{vis / cold:.0f}x | {tsc / cold:.0f}x | {size / 1024:.0f} KiB |"
        )


if __name__ == "__main__":
    main()
