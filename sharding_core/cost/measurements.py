"""Published measurements of collectives, each with its public source: what the cost model's *expected*
times are fitted to (the training sources) and checked against (the held-out sources) — :mod:`.efficiency`,
``tests/test_cost_measured.py``, ``bench/bench_cost.py``, ``docs/cost-model.md``.

A row is one collective on one device set, as the cost model takes it (``op``, ``bytes`` per device as the HLO
writes it, device ``groups``), and the time it was measured to take. Where the source prints a bandwidth, the
time is derived with the source's own definition, said in ``read``. nccl-tests (``doc/PERFORMANCE.md``) prints
``algbw = size / time`` and ``busbw = algbw · factor``: all-reduce ``2 (n − 1) / n``; all-gather, reduce-scatter
and all-to-all ``(n − 1) / n``; ``size`` is the buffer per rank — an all-gather's *output*, a reduce-scatter's
*input* (``n`` times the HLO result), an all-to-all's send buffer. So ``time = size · factor / busbw``. The
accelerator-microbenchmarks guide prints ``achieved_bw = transferred / time``. Statements of a peak ("up to",
"you should see") are taken at a large message (``bytes`` says which), where the latency term is negligible.
Nothing here is tuned: the rows are what the sources say.

**Sources, not rows, are split** into the training set (the fitted constants see only these) and the held-out
set (never fitted; reported). The split is declared here, before any fit, by three rules, and a source is never
moved because of its error (``tests/test_cost_measured.py`` pins the split):

1. every (operation, fabric) that any source measures is measured by at least one training source, so a
   held-out row tests a prediction, not a missing fit;
2. every fabric keeps at least one held-out source;
3. of the rest, about a third of each fabric's sources are held out, taking first the kinds issue 31 named as
   out of sample: nccl-tests reports on H100/A100 and the scaling book's worked figures.

**Counted once.** A source that lists the same measurement twice contributes it once: the accelerator-
microbenchmarks Ironwood guide runs one 4-way all-gather (one core of each chip of a 2x2 plane) on a 2x2x1 and
on a 2x2x2 slice; the 2x2x2 rows are kept in :data:`REPLICATES`, modelled as the source states them, and left
out of every fit and figure (a test checks each is the same collective as its twin).

**Rows from a sweep.** From a size sweep the rows taken are its largest size and every 16× smaller, down to the
smallest size it prints with at least two significant digits of bandwidth (so one sweep does not outweigh the
other sources tenfold); the rows left out are named in ``read``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sharding_core.devices import DeviceSet, parse_devices

GiB = 2**30
MiB = 2**20
KiB = 2**10

TRAIN = "train"
HELD_OUT = "held_out"


@dataclasses.dataclass(frozen=True)
class Source:
    """One published set of measurements: its address, which split it is in, and why (the rule above)."""

    key: str
    url: str
    title: str
    split: str  # TRAIN or HELD_OUT
    why: str

    def json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_ML_ENG = "https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/network/README.md"
_PEDIA = (
    "https://github.com/yangwhale/gpu-tpu-pedia/blob/3fa9ce174583eba63032ed504a05793fe8bd520b/"
    "gpu/a4x/04-nccl-test/README.en.md"
)

SOURCES: dict[str, Source] = {
    s.key: s
    for s in (
        # ICI (TPU slices)
        Source(
            "book-sharding",
            "https://jax-ml.github.io/scaling-book/sharding/",
            "How to Scale Your Model, sharding chapter: Pop Quiz 2's profiles (TPU v5e)",
            HELD_OUT,
            "rule 3: the scaling book's worked figures; the all-gather over ICI is also measured by two training "
            "sources",
        ),
        Source(
            "ironwood-all-gather",
            "https://github.com/AI-Hypercomputer/accelerator-microbenchmarks/blob/"
            "ecd4c82fac418f597923c800f48883081d480ac3/Ironwood/guides/collectives/all_gather.md",
            "accelerator-microbenchmarks, Ironwood all-gather guide: Expected Results (TPU7x)",
            TRAIN,
            "the largest TPU sweep (5 sizes); train so ICI's size dependence is fitted",
        ),
        Source(
            "jetstream-pytorch-168",
            "https://github.com/AI-Hypercomputer/jetstream-pytorch/pull/168",
            "jetstream-pytorch PR 168: benchmarks/basic_ops.py output on a v5litepod-8 (TPU v5e 2x4)",
            TRAIN,
            "rule 1: the only all-reduce over ICI",
        ),
        # NVLink (one GPU host, or one NVLink domain)
        Source(
            "nccl-tests-212",
            "https://github.com/NVIDIA/nccl-tests/issues/212",
            "nccl-tests issue 212: 8 x H100 NVLink all-reduce bandwidth (NCCL maintainer)",
            HELD_OUT,
            "rule 3: an nccl-tests report on H100",
        ),
        Source(
            "nccl-tests-290",
            "https://github.com/NVIDIA/nccl-tests/issues/290",
            "nccl-tests issue 290: single-node and two-node H100 all-reduce",
            HELD_OUT,
            "rule 3: an nccl-tests report on H100 (its two-node row is the network's held-out row with 812)",
        ),
        Source(
            "nccl-tests-272",
            "https://github.com/NVIDIA/nccl-tests/issues/272",
            "nccl-tests issue 272: 8 x H200 all_reduce_perf peak",
            TRAIN,
            "rule 3: two thirds train",
        ),
        Source(
            "nccl-1807",
            "https://github.com/NVIDIA/nccl/issues/1807",
            "NCCL issue 1807: 8 x B200 all_reduce_perf",
            TRAIN,
            "rule 3: two thirds train",
        ),
        Source(
            "book-gpus",
            "https://jax-ml.github.io/scaling-book/gpus/",
            "How to Scale Your Model, GPUs chapter: the empirical all-reduce bandwidth of LLaMA-3 70B's MLP shard",
            HELD_OUT,
            "rule 3: the scaling book's worked figure (issue 31: 56 MiB on 8 x H100, expected 54 % low)",
        ),
        Source(
            "triton-distributed-57",
            "https://github.com/ByteDance-Seed/Triton-distributed/issues/57",
            "Triton-distributed issue 57: 8 x H100 NCCL all-reduce times, 128 B to 16 MiB",
            TRAIN,
            "the only small-message NVLink sweep: train so NVLink's latency is fitted",
        ),
        Source(
            "ml-engineering-b200-node",
            f"{_ML_ENG}#inter-node-speed-depends-on-intra-node-speed",
            "Machine Learning Engineering, network: all_reduce_bench on one 8 x B200 node (1 node column)",
            TRAIN,
            "rule 3: two thirds train",
        ),
        Source(
            "ml-engineering-sharp-h200",
            f"{_ML_ENG}#sharp",
            "Machine Learning Engineering, network, SHARP: nccl-tests on 4 to 8 of an 8 x H200 node, 8 GiB",
            HELD_OUT,
            "rule 3: held out (group sizes below a full node)",
        ),
        Source(
            "ml-engineering-sharp-b200",
            f"{_ML_ENG}#sharp",
            "Machine Learning Engineering, network, SHARP: nccl-tests on 4 to 8 of an 8 x B200 node, 8 GiB",
            TRAIN,
            "rule 3: two thirds train",
        ),
        Source(
            "gpu-tpu-pedia-gb200",
            _PEDIA,
            "gpu-tpu-pedia, A4X (GB200 NVL72) NCCL tests: four collectives inside an NVLink domain, and RDMA",
            TRAIN,
            "rule 1: the only all-gather, reduce-scatter and all-to-all over NVLink",
        ),
        # the network between GPU hosts
        Source(
            "nccl-812",
            "https://github.com/NVIDIA/nccl/issues/812",
            "NCCL issue 812: DGX A100 two-node all-reduce bus bandwidth (NCCL maintainer)",
            HELD_OUT,
            "rule 3: an NCCL report on A100",
        ),
        Source(
            "nccl-tests-283",
            "https://github.com/NVIDIA/nccl-tests/issues/283",
            "nccl-tests issue 283: 248 x 8 H200 all-reduce, 512 MiB",
            TRAIN,
            "rule 3: two thirds train",
        ),
        Source(
            "nccl-tests-150",
            "https://github.com/NVIDIA/nccl-tests/issues/150",
            "nccl-tests issue 150: two A100 nodes over HDR InfiniBand, 8-byte all-reduce",
            TRAIN,
            "the only measured network latency: train",
        ),
        Source(
            "ml-engineering-b200-4-nodes",
            f"{_ML_ENG}#inter-node-speed-depends-on-intra-node-speed",
            "Machine Learning Engineering, network: all_reduce_bench on 4 x 8 B200 (EFA v4), 4 nodes column",
            TRAIN,
            "the only multi-node size sweep: train so the network's size dependence is fitted",
        ),
    )
}


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One published measurement: a collective (``op`` of ``bytes`` per device over ``groups(devset)``) on
    ``devices`` that took ``seconds``, from :data:`SOURCES` ``[source]``."""

    name: str
    devices: str
    op: str
    bytes: int
    groups: Callable[[DeviceSet], list[list[int]]]
    seconds: float
    source: str
    read: str  # how the number was read from the source
    replicate_of: str | None = None  # the row of the same collective this one repeats (counted once)

    @property
    def url(self) -> str:
        return SOURCES[self.source].url

    @property
    def split(self) -> str:
        return SOURCES[self.source].split

    def collective(self, devset: DeviceSet) -> dict[str, Any]:
        return {"op": self.op, "bytes": self.bytes, "groups": self.groups(devset), "pairs": None}

    def devset(self) -> DeviceSet:
        return parse_devices(self.devices)


