"""Device sets from the contract's ``devices`` strings: ``cpu:N``, ``gpu:KIND:HxG``, ``tpu:GEN:TOPO``, ``local``.

Simulated devices are plain objects carrying exactly the attributes JAX reads from a device
(``id``, ``platform``, ``device_kind``, ``process_index``, ``coords``, ``core_on_chip`` and, for
multi-slice sets, ``slice_index``). JAX accepts them in ``Mesh``, ``NamedSharding``,
``devices_indices_map``, ``jax.make_mesh(devices=...)`` and ``mesh_utils.create_device_mesh``, so every
ordering and index we report is computed by JAX itself.

TPU slices are laid out as libtpu's compile-only topologies
(``jax.experimental.topologies.get_topology_desc``) lay them out, which is the reference
(``tests/test_tpu_reference.py`` compares the two when the optional ``tpu`` extra is installed):

* chip coordinates run x fastest, then y, then z; a chip's devices are its cores
  (``core_on_chip``), so ``id = cores_per_chip * (x + X * (y + Y * z)) + core``;
* hosts are blocks of ``chips_per_host`` chips, numbered x fastest, then y, then z;
* the device list is ordered by host, then id (what ``jax.devices()`` returns there);
* with ``slices > 1`` device ids become ``(slice + 1) * 100000 + id`` and hosts are numbered
  globally, slice-major.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Sequence
from typing import Any

from sharding_core.cache import bounded_cache
from sharding_core.errors import BAD_DEVICES, TOO_LARGE, ShardingError

MAX_DEVICES = 16384
"""Devices per set, checked on the parsed numbers before any device object exists."""

MAX_SLICES = 64
"""Slices in a multi-slice TPU set."""

_MULTISLICE_ID_STRIDE = 100000  # libtpu numbers slice s's devices from (s + 1) * 100000.


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class SimDevice:
    """A simulated device that JAX accepts wherever it takes a ``jax.Device``.

    Identity-hashed (``eq=False``) like real devices, so meshes and shardings built from one
    :class:`DeviceSet` hit JAX's caches.
    """

    id: int
    platform: str
    device_kind: str
    process_index: int
    coords: tuple[int, int, int] | None = None
    core_on_chip: int = 0
    slice_index: int | None = None

    @property
    def host_id(self) -> int:
        return self.process_index

    @property
    def task_id(self) -> int:
        return self.process_index

    def __repr__(self) -> str:
        extra = ""
        if self.coords is not None:
            extra = f", coords={self.coords}, core_on_chip={self.core_on_chip}"
        if self.slice_index is not None:
            extra += f", slice_index={self.slice_index}"
        return f"SimDevice(id={self.id}, {self.platform}, process_index={self.process_index}{extra})"


@dataclasses.dataclass(frozen=True)
class TpuGeneration:
    """What a TPU generation looks like to JAX, and which slices exist for it."""

    name: str  # as users write it in ``tpu:GEN:TOPO``
    libtpu_name: str  # as ``get_topology_desc`` names it
    device_kind: str  # ``device.device_kind`` as JAX reports it
    cores_per_chip: int  # devices per chip (1 for megacore / single-core chips)
    dims: int  # 2-D (v2, v3, v5e, v6e) or 3-D torus
    topologies: tuple[str, ...]  # the standard slice shapes
    max_chips: int
    chips_per_host: tuple[int, int, int]  # default host block, as the multi-host machine types
    chips_per_host_note: str
    custom_multiple: int | None = None  # 3-D: any AxBxC with each side a multiple of this
    chip_config: str | None = None  # libtpu chip_config_name (v4: "megacore")
    # Which torus axes close into rings (read by ``sharding_core.hardware.wraparound``, which cites the
    # sources): 3-D generations wrap an axis only in slices of full 4x4x4 cubes ("cube"); 2-D ones only
    # an axis that spans the pod side (``pod_side`` chips).
    wrap_rule: str = "pod_side"
    pod_side: int = 0
    device_kind_aliases: tuple[str, ...] = ()  # other spellings of ``device_kind`` JAX versions report

    @property
    def torus(self) -> str:
        return f"{self.dims}D torus"

    def single_host_bounds(self, topo: tuple[int, int, int]) -> tuple[int, int, int]:
        """Host bounds for ``topo``: small v5e/v6e slices run on one 1-, 4- or 8-chip machine."""
        if self.name in ("v5e", "v6e") and math.prod(topo) <= 8:
            return topo
        return self.chips_per_host


_SMALL_3D = ("2x2x1", "2x2x2", "2x2x4", "2x4x4")
_CUBES_V4 = ("4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x12", "8x8x16", "8x16x16", "12x16x16", "16x16x16")
_CUBES_V5P = (*_CUBES_V4, "16x16x24", "16x20x28")
_CUBES_7X = ("4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16", "8x16x16", "16x16x16", "16x16x24", "16x24x24")
_TWO_D_LITE = ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")

TPU_GENERATIONS: dict[str, TpuGeneration] = {
    g.name: g
    for g in (
        TpuGeneration(
            "v2",
            "v2",
            "TPU v2",
            2,
            2,
            ("2x2", "4x4", "4x8", "8x8", "8x16", "16x16"),
            256,
            (2, 2, 1),
            "4 chips (8 cores) per host, as on a v2-8 machine",
            pod_side=16,
        ),
        TpuGeneration(
            "v3",
            "v3",
            "TPU v3",
            2,
            2,
            ("2x2", "4x4", "4x8", "8x8", "8x16", "16x16", "16x32", "32x32"),
            1024,
            (2, 2, 1),
            "4 chips (8 cores) per host, as on a v3-8 machine",
            pod_side=32,
        ),
        TpuGeneration(
            "v4",
            "v4",
            "TPU v4",
            1,
            3,
            (*_SMALL_3D, *_CUBES_V4),
            4096,
            (2, 2, 1),
            "4 chips per host (2x2x1); megacore: one device per chip",
            custom_multiple=4,
            chip_config="megacore",
            wrap_rule="cube",
        ),
        TpuGeneration(
            "v5e",
            "v5e",
            "TPU v5 lite",
            1,
            2,
            _TWO_D_LITE,
            256,
            (2, 2, 1),
            "slices of up to 8 chips on one host (1-, 4- and 8-chip machines); larger slices 4 chips (2x2) per host",
            pod_side=16,
            device_kind_aliases=("TPU v5e",),
        ),
        TpuGeneration(
            "v5p",
            "v5p",
            "TPU v5",
            1,
            3,
            (*_SMALL_3D, *_CUBES_V5P),
            8960,
            (2, 2, 1),
            "4 chips per host (2x2x1)",
            custom_multiple=4,
            wrap_rule="cube",
            device_kind_aliases=("TPU v5p",),
        ),
        TpuGeneration(
            "v6e",
            "v6e",
            "TPU v6 lite",
            1,
            2,
            _TWO_D_LITE,
            256,
            (2, 2, 1),
            "slices of up to 8 chips on one host (1-, 4- and 8-chip machines); larger slices 4 chips (2x2) per host",
            pod_side=16,
            device_kind_aliases=("TPU v6e",),
        ),
        TpuGeneration(
            "7x",
            "tpu7x",
            "TPU7x",
            2,
            3,
            (*_SMALL_3D, *_CUBES_7X),
            9216,
            (2, 2, 1),
            "4 chips (8 devices: 2 TensorCores per chip) per host (2x2x1)",
            custom_multiple=4,
            wrap_rule="cube",
        ),
    )
}

# GPU kinds: ``device_kind`` strings as JAX reports them on those GPUs, and memory per GPU.
GPU_KINDS: dict[str, tuple[str, int]] = {
    "v100": ("Tesla V100-SXM2-16GB", 16),
    "a100": ("NVIDIA A100-SXM4-80GB", 80),
    "a100-40gb": ("NVIDIA A100-SXM4-40GB", 40),
    "l4": ("NVIDIA L4", 24),
    "h100": ("NVIDIA H100 80GB HBM3", 80),
    "h200": ("NVIDIA H200", 141),
    "b200": ("NVIDIA B200", 180),
    "gb200": ("NVIDIA GB200", 186),
}


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceSet:
    """An immutable, validated set of devices in JAX's device-list order."""

    key: str  # canonical description, e.g. "tpu:v5e:4x4" or "tpu:v5e:4x4/slices=2/hosts=2x2x1"
    platform: str  # "cpu", "gpu" or "tpu"
    devices: tuple[Any, ...]
    generation: TpuGeneration | None = None
    topology: tuple[int, ...] | None = None  # chips per axis (TPU)
    chips_per_host: tuple[int, ...] | None = None
    slices: int = 1
    simulated: bool = True

    def __len__(self) -> int:
        return len(self.devices)

    @functools.cached_property
    def by_id(self) -> dict[int, Any]:
        return {d.id: d for d in self.devices}

    @property
    def num_hosts(self) -> int:
        return len({d.process_index for d in self.devices})


