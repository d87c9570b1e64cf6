"""Device sets: the contract's devices strings, their errors, and JAX's orderings on them."""

from __future__ import annotations

import math
import time

import jax
import pytest
from jax.experimental import mesh_utils

from sharding_core.devices import GPU_KINDS, MAX_DEVICES, TPU_GENERATIONS, parse_devices, platforms_catalog
from sharding_core.errors import ShardingError


def test_cpu_set_ids_and_cache() -> None:
    ds = parse_devices("cpu:8")
    assert [d.id for d in ds.devices] == list(range(8))
    assert {d.platform for d in ds.devices} == {"cpu"}
    assert parse_devices("cpu:8") is ds  # cached: meshes and shardings reuse the same objects


def test_gpu_set_is_host_major() -> None:
    ds = parse_devices("gpu:h100:2x8")
    assert [d.id for d in ds.devices] == list(range(16))
    assert [d.process_index for d in ds.devices] == [0] * 8 + [1] * 8
    assert ds.devices[0].device_kind == GPU_KINDS["h100"][0]
    assert ds.num_hosts == 2


@pytest.mark.parametrize(
    ("text", "devices", "hosts"),
    [
        ("tpu:v2:2x2", 8, 1),
        ("tpu:v3:4x4", 32, 4),
        ("tpu:v4:2x2x1", 4, 1),
        ("tpu:v4:4x4x4", 64, 16),
        ("tpu:v5e:1x1", 1, 1),
        ("tpu:v5e:2x4", 8, 1),  # v5litepod-8: one 8-chip host
        ("tpu:v5e:4x4", 16, 4),  # multi-host v5e: 4 chips (2x2) per host
        ("tpu:v5p:2x2x1", 4, 1),
        ("tpu:v6e:16x16", 256, 64),
        ("tpu:7x:2x2x1", 8, 1),
        ("tpu:v5p:16x16x24", 6144, 1536),
    ],
)
def test_tpu_sizes_and_hosts(text: str, devices: int, hosts: int) -> None:
    ds = parse_devices(text)
    assert len(ds) == devices
    assert ds.num_hosts == hosts
    assert len({d.id for d in ds.devices}) == devices


def test_tpu_device_kind_and_cores() -> None:
    v3 = parse_devices("tpu:v3:2x2")
    assert {d.core_on_chip for d in v3.devices} == {0, 1}
    assert v3.devices[0].device_kind == "TPU v3"
    v4 = parse_devices("tpu:v4:2x2x2")  # megacore: one device per chip
    assert {d.core_on_chip for d in v4.devices} == {0}
    assert len(v4) == 8


def test_multislice_ids_and_hosts() -> None:
    ds = parse_devices("tpu:v5e:4x4", slices=2)
    assert len(ds) == 32
    assert {d.slice_index for d in ds.devices} == {0, 1}
    assert min(d.id for d in ds.devices if d.slice_index == 1) == 200000
    assert ds.num_hosts == 8


def test_chips_per_host_override() -> None:
    ds = parse_devices("tpu:v5e:4x4", chips_per_host=(2, 4))
    assert ds.num_hosts == 2
    assert "hosts=2x4x1" in ds.key


def test_v3_tray_ring_order_from_make_mesh() -> None:
    # jax.make_mesh's docstring: on 8 TPU v3 devices the ring order is 0 1 2 3 6 7 4 5.
    ds = parse_devices("tpu:v3:2x2")
    mesh = jax.make_mesh((8,), ("x",), devices=ds.devices)
    assert [d.id for d in mesh.devices.flat] == [0, 1, 2, 3, 6, 7, 4, 5]


def test_create_device_mesh_accepts_simulated_devices() -> None:
    ds = parse_devices("tpu:v4:2x2x2")
    grid = mesh_utils.create_device_mesh((2, 4), ds.devices)
    assert sorted(d.id for d in grid.flat) == list(range(8))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("tpu:v9:4x4", "known generations: v2, v3, v4, v5e, v5p, v6e, 7x"),
        ("tpu:v5e:3x3", "v5e slices are 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"),
        ("tpu:v4:4x4", "v4 slices are"),
        ("tpu:v4:4x4x6", "multiple of 4"),
        ("gpu:k80:1x8", "known kinds: v100"),
        ("gpu:h100:8", "HOSTSxGPUS"),
        ("cpu:0", "positive integer"),
        ("cpu:abc", "positive integer"),
        ("fpga:8", "allowed forms"),
        ("", "allowed forms"),
    ],
)
def test_bad_device_sets_explain(text: str, fragment: str) -> None:
    with pytest.raises(ShardingError) as e:
        parse_devices(text)
    assert e.value.code == "bad_devices"
    assert fragment in e.value.message


@pytest.mark.parametrize("text", ["cpu:16385", "gpu:h100:1000x1000", "tpu:v4:16x16x32", "cpu:1000000"])
def test_too_many_devices_refused_before_allocating(text: str) -> None:
    with pytest.raises(ShardingError) as e:
        parse_devices(text)
    assert e.value.code in ("too_large", "bad_devices")


def test_limit_accepted_and_one_past_refused() -> None:
    assert len(parse_devices(f"cpu:{MAX_DEVICES}")) == MAX_DEVICES
    with pytest.raises(ShardingError) as e:
        parse_devices(f"cpu:{MAX_DEVICES + 1}")
    assert e.value.code == "too_large"


def test_billion_devices_refused_in_milliseconds() -> None:
    start = time.perf_counter()
    for text in ("cpu:1000000000", "gpu:h100:100000x10000", "tpu:v5p:1000x1000x1000", "cpu:" + "9" * 100_000):
        with pytest.raises(ShardingError):
            parse_devices(text)
    assert time.perf_counter() - start < 1.0  # a guard against allocating, not a benchmark


def test_multislice_limits() -> None:
    with pytest.raises(ShardingError):
        parse_devices("cpu:8", slices=2)
    with pytest.raises(ShardingError) as e:
        parse_devices("tpu:v5p:16x16x24", slices=4)
    assert e.value.code == "too_large"


def test_local_is_jax_devices() -> None:
    ds = parse_devices("local")
    assert list(ds.devices) == jax.devices()
    assert not ds.simulated


def test_catalog_lists_every_generation() -> None:
    cat = platforms_catalog()
    assert [g["name"] for g in cat["tpu"]] == list(TPU_GENERATIONS)
    for g in cat["tpu"]:
        for topo in g["topologies"]:
            ds = parse_devices(f"tpu:{g['name']}:{topo}") if math.prod(map(int, topo.split("x"))) <= 1024 else None
            if ds is not None:
                assert len(ds) == math.prod(map(int, topo.split("x"))) * g["cores_per_chip"]