def everyone(devset: DeviceSet) -> list[list[int]]:
    return [[d.id for d in devset.devices]]


def first(n: int) -> Callable[[DeviceSet], list[list[int]]]:
    """One group: the first ``n`` devices (``CUDA_VISIBLE_DEVICES=0..n-1``, or ``n`` GPUs of an NVLink domain)."""

    def groups(devset: DeviceSet) -> list[list[int]]:
        return [[d.id for d in devset.devices[:n]]]

    groups.__name__ = f"first_{n}"
    return groups


def line_of_4_along_x(devset: DeviceSet) -> list[list[int]]:
    """v5e 4x8: groups of the 4 chips along x (an axis of 4: no wraparound)."""
    return [[x + 4 * y for x in range(4)] for y in range(8)]


def one_core_per_chip(devset: DeviceSet) -> list[list[int]]:
    """TPU7x 2x2x1 (4 chips, 8 devices): the benchmark's 2x2x2 mesh sharded 2x2x1 — one group per core index,
    a 2x2 plane of chips (its "parallel" replica groups: the first holds the even ids)."""
    by_core: dict[int, list[int]] = {}
    for d in devset.devices:
        by_core.setdefault(int(d.core_on_chip), []).append(int(d.id))
    return [sorted(g) for _, g in sorted(by_core.items())]


