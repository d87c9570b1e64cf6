"""Shardscope: see and debug how JAX arrays are sharded — the ``shardscope`` command and ``shardscope.show``.

Packages by audience: :mod:`sharding_core` is the domain a training script imports (``capture``,
``publish``, ``inspect_jit``); :mod:`server` is the dashboard; this package is what a person calls —
the command line (:mod:`shardscope.cli`), ``shardscope.show`` (the notebook host,
:mod:`shardscope.notebook`) and the front end's files (:mod:`shardscope.assets`).

``show``, ``link`` and ``__version__`` are loaded on first use (PEP 562), so the CLI's start-up and a training
script's ``import shardscope`` stay light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sharding_core.linking import link as link
    from sharding_core.program.targets import mesh as mesh
    from shardscope.notebook import show as show

    __version__: str

__all__ = ["__version__", "link", "mesh", "show"]


def version() -> str:
    """The installed distribution's version (pyproject's, through the package metadata: one source)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("shardscope")
    except PackageNotFoundError:  # imported from a checkout that was never installed (no metadata)
        return "0+unknown"


def __getattr__(name: str) -> Any:
    # `shardscope.show(x)`: inline in a notebook, text elsewhere; `shardscope.link(x)`: the dashboard's
    # address of x's layout. Loaded on first use so the CLI's start-up stays light.
    if name == "show":
        from shardscope.notebook import show

        globals()["show"] = show
        return show
    if name == "mesh":  # shardscope.mesh("tpu:v5p:4x4x4", (16, 4), ("fsdp", "tp")): compile-only devices
        from sharding_core.program.targets import mesh as mesh

        return mesh
    if name == "link":  # shardscope.link(x): the layout explorer's address of an array or a tree
        from sharding_core.linking import link

        globals()["link"] = link
        return link
    if name == "__version__":
        value = version()
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module 'shardscope' has no attribute {name!r}")
