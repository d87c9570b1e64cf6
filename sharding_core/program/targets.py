"""Compile-only devices for a device-set string, and :func:`mesh` over them: plan on hardware you don't have.

* ``tpu:GEN:TOPO`` (``slices=``, ``chips_per_host=``): libtpu's compile-only topology,
  ``jax.experimental.topologies.get_topology_desc(platform="tpu", topology_name="v5p:2x2x4",
  chips_per_host_bounds=..., num_slices=...)`` — the optional ``tpu`` extra. Its devices are the ones
  :func:`sharding_core.devices.parse_devices` simulates, id for id (``tests/test_tpu_reference.py``).
* ``gpu:KIND:HxG``: XLA's GPU compiler through the CUDA PJRT plugin (the optional ``gpu`` extra:
  ``jax-cuda12-plugin`` and ``jax-cuda12-pjrt`` without NVIDIA's libraries — compiling needs none),
  ``get_topology_desc(platform="cuda", topology="1xHxG", target_config=TEXT)`` with ``TEXT`` the
  ``GpuTargetConfigProto`` XLA ships for that GPU (``gpu_targets/``, each with its source). With no GPU
  attached JAX must not start its CUDA backend: run with ``JAX_PLATFORMS=cpu`` (``shardscope plan`` does).
* ``cpu:N``: this process's CPU devices (``jax_num_cpu_devices``), the stand-in for a quick check.

:func:`mesh` builds the mesh with the same orderings as the layout explorer (:func:`sharding_core.mesh.
build_mesh` on the simulated set, then each device swapped for the compile-only device with its id), so a
plan's mesh is the one the dashboard draws. :func:`target_of` tells :func:`sharding_core.inspect_jit`
which set a compile-only device came from (its hosts, slices and hardware figures).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sharding_core.devices import DeviceSet, parse_devices
from sharding_core.errors import BAD_DEVICES, ShardingError
from sharding_core.mesh import MeshSpec, build_mesh

UNAVAILABLE = "unavailable"

GPU_TARGETS_DIR = Path(__file__).with_name("gpu_targets")

# GPU kind (as in gpu:KIND:HxG) -> XLA's target config file (xla/backends/gpu/target_config/specs/).
GPU_TARGET_FILES: dict[str, str] = {
    "v100": "v100.txtpb",
    "a100": "a100_sxm_80.txtpb",
    "a100-40gb": "a100_sxm_40.txtpb",
    "h100": "h100_sxm.txtpb",
    "h200": "h200.txtpb",
    "b200": "b200.txtpb",
    "gb200": "gb200.txtpb",
}

# Fields newer XLA target configs carry that an older jaxlib's GpuDeviceInfoProto does not know (its text
# parser refuses the whole file). They describe the GPU (clocks, block limits, the NVLink allocation
# granularity) and do not change the partitioned program: dropped, and the target says so.
NEWER_FIELDS = (
    "mem_clock_ghz",
    "reserved_shared_memory_per_block",
    "max_blocks_per_multiprocessor",
    "collective_memory_granularity",
)


@dataclasses.dataclass(frozen=True)
class TpuTarget:
    """A ``tpu:`` set as libtpu's compile-only topology (``get_topology_desc`` arguments)."""

    topology_name: str  # e.g. "v5e:2x4" with libtpu's generation name
    chips_per_host: tuple[int, ...]
    chip_config: str | None = None
    slices: int = 1

    def describe(self) -> dict[str, Any]:
        """Keyword arguments for ``jax.experimental.topologies.get_topology_desc``."""
        kwargs: dict[str, Any] = {
            "platform": "tpu",
            "topology_name": self.topology_name,
            "chips_per_host_bounds": self.chips_per_host,
        }
        if self.chip_config:
            kwargs["chip_config_name"] = self.chip_config
        if self.slices > 1:
            kwargs["num_slices"] = self.slices
        return kwargs


def libtpu_available() -> bool:
    """Whether the optional ``tpu`` extra (libtpu) is importable."""
    return importlib.util.find_spec("libtpu") is not None


def gpu_compiler_available() -> bool:
    """Whether XLA's CUDA compiler plugin (the optional ``gpu`` extra) is importable."""
    return importlib.util.find_spec("jax_cuda12_plugin") is not None


