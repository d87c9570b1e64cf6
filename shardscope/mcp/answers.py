"""The answers the MCP tools and the CLI's ``--json`` share: one function per question, one JSON shape each.

The quick ones (no compile) are computed here, in the caller's process: device sets, topology, a layout,
one collective's estimate. Plans (:func:`plan_summary`, :func:`why_answer`, :func:`compare_answer`) are read
from the snapshot a worker compiled (:mod:`shardscope.mcp.worker`). Every answer says where each figure comes
from (``evidence``: computed by JAX, compiled by XLA for a target, estimated by the cost model with its
held-out error, measured by ``shardscope calibrate``, or a published figure) and carries the dashboard's
address of the same thing (``link``), or says how to open it (``link_note``).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.errors import ShardingError

MAX_GRID_DEVICES = 64
"""Up to this many devices a layout's text is the grid ``shardscope preview`` draws; past it, the summary (the grid
of a 256-device set is thousands of characters no model reads, and drawing it takes most of a second): the
``link`` draws it."""
MAX_LISTED_COLLECTIVES = 40
"""Collectives a plan answer lists (the costliest per step first); the snapshot keeps them all."""

JAX = "jax"
XLA = "xla"
COST_MODEL = "cost_model"
MEASURED = "measured"
PUBLISHED = "published"
SOURCES = (JAX, XLA, COST_MODEL, MEASURED, PUBLISHED)
"""Where a figure comes from: computed by JAX, compiled by XLA, estimated by the cost model, measured by
``shardscope calibrate``, or a published figure (the hardware table's sources)."""


def evidence(figure: str, source: str, how: str, **extra: Any) -> dict[str, Any]:
    assert source in SOURCES
    return {"figure": figure, "source": source, "how": how, **extra}


def jax_version() -> str:
    import jax

    return str(jax.__version__)


# ---- device sets and topology ---------------------------------------------------------------------------


def device_sets(devices: str | None = None, slices: int = 1, *, max_devices: int | None = None) -> dict[str, Any]:
    """Without ``devices``: every device set the tools take (``GET /api/platforms``'s catalog). With it: that
    set — its devices, hosts and slices, and its hardware's published figures."""
    from sharding_core.devices import platforms_catalog

    out: dict[str, Any] = {"catalog": platforms_catalog(), "set": None}
    out["forms"] = {
        "cpu:N": "N CPU devices, ids 0..N-1",
        "gpu:KIND:HxG": "H hosts of G GPUs each (e.g. gpu:h100:2x8)",
        "tpu:GEN:TOPO": "a TPU slice (e.g. tpu:v5p:4x4x4); slices= for multi-slice",
    }
    if devices is None:
        return out
    devset = checked_devices(devices, slices, max_devices)
    first = devset.devices[0]
    hardware = _hardware(str(first.platform), str(first.device_kind))
    out["set"] = {
        "devices": devset.key,
        "slices": slices,
        "num_devices": len(devset),
        "platform": str(first.platform),
        "device_kind": str(first.device_kind),
        "hosts": devset.num_hosts,
        "hardware": hardware,
    }
    out["evidence"] = [
        evidence(
            "devices (ids, coordinates, hosts)",
            JAX,
            "the device set as JAX reports it for this slice (libtpu's compile-only topology is the reference: "
            "tests/test_tpu_reference.py)",
        ),
        evidence("hardware figures", PUBLISHED, "sharding_core/hardware.py: each figure with its public source"),
    ]
    return out


def _hardware(platform: str, kind: str) -> dict[str, Any] | None:
    from sharding_core.hardware import figures_for_kind, table_json

    hw = figures_for_kind(platform, kind)
    if hw is None:
        return None
    rows = table_json()
    for row in [*rows["tpu"], *rows["gpu"]]:
        if row["name"] == hw.name:
            return dict(row)
    return None


def checked_devices(devices: str, slices: int, max_devices: int | None) -> Any:
    from sharding_core.devices import parse_devices

    devset = parse_devices(devices, slices=slices)
    if max_devices is not None and len(devset) > max_devices:
        raise ShardingError(
            "too_large",
            f"{devset.key} has {len(devset)} devices; this server allows at most {max_devices} (setting max_devices)",
            hint="pick a smaller device set",
        )
    return devset


def topology(
    devices: str,
    slices: int = 1,
    mesh: Any = None,
    *,
    url: str,
    max_devices: int | None = None,
) -> dict[str, Any]:
    """The interconnect (``GET /api/topology``'s JSON) and, with a mesh, each mesh axis laid on it (``POST
    /api/topology/mesh``'s JSON: per axis its groups in ring order, hops, rings, hosts and slices crossed)."""
    from sharding_core.mesh import build_mesh
    from sharding_core.topology import compare_orderings, mesh_on_topology
    from sharding_core.topology import topology as physical

    devset = checked_devices(devices, slices, max_devices)
    out: dict[str, Any] = {"topology": physical(devset), "mesh": None}
    lines = [_topology_line(out["topology"])]
    if mesh is not None:
        spec = mesh_spec(mesh)
        laid = mesh_on_topology(devset, build_mesh(devset, spec))
        laid["orderings"] = compare_orderings(devset, spec.shape, spec.axis_names)
        out["mesh"] = laid
        lines += [_axis_line(a) for a in laid["axes"]]
    out["text"] = "\n".join(lines)
    state = {"devices": devices, **({"slices": str(slices)} if slices > 1 else {})}
    if mesh is not None:
        state.update(_mesh_state(mesh))
    out["link"] = f"{url}/topology.html?{urllib.parse.urlencode(state)}"
    out["evidence"] = [
        evidence(
            "devices, coordinates, links, hosts",
            JAX,
            "the device set's devices as JAX reports them; links from the generation's torus (wraparound rule: "
            "sharding_core/hardware.py)",
        ),
    ]
    if mesh is not None:
        out["evidence"].append(
            evidence("mesh axes' groups", JAX, "jax.make_mesh (or the order asked) over these devices; hops counted")
        )
    return out


def _topology_line(t: Mapping[str, Any]) -> str:
    topo = "x".join(map(str, t.get("topology") or [])) or "-"
    return (
        f"{t['devices_key']}: {len(t['devices'])} {t['device_kind']} devices, torus {topo}, "
        f"{len(t['hosts'])} host(s), {t['slices']} slice(s), {len(t['links'])} links"
    )


def _axis_line(a: Mapping[str, Any]) -> str:
    ring = "a ring of nearest neighbours" if a["is_ring"] else f"not a ring ({a['groups_not_rings']} groups)"
    hosts = f"crosses hosts ({a['groups_crossing_hosts']} groups)" if a["crosses_hosts"] else "within a host"
    return (
        f"axis {a['name']} ({a['size']}): {ring}, max hop {a['max_hop']}, mean hop {a['mean_hop']:.2f}, {hosts}, "
        f"over {a['interconnect']}"
    )


# ---- a layout ---------------------------------------------------------------------------------------------


def mesh_spec(mesh: Any) -> Any:
    """A mesh argument (the HTTP API's ``MeshRequest``, or its dict) as the domain's ``MeshSpec``."""
    if hasattr(mesh, "to_spec"):
        return mesh.to_spec()
    from sharding_core.mesh import MeshSpec

    m = dict(mesh)
    return MeshSpec(
        tuple(m["shape"]),
        tuple(m["axis_names"]),
        axis_types=tuple(m["axis_types"]) if m.get("axis_types") else None,
        order=m.get("order") or "make_mesh",
        device_ids=tuple(m["device_ids"]) if m.get("device_ids") else None,
        allow_split_physical_axes=m.get("allow_split_physical_axes"),
        dcn_shape=tuple(m["dcn_shape"]) if m.get("dcn_shape") else None,
    )


def _mesh_state(mesh: Any) -> dict[str, str]:
    """The layout explorer's query fields for a mesh (frontend/js/model/state.js)."""
    spec = mesh_spec(mesh)
    state = {"mesh": "x".join(map(str, spec.shape)), "axes": ",".join(spec.axis_names), "order": spec.order}
    if spec.device_ids:
        state["ids"] = ",".join(map(str, spec.device_ids))
    if spec.dcn_shape:
        state["dcn"] = "x".join(map(str, spec.dcn_shape))
    if spec.allow_split_physical_axes:
        state["split"] = "1"
    types = {str(t).lower() for t in spec.axis_types or ()}
    if len(types) == 1 and types <= {"auto", "explicit"}:
        state["types"] = types.pop()
    return state


def layout(
    devices: str,
    mesh: Any,
    spec: str,
    shape: Sequence[int],
    dtype: str = "float32",
    slices: int = 1,
    *,
    url: str,
    width: int = 100,
    max_devices: int | None = None,
) -> dict[str, Any]:
    """Which device holds which block: ``{"layout": <POST /api/layout's JSON, exactly>, "text": <what shardscope
    preview prints>, "link", "evidence"}``."""
    import orjson

    from sharding_core.layout import Layout
    from sharding_core.render import render_text, summary_text

    devset = checked_devices(devices, slices, max_devices)
    result = Layout.from_named(devset, mesh_spec(mesh), spec, list(shape), dtype)
    state = {"devices": devices, **({"slices": str(slices)} if slices > 1 else {}), **_mesh_state(mesh)}
    state.update(spec=str(result.spec), shape=",".join(map(str, shape)), dtype=dtype)
    return {
        "layout": orjson.loads(result.json_text),
        "text": render_text(result, summary=True, max_width=width)
        if len(result.shards) <= MAX_GRID_DEVICES
        else summary_text(result) + f"(grid of {len(result.shards)} devices not drawn here: the link draws it)\n",
        "link": f"{url}/?{urllib.parse.urlencode(state)}",
        "evidence": [
            evidence(
                "shards (device, index bounds, replica), shard shape",
                JAX,
                f"NamedSharding(mesh, spec).devices_indices_map(shape) and .shard_shape(shape), JAX {jax_version()}",
            ),
            evidence("mesh device order", JAX, f"{mesh_spec(mesh).order}: as jax.make_mesh orders these devices"),
            evidence("bytes per device", JAX, "shard shape × the dtype's item size"),
        ],
    }


# ---- one collective's estimate ------------------------------------------------------------------------------


def collective_estimate(
    devices: str,
    op: str,
    nbytes: int,
    groups: Sequence[Sequence[int]] | None = None,
    pairs: Sequence[Sequence[int]] | None = None,
    slices: int = 1,
    *,
    max_devices: int | None = None,
) -> dict[str, Any]:
    """:func:`sharding_core.estimate_collective` with its evidence (the fit and its held-out error)."""
    import sharding_core

    checked_devices(devices, slices, max_devices)
    est = sharding_core.estimate_collective(devices, op, nbytes, groups=groups, pairs=pairs, slices=slices)
    fit = est.get("fit") or {}
    return {
        "estimate": est,
        "evidence": [
            evidence(
                "bound_seconds",
                COST_MODEL,
                "the scaling book's formula at the hardware table's link bandwidths (a lower bound)",
            ),
            evidence(
                "expected_seconds",
                COST_MODEL,
                f"fitted to published measurements ({fit.get('name')})",
                held_out_median_error=fit.get("held_out_median_error"),
                held_out_rows=fit.get("held_out_rows"),
            ),
        ],
    }


# ---- plans ----------------------------------------------------------------------------------------------------


def held_out_error(fabric: str | None) -> float | None:
    """The cost model's held-out median |error| for a fabric's expected collective times (None when unknown)."""
    try:
        from sharding_core.cost.estimate import held_out_errors

        errors = held_out_errors()
    except (ImportError, AttributeError):  # an older cost model: no declared held-out split
        return None
    key = "network" if fabric == "dcn" else fabric
    row = errors.get(key or "") or {}
    value = row.get("median_abs") if row.get("rows") else None
    return float(value) if value is not None else None


def per_step(c: Mapping[str, Any]) -> int:
    return int(c.get("bytes") or 0) * int(c.get("repeat", 1) or 1)


def collective_row(index: int, c: Mapping[str, Any]) -> dict[str, Any]:
    est = c.get("estimate") or {}
    return {
        "index": index,
        "op": c.get("op"),
        "name": c.get("name"),
        "shape": c.get("shape"),
        "axes": c.get("axes"),
        "bytes": c.get("bytes"),
        "repeat": c.get("repeat", 1),
        "bytes_per_step": per_step(c),
        "line": c.get("line"),
        "bound_seconds": est.get("bound_seconds", est.get("seconds")),
        "expected_seconds": est.get("expected_seconds"),
        "fabric": est.get("fabric"),
    }


def plan_evidence(snap: Mapping[str, Any]) -> list[dict[str, Any]]:
    target = snap.get("target") or {}
    where = f"{target.get('devices')} ({target.get('source')})"
    fabrics = sorted({str((c.get("estimate") or {}).get("fabric")) for c in snap.get("collectives") or ()} - {"None"})
    measured = bool((snap.get("plan") or {}).get("profile")) or any(
        "measured" in str((c.get("estimate") or {}).get("profile") or "") for c in snap.get("collectives") or ()
    )
    out = [
        evidence(
            "memory (memory_per_device: peak, arguments, outputs, temporaries)",
            XLA,
            f"Compiled.memory_analysis() of the program XLA compiled for {where}",
        ),
        evidence(
            "collectives (op, device groups, bytes, repeat)",
            XLA,
            f"the optimized HLO XLA compiled for {where}; repeat = the trip counts of the loops around each",
        ),
        evidence(
            "flops and bytes (work)",
            XLA,
            "XLA's cost_analysis with every loop body counted as often as it runs (sharding_core/hlo/program.py)",
        ),
        evidence(
            "HBM capacity, peak FLOP/s and bandwidths",
            PUBLISHED,
            "the hardware table (sharding_core/hardware.py), each figure with its public source",
        ),
        evidence(
            "step_time lower bound (roofline)",
            COST_MODEL,
            "max(flops / peak, HBM traffic / bandwidth, Σ collective bounds × repeat): a lower bound at 100 % MFU",
        ),
        evidence(
            "step_time expected: the compiled schedule replayed (sharding_core/cost/step.py), its work at "
            "efficiencies fitted to published training runs (sharding_core/cost/runs.py); each collective's "
            "expected_seconds",
            MEASURED if measured else COST_MODEL,
            "a `shardscope calibrate` profile: measured on the hardware"
            if measured
            else "the cost model's fit to published measurements (sharding_core/cost/measurements.py)",
            held_out_median_error={f: held_out_error(f) for f in fabrics},
        ),
    ]
    return out


def plan_summary(snap: Mapping[str, Any], plan_id: str, link: str | None, link_note: str | None) -> dict[str, Any]:
    """A plan as the ``plan`` tool answers it: the verdict, memory, step time, the costliest collectives, what
    XLA refused (if it did), and findings where this version has them; the whole snapshot stays on the server
    under ``plan_id`` (``publish`` sends it to the dashboard)."""
    plan = dict(snap.get("plan") or {})
    jit = snap.get("jit") or {}
    collectives = list(snap.get("collectives") or ())
    ranked = sorted(range(len(collectives)), key=lambda i: -per_step(collectives[i]))
    temporaries = (plan.get("temporaries") or {}).get("largest") or []
    out: dict[str, Any] = {
        "plan_id": plan_id,
        "name": snap.get("name"),
        "target": snap.get("target"),
        "verdict": plan.get("verdict"),
        "fits": plan.get("fits"),
        "over_bytes": plan.get("over_bytes"),
        "capacity_bytes": plan.get("capacity_bytes"),
        "memory_per_device": jit.get("memory_per_device"),
        "arguments": (plan.get("arguments") or {}).get("groups"),
        "largest_temporaries": temporaries[:5],
        "refusal": plan.get("refusal"),
        "step_time": plan.get("step_time"),
        "work": {k: (plan.get("work") or {}).get(k) for k in ("flops", "flops_xla", "bytes_accessed")},
        "collectives_total": len(collectives),
        "collective_bytes_per_step": sum(per_step(c) for c in collectives),
        "collectives": [collective_row(i, collectives[i]) for i in ranked[:MAX_LISTED_COLLECTIVES]],
        "partitioner": plan.get("partitioner"),
        "compile_seconds": plan.get("compile_seconds"),
        "evidence": plan_evidence(snap),
        "link": link,
        "link_note": link_note,
    }
    if "findings" in snap:
        out["findings"] = snap["findings"]
    if "fit" in plan:
        out["fit"] = plan["fit"]
    return out


def plan_text(summary: Mapping[str, Any]) -> str:
    """The plan answer in a few lines, for the model to read first."""
    target = summary.get("target") or {}
    lines = [f"plan {summary['plan_id']}: {summary.get('name')} on {target.get('devices')} ({target.get('source')})"]
    lines.append(f"verdict: {summary.get('verdict')}")
    from sharding_core.units import fmt_bytes, fmt_seconds

    for c in summary["collectives"][:8]:
        est = c.get("expected_seconds")
        lines.append(
            f"  [{c['index']}] {c['op']} over {','.join(c.get('axes') or []) or '?'}: {fmt_bytes(c['bytes'] or 0)} × "
            f"{c['repeat']} at {c.get('line') or 'XLA relayout'}"
            + (f", expected {fmt_seconds(est)} each" if est is not None else "")
        )
    if summary["collectives_total"] > 8:
        lines.append(f"  ... {summary['collectives_total'] - 8} more (structured content lists up to 40)")
    lines.append(summary.get("link") or summary.get("link_note") or "")
    return "\n".join(lines)


def pick_collective(
    snap: Mapping[str, Any], index: int | None, op: str | None, line: str | None
) -> tuple[int, dict[str, Any]]:
    """The collective a ``why`` asks about: by index into the plan's collectives, or the costliest per step with
    this op and/or at this source line."""
    collectives = list(snap.get("collectives") or ())
    if not collectives:
        raise ShardingError("no_collectives", "this program compiles to no collective: there is nothing to explain")
    if index is not None:
        if not 0 <= index < len(collectives):
            raise ShardingError(
                "bad_collective",
                f"collective index {index} is out of range: the plan has {len(collectives)} "
                f"(0..{len(collectives) - 1})",
                hint="use an index from the plan's collectives list, or give op= and/or line=",
            )
        return index, dict(collectives[index])
    matches = [
        i
        for i, c in enumerate(collectives)
        if (op is None or c.get("op") == op) and (line is None or str(c.get("line") or "").endswith(line))
    ]
    if not matches:
        seen = sorted({f"{c.get('op')} at {c.get('line')}" for c in collectives})[:12]
        raise ShardingError(
            "bad_collective",
            f"no collective matches op={op!r} line={line!r}",
            hint="the plan has: " + "; ".join(seen),
        )
    best = max(matches, key=lambda i: per_step(collectives[i]))
    return best, dict(collectives[best])


def why_answer(snap: Mapping[str, Any], index: int, plan_id: str, link: str | None, note: str | None) -> dict[str, Any]:
    c = dict(snap["collectives"][index])
    why = dict(c.get("why") or {})
    fixes = list(why.get("fixes") or [])
    return {
        "plan_id": plan_id,
        "collective": collective_row(index, c),
        "explanation": why.get("explanation"),
        "source": why.get("source"),
        "op": why.get("op"),
        "jaxpr": why.get("jaxpr"),
        "operands": why.get("operands"),
        "leaves": why.get("leaves"),
        "origin": why.get("origin"),
        "partitioner": why.get("partitioner"),
        "fixes": fixes,
        "fixes_note": why.get("fixes_note"),
        "search": snap.get("why_search"),
        "evidence": [
            evidence("the collective", XLA, "the optimized HLO and its source metadata (op_name, stack frames)"),
            evidence(
                "operands, shardings before and after, origins",
                XLA,
                "Shardy's module after propagation (sharding origins and propagation edges), a second compile",
            ),
            evidence(
                "each fix's collectives_after, bytes_after, peak_after",
                XLA,
                "the program compiled again with the fix (verified: true)",
            ),
            evidence("each fix's seconds_before/after", COST_MODEL, "the cost model's estimates of both programs"),
        ],
        "link": link,
        "link_note": note,
    }


def compare_answer(a: Mapping[str, Any], b: Mapping[str, Any], labels: tuple[str, str]) -> dict[str, Any]:
    """Two plans side by side: the compare page's summary and verdict (sharding_core.cost.compare), and what
    ``shardscope plan --baseline`` says of B against A (peak growth, new collectives)."""
    from sharding_core.cost.compare import compare, snapshot_summary
    from sharding_core.planning import baseline

    side = compare(snapshot_summary(a, labels[0]), snapshot_summary(b, labels[1]))
    regress = baseline.compare(a, b, max_peak_growth=0.0, max_new_collective_bytes=0)
    rows = {}
    for label, snap in zip(labels, (a, b), strict=True):
        plan = snap.get("plan") or {}
        rows[label] = {
            "verdict": plan.get("verdict"),
            "peak_bytes": baseline.peak_bytes(snap),
            "fits": plan.get("fits"),
            "step_time": plan.get("step_time"),
            "collective_bytes_per_step": sum(per_step(c) for c in snap.get("collectives") or ()),
            "collectives": len(snap.get("collectives") or ()),
        }
    return {"sides": rows, "compare": side, "b_against_a": regress}
