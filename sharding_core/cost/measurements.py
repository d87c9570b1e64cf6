"""Published measurements of collectives, each with its public source: what the cost model's *expected*
times are fitted to and checked against (:mod:`.efficiency`, ``tests/test_cost_measured.py``,
``bench/bench_cost.py``, ``docs/cost-model.md``).

A row is one collective on one device set, as the cost model takes it (``op``, ``bytes`` per device, device
``groups``), and the time it was measured to take. Where the source prints a bandwidth, the time is derived
with the source's own definition, said in ``read``: nccl-tests' bus bandwidth (``doc/PERFORMANCE.md``:
all-reduce ``busbw = algbw · 2 (n − 1) / n``, ``algbw = size / time``) gives ``time = size · 2 (n − 1) / n /
busbw``; the accelerator-microbenchmarks guide prints ``achieved_bw = transferred / time``. Statements of a
peak ("up to", "you should see") are taken at a large message (``bytes`` says which) where the latency term
is negligible. Nothing here is tuned: the rows are what the sources say.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sharding_core.devices import DeviceSet, parse_devices

GiB = 2**30
MiB = 2**20

BOOK_SHARDING = "https://jax-ml.github.io/scaling-book/sharding/"
BOOK_GPUS = "https://jax-ml.github.io/scaling-book/gpus/"
IRONWOOD_AG = (
    "https://github.com/AI-Hypercomputer/accelerator-microbenchmarks/blob/"
    "ecd4c82fac418f597923c800f48883081d480ac3/Ironwood/guides/collectives/all_gather.md"
)


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One published measurement: a collective (``op`` of ``bytes`` per device over ``groups(devset)``) on
    ``devices`` that took ``seconds``."""

    name: str
    devices: str
    op: str
    bytes: int
    groups: Callable[[DeviceSet], list[list[int]]]
    seconds: float
    url: str
    read: str  # how the number was read from the source

    def collective(self, devset: DeviceSet) -> dict[str, Any]:
        return {"op": self.op, "bytes": self.bytes, "groups": self.groups(devset), "pairs": None}

    def devset(self) -> DeviceSet:
        return parse_devices(self.devices)


def everyone(devset: DeviceSet) -> list[list[int]]:
    return [[d.id for d in devset.devices]]


def line_of_4_along_x(devset: DeviceSet) -> list[list[int]]:
    """v5e 4x8: groups of the 4 chips along x (an axis of 4: no wraparound)."""
    return [[x + 4 * y for x in range(4)] for y in range(8)]


def one_core_per_chip(devset: DeviceSet) -> list[list[int]]:
    """TPU7x: the devices of each core index together (the benchmark's "parallel" replica groups: even ids)."""
    by_core: dict[int, list[int]] = {}
    for d in devset.devices:
        by_core.setdefault(int(d.core_on_chip), []).append(int(d.id))
    return [sorted(g) for _, g in sorted(by_core.items())]


def _busbw_all_reduce(size: int, ranks: int, busbw: float) -> float:
    """nccl-tests' all-reduce time from its bus bandwidth: size · 2 (n − 1) / n / busbw."""
    return size * 2 * (ranks - 1) / ranks / busbw


