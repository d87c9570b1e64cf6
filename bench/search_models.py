"""The issue's models as ``FN(mesh, rules)`` for ``bench/bench_search.py`` (in a module of their own, so the
search's worker processes import them by file and name): the Llama and Mixtral steps of ``examples/``."""

from __future__ import annotations

from typing import Any

from examples import llama, moe


def llama_8b(mesh: Any, rules: Any = None, **knobs: Any) -> Any:
    """Llama 3 8B, B=64 x S=2048 (2048 tokens a chip on 64 chips); ``knobs`` as ``examples/llama.py`` takes them
    (``remat=`` a MaxText policy name, ...)."""
    return llama.plan_fn("8b", tuple(rules or ()), 64, 2048)(mesh, **knobs)


def llama_70b(mesh: Any, rules: Any = None) -> Any:
    """Llama 3 70B, B=256 x S=512: 512 tokens a chip on 256 chips (the scaling book's Part 6 regime)."""
    return llama.plan_fn("70b", tuple(rules or ()), 256, 512)(mesh)


def llama_70b_knobs(mesh: Any, rules: Any = None, **knobs: Any) -> Any:
    """:func:`llama_70b` with the knobs ``examples/llama.py`` takes (``remat=`` a MaxText policy name, ...): the
    space a search varies them in (``bench_search.py --only 70b-remat``)."""
    return llama.plan_fn("70b", tuple(rules or ()), 256, 512)(mesh, **knobs)


def mixtral(mesh: Any, rules: Any = None, **knobs: Any) -> Any:
    """Mixtral 8x7B's shapes (examples/moe.py), B=64 x S=4096, with the search's rules."""
    return moe.plan_fn("mixtral", "ep", 64, 4096)(mesh, tuple(rules) if rules is not None else None, **knobs)


def llama_tiny(mesh: Any, rules: Any = None, **knobs: Any) -> Any:
    """``examples/llama.py``'s tiny Llama (2 layers, d_model 256), B=32 x S=2048: the Llama step whose candidates
    compile fastest (about 40 s each with libtpu on 2 cores; the 1B's take 50-130 s), for
    ``bench/bench_search_replicas.py``."""
    return llama.plan_fn("tiny", tuple(rules or ()), 32, 2048)(mesh, **knobs)