def _positive_int(text: str, what: str, spec: str) -> int:
    # Bound the digits before int(): "cpu:" followed by 10^6 digits must not cost anything; up to
    # 12 digits parse, so 10^9 devices is refused as too_large (the limit says what is allowed).
    if not re.fullmatch(r"[0-9]{1,12}", text) or int(text) < 1:
        raise ShardingError(
            BAD_DEVICES,
            f"{what} must be a positive integer of at most 12 digits, got {text[:20]!r} in {spec[:40]!r}",
            hint="e.g. cpu:8, gpu:h100:2x8, tpu:v5e:4x4",
        )
    return int(text)


def _dims(text: str, what: str, spec: str) -> tuple[int, ...]:
    parts = text.lower().split("x")
    if not 1 <= len(parts) <= 3:
        raise ShardingError(BAD_DEVICES, f"{what} must look like 4x4 or 2x2x2, got {text!r} in {spec!r}")
    return tuple(_positive_int(p, what, spec) for p in parts)


def _check_count(n: int, spec: str) -> None:
    if n > MAX_DEVICES:
        raise ShardingError(
            TOO_LARGE,
            f"{spec!r} has {n} devices; at most {MAX_DEVICES} devices per set are allowed",
            hint=f"choose a smaller set (the limit is MAX_DEVICES = {MAX_DEVICES})",
            limit=MAX_DEVICES,
        )


