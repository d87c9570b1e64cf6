"""The kernel lab's domain: the catalog, run planning, the in-process runner and HLO parsing.

``catalog`` and ``plan`` import JAX only when a kernel is built or a mesh is made; ``runner``
runs in worker processes (see ``server/kernels.py``); ``hlo`` and ``origins`` are pure text parsing.
"""
