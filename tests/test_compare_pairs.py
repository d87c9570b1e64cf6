"""Compare's "collectives, matched up" against a hand-made pairing (issue 28): ``_match`` fell back from (op, mesh
axes) to op alone, greedily in program order, and put A's all-reduce over ``tp`` beside B's over a 16-device
``fsdp`` group, a 128 KiB ``reduce_sum`` beside a 128 MiB ``dot_general``, a 500 MiB all-reduce beside a
128 KiB one. docs/compare.md promises "the same op along the same mesh axes"; the rest stand alone."""

from __future__ import annotations

from typing import Any

from sharding_core.cost.compare import compare, kernel_summary

KIB, MIB = 2**10, 2**20


def coll(name: str, op: str, axes: str, nbytes: int, line: str | None, source: str | None = None) -> dict[str, Any]:
    return {"name": name, "op": op, "axes_text": axes, "bytes": nbytes, "line": line, "source": source,
            "groups": [[0, 1]], "estimate": {"seconds": nbytes / 1e11, "fabric": "ici"}}  # fmt: skip


def side(label: str, collectives: list[dict[str, Any]]) -> dict[str, Any]:
    run = {"kernel": "k", "devices_key": "tpu:v5p:2x2x4", "mesh": {"shape": [4, 4], "axis_names": ["fsdp", "tp"]},
           "inputs": [], "outputs": [], "collectives": collectives,
           "roofline": {"lower_bound_seconds": 1e-3, "hbm": {"fits": True, "text": "fits"}}, "tpu": None}  # fmt: skip
    return kernel_summary(run, label)


def pairing(result: dict[str, Any]) -> list[tuple[str | None, str | None]]:
    return [((r["a"] or {}).get("name"), (r["b"] or {}).get("name")) for r in result["collectives"]]


# FSDP × TP (A) against FSDP over all 16 devices (B), as the user had them
A = [
    coll("a.ar_tp_logits", "all-reduce", "tp", 500 * MIB, "model.py:88", "jit(step)/dot_general"),
    coll("a.ag_fsdp_w", "all-gather", "fsdp", 32 * MIB, "model.py:40", "jit(step)/all_gather"),
    coll("a.ar_tp_small", "all-reduce", "tp", 128 * KIB, "model.py:61", "jit(step)/reduce_sum"),
    coll("a.rs_fsdp_grad", "reduce-scatter", "fsdp", 32 * MIB, "model.py:40", "jit(step)/transpose"),
    coll("a.ar_fsdp_loss", "all-reduce", "fsdp,tp", 4, "model.py:95", "jit(step)/reduce_sum"),
]
B = [
    coll("b.ar_fsdp_mlp", "all-reduce", "fsdp,tp", 128 * MIB, "model.py:52", "jit(step)/dot_general"),
    coll("b.ag_fsdp_w", "all-gather", "fsdp,tp", 128 * MIB, "model.py:40", "jit(step)/all_gather"),
    coll("b.ar_fsdp_loss", "all-reduce", "fsdp,tp", 4, "model.py:95", "jit(step)/reduce_sum"),
    coll("b.rs_fsdp_grad", "reduce-scatter", "fsdp,tp", 128 * MIB, "model.py:40", "jit(step)/transpose"),
]


def test_only_the_same_op_along_the_same_axes_is_paired() -> None:
    result = compare(side("A", A), side("B", B))
    # by hand: the loss's all-reduce over all 16 devices is the one collective both programs make alike; A's
    # FSDP collectives run over 4 devices (axis fsdp), B's over 16 (fsdp,tp): different collectives
    assert pairing(result) == [
        ("a.ar_tp_logits", None),
        ("a.ag_fsdp_w", None),
        ("a.ar_tp_small", None),
        ("a.rs_fsdp_grad", None),
        ("a.ar_fsdp_loss", "b.ar_fsdp_loss"),
        (None, "b.ar_fsdp_mlp"),
        (None, "b.ag_fsdp_w"),
        (None, "b.rs_fsdp_grad"),
    ]
    for row in result["collectives"]:
        if row["a"] and row["b"]:
            assert (row["a"]["op"], row["a"]["axes_text"]) == (row["b"]["op"], row["b"]["axes_text"])
            assert row["delta_bytes"] == 0
        else:
            assert row["delta_bytes"] is None and row["delta_seconds"] is None


def test_among_several_the_same_line_then_the_nearest_size() -> None:
    a = [
        coll("a.small", "all-reduce", "tp", 128 * KIB, "m.py:61", "jit(f)/reduce_sum"),
        coll("a.big", "all-reduce", "tp", 128 * MIB, "m.py:30", "jit(f)/dot_general"),
        coll("a.mid", "all-reduce", "tp", 8 * MIB, None, None),
    ]
    b = [
        coll("b.big", "all-reduce", "tp", 64 * MIB, "m.py:30", "jit(f)/dot_general"),  # the same line, half the size
        coll("b.near_mid", "all-reduce", "tp", 6 * MIB, None, None),
        coll("b.huge", "all-reduce", "tp", 500 * MIB, None, None),
    ]
    # a.big takes its own line's b.big; a.mid (no line) the nearest in size;
    # a.small (128 KiB) has nothing within 16x and no line in common: alone, as is the 500 MiB one
    assert pairing(compare(side("A", a), side("B", b))) == [
        ("a.small", None),
        ("a.big", "b.big"),
        ("a.mid", "b.near_mid"),
        (None, "b.huge"),
    ]


def test_the_same_jax_op_pairs_when_no_line_does() -> None:
    a = [coll("a.1", "all-gather", "data", 4 * MIB, None, "jit(f)/x"), coll("a.2", "all-gather", "data", 4 * MIB,
         None, "jit(f)/y")]  # fmt: skip
    b = [coll("b.2", "all-gather", "data", 4 * MIB, None, "jit(f)/y"), coll("b.1", "all-gather", "data", 1 * KIB,
         None, "jit(f)/x")]  # fmt: skip
    # a.1 and b.1 come from the same JAX op (B's is a smaller shard of it), a.2 and b.2 too: not the sizes
    assert pairing(compare(side("A", a), side("B", b))) == [("a.1", "b.1"), ("a.2", "b.2")]


def test_matching_thousands_of_collectives_stays_bounded() -> None:
    """4,096 collectives a side (the snapshot format's most), all of one op and axes, no lines: a pairing in
    bounded work (at most 16 candidates each), every one paired with its equal."""
    many_a = [coll(f"a.{i}", "all-reduce", "x", 1024 + i, None) for i in range(4096)]
    many_b = [coll(f"b.{i}", "all-reduce", "x", 1024 + i, None) for i in reversed(range(4096))]
    rows = compare(side("A", many_a), side("B", many_b))["collectives"]
    assert len(rows) == 4096 and all(r["delta_bytes"] == 0 for r in rows)
