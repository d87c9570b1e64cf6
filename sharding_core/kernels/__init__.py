"""The kernel lab's domain: the catalog, run planning, the in-process runner and the worker entry point.

``catalog`` and ``plan`` import JAX only when a kernel is built or a mesh is made; ``runner`` and
``worker`` run in worker processes (started by ``server/pool.py``); compiled HLO is read by
:mod:`sharding_core.hlo`.
"""