def _topology_ok(gen: TpuGeneration, topo: tuple[int, ...]) -> bool:
    text = "x".join(map(str, topo))
    if text in gen.topologies:
        return True
    if gen.custom_multiple is not None and len(topo) == 3:
        return all(d % gen.custom_multiple == 0 for d in topo) and math.prod(topo) <= gen.max_chips
    return False


def _topology_rule(gen: TpuGeneration) -> str:
    rule = ", ".join(gen.topologies)
    if gen.custom_multiple is not None:
        rule += f", or any AxBxC with each side a multiple of {gen.custom_multiple} and at most {gen.max_chips} chips"
    return rule


def parse_devices(
    text: str,
    *,
    slices: int = 1,
    chips_per_host: Sequence[int] | None = None,
) -> DeviceSet:
    """Parses a ``devices`` string into a (cached) :class:`DeviceSet`.

    ``slices`` asks a ``tpu:`` set for several slices joined by DCN; ``chips_per_host`` overrides
    the generation's host block (e.g. ``(2, 4, 1)`` for v5e 8-chip hosts).
    """
    if not isinstance(text, str) or len(text) > 64:
        raise ShardingError(BAD_DEVICES, "the devices string must be at most 64 characters", hint="e.g. tpu:v5e:4x4")
    if not 1 <= slices <= MAX_SLICES:
        raise ShardingError(BAD_DEVICES, f"slices must be between 1 and {MAX_SLICES}, got {slices}")
    cph = tuple(chips_per_host) if chips_per_host is not None else None
    return _parse_devices(text.strip(), slices, cph)


