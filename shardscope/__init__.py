"""Shardscope: a web dashboard for seeing and debugging how JAX arrays are sharded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from sharding_core.linking import link as link
    from sharding_core.notebook import show as show


def __getattr__(name: str) -> Any:
    # `shardscope.show(x)`: inline in a notebook, text elsewhere; `shardscope.link(x)`: the dashboard's
    # address of x's layout. Loaded on first use so the CLI's start-up stays light.
    if name == "show":
        from sharding_core.notebook import show as show

        return show
    if name == "link":
        from sharding_core.linking import link as link

        return link
    raise AttributeError(f"module 'shardscope' has no attribute {name!r}")
