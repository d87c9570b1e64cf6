"""Findings: what a capture, a plan or a kernel run should change, each in the contract's shape
``{"kind", "source": "file:line", "bytes_per_step", "text", "fix": {...} | null}`` (a snapshot's top-level
``findings`` list).

:mod:`sharding_core.findings.mesh_order`: arguments committed to other devices, or the same devices in another
order, than the mesh of ``jax.set_mesh`` — what jit refuses as "incompatible devices" (MaxText #2863).
"""