@dataclasses.dataclass(frozen=True, eq=False)
class Target:
    """A device set's compile-only devices, and what a plan says about them."""

    devset: DeviceSet  # the simulated set (ids, coords, hosts: the dashboard's picture)
    devices: tuple[Any, ...]  # the compile-only devices, in the simulated set's order
    source: str  # where the devices come from, in words
    dropped_fields: tuple[str, ...] = ()

    @property
    def by_id(self) -> dict[int, Any]:
        return {int(d.id): d for d in self.devices}

    def describe(self) -> dict[str, Any]:
        """The snapshot's ``target`` entry: what the program was compiled for."""
        ds = self.devset
        return {
            "devices": ds.key,
            "platform": ds.platform,
            "device_kind": str(self.devices[0].device_kind),
            "compile_only": ds.simulated and ds.platform != "cpu",  # cpu:N runs on this process's devices
            "num_devices": len(ds),
            "hosts": ds.num_hosts,
            "slices": ds.slices,
            "topology": "x".join(map(str, ds.topology)) if ds.topology else None,
            "chips_per_host": list(ds.chips_per_host) if ds.chips_per_host else None,
            "source": self.source,
        }


_lock = threading.Lock()
_by_device: dict[int, Target] = {}  # id(compile-only device) -> its Target


def target_of(device: Any) -> Target | None:
    """The :class:`Target` a compile-only device belongs to (None for devices not made here)."""
    return _by_device.get(id(device))


def compile_target(devices: str, *, slices: int = 1, chips_per_host: Sequence[int] | None = None) -> Target:
    """The compile-only devices of a device-set string (cached: one libtpu topology per set)."""
    devset = parse_devices(devices, slices=slices, chips_per_host=chips_per_host)
    return _target(devset)


def set_target(devset: DeviceSet) -> Target:
    """The compile-only devices of a (simulated) device set (cached, as :func:`compile_target`)."""
    return _target(devset)


@functools.lru_cache(maxsize=32)
def _target(devset: DeviceSet) -> Target:
    if devset.platform == "tpu" and devset.simulated:
        target = _tpu_target(devset)
    elif devset.platform == "gpu" and devset.simulated:
        target = _gpu_target(devset)
    elif devset.platform == "cpu" and devset.simulated:
        target = _cpu_target(devset)
    else:  # local: the process's own devices
        target = Target(devset, tuple(devset.devices), "local")
    with _lock:
        for d in target.devices:
            _by_device[id(d)] = target
    return target


def _tpu_target(devset: DeviceSet) -> Target:
    gen = devset.generation
    assert gen is not None and devset.topology is not None and devset.chips_per_host is not None
    if not libtpu_available():
        raise ShardingError(
            UNAVAILABLE,
            f"{devset.key} compiles with libtpu's compile-only topology, and libtpu is not installed",
            hint="install the tpu extra: pip install 'shardscope[tpu]' (or uv sync --extra tpu)",
        )
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")  # never ask a cloud metadata server: no TPU is here
    # Compile-only: no TPU to guard, so other processes (a dashboard's kernel workers) may load libtpu too.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    from jax.experimental import topologies

    kwargs = TpuTarget(
        f"{gen.libtpu_name}:{'x'.join(map(str, devset.topology))}",
        tuple(devset.chips_per_host),
        gen.chip_config,
        devset.slices,
    ).describe()
    real = {int(d.id): d for d in topologies.get_topology_desc(**kwargs).devices}
    missing = [d.id for d in devset.devices if d.id not in real]
    if missing or len(real) != len(devset):
        raise ShardingError(
            UNAVAILABLE,
            f"libtpu's {kwargs['topology_name']} topology has {len(real)} devices, not the {len(devset)} of "
            f"{devset.key} (first missing id: {missing[:1]})",
            hint="this libtpu lays the slice out differently; report it with `pip show libtpu`",
        )
    source = f"libtpu compile-only topology {kwargs['topology_name']}"
    if devset.slices > 1:
        source += f" x {devset.slices} slices"
    return Target(devset, tuple(real[d.id] for d in devset.devices), source)


def gpu_target_text(kind: str) -> str:
    """XLA's ``GpuTargetConfigProto`` text for a GPU kind of the hardware table."""
    name = GPU_TARGET_FILES.get(kind)
    if name is None:
        raise ShardingError(
            UNAVAILABLE,
            f"XLA ships no GPU target config for {kind!r}; GPU sets compile for {', '.join(GPU_TARGET_FILES)}",
            hint="pick one of those kinds, e.g. gpu:h100:2x8",
        )
    return (GPU_TARGETS_DIR / name).read_text()


def strip_fields(text: str, fields: Sequence[str]) -> str:
    """A text-format proto without the named fields (``name: value`` lines and ``name { ... }`` blocks)."""
    out: list[str] = []
    depth = 0
    for line in text.splitlines(keepends=True):
        s = line.strip()
        if depth:
            depth += s.count("{") - s.count("}")
            continue
        m = re.match(r"(\w+)\s*[:{]", s)
        if m and m.group(1) in fields:
            depth = s.count("{") - s.count("}")
            continue
        out.append(line)
    return "".join(out)