def _ironwood(strategy: str, elements: int, transferred_gb: float, achieved_gbps: float) -> Measurement:
    shard = elements * 4  # f32
    per_group = 4 if strategy == "2x2x1" else 8
    groups = one_core_per_chip if strategy == "2x2x1" else everyone
    return Measurement(
        name=f"TPU7x 2x2x1 all-gather over {per_group} devices, f32 shard {shard // 1024} KiB",
        devices="tpu:7x:2x2x1",
        op="all-gather",
        bytes=shard * per_group,
        groups=groups,
        seconds=transferred_gb / achieved_gbps,
        url=IRONWOOD_AG,
        read=(
            f"'Expected Results', sharding {strategy}, {elements} elements: transferred {transferred_gb} GB at "
            f"{achieved_gbps} GB/s achieved (time = transferred / achieved)"
        ),
    )


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement(
        "TPU v5e all-gather along an axis of 4 (no wraparound), bf16[2048, 8192]",
        "tpu:v5e:4x8",
        "all-gather",
        2048 * 8192 * 2,
        line_of_4_along_x,
        680e-6,
        BOOK_SHARDING,
        "Pop quiz: AllGather_Y([E_Y, F]), E = 2048, F = 8192 bf16 on v5e {'X': 8, 'Y': 4}: predicted 560 us, "
        "'an actual profile ... shows 680 us'",
    ),
    Measurement(
        "TPU v5e all-gather along an axis of 4 (no wraparound), 32 kB shards (latency-bound)",
        "tpu:v5e:4x8",
        "all-gather",
        4 * 64 * 256 * 2,
        line_of_4_along_x,
        8e-6,
        BOOK_SHARDING,
        "Pop quiz part (2): 'each shard has size 64 * 256 * 2 = 32kB ... 3 hops ... 3us. In practice, it's closer "
        "to 8us'",
    ),
    _ironwood("2x2x1", 65536, 0.001572864, 71.7703034),
    _ironwood("2x2x1", 262144, 0.006291456, 129.1869148),
    _ironwood("2x2x1", 1048576, 0.025165824, 161.9040742),
    _ironwood("2x2x1", 4194304, 0.100663296, 174.765465),
    _ironwood("2x2x1", 16777216, 0.402653184, 178.7714158),
    _ironwood("2x2x2", 65536, 0.001572864, 69.53210305),
    _ironwood("2x2x2", 262144, 0.006291456, 127.3945462),
    _ironwood("2x2x2", 1048576, 0.025165824, 162.0864029),
    _ironwood("2x2x2", 4194304, 0.100663296, 174.6652133),
    _ironwood("2x2x2", 16777216, 0.402653184, 178.7592252),
    Measurement(
        "8 x H100 NVLink all-reduce, ring (no NVLink SHARP), large messages",
        "gpu:h100:1x8",
        "all-reduce",
        4 * GiB,
        everyone,
        _busbw_all_reduce(4 * GiB, 8, 370e9),
        "https://github.com/NVIDIA/nccl-tests/issues/212",
        "NCCL maintainer: 'With the protocol overhead (~20%) NCCL can get an effective NVLink bandwidth of "
        "370GB/s, which you can observe as BusBw ... when running with NCCL_ALGO=RING' (taken at 4 GiB)",
    ),
    Measurement(
        "8 x H100 NVLink all-reduce, NVLink SHARP, large messages",
        "gpu:h100:1x8",
        "all-reduce",
        4 * GiB,
        everyone,
        _busbw_all_reduce(4 * GiB, 8, 480e9),
        "https://github.com/NVIDIA/nccl-tests/issues/212",
        "NCCL maintainer: 'On 8 GPUs, you should reach a peak busBw of ~480GB/s' (taken at 4 GiB)",
    ),
    Measurement(
        "8 x H100 NVLink all-reduce, single node, nccl-tests",
        "gpu:h100:1x8",
        "all-reduce",
        8 * GiB,
        everyone,
        _busbw_all_reduce(8 * GiB, 8, 476e9),
        "https://github.com/NVIDIA/nccl-tests/issues/290",
        "'The single node run above will be using NVLink and NVLink SHARP ... 476GB/s looks to be in the expected "
        "range for H100' (bus bandwidth, taken at 8 GiB)",
    ),
    Measurement(
        "8 x H200 NVLink all-reduce, nccl-tests peak",
        "gpu:h200:1x8",
        "all-reduce",
        4 * GiB,
        everyone,
        _busbw_all_reduce(4 * GiB, 8, 475e9),
        "https://github.com/NVIDIA/nccl-tests/issues/272",
        "all_reduce_perf -b 64k -e 4G on 8 x H200: 'The output shows peak bandwidth of 475 GB/s' (bus bandwidth, "
        "at 4 GiB)",
    ),
    Measurement(
        "8 x B200 NVLink all-reduce, nccl-tests",
        "gpu:b200:1x8",
        "all-reduce",
        8 * GiB,
        everyone,
        _busbw_all_reduce(8 * GiB, 8, 830e9),
        "https://github.com/NVIDIA/nccl/issues/1807",
        "'should the all_reduce_perf performance of 8 B200s in a single machine reach 900+? Ours is 830+' (bus "
        "bandwidth, taken at 8 GiB)",
    ),
    Measurement(
        "8 x H100 all-reduce of LLaMA-3 70B's MLP shard, bf16[8192, 3584]",
        "gpu:h100:1x8",
        "all-reduce",
        8192 * 3584 * 2,
        everyone,
        _busbw_all_reduce(8192 * 3584 * 2, 8, 150e9),
        BOOK_GPUS,
        "'an AllReduce over ... bf16[8192, 3584] = 58MB can achieve only around 150GB/s' (the chapter's empirical "
        "link bandwidth, 2 · bytes · (N − 1) / (N · runtime))",
    ),
    Measurement(
        "8 x H100 NCCL all-reduce, 16 MiB",
        "gpu:h100:1x8",
        "all-reduce",
        16 * MiB,
        everyone,
        135.68e-6,
        "https://github.com/ByteDance-Seed/Triton-distributed/issues/57",
        "the issue's table, 8xH100 intra-node, NCCL (torch.distributed) column: 16MB, 135.68 us",
    ),
    Measurement(
        "8 x H100 NCCL all-reduce, 1 MiB",
        "gpu:h100:1x8",
        "all-reduce",
        1 * MiB,
        everyone,
        32.42e-6,
        "https://github.com/ByteDance-Seed/Triton-distributed/issues/57",
        "the issue's table, 8xH100 intra-node, NCCL column: 1MB, 32.42 us",
    ),
    Measurement(
        "8 x H100 NCCL all-reduce, 128 B (latency)",
        "gpu:h100:1x8",
        "all-reduce",
        128,
        everyone,
        19.19e-6,
        "https://github.com/ByteDance-Seed/Triton-distributed/issues/57",
        "the issue's table, 8xH100 intra-node, NCCL column: 128B, 19.19 us",
    ),
    Measurement(
        "2 x 8 A100 (DGX A100, 8 x 200 Gb/s HDR InfiniBand) all-reduce, ring",
        "gpu:a100:2x8",
        "all-reduce",
        8 * GiB,
        everyone,
        _busbw_all_reduce(8 * GiB, 16, 192e9),
        "https://github.com/NVIDIA/nccl/issues/812",
        "NCCL maintainer: 'On an Nvidia DGX-A100 system we have 8x200Gbit/s IB cards and we measure 192GB/s "
        "AllReduce BusBW' (two nodes, ring; taken at 8 GiB)",
    ),
    Measurement(
        "2 x 8 H100 (8 x 400 Gb/s NDR InfiniBand) all-reduce, ring",
        "gpu:h100:2x8",
        "all-reduce",
        8 * GiB,
        everyone,
        _busbw_all_reduce(8 * GiB, 16, 8 * 47e9),
        "https://github.com/NVIDIA/nccl-tests/issues/290",
        "NCCL maintainer, two nodes with NCCL_ALGO=RING: 'For NDR @ 400Gbps you should see 46-48GB/s per NIC' "
        "(8 NICs a node: bus bandwidth 8 x 47 GB/s, taken at 8 GiB)",
    ),
    Measurement(
        "248 x 8 H200 (8 NICs a node) all-reduce, 512 MiB",
        "gpu:h200:248x8",
        "all-reduce",
        512 * MiB,
        everyone,
        _busbw_all_reduce(512 * MiB, 1984, 350e9),
        "https://github.com/NVIDIA/nccl-tests/issues/283",
        "248 servers of 8 H200, all_reduce_perf --minbytes 512M --maxbytes 512M, default algorithm: 'the bus "
        "bandwidth ... typically measuring around 350G'",
    ),
    Measurement(
        "2 x 1 A100 across HDR InfiniBand, 8-byte all-reduce (latency)",
        "gpu:a100:2x1",
        "all-reduce",
        8,
        everyone,
        19.90e-6,
        "https://github.com/NVIDIA/nccl-tests/issues/150",
        "all_reduce_perf, one GPU on each of two nodes: 8 B, out-of-place time 19.90 us",
    ),
)