@bounded_cache("device_sets", lambda devset: 1024 + 160 * len(devset))
def _parse_devices(text: str, slices: int, chips_per_host: tuple[int, ...] | None) -> DeviceSet:
    kind, _, rest = text.partition(":")
    kind = kind.lower()
    if slices != 1 and kind != "tpu":
        raise ShardingError(BAD_DEVICES, f"slices applies to tpu: sets only, got slices={slices} for {text!r}")
    if chips_per_host is not None and kind != "tpu":
        raise ShardingError(BAD_DEVICES, f"chips_per_host applies to tpu: sets only, got it for {text!r}")
    if kind == "cpu":
        n = _positive_int(rest, "the CPU count", text)
        _check_count(n, text)
        devs = tuple(SimDevice(i, "cpu", "cpu", 0) for i in range(n))
        return DeviceSet(f"cpu:{n}", "cpu", devs)
    if kind == "gpu":
        gpu_kind, _, hxg = rest.partition(":")
        gpu_kind = gpu_kind.lower()
        if gpu_kind not in GPU_KINDS:
            raise ShardingError(
                BAD_DEVICES,
                f"unknown GPU kind {gpu_kind!r} in {text!r}; known kinds: {', '.join(GPU_KINDS)}",
                hint="e.g. gpu:h100:2x8 (2 hosts with 8 GPUs each)",
            )
        dims = _dims(hxg, "hosts x GPUs", text)
        if len(dims) != 2:
            raise ShardingError(BAD_DEVICES, f"GPU sets are HOSTSxGPUS, e.g. gpu:h100:2x8; got {hxg!r}")
        hosts, per_host = dims
        _check_count(hosts * per_host, text)
        device_kind = GPU_KINDS[gpu_kind][0]
        devs = tuple(SimDevice(h * per_host + g, "gpu", device_kind, h) for h in range(hosts) for g in range(per_host))
        return DeviceSet(f"gpu:{gpu_kind}:{hosts}x{per_host}", "gpu", devs)
    if kind == "tpu":
        return _tpu_set(text, rest, slices, chips_per_host)
    if kind == "local" and not rest:
        return local_devices()
    raise ShardingError(
        BAD_DEVICES,
        f"unknown device set {text!r}; allowed forms: cpu:N, gpu:KIND:HxG, tpu:GEN:TOPO, local",
        hint="e.g. cpu:8, gpu:h100:2x8, tpu:v5e:4x4, tpu:v4:2x2x2",
    )


def _tpu_set(text: str, rest: str, slices: int, chips_per_host: tuple[int, ...] | None) -> DeviceSet:
    gen_name, _, topo_text = rest.partition(":")
    gen = TPU_GENERATIONS.get(gen_name.lower())
    if gen is None:
        raise ShardingError(
            BAD_DEVICES,
            f"unknown TPU generation {gen_name!r}; known generations: {', '.join(TPU_GENERATIONS)}",
            hint="e.g. tpu:v5e:4x4, tpu:v4:2x2x2, tpu:v5p:4x4x4",
        )
    topo = _dims(topo_text, "the topology", text)
    if len(topo) != gen.dims or not _topology_ok(gen, topo):
        raise ShardingError(
            BAD_DEVICES,
            f"TPU {gen.name} has no {topo_text!r} slice; {gen.name} slices are {_topology_rule(gen)}",
            hint=f"e.g. tpu:{gen.name}:{gen.topologies[1]}",
        )
    chips = math.prod(topo)
    _check_count(chips * gen.cores_per_chip * slices, f"{text} x {slices} slices" if slices > 1 else text)
    topo3 = (*topo, 1) if len(topo) == 2 else topo
    if chips_per_host is None:
        host = gen.single_host_bounds(topo3)  # type: ignore[arg-type]
    else:
        if len(chips_per_host) not in (2, 3) or any(c < 1 for c in chips_per_host):
            raise ShardingError(BAD_DEVICES, f"chips_per_host must be 2 or 3 positive sizes, got {chips_per_host}")
        host = (*chips_per_host, 1) if len(chips_per_host) == 2 else chips_per_host  # type: ignore[assignment]
    if any(t % h for t, h in zip(topo3, host, strict=True)):
        raise ShardingError(
            BAD_DEVICES,
            f"chips_per_host {'x'.join(map(str, host))} does not tile the {topo_text} slice",
            hint="each side of the host block must divide the matching side of the topology",
        )
    devices = _tpu_devices(gen, topo3, host, slices)  # type: ignore[arg-type]
    key = f"tpu:{gen.name}:{'x'.join(map(str, topo))}"
    if slices > 1:
        key += f"/slices={slices}"
    if chips_per_host is not None:
        key += f"/hosts={'x'.join(map(str, host))}"
    return DeviceSet(key, "tpu", devices, gen, topo, host, slices)


