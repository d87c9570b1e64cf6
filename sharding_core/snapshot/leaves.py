"""What a snapshot calls a leaf of a pytree, and its path: the one rule :func:`sharding_core.capture` walks a tree by
and why's fixes name leaves by (``inputs/args/1``, ``inputs/kwargs/w``, ``params/...``).

Flax is optional: its boxes and nnx variables are recognised only when the program already imported Flax (looked
up in ``sys.modules``), so capturing plain JAX never imports it.
"""

from __future__ import annotations

import sys
from typing import Any

ROOT_PATH = "(root)"
"""The path of a tree that is itself one leaf."""


def flax_box_types() -> tuple[type, ...]:
    meta = sys.modules.get("flax.core.meta")
    return (meta.AxisMetadata,) if meta is not None else ()


def nnx_variable_types() -> tuple[type, ...]:
    nnx = sys.modules.get("flax.nnx")
    if nnx is None:
        return ()
    # Only Variable: in Flax 0.12 VariableState is a deprecated alias of it (and warns when looked up).
    variable = vars(nnx).get("Variable")
    return (variable,) if variable is not None else ()


def is_capture_leaf(x: Any) -> bool:
    """Shardings, abstract arrays, PartitionSpecs and Flax's boxes are leaves (JAX would walk into some)."""
    import jax

    if isinstance(x, (jax.sharding.Sharding, jax.ShapeDtypeStruct, jax.sharding.PartitionSpec)):
        return True
    boxes = flax_box_types() + nnx_variable_types()
    return bool(boxes) and isinstance(x, boxes)


def leaf_paths(tree: Any) -> list[tuple[str, Any]]:
    """Every leaf of ``tree`` with its snapshot path (``a/b/0``; a tree that is one leaf: :data:`ROOT_PATH`)."""
    import jax

    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_capture_leaf)
    return [(jax.tree_util.keystr(p, simple=True, separator="/") or ROOT_PATH, leaf) for p, leaf in flat]


def paths(tree: Any) -> list[str]:
    """Snapshot paths of a tree's leaves, exactly as :func:`sharding_core.capture` writes them."""
    return [path for path, _ in leaf_paths(tree)]