def ironwood_2x2x2_groups(devset: DeviceSet) -> list[list[int]]:
    """TPU7x 2x2x2 (8 chips, 16 devices): the benchmark's mesh 2x4x2 (``mesh_utils.create_device_mesh``) sharded
    1x4x1 — groups along the mesh's axis of 4, which ``create_device_mesh`` lays on one core of each chip of a
    2x2 plane (``[[0, 2, 6, 4], [1, 3, 7, 5], [8, 10, 14, 12], [9, 11, 15, 13]]``)."""
    plane: dict[tuple[int, int], list[int]] = {}
    for d in devset.devices:
        plane.setdefault((int(d.coords[2]), int(d.core_on_chip)), []).append(int(d.id))
    return [sorted(g) for _, g in sorted(plane.items())]


def _allreduce_time(size: int, ranks: int, busbw: float) -> float:
    """nccl-tests' all-reduce time from its bus bandwidth: size · 2 (n − 1) / n / busbw."""
    return size * 2 * (ranks - 1) / ranks / busbw


def _other_time(size: int, ranks: int, busbw: float) -> float:
    """nccl-tests' all-gather / reduce-scatter / all-to-all time: size · (n − 1) / n / busbw (``size`` the
    per-rank buffer: the all-gather's output, the reduce-scatter's input, the all-to-all's send buffer)."""
    return size * (ranks - 1) / ranks / busbw


# ------------------------------------------------------------------------------------------------- ICI


