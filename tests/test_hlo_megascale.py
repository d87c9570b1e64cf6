"""Cross-slice (DCN) steps read from libtpu's own multi-slice compiles (``_xla_megascale_target`` and
``_xla_megascale_transfer_type`` on each megascale send): the truth for DCN steps.

Regression tests for issue 19's multi-slice items, each compiled here for libtpu's compile-only topology:

* a cross-slice ``collective-permute`` kept its direction: on 2 × v5e 2x2, iota mesh (2, 4) ``('s', 'i')``,
  [8, 8], ``P('s', 'i')`` → ``P('i', 's')``, libtpu sends ``200000 → 100002`` (the old steps, split from the
  CPU run's global groups, listed ``[100002, 200000]`` and a two-way exchange twice);
* an all-to-all over ``('s', 'i')`` on 2 × v4 2x2x2 (iota (2, 8), ``P(('s','i'), None)`` →
  ``P(None, ('s','i'))``) is one 16-device DCN all-to-all (the old steps: 8 two-device pairs);
* libtpu names the devices of every transfer; the three spellings of its target are read exactly.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding

from sharding_core.cost.collectives import estimate_dcn_step
from sharding_core.cost.context import context_for
from sharding_core.devices import parse_devices
from sharding_core.hlo.collectives import dcn_steps, device_assignment, read_collectives
from sharding_core.hlo.megascale import parse_target
from sharding_core.kernels.reshard import plan_reshard
from sharding_core.mesh import MeshSpec
from sharding_core.program.targets import libtpu_available
from sharding_core.spec import parse_spec


def test_the_three_target_spellings() -> None:
    groups, pairs = parse_target("{1,2}x{0:3}")
    assert groups == [[100000, 200000], [100001, 200001], [100002, 200002], [100003, 200003]] and pairs is None
    groups, pairs = parse_target("{{100002->200000},{100003->200001},{200000->100002},{200001->100003}}")
    assert pairs == [[100002, 200000], [100003, 200001], [200000, 100002], [200001, 100003]]
    groups, pairs = parse_target("{{100000,100001,200000,200001}}")
    assert groups == [[100000, 100001, 200000, 200001]] and pairs is None
    assert parse_target("{1,2,3}x{0:1,5}")[0] == [[100000, 200000, 300000], [100001, 200001, 300001],
                                                  [100005, 200005, 300005]]  # fmt: skip


def compile_reshard(devices: str, slices: int, mesh: tuple[int, ...], shape: tuple[int, ...], source: str,
                    target: str) -> tuple[Any, Any]:  # fmt: skip
    """The reshard compiled for libtpu's multi-slice topology, on the simulated mesh's device ids."""
    from jax.experimental import topologies

    os.environ["TPU_SKIP_MDS_QUERY"] = "1"
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    plan = plan_reshard(devices, MeshSpec(mesh, ("s", "i"), order="iota"), shape, "float32", source, target,
                        slices=slices)  # fmt: skip
    job = plan.job
    assert job.tpu is not None
    found = {d.id: d for d in topologies.get_topology_desc(**job.tpu.describe()).devices}
    grid = np.empty(job.size, dtype=object)
    grid[:] = [found[i] for i in job.device_ids]
    tpu_mesh = Mesh(grid.reshape(job.mesh_shape), job.axis_names)
    x = jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(tpu_mesh, parse_spec(source)))
    out = NamedSharding(tpu_mesh, parse_spec(target))
    return jax.jit(lambda a: a, out_shardings=out).lower(x).compile(), job


@pytest.mark.tpu
@pytest.mark.skipif(not libtpu_available(), reason="needs the tpu extra (libtpu)")
def test_a_cross_slice_permute_keeps_its_direction() -> None:
    c, job = compile_reshard("tpu:v5e:2x2", 2, (2, 4), (8, 8), "P('s', 'i')", "P('i', 's')")
    steps = dcn_steps(c.as_text(), job.id_grid, job.axis_names)
    assert [s["transfer_type"] for s in steps] == ["ONE_TO_ONE"]
    (step,) = steps
    assert step["op"] == "collective-permute"
    assert [200000, 100002] in step["pairs"] and [100002, 200000] in step["pairs"]  # each direction once
    assert len(step["pairs"]) == len({tuple(p) for p in step["pairs"]}) == 4
    assert step["bytes"] == 2 * 4 * 4  # f32[2,4] a device
    est = estimate_dcn_step(step, context_for(parse_devices("tpu:v5e:2x2", slices=2)))
    assert est["fabric"] == "dcn" and est["inputs"]["pairs"] == 4
    assert est["seconds"] >= est["inputs"]["dcn_step_latency"] > 0  # never 10 ns: a DCN transfer has latency


@pytest.mark.tpu
@pytest.mark.skipif(not libtpu_available(), reason="needs the tpu extra (libtpu)")
def test_an_all_to_all_across_slices_is_one_16_device_dcn_step() -> None:
    c, job = compile_reshard("tpu:v4:2x2x2", 2, (2, 8), (16, 16), "P(('s', 'i'), None)", "P(None, ('s', 'i'))")
    hlo = c.as_text()
    steps = dcn_steps(hlo, job.id_grid, job.axis_names)
    assert [(s["op"], len(s["groups"]), len(s["groups"][0])) for s in steps] == [("all-to-all", 1, 16)]
    assert sorted(steps[0]["groups"][0]) == sorted(job.device_ids)
    slice_ids = [[int(d.id) for d in device_assignment(c)]]
    assert read_collectives(hlo, slice_ids, job.id_grid, job.axis_names) == []  # nothing inside a slice
    est = estimate_dcn_step(steps[0], context_for(parse_devices("tpu:v4:2x2x2", slices=2)))
    assert est["inputs"]["group_size"] == 16 and est["inputs"]["islands"] == 2 and est["inputs"]["per_island"] == 8


@pytest.mark.tpu
@pytest.mark.skipif(not libtpu_available(), reason="needs the tpu extra (libtpu)")
def test_a_gather_across_slices_reads_the_compact_target() -> None:
    c, job = compile_reshard("tpu:v5e:2x2", 2, (2, 4), (8, 8), "P('s', 'i')", "P()")
    (step,) = dcn_steps(c.as_text(), job.id_grid, job.axis_names)
    assert step["transfer_type"] == "ALL_GATHER" and step["target"] == "{1,2}x{0:3}"
    assert step["groups"] == [[100000 + k, 200000 + k] for k in range(4)]
    assert step["bytes"] == 2 * step["sent_bytes"]  # the gathered result: two slices' shards
    assert step["axes"] == ["s"] and step["repeat"] == 1
