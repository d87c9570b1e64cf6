"""Shardscope: a web dashboard for seeing and debugging how JAX arrays are sharded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from sharding_core.notebook import show as show
    from sharding_core.planning.targets import mesh as mesh


def __getattr__(name: str) -> Any:
    # `shardscope.show(x)`: inline in a notebook, text elsewhere; loaded on first use so the CLI's
    # start-up stays light.
    if name == "show":
        from sharding_core.notebook import show as show

        return show
    if name == "mesh":  # shardscope.mesh("tpu:v5p:4x4x4", (16, 4), ("fsdp", "tp")): compile-only devices
        from sharding_core.planning.targets import mesh as mesh

        return mesh
    raise AttributeError(f"module 'shardscope' has no attribute {name!r}")