def _ironwood(topology: str, elements: int, transferred_gb: float, achieved_gbps: float) -> Measurement:
    out = elements * 4 * 4  # f32, gathered 4 ways: the output shape f32[4·m, 8, 128]
    twin = topology == "2x2x2"
    return Measurement(
        name=f"TPU7x {topology} all-gather over 4 devices (a 2x2 plane, one core a chip), f32 {out // KiB} KiB out",
        devices=f"tpu:7x:{topology}",
        op="all-gather",
        bytes=out,
        groups=ironwood_2x2x2_groups if twin else one_core_per_chip,
        seconds=transferred_gb / achieved_gbps,
        source="ironwood-all-gather",
        read=(
            f"'Expected Results', topology {topology}, {elements} elements (f32[{elements // 1024},8,128] -> "
            f"f32[{4 * elements // 1024},8,128]): transferred {transferred_gb} GB at {achieved_gbps} GB/s "
            "achieved; the script's achieved_bw = transferred / time, so time = transferred / achieved. Config "
            + (
                "configs/collectives/all_gather_tpu7x_2x2x2.yaml: mesh 2x4x2, sharding 1x4x1"
                if twin
                else "configs/collectives/all_gather_tpu7x_2x2x1.yaml: mesh 2x2x2, sharding 2x2x1"
            )
        ),
        replicate_of=(
            f"TPU7x 2x2x1 all-gather over 4 devices (a 2x2 plane, one core a chip), f32 {out // KiB} KiB out"
            if twin
            else None
        ),
    )


_IRONWOOD = (
    (65536, 0.001572864, 71.7703034, 69.53210305),
    (262144, 0.006291456, 129.1869148, 127.3945462),
    (1048576, 0.025165824, 161.9040742, 162.0864029),
    (4194304, 0.100663296, 174.765465, 174.6652133),
    (16777216, 0.402653184, 178.7714158, 178.7592252),
)

_JETSTREAM_READ = (
    "benchmarks/basic_ops.py (commit 1e08833e6b2d315c62adfb3884425279bdf3eb25): L = 2**15, mesh of the 8 "
    "devices on one axis, shard_map over P('x'); time = mean of 5 timed calls after 2 warm-ups (perf_counter "
    "around block_until_ready). PR description, output on v5litepod-8: "
)

ICI: tuple[Measurement, ...] = (
    Measurement(
        "TPU v5e all-gather along an axis of 4 (no wraparound), bf16[2048, 8192]",
        "tpu:v5e:4x8",
        "all-gather",
        2048 * 8192 * 2,
        line_of_4_along_x,
        680e-6,
        "book-sharding",
        "Pop quiz 2: AllGather_Y([E_Y, F]), E = 2048, F = 8192 bf16 on v5e {'X': 8, 'Y': 4}: predicted 560 us, "
        "'an actual profile ... shows 680 us'",
    ),
    Measurement(
        "TPU v5e all-gather along an axis of 4 (no wraparound), 32 kB shards (latency-bound)",
        "tpu:v5e:4x8",
        "all-gather",
        4 * 64 * 256 * 2,
        line_of_4_along_x,
        8e-6,
        "book-sharding",
        "Pop quiz 2 part (2): 'each shard has size 64 * 256 * 2 = 32kB ... 3 hops ... 3us. In practice, it's "
        "closer to 8us'",
    ),
    *(_ironwood("2x2x1", e, gb, bw) for e, gb, bw, _ in _IRONWOOD),
    Measurement(
        "TPU v5e 2x4 all-gather over the 8 chips, bf16, 2 GiB out",
        "tpu:v5e:2x4",
        "all-gather",
        2 * GiB,
        everyone,
        68.3381e-3,
        "jetstream-pytorch-168",
        _JETSTREAM_READ + "'bfloat16 all_gather: 68.3381 ms sizes: ('2048.0 MiB',)' — all_gather of a (L/8, L) "
        "shard: (8, L/8, L) bf16 = 2 GiB out per device",
    ),
    Measurement(
        "TPU v5e 2x4 all-gather over the 8 chips, int8, 1 GiB out",
        "tpu:v5e:2x4",
        "all-gather",
        1 * GiB,
        everyone,
        34.4571e-3,
        "jetstream-pytorch-168",
        _JETSTREAM_READ + "'int8 all_gather: 34.4571 ms sizes: ('1024.0 MiB',)' — (8, L/8, L) int8 = 1 GiB out",
    ),
    Measurement(
        "TPU v5e 2x4 all-reduce over the 8 chips, bf16, 256 MiB",
        "tpu:v5e:2x4",
        "all-reduce",
        256 * MiB,
        everyone,
        8.25386e-3,
        "jetstream-pytorch-168",
        _JETSTREAM_READ + "'bfloat16 all_reduce: 8.25386 ms sizes: ('2048.0 MiB',)' — psum of each device's "
        "(L/8, L) bf16 shard: 256 MiB",
    ),
    Measurement(
        "TPU v5e 2x4 all-reduce over the 8 chips, int8, 128 MiB",
        "tpu:v5e:2x4",
        "all-reduce",
        128 * MiB,
        everyone,
        4.34715e-3,
        "jetstream-pytorch-168",
        _JETSTREAM_READ + "'int8 all_reduce: 4.34715 ms sizes: ('1024.0 MiB',)' — psum of an (L/8, L) int8 "
        "shard: 128 MiB",
    ),
)

