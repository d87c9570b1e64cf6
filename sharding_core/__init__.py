"""Shardscope's domain: device sets, meshes, PartitionSpecs and layouts, computed by JAX.

``capture``, ``publish``, ``inspect_jit``, ``explain``, ``why_budget``, ``plan``, ``search``, ``mesh``,
``estimate_collective``, ``new_run_id`` and ``PublishError`` are loaded
on first use (PEP 562), so ``import sharding_core`` stays light for a training script. Drawing a value inline
in a notebook is ``shardscope.show`` (the notebook host lives beside the front end, in :mod:`shardscope`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sharding_core.capturing import capture, explain, inspect_jit, plan, search
    from sharding_core.cost.estimate import estimate_collective
    from sharding_core.program.targets import mesh
    from sharding_core.publishing import PublishError, new_run_id, publish
    from sharding_core.why.fixes import why_budget

_LAZY = {
    "capture": "sharding_core.capturing",
    "inspect_jit": "sharding_core.capturing",
    "explain": "sharding_core.capturing",
    "estimate_collective": "sharding_core.cost.estimate",
    "why_budget": "sharding_core.why.fixes",
    "publish": "sharding_core.publishing",
    "new_run_id": "sharding_core.publishing",
    "PublishError": "sharding_core.publishing",
    "mesh": "sharding_core.program.targets",
    "plan": "sharding_core.capturing",
    "search": "sharding_core.capturing",
}

__all__ = [
    "PublishError",
    "capture",
    "estimate_collective",
    "explain",
    "inspect_jit",
    "mesh",
    "new_run_id",
    "plan",
    "publish",
    "search",
    "why_budget",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sharding_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