def _gpu_target(devset: DeviceSet) -> Target:
    kind = devset.key.split(":")[1]
    text = gpu_target_text(kind)
    hosts = devset.num_hosts
    per_host = len(devset) // hosts
    topology = f"1x{hosts}x{per_host}"
    try:
        from jax.experimental import topologies
    except ImportError as e:  # pragma: no cover - jax is a core dependency
        raise ShardingError(UNAVAILABLE, f"jax.experimental.topologies is missing: {e}") from None

    def describe(config: str) -> Any:
        return topologies.get_topology_desc(topology_name="", platform="cuda", topology=topology, target_config=config)

    dropped: tuple[str, ...] = ()
    try:
        try:
            desc = describe(text)
        except Exception as first:
            if "parse" not in str(first).lower():
                raise
            dropped = tuple(f for f in NEWER_FIELDS if re.search(rf"^\s*{f}\s*[:{{]", text, re.M))
            desc = describe(strip_fields(text, dropped))
    except NotImplementedError:
        raise ShardingError(
            UNAVAILABLE,
            f"{devset.key} compiles with XLA's GPU compiler, and JAX has no CUDA plugin registered",
            hint="install the gpu extra (pip install 'shardscope[gpu]': jax-cuda12-plugin and jax-cuda12-pjrt, no "
            "NVIDIA libraries needed) and, on a machine without a GPU, start Python with JAX_PLATFORMS=cpu",
        ) from None
    devs = list(desc.devices)
    by_id = {int(d.id): d for d in devs}
    mismatch = [d.id for d in devset.devices if d.id not in by_id or int(by_id[d.id].process_index) != d.process_index]
    if mismatch or len(devs) != len(devset):
        raise ShardingError(
            UNAVAILABLE,
            f"XLA's {topology} GPU topology does not number its {len(devs)} devices as {devset.key} does "
            f"(first differing id: {mismatch[:1]})",
        )
    source = f"XLA GPU compiler, topology {topology}, target config {GPU_TARGET_FILES[kind]}"
    return Target(devset, tuple(by_id[d.id] for d in devset.devices), source, dropped)


def _cpu_target(devset: DeviceSet) -> Target:
    import jax

    cpus = jax.devices("cpu")
    if len(cpus) < len(devset):
        raise ShardingError(
            BAD_DEVICES,
            f"{devset.key} needs {len(devset)} CPU devices; this process has {len(cpus)}",
            hint=f"set jax.config.update('jax_num_cpu_devices', {len(devset)}) before JAX starts",
        )
    return Target(devset, tuple(cpus[: len(devset)]), "this process's CPU devices")


def mesh(
    devices: str,
    shape: Sequence[int],
    axis_names: Sequence[str],
    *,
    slices: int = 1,
    chips_per_host: Sequence[int] | None = None,
    axis_types: Sequence[str] | None = None,
    order: str = "make_mesh",
    device_ids: Sequence[int] | None = None,
    allow_split_physical_axes: bool | None = None,
    dcn_shape: Sequence[int] | None = None,
) -> Any:
    """A ``jax.sharding.Mesh`` over the devices ``devices`` names, compile-only for TPU and GPU sets.

    ``shardscope.mesh("tpu:v5p:4x4x4", (16, 4), ("fsdp", "tp"))`` gives libtpu's 64 compile-only v5p
    devices in ``jax.make_mesh``'s order; shard ``jax.ShapeDtypeStruct``s on it and ``inspect_jit`` (or
    ``shardscope plan``) compiles the real TPU program without a TPU. ``order`` and the options are the
    layout explorer's (``make_mesh``, ``iota``, ``devices`` with ``device_ids``, ``hybrid`` with
    ``dcn_shape`` for multi-slice / multi-host sets). ``axis_types`` default to ``Auto`` for every axis —
    what ``jax.sharding.Mesh`` and most training code use (``jax.make_mesh`` defaults to ``Explicit``).
    """
    spec = MeshSpec(
        tuple(int(s) for s in shape),
        tuple(str(a) for a in axis_names),
        tuple(axis_types) if axis_types is not None else ("auto",) * len(tuple(shape)),
        order,
        tuple(device_ids) if device_ids is not None else None,
        allow_split_physical_axes,
        tuple(dcn_shape) if dcn_shape is not None else None,
    )
    target = compile_target(devices, slices=slices, chips_per_host=chips_per_host)
    simulated = build_mesh(target.devset, spec)
    real = target.by_id
    from jax.sharding import Mesh

    grid = np.empty(simulated.devices.shape, dtype=object)
    for index, d in np.ndenumerate(simulated.devices):
        grid[index] = real[int(d.id)]
    return Mesh(grid, simulated.axis_names, axis_types=simulated.axis_types)