REPLICATES: tuple[Measurement, ...] = tuple(_ironwood("2x2x2", e, gb, bw) for e, gb, _, bw in _IRONWOOD)
"""The Ironwood guide's 2x2x2 rows: the same 4-way gather over a 2x2 plane as its 2x2x1 rows (counted once)."""


# ---------------------------------------------------------------------------------------------- NVLink


def _b200_node(size: int, label: str, busbw_gbps: float) -> Measurement:
    return Measurement(
        f"8 x B200 all-reduce (torch.distributed, NCCL 2.27.7), {label}",
        "gpu:b200:1x8",
        "all-reduce",
        size,
        everyone,
        _allreduce_time(size, 8, busbw_gbps * 1e9),
        "ml-engineering-b200-node",
        f"'Inter-node speed depends on intra-node speed' table, payload {label}, 1 node column: "
        f"{busbw_gbps}GBps busbw (all_reduce_bench.py: busbw = size / time · 2 (n − 1) / n, GBps = 1e9 B/s); "
        "rows taken 16GiB, 1GiB, 64MiB, 4MiB, 256KiB, 32KiB (every 16x)",
    )


def _b200_4nodes(size: int, label: str, busbw_gbps: float) -> Measurement:
    return Measurement(
        f"4 x 8 B200 (EFA v4, 8 x 400 Gb/s a node) all-reduce (torch.distributed), {label}",
        "gpu:b200:4x8",
        "all-reduce",
        size,
        everyone,
        _allreduce_time(size, 32, busbw_gbps * 1e9),
        "ml-engineering-b200-4-nodes",
        f"same table, payload {label}, 4 nodes column: {busbw_gbps}GBps busbw (n = 32); rows taken 16GiB, 1GiB, "
        "64MiB, 4MiB, 256KiB (every 16x; 32KiB prints 0.01GBps, one significant digit)",
    )


def _sharp(gpu: str, gpus: int, busbw_gbps: float, algo: str) -> Measurement:
    kind = {"h200": "H200", "b200": "B200"}[gpu]
    return Measurement(
        f"{gpus} of 8 {kind} NVLink all-reduce, 8 GiB, NCCL's default ({algo})",
        f"gpu:{gpu}:1x8",
        "all-reduce",
        8 * GiB,
        first(gpus),
        _allreduce_time(8 * GiB, gpus, busbw_gbps * 1e9),
        f"ml-engineering-sharp-{gpu}",
        f"SHARP section, 8x {kind} table at an 8GiB payload with nccl-tests: {gpus} GPUs, 'algo NCCL picks' "
        f"{algo}, busbw {busbw_gbps}GBps (the default column; rows taken 4, 6, 8 GPUs)",
    )


def _gb200(op: str, gpus: int, busbw_gbps: float, where: str) -> Measurement:
    size = 16 * GiB
    seconds = (_allreduce_time if op == "all-reduce" else _other_time)(size, gpus, busbw_gbps * 1e9)
    nbytes = size // gpus if op == "reduce-scatter" else size
    return Measurement(
        f"{gpus} GB200 in one NVL72 domain (MNNVL), {op}, 16 GiB buffer",
        "gpu:gb200:1x72",
        op,
        nbytes,
        first(gpus),
        seconds,
        "gpu-tpu-pedia-gb200",
        f"{where}: {op.replace('-', '_')} @16G busbw {busbw_gbps} GB/s (nccl-tests; size = 16 GiB per rank: "
        + (
            "the result per device is size / n)"
            if op == "reduce-scatter"
            else "the all-gather's output)"
            if op == "all-gather"
            else "the buffer)"
        ),
    )