def devices_of_key(key: str) -> DeviceSet:
    """The device set its canonical :attr:`DeviceSet.key` names (``tpu:v5e:4x4/slices=2/hosts=2x2x1``: the devices
    string, then its slices and host block when they were given), as :func:`parse_devices` made it."""
    text, *extras = key.split("/")
    options = dict(e.split("=", 1) for e in extras if "=" in e)
    hosts = options.get("hosts")
    try:
        slices = int(options.get("slices", "1"))
        chips = tuple(int(x) for x in hosts.split("x")) if hosts else None
    except ValueError:
        raise ShardingError(BAD_DEVICES, f"not a device set's key: {key[:80]!r}") from None
    return parse_devices(text, slices=slices, chips_per_host=chips)


def _tpu_devices(
    gen: TpuGeneration, topo: tuple[int, int, int], host: tuple[int, int, int], slices: int
) -> tuple[SimDevice, ...]:
    X, Y, Z = topo
    hx, hy, hz = host
    HX, HY = X // hx, Y // hy
    hosts_per_slice = math.prod(t // h for t, h in zip(topo, host, strict=True))
    cores = gen.cores_per_chip
    out: list[tuple[int, int, SimDevice]] = []
    for s in range(slices):
        base = (s + 1) * _MULTISLICE_ID_STRIDE if slices > 1 else 0
        for z in range(Z):
            for y in range(Y):
                for x in range(X):
                    chip = x + X * (y + Y * z)
                    proc = s * hosts_per_slice + (x // hx) + HX * ((y // hy) + HY * (z // hz))
                    for c in range(cores):
                        dev_id = base + cores * chip + c
                        dev = SimDevice(dev_id, "tpu", gen.device_kind, proc, (x, y, z), c, s if slices > 1 else None)
                        out.append((proc, dev_id, dev))
    out.sort(key=lambda t: (t[0], t[1]))
    return tuple(d for _, _, d in out)


def local_devices() -> DeviceSet:
    """The serving process's own ``jax.devices()``: real devices, not simulated."""
    import jax

    devs = tuple(jax.devices())
    platform = devs[0].platform
    return DeviceSet("local", platform, devs, simulated=False)


def device_info(dev: Any) -> dict[str, Any]:
    """The JSON view of one device: what JAX reports for it."""
    coords = getattr(dev, "coords", None)
    info: dict[str, Any] = {
        "id": int(dev.id),
        "platform": dev.platform,
        "device_kind": dev.device_kind,
        "process_index": int(dev.process_index),
        "coords": list(coords) if coords is not None else None,
        "core_on_chip": int(getattr(dev, "core_on_chip", 0) or 0),
    }
    slice_index = getattr(dev, "slice_index", None)
    if slice_index is not None:
        info["slice_index"] = int(slice_index)
    return info


def platforms_catalog() -> dict[str, Any]:
    """What the frontend's pickers are built from: generations, topologies, hosts, GPU kinds."""
    return {
        "max_devices": MAX_DEVICES,
        "max_slices": MAX_SLICES,
        "tpu": [
            {
                "name": g.name,
                "device_kind": g.device_kind,
                "cores_per_chip": g.cores_per_chip,
                "dims": g.dims,
                "topologies": list(g.topologies),
                "custom_rule": (
                    f"AxBxC, each side a multiple of {g.custom_multiple}, at most {g.max_chips} chips"
                    if g.custom_multiple
                    else None
                ),
                "max_chips": g.max_chips,
                "chips_per_host": list(g.chips_per_host),
                "chips_per_host_note": g.chips_per_host_note,
            }
            for g in TPU_GENERATIONS.values()
        ],
        "gpu": [{"name": k, "device_kind": v[0], "memory_gib": v[1]} for k, v in GPU_KINDS.items()],
        "cpu": {"max_devices": MAX_DEVICES},
    }
