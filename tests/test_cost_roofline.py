"""The roofline on libtpu's own compile of the kernel lab's ``layer_jit`` (``sigmoid(x @ w + b)``), checked
against the book's arithmetic-intensity rule (roofline chapter: a matmul is compute-bound when its flops per
byte loaded from HBM exceed the accelerator's, peak FLOP/s / HBM bandwidth).

Regression (issue 19): "``layer_jit`` bf16 on v5p 2x2x2 is labelled memory-bound where the book's
arithmetic-intensity rule (B = 256 > 166) says compute-bound" — the memory time used XLA's ``bytes accessed``,
which on TPU counts bitcast fusions and VMEM prefetches (several times the HBM traffic).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.cost.context import context_for
from sharding_core.cost.roofline import roofline
from sharding_core.devices import parse_devices
from sharding_core.hardware import TPU_FIGURES
from sharding_core.program.compile import compile_program
from sharding_core.program.report import Reading, read_report
from sharding_core.program.targets import libtpu_available

pytestmark = [pytest.mark.tpu, pytest.mark.skipif(not libtpu_available(), reason="needs the tpu extra (libtpu)")]

B, D, F = 256, 4096, 4096  # per device: x is [8 · 256, 4096] over the 8 chips of a v5p 2x2x2


def test_layer_jit_bf16_on_v5p_is_compute_bound_by_the_books_rule() -> None:
    from jax.experimental import topologies

    os.environ["TPU_SKIP_MDS_QUERY"] = "1"
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    devset = parse_devices("tpu:v5p:2x2x2")
    topo = topologies.get_topology_desc(platform="tpu", topology_name="v5p:2x2x2", chips_per_host_bounds=(2, 2, 1))
    found = {d.id: d for d in topo.devices}
    mesh = Mesh(np.asarray([found[d.id] for d in devset.devices], dtype=object), ("x",))

    def sds(shape: tuple[int, ...], spec: P) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, spec))

    layer = jax.jit(lambda x, w, b: jax.nn.sigmoid(x @ w + b))
    program = compile_program(layer, [sds((8 * B, D), P("x")), sds((D, F), P()), sds((F,), P())])
    report = read_report(program, Reading(None, ()))
    work = report.work
    assert work is not None
    r = roofline(work, report.memory, [], context_for(devset), "bfloat16", "test")

    hw = TPU_FIGURES["v5p"]
    assert hw.peak["bf16"].value is not None and hw.hbm_bandwidth.value is not None
    critical = hw.peak["bf16"].value / hw.hbm_bandwidth.value
    assert round(critical) == 166
    book = 2 * B * D * F / (2 * (B * D + D * F + B * F))  # flops / bytes of x, w and the result (bf16)
    assert book > critical
    assert r["inputs"]["intensity"] == pytest.approx(book, rel=0.1)  # the same rule, on XLA's own figures
    assert r["bound"] == "compute" and r["compute_seconds"] > r["memory_seconds"]
    # what the old rule read: XLA's bytes accessed would have made it memory-bound
    assert work["bytes_accessed_xla"] / hw.hbm_bandwidth.value > r["compute_seconds"]