NVLINK: tuple[Measurement, ...] = (
    Measurement(
        "8 x H100 NVLink all-reduce, ring (no NVLink SHARP), large messages",
        "gpu:h100:1x8",
        "all-reduce",
        4 * GiB,
        everyone,
        _allreduce_time(4 * GiB, 8, 370e9),
        "nccl-tests-212",
        "NCCL maintainer: 'With the protocol overhead (~20%) NCCL can get an effective NVLink bandwidth of "
        "370GB/s, which you can observe as BusBw ... when running with NCCL_ALGO=RING' (taken at 4 GiB)",
    ),
    Measurement(
        "8 x H100 NVLink all-reduce, NVLink SHARP, large messages",
        "gpu:h100:1x8",
        "all-reduce",
        4 * GiB,
        everyone,
        _allreduce_time(4 * GiB, 8, 480e9),
        "nccl-tests-212",
        "NCCL maintainer: 'On 8 GPUs, you should reach a peak busBw of ~480GB/s' (taken at 4 GiB)",
    ),
    Measurement(
        "8 x H100 NVLink all-reduce, single node, nccl-tests",
        "gpu:h100:1x8",
        "all-reduce",
        8 * GiB,
        everyone,
        _allreduce_time(8 * GiB, 8, 476e9),
        "nccl-tests-290",
        "'The single node run above will be using NVLink and NVLink SHARP ... 476GB/s looks to be in the expected "
        "range for H100' (bus bandwidth, taken at 8 GiB)",
    ),
    Measurement(
        "8 x H200 NVLink all-reduce, nccl-tests peak",
        "gpu:h200:1x8",
        "all-reduce",
        4 * GiB,
        everyone,
        _allreduce_time(4 * GiB, 8, 475e9),
        "nccl-tests-272",
        "all_reduce_perf -b 64k -e 4G on 8 x H200: 'The output shows peak bandwidth of 475 GB/s' (bus bandwidth, "
        "at 4 GiB)",
    ),
    Measurement(
        "8 x B200 NVLink all-reduce, nccl-tests",
        "gpu:b200:1x8",
        "all-reduce",
        8 * GiB,
        everyone,
        _allreduce_time(8 * GiB, 8, 830e9),
        "nccl-1807",
        "'should the all_reduce_perf performance of 8 B200s in a single machine reach 900+? Ours is 830+' (bus "
        "bandwidth, taken at 8 GiB)",
    ),
    Measurement(
        "8 x H100 all-reduce of LLaMA-3 70B's MLP shard, bf16[8192, 3584]",
        "gpu:h100:1x8",
        "all-reduce",
        8192 * 3584 * 2,
        everyone,
        _allreduce_time(8192 * 3584 * 2, 8, 150e9),
        "book-gpus",
        "'an AllReduce over ... bf16[8192, 3584] = 58MB can achieve only around 150GB/s' (the chapter's empirical "
        "link bandwidth, 2 · bytes · (N − 1) / (N · runtime))",
    ),
    *(
        Measurement(
            f"8 x H100 NCCL all-reduce (torch.distributed), {label}",
            "gpu:h100:1x8",
            "all-reduce",
            size,
            everyone,
            us * 1e-6,
            "triton-distributed-57",
            f"the issue's table, 8xH100 intra-node, NCCL (µs) column: {label}, {us} us (rows taken 16MB, 1MB, 64KB "
            "(every 16x) and the smallest, 128B)",
        )
        for size, label, us in (
            (16 * MiB, "16MB", 135.68),
            (1 * MiB, "1MB", 32.42),
            (64 * KiB, "64KB", 23.05),
            (128, "128B", 19.19),
        )
    ),
    *(
        _b200_node(size, label, bw)
        for size, label, bw in (
            (16 * GiB, "16GiB", 845.67),
            (1 * GiB, "1GiB", 723.34),
            (64 * MiB, "64MiB", 400.60),
            (4 * MiB, "4MiB", 76.48),
            (256 * KiB, "256KiB", 9.54),
            (32 * KiB, "32KiB", 1.20),
        )
    ),
    _sharp("h200", 4, 363.3, "Ring"),
    _sharp("h200", 6, 435.6, "NVLS"),
    _sharp("h200", 8, 473.1, "NVLS"),
    _sharp("b200", 4, 673.2, "Ring"),
    _sharp("b200", 6, 778.2, "NVLS"),
    _sharp("b200", 8, 838.0, "NVLS"),
    Measurement(
        "4 GB200 of one node, NVLink all-reduce, 8 GiB",
        "gpu:gb200:1x72",
        "all-reduce",
        8 * GiB,
        first(4),
        _allreduce_time(8 * GiB, 4, 683e9),
        "gpu-tpu-pedia-gb200",
        "5.1 Single Node 4 GPU (NVLink Baseline): 'all_reduce 4 GPU @8G | 683 GB/s busbw'",
    ),
    _gb200("all-reduce", 8, 839.54, "5.2 Intra-domain 2-node MNNVL, first verification"),
    _gb200("all-gather", 8, 683.83, "5.2 Intra-domain 2-node MNNVL, first verification"),
    _gb200("reduce-scatter", 8, 693.07, "5.2 Intra-domain 2-node MNNVL, first verification"),
    _gb200("all-to-all", 8, 682.73, "5.2 Intra-domain 2-node MNNVL, first verification"),
    _gb200("all-reduce", 64, 909.96, "single-domain MNNVL scale-out, 16n/64GPU table"),
    _gb200("all-gather", 64, 692.88, "single-domain MNNVL scale-out, 16n/64GPU table"),
    _gb200("reduce-scatter", 64, 706.98, "single-domain MNNVL scale-out, 16n/64GPU table"),
    _gb200("all-to-all", 64, 666.64, "single-domain MNNVL scale-out, 16n/64GPU table"),
)


