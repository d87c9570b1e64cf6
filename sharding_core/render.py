"""Terminal rendering of a :class:`~sharding_core.layout.Layout` (reads the layout data only).

For 1-D and 2-D arrays the output is character for character what
``jax.debug.visualize_sharding(shape, sharding, use_color=False)`` prints (the same ``rich`` table,
built from our layout instead of from JAX; ``tests/test_render.py`` checks it against JAX). Higher
ranks print one such grid per block of the other split dimensions, each titled with its index
ranges, followed by a summary JAX's table leaves out.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

from sharding_core.errors import BAD_SHAPE, ShardingError
from sharding_core.layout import Bounds, Layout
from sharding_core.units import fmt_bytes


def compact_ids(ids: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 8, 9, 10, 11]`` → ``"0-3,8-11"`` (runs of three or more become ranges)."""
    out: list[str] = []
    run: list[int] = []

    def flush() -> None:
        if len(run) >= 3:
            out.append(f"{run[0]}-{run[-1]}")
        else:
            out.extend(map(str, run))

    for i in sorted(ids):
        if run and i == run[-1] + 1:
            run.append(i)
        else:
            flush()
            run = [i]
    flush()
    return ",".join(out)


def _chunk(start: int, stop: int, size: int) -> int:
    # jax/_src/debugging.py: _slice_to_chunk_idx; a full dimension is chunk 0.
    if (start, stop) == (0, size):
        return 0
    return start // (stop - start)


def _table_text(
    shape: Sequence[int],
    cells: dict[tuple[int, int], tuple[Bounds, list[int]]],
    platform: str,
    *,
    compact: bool,
    scale: float = 1.0,
    min_width: int = 9,
    max_width: int = 80,
) -> str:
    """One grid, built exactly as ``jax.debug.visualize_sharding`` builds its rich table."""
    import rich.align
    import rich.box
    import rich.console
    import rich.padding
    import rich.table

    base_height = int(10 * scale)
    aspect_ratio = (shape[1] if len(shape) == 2 else 1) / shape[0]
    base_width = int(base_height * aspect_ratio)
    height_to_width_ratio = 2.5
    num_rows = max(i for i, _ in cells) + 1
    num_cols = max(j for _, j in cells) + 1
    table = rich.table.Table(
        show_header=False, show_lines=True, padding=0, highlight=True, pad_edge=False, box=rich.box.SQUARE
    )
    for i in range(num_rows):
        row = []
        for j in range(num_cols):
            bounds, ids = cells[i, j]
            label = compact_ids(ids) if compact else ",".join(str(s) for s in sorted(ids))
            entry = f"{platform.upper()} {label}"
            if len(shape) == 2:
                width_frac = (bounds[1][1] - bounds[1][0]) / shape[1]
                height = int((bounds[0][1] - bounds[0][0]) / shape[0] * base_height)
            else:
                width_frac = (bounds[0][1] - bounds[0][0]) / shape[0]
                height = 1
            width = int(width_frac * base_width * height_to_width_ratio)
            width = min(max(width, min_width), max_width)
            left, rem = divmod(width - len(entry) - 2, 2)
            right = left + rem
            top, rem = divmod(height - 2, 2)
            bottom = top + rem
            pad = (max(top, 0), max(right, 0), max(bottom, 0), max(left, 0))
            row.append(rich.padding.Padding(rich.align.Align(entry, "center", vertical="middle"), pad))
        table.add_row(*row)
    buf = io.StringIO()
    console = rich.console.Console(width=max_width, file=buf, color_system=None, force_terminal=False)
    console.print(table, end="\n\n")
    return buf.getvalue()


def render_text(
    layout: Layout,
    *,
    dims: Sequence[int] | None = None,
    compact: bool = False,
    summary: bool = False,
    max_width: int = 80,
) -> str:
    """Renders ``layout`` as text; ``dims`` picks the one or two array dimensions of each grid."""
    shape = layout.shape
    rank = len(shape)
    shards: list[Bounds]
    if rank == 0:
        shape_v: tuple[int, ...] = (1,)
        shards = [((0, 1),) for _ in layout.shards]
    else:
        shape_v = shape
        shards = [s.index for s in layout.shards]
    rank_v = len(shape_v)
    if dims is None:
        dims = tuple(range(rank_v)) if rank_v <= 2 else (rank_v - 2, rank_v - 1)
    dims = tuple(dims)
    if not 1 <= len(dims) <= 2 or len(set(dims)) != len(dims) or any(not 0 <= d < rank_v for d in dims):
        raise ShardingError(
            BAD_SHAPE, f"grid dimensions must be one or two distinct dimensions of a rank-{rank_v} array, got {dims}"
        )
    others = [d for d in range(rank_v) if d not in dims]
    # Group shards into blocks (one per combination of the other dimensions' ranges), then cells.
    blocks: dict[tuple[tuple[int, int], ...], dict[tuple[int, int], tuple[Bounds, list[int]]]] = {}
    grid_shape = tuple(shape_v[d] for d in dims)
    for shard, idx in zip(layout.shards, shards, strict=True):
        key = tuple(idx[d] for d in others)
        sub: Bounds = tuple(idx[d] for d in dims)
        chunk = tuple(_chunk(b[0], b[1], n) for b, n in zip(sub, grid_shape, strict=True))
        cell = (chunk[0], chunk[1]) if len(dims) == 2 else (0, chunk[0])
        cells = blocks.setdefault(key, {})
        cells.setdefault(cell, (sub, []))[1].append(shard.device_id)
    parts = []
    for key in sorted(blocks):
        if others:
            title = ", ".join(f"dim {d} [{b[0]}:{b[1]}]" for d, b in zip(others, key, strict=True))
            parts.append(title + "\n")
        parts.append(_table_text(grid_shape, blocks[key], layout.platform, compact=compact, max_width=max_width))
    if summary:
        parts.append(summary_text(layout))
    return "".join(parts)


def summary_text(layout: Layout) -> str:
    lines = [
        f"spec {layout.spec} on mesh "
        + " x ".join(f"{n}({s})" for n, s in zip(layout.axis_names, layout.mesh_shape, strict=True))
        + f" over {layout.devices_key}",
        f"array {list(layout.shape)} {layout.dtype}; shard shape {list(layout.shard_shape)}",
    ]
    if layout.typed is not None and "Explicit" in layout.axis_types:
        # Explicit axes: the sharding is part of the array's type, as jax.typeof prints it
        lines.insert(1, f"type {layout.typed} (jax.typeof: Explicit axes {', '.join(explicit_axes(layout))})")
    lines += [d.describe() for d in layout.dim_splits]
    rep = f"replication factor {layout.replication_factor}"
    if layout.replicated_axes:
        rep += " (replicated over " + ", ".join(layout.replicated_axes) + ")"
    if layout.unreduced_axes:
        rep += "; unreduced (partial sums) over " + ", ".join(layout.unreduced_axes)
    lines.append(rep)
    lines.append(
        f"bytes per device {fmt_bytes(layout.bytes_per_device)}; total {fmt_bytes(layout.total_bytes)} "
        f"across {len(layout.shards)} devices vs {fmt_bytes(layout.logical_bytes)} logical"
    )
    return "\n".join(lines) + "\n"


def explicit_axes(layout: Layout) -> list[str]:
    """The mesh axes of ``layout`` that are Explicit (their shardings are in the array's type)."""
    return [n for n, t in zip(layout.axis_names, layout.axis_types, strict=True) if t == "Explicit"]