# --------------------------------------------------------------------------------------------- network

NETWORK: tuple[Measurement, ...] = (
    Measurement(
        "2 x 8 A100 (DGX A100, 8 x 200 Gb/s HDR InfiniBand) all-reduce, ring",
        "gpu:a100:2x8",
        "all-reduce",
        8 * GiB,
        everyone,
        _allreduce_time(8 * GiB, 16, 192e9),
        "nccl-812",
        "NCCL maintainer: 'On an Nvidia DGX-A100 system we have 8x200Gbit/s IB cards and we measure 192GB/s "
        "AllReduce BusBW' (two nodes, ring; taken at 8 GiB)",
    ),
    Measurement(
        "2 x 8 H100 (8 x 400 Gb/s NDR InfiniBand) all-reduce, ring",
        "gpu:h100:2x8",
        "all-reduce",
        8 * GiB,
        everyone,
        _allreduce_time(8 * GiB, 16, 8 * 47e9),
        "nccl-tests-290",
        "NCCL maintainer, two nodes with NCCL_ALGO=RING: 'For NDR @ 400Gbps you should see 46-48GB/s per NIC' "
        "(8 NICs a node: bus bandwidth 8 x 47 GB/s, taken at 8 GiB)",
    ),
    Measurement(
        "248 x 8 H200 (8 NICs a node) all-reduce, 512 MiB",
        "gpu:h200:248x8",
        "all-reduce",
        512 * MiB,
        everyone,
        _allreduce_time(512 * MiB, 1984, 350e9),
        "nccl-tests-283",
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
        "nccl-tests-150",
        "all_reduce_perf, one GPU on each of two nodes: 8 B, out-of-place time 19.90 us",
    ),
    *(
        _b200_4nodes(size, label, bw)
        for size, label, bw in (
            (16 * GiB, "16GiB", 381.80),
            (1 * GiB, "1GiB", 361.99),
            (64 * MiB, "64MiB", 156.74),
            (4 * MiB, "4MiB", 18.90),
            (256 * KiB, "256KiB", 1.33),
        )
    ),
    Measurement(
        "2 x 4 GB200 across RDMA (no MNNVL), all-reduce, 8 GiB",
        "gpu:gb200:2x4",
        "all-reduce",
        8 * GiB,
        everyone,
        _allreduce_time(8 * GiB, 8, 325.88e9),
        "gpu-tpu-pedia-gb200",
        "5.3 Cross-domain 2-node RDMA (NCCL_MNNVL_ENABLE=0, 4 GPUs a node): 'all_reduce 8 GPU @8G (RDMA) | "
        "325.88 GB/s busbw'",
    ),
    Measurement(
        "4 x 4 GB200 across RDMA (no MNNVL), all-reduce, 8 GiB",
        "gpu:gb200:4x4",
        "all-reduce",
        8 * GiB,
        everyone,
        _allreduce_time(8 * GiB, 16, 162.45e9),
        "gpu-tpu-pedia-gb200",
        "5.4 Mixed 4-node (NCCL_MNNVL_ENABLE=0): 'all_reduce 16 GPU @8G (pure RDMA) | 162.45 GB/s busbw'",
    ),
)

MEASUREMENTS: tuple[Measurement, ...] = (*ICI, *NVLINK, *NETWORK)
"""Every row counted once (the fits and figures); :data:`REPLICATES` are apart."""
