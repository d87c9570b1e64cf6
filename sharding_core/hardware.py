"""Hardware figures per TPU generation and GPU kind: the one table topology and cost estimates read.

Every figure carries its public source (:data:`SOURCES`): the Cloud TPU system-architecture page of its
generation, "How to Scale Your Model" (the JAX scaling book, whose TPU chapter gives ICI bandwidth per
link and whose sharding chapter gives the collectives' formulas), or NVIDIA's datasheets and DGX
reference architectures. Units are taken as each source prints them (GB = 1e9 bytes, GiB = 2**30,
Gbps = 1e9 bits/s). A figure no public source gave us is ``None`` with a note saying so: an estimate that
needs it says there is none rather than guess.

Conventions:

* TPU figures are per *chip*; JAX shows ``devices_per_chip`` devices per chip (v2, v3 and 7x: two
  TensorCores, each its own device; v4 and v5p: megacore, one device), so per-device compute and HBM
  are the chip's divided by that.
* ICI bandwidth is per link, one way (the scaling book's "one-way" column); a ring with wraparound
  uses both directions of its links.
* DCN and GPU network bandwidth is per chip / per GPU, one way (a NIC's line rate, shared by the chips
  of a host).
* GPU FLOP/s are dense (NVIDIA prints tensor-core figures "with sparsity": those are halved here).
* NVLink is the GPU's NVLink bandwidth one way (half the bidirectional total NVIDIA prints). A
  ``gpu:KIND:HxG`` set's host is its NVLink domain: for a GB200 NVL72 rack write ``gpu:gb200:1x72``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from sharding_core.devices import TPU_GENERATIONS, TpuGeneration

GB = 1e9
GIB = float(2**30)
GBPS = 1e9 / 8  # bytes per second in one Gbit/s


@dataclasses.dataclass(frozen=True)
class Source:
    title: str
    url: str


SOURCES: dict[str, Source] = {
    "tpu-v3": Source("Cloud TPU: TPU v3 system architecture", "https://cloud.google.com/tpu/docs/v3"),
    "tpu-v4": Source("Cloud TPU: TPU v4 system architecture", "https://cloud.google.com/tpu/docs/v4"),
    "tpu-v5e": Source("Cloud TPU: TPU v5e system architecture", "https://cloud.google.com/tpu/docs/v5e"),
    "tpu-v5p": Source("Cloud TPU: TPU v5p system architecture", "https://cloud.google.com/tpu/docs/v5p"),
    "tpu-v6e": Source("Cloud TPU: TPU v6e (Trillium) system architecture", "https://cloud.google.com/tpu/docs/v6e"),
    "tpu-7x": Source("Cloud TPU: TPU7x (Ironwood) system architecture", "https://cloud.google.com/tpu/docs/tpu7x"),
    "book-tpus": Source(
        "How to Scale Your Model, part 2: How to Think About TPUs", "https://jax-ml.github.io/scaling-book/tpus/"
    ),
    "book-sharding": Source(
        "How to Scale Your Model, part 3: Sharded Matrices and How to Multiply Them",
        "https://jax-ml.github.io/scaling-book/sharding/",
    ),
    "book-gpus": Source(
        "How to Scale Your Model, part 12: How to Think About GPUs", "https://jax-ml.github.io/scaling-book/gpus/"
    ),
    "nv-v100": Source("NVIDIA V100 Tensor Core GPU datasheet", "https://www.nvidia.com/en-us/data-center/v100/"),
    "nv-a100": Source("NVIDIA A100 Tensor Core GPU datasheet", "https://www.nvidia.com/en-us/data-center/a100/"),
    "nv-l4": Source("NVIDIA L4 Tensor Core GPU datasheet", "https://www.nvidia.com/en-us/data-center/l4/"),
    "nv-h100": Source("NVIDIA H100 Tensor Core GPU datasheet", "https://www.nvidia.com/en-us/data-center/h100/"),
    "nv-h200": Source("NVIDIA H200 Tensor Core GPU datasheet", "https://www.nvidia.com/en-us/data-center/h200/"),
    "nv-hgx": Source("NVIDIA HGX platform (HGX B200) specifications", "https://www.nvidia.com/en-us/data-center/hgx/"),
    "nv-gb200": Source("NVIDIA GB200 NVL72 specifications", "https://www.nvidia.com/en-us/data-center/gb200-nvl72/"),
    "nv-dgx1": Source(
        "NVIDIA DGX-1 with Tesla V100 system architecture white paper",
        "https://images.nvidia.com/content/pdf/dgx1-v100-system-architecture-whitepaper.pdf",
    ),
    "nv-dgx-a100": Source(
        "NVIDIA technical blog: Defining AI innovation with NVIDIA DGX A100",
        "https://developer.nvidia.com/blog/defining-ai-innovation-with-dgx-a100/",
    ),
    "nccl-tests-150": Source(
        "nccl-tests issue 150: all_reduce_perf between two nodes over HDR InfiniBand, one A100 each",
        "https://github.com/NVIDIA/nccl-tests/issues/150",
    ),
    "nccl-perf": Source(
        "nccl-tests doc/PERFORMANCE.md: time, algorithm bandwidth and bus bandwidth",
        "https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md",
    ),
    "nv-basepod": Source(
        "NVIDIA DGX BasePOD reference architecture: core components (DGX B200, H200, H100)",
        "https://docs.nvidia.com/dgx-basepod/reference-architecture-infrastructure-foundation-enterprise-ai/latest/"
        "core-components.html",
    ),
}


@dataclasses.dataclass(frozen=True)
class Figure:
    """One number with its unit, its source (a key of :data:`SOURCES`) and how it was read from it."""

    value: float | None
    unit: str
    source: str
    note: str = ""

    def json(self) -> dict[str, Any]:
        src = SOURCES[self.source]
        return {"value": self.value, "unit": self.unit, "source": src.title, "url": src.url, "note": self.note}


def _none(unit: str, note: str, source: str = "book-tpus") -> Figure:
    return Figure(None, unit, source, note)


# --------------------------------------------------------------------------------------------- TPUs

ICI_HOP_LATENCY = Figure(
    1e-6,
    "s",
    "book-sharding",
    "each ICI hop costs about 1 us regardless of the bytes sent (the book's latency-bound regime)",
)

NETWORK_STEP_LATENCY = Figure(
    19.9e-6 / 2,
    "s",
    "nccl-tests-150",
    "half the 19.9 us an 8-byte all_reduce_perf takes between two nodes over HDR InfiniBand (two network "
    "transfers: a reduce-scatter step and an all-gather step); the floor of one step across hosts",
)

DCN_STEP_LATENCY = Figure(
    NETWORK_STEP_LATENCY.value,
    "s",
    "nccl-tests-150",
    "no public figure for TPU DCN: taken as one host-to-host network transfer measured over InfiniBand "
    "(half the 19.9 us 8-byte all_reduce_perf between two nodes); DCN transfers also cross PCIe through the "
    "host, so this is a floor",
)


@dataclasses.dataclass(frozen=True)
class TpuFigures:
    """A TPU generation's figures, per chip. What the generation *is* (devices per chip, torus, which axes
    wrap, ``device_kind``) is its one record, :data:`sharding_core.devices.TPU_GENERATIONS`."""

    name: str  # as in ``tpu:GEN:TOPO``
    title: str
    peak: Mapping[str, Figure]  # FLOP/s (OP/s for int8) by HLO-ish dtype: bf16, int8, fp8
    hbm_bytes: Figure
    hbm_bandwidth: Figure  # bytes/s
    ici_link_bandwidth: Figure  # bytes/s per link, one way
    ici_links: Figure  # links per chip
    dcn_bandwidth: Figure  # bytes/s per chip, one way
    hop_latency: Figure = ICI_HOP_LATENCY
    dcn_latency: Figure = DCN_STEP_LATENCY

    @property
    def kind(self) -> str:
        return "tpu"

    @property
    def generation(self) -> TpuGeneration:
        return TPU_GENERATIONS[self.name]

    @property
    def devices_per_chip(self) -> int:
        return self.generation.cores_per_chip

    @property
    def torus(self) -> str:
        return self.generation.torus

    @property
    def wraparound_rule(self) -> str:
        return wraparound_rule(self.generation)


def wraparound(gen_name: str, topo: tuple[int, ...]) -> tuple[bool, ...]:
    """Which axes of a ``gen_name`` slice of shape ``topo`` (in chips) close into rings.

    * v4, v5p, 7x (``wrap_rule == "cube"``): an axis wraps only when the slice is made of full 4x4x4
      cubes (every side a multiple of 4): optical switches provide the wraparound links (Cloud TPU v4 /
      v5p pages; the book's TPU chapter: "Any multiple of a full cube ... will have wraparounds"); 7x is
      taken to follow the same cube rule (its page: "shares many similarities with TPU v5p").
    * v5e, v6e: only an axis of 16 chips, the full pod side (the book: "smaller topologies can be
      requested without wraps on dims < 16"; "A TPU v5e 8x16 _will_ have a wraparound on the longer
      axis").
    * v2, v3: only an axis spanning the full pod side (16 for v2, 32 for v3).
    """
    gen = TPU_GENERATIONS[gen_name]
    if gen.wrap_rule == "cube":
        cube = all(d % 4 == 0 for d in topo)
        return tuple(cube and d > 2 for d in topo)
    return tuple(d == gen.pod_side and d > 2 for d in topo)


def wraparound_rule(gen: TpuGeneration) -> str:
    """The rule :func:`wraparound` applies to ``gen``, in words."""
    if gen.wrap_rule == "cube":
        return "an axis wraps only when every side of the slice is a multiple of 4 (full 4x4x4 cubes)"
    return f"an axis wraps only when it spans {gen.pod_side} chips (the full pod side)"


_TYPICAL_DCN = (
    "the scaling book's typical DCN bandwidth, 2.5e10 bytes/s per host, over the 4 chips of a host "
    "(not a per-generation figure)"
)

TPU_FIGURES: dict[str, TpuFigures] = {
    t.name: t
    for t in (
        TpuFigures(
            "v2",
            "TPU v2",
            {
                "bf16": _none("FLOP/s", "not published: the Cloud TPU v2 page gives no per-chip figures"),
            },
            _none("B", "not published on the Cloud TPU v2 page"),
            _none("B/s", "not published on the Cloud TPU v2 page"),
            _none("B/s", "no v2 row in the scaling book's ICI table"),
            _none("links", "not needed without a link bandwidth"),
            _none("B/s", "no DCN figure for v2"),
        ),
        TpuFigures(
            "v3",
            "TPU v3",
            {"bf16": Figure(123e12, "FLOP/s", "tpu-v3", "peak compute per chip: 123 teraflops (bf16)")},
            Figure(32 * GIB, "B", "tpu-v3", "HBM2 capacity: 32 GiB"),
            Figure(900 * GB, "B/s", "tpu-v3", "HBM2 bandwidth: 900 GBps"),
            Figure(1e11, "B/s", "book-tpus", "ICI BW/link one-way: 1e11 bytes/s"),
            Figure(4, "links", "tpu-v3", "2D torus: one link to each of 4 neighbours"),
            Figure(2.5e10 / 4, "B/s", "book-tpus", _TYPICAL_DCN),
        ),
        TpuFigures(
            "v4",
            "TPU v4",
            {
                "bf16": Figure(275e12, "FLOP/s", "tpu-v4", "peak compute per chip: 275 teraflops (bf16 or int8)"),
                "int8": Figure(275e12, "OP/s", "tpu-v4", "peak compute per chip: 275 teraflops (bf16 or int8)"),
            },
            Figure(32 * GIB, "B", "tpu-v4", "HBM2 capacity: 32 GiB"),
            Figure(1200 * GB, "B/s", "tpu-v4", "HBM2 bandwidth: 1200 GBps"),
            Figure(4.5e10, "B/s", "book-tpus", "ICI BW/link one-way (TPU v4p): 4.5e10 bytes/s"),
            Figure(6, "links", "tpu-v4", "3D mesh/torus: a direct connection to the nearest chips in 3 dimensions"),
            Figure(2.5e10 / 4, "B/s", "book-tpus", _TYPICAL_DCN),
        ),
        TpuFigures(
            "v5e",
            "TPU v5e",
            {
                "bf16": Figure(197e12, "FLOP/s", "tpu-v5e", "peak compute per chip (bf16): 197 TFLOPs"),
                "int8": Figure(393e12, "OP/s", "tpu-v5e", "peak compute per chip (Int8): 393 TOPs"),
            },
            Figure(16 * GIB, "B", "book-tpus", "TPU v5e has 16GiB of HBM (the book, linking the v5e page)"),
            Figure(800 * GIB, "B/s", "tpu-v5e", "HBM bandwidth per chip: 800 GiBps"),
            Figure(4.5e10, "B/s", "book-tpus", "ICI BW/link one-way: 4.5e10 bytes/s"),
            Figure(4, "links", "tpu-v5e", "ICI ports per chip: 4"),
            Figure(200 * GBPS / 8, "B/s", "tpu-v5e", "per-host NIC 2 x 100 Gbps over 8 chips per host: 25 Gbps a chip"),
        ),
        TpuFigures(
            "v5p",
            "TPU v5p",
            {
                "bf16": Figure(459e12, "FLOP/s", "tpu-v5p", "peak compute per chip (BF16): 459 TFLOPs"),
                "fp8": Figure(459e12, "FLOP/s", "tpu-v5p", "peak compute per chip (FP8): 459 TFLOPs"),
                "int8": Figure(9.18e14, "OP/s", "book-tpus", "FLOPs/s/chip (int8): 9.18e14"),
            },
            Figure(95 * GIB, "B", "tpu-v5p", "HBM capacity per chip: 95 GiB"),
            Figure(2765 * GB, "B/s", "tpu-v5p", "HBM bandwidth per chip: 2765 GBps"),
            Figure(9e10, "B/s", "book-tpus", "ICI BW/link one-way: 9e10 bytes/s"),
            Figure(6, "links", "book-tpus", "3D torus: one link to each of 6 neighbours"),
            Figure(50 * GBPS, "B/s", "tpu-v5p", "data center network (DCN) bandwidth per chip: 50 Gbps"),
        ),
        TpuFigures(
            "v6e",
            "TPU v6e",
            {
                "bf16": Figure(918e12, "FLOP/s", "tpu-v6e", "peak compute per chip (bf16): 918 TFLOPs"),
                "int8": Figure(1836e12, "OP/s", "tpu-v6e", "peak compute per chip (Int8): 1836 TOPs"),
                "fp8": Figure(918e12, "FLOP/s", "tpu-7x", "peak compute per chip (FP8), v6e column: 918 TFLOPs"),
            },
            Figure(32 * GIB, "B", "tpu-7x", "HBM capacity per chip, v6e column: 32 GiB"),
            Figure(1640 * GB, "B/s", "tpu-v6e", "HBM bandwidth per chip: 1640 GBps"),
            Figure(9e10, "B/s", "book-tpus", "ICI BW/link one-way: 9e10 bytes/s"),
            Figure(4, "links", "tpu-v6e", "ICI ports per chip: 4"),
            Figure(
                100 * GBPS, "B/s", "tpu-7x", "DCN bandwidth per chip, v6e column: 100 Gbps (4 x 200 Gbps per 8 chips)"
            ),
        ),
        TpuFigures(
            "7x",
            "TPU7x (Ironwood)",
            {
                "bf16": Figure(2307e12, "FLOP/s", "tpu-7x", "peak compute per chip (BF16): 2307 TFLOPs"),
                "fp8": Figure(4614e12, "FLOP/s", "tpu-7x", "peak compute per chip (FP8): 4614 TFLOPs"),
            },
            Figure(192 * GIB, "B", "tpu-7x", "HBM capacity per chip: 192 GiB"),
            Figure(7380 * GB, "B/s", "tpu-7x", "HBM bandwidth per chip: 7380 GBps"),
            Figure(
                1200 * GB / 6 / 2,
                "B/s",
                "tpu-7x",
                "derived: bidirectional ICI bandwidth per chip, 1200 GBps, over 6 links and 2 directions "
                "(the book has no 7x row)",
            ),
            Figure(6, "links", "tpu-7x", "3D torus (the page: shares many similarities with TPU v5p)"),
            Figure(100 * GBPS, "B/s", "tpu-7x", "data center network (DCN) bandwidth per chip: 100 Gbps"),
        ),
    )
}

# --------------------------------------------------------------------------------------------- GPUs


@dataclasses.dataclass(frozen=True)
class GpuFigures:
    """A GPU kind's figures, per GPU."""

    name: str  # as in ``gpu:KIND:HxG``
    title: str
    peak: Mapping[str, Figure]  # dense FLOP/s by dtype: bf16, fp16, tf32, fp32, fp8, int8
    hbm_bytes: Figure
    hbm_bandwidth: Figure
    nvlink_bandwidth: Figure  # bytes/s per GPU, one way
    network_bandwidth: Figure  # bytes/s per GPU, one way (the reference system's NIC per GPU)
    network_latency: Figure = NETWORK_STEP_LATENCY

    @property
    def kind(self) -> str:
        return "gpu"

    @property
    def devices_per_chip(self) -> int:
        return 1


_SPARSE = "NVIDIA prints it with sparsity; dense is half"
_BASEPOD_NIC = "DGX: eight single-port ConnectX-7, up to 400 Gb/s: one 400 Gb/s NIC per GPU"


def _dense(value: float, unit: str, source: str, printed: str) -> Figure:
    return Figure(value, unit, source, f"{printed} ({_SPARSE})")


GPU_FIGURES: dict[str, GpuFigures] = {
    g.name: g
    for g in (
        GpuFigures(
            "v100",
            "NVIDIA V100 SXM2 16GB",
            {
                "fp16": Figure(125e12, "FLOP/s", "nv-v100", "tensor performance: 125 TFLOPS"),
                "fp32": Figure(15.7e12, "FLOP/s", "nv-v100", "single precision: 15.7 TFLOPS"),
                "fp64": Figure(7.8e12, "FLOP/s", "nv-v100", "double precision: 7.8 TFLOPS"),
            },
            Figure(16 * GB, "B", "nv-v100", "HBM2: 16 GB"),
            Figure(900 * GB, "B/s", "nv-v100", "memory bandwidth: 900 GB/s"),
            Figure(150 * GB, "B/s", "nv-v100", "NVLink: 300 GB/s (both directions)"),
            Figure(400 * GBPS / 8, "B/s", "nv-dgx1", "DGX-1: four 100 Gb InfiniBand NICs for 8 GPUs (50 Gb/s a GPU)"),
        ),
        *(
            GpuFigures(
                name,
                title,
                {
                    "bf16": _dense(312e12, "FLOP/s", "nv-a100", "BFLOAT16 Tensor Core: 624 TFLOPS"),
                    "fp16": _dense(312e12, "FLOP/s", "nv-a100", "FP16 Tensor Core: 624 TFLOPS"),
                    "tf32": _dense(156e12, "FLOP/s", "nv-a100", "TF32 Tensor Core: 312 TFLOPS"),
                    "fp32": Figure(19.5e12, "FLOP/s", "nv-a100", "FP32: 19.5 TFLOPS"),
                    "int8": _dense(624e12, "OP/s", "nv-a100", "INT8 Tensor Core: 1248 TOPS"),
                },
                Figure(memory * GB, "B", "nv-a100", f"GPU memory: {memory} GB"),
                Figure(bandwidth * GB, "B/s", "nv-a100", f"GPU memory bandwidth (SXM): {bandwidth:,} GB/s"),
                Figure(300 * GB, "B/s", "nv-a100", "NVLink: 600 GB/s (both directions)"),
                Figure(
                    200 * GBPS,
                    "B/s",
                    "nv-dgx-a100",
                    "DGX A100: eight single-port ConnectX-6 200 Gb/s HDR InfiniBand, one per GPU",
                ),
            )
            for name, title, memory, bandwidth in (
                ("a100", "NVIDIA A100 SXM 80GB", 80, 2039),
                ("a100-40gb", "NVIDIA A100 SXM 40GB", 40, 1555),
            )
        ),
        GpuFigures(
            "l4",
            "NVIDIA L4",
            {
                "bf16": _dense(121e12, "FLOP/s", "nv-l4", "BF16 Tensor Core: 242 TFLOPS"),
                "fp16": _dense(121e12, "FLOP/s", "nv-l4", "FP16 Tensor Core: 242 TFLOPS"),
                "tf32": _dense(60e12, "FLOP/s", "nv-l4", "TF32 Tensor Core: 120 TFLOPS"),
                "fp32": Figure(30.3e12, "FLOP/s", "nv-l4", "FP32: 30.3 TFLOPS"),
                "fp8": _dense(242.5e12, "FLOP/s", "nv-l4", "FP8 Tensor Core: 485 TFLOPS"),
                "int8": _dense(242.5e12, "OP/s", "nv-l4", "INT8 Tensor Core: 485 TOPS"),
            },
            Figure(24 * GB, "B", "nv-l4", "GPU memory: 24 GB GDDR6"),
            Figure(300 * GB, "B/s", "nv-l4", "GPU memory bandwidth: 300 GB/s"),
            _none("B/s", "the L4 has no NVLink (GPUs of a host talk over PCIe; no figure used)", "nv-l4"),
            _none("B/s", "no NVIDIA reference system with L4 GPUs gives a network per GPU", "nv-l4"),
        ),
        *(
            GpuFigures(
                name,
                title,
                {
                    "bf16": _dense(989.5e12, "FLOP/s", sheet, "BFLOAT16 Tensor Core: 1,979 TFLOPS"),
                    "fp16": _dense(989.5e12, "FLOP/s", sheet, "FP16 Tensor Core: 1,979 TFLOPS"),
                    "tf32": _dense(494.5e12, "FLOP/s", sheet, "TF32 Tensor Core: 989 TFLOPS"),
                    "fp32": Figure(67e12, "FLOP/s", sheet, "FP32: 67 TFLOPS"),
                    "fp8": _dense(1979e12, "FLOP/s", sheet, "FP8 Tensor Core: 3,958 TFLOPS"),
                    "int8": _dense(1979e12, "OP/s", sheet, "INT8 Tensor Core: 3,958 TOPS"),
                },
                Figure(memory * GB, "B", sheet, f"GPU memory: {memory} GB"),
                Figure(bandwidth * GB, "B/s", sheet, f"GPU memory bandwidth: {bandwidth / 1000:g} TB/s"),
                Figure(450 * GB, "B/s", sheet, "NVLink: 900 GB/s (both directions); the book: 450 GB/s egress"),
                Figure(400 * GBPS, "B/s", "nv-basepod", _BASEPOD_NIC),
            )
            for name, title, sheet, memory, bandwidth in (
                ("h100", "NVIDIA H100 SXM 80GB", "nv-h100", 80, 3350),
                ("h200", "NVIDIA H200 SXM 141GB", "nv-h200", 141, 4800),
            )
        ),
        GpuFigures(
            "b200",
            "NVIDIA B200 (HGX B200)",
            {
                "bf16": _dense(2.25e15, "FLOP/s", "nv-hgx", "FP16/BF16 Tensor Core: 36 PFLOPS for 8 GPUs"),
                "fp16": _dense(2.25e15, "FLOP/s", "nv-hgx", "FP16/BF16 Tensor Core: 36 PFLOPS for 8 GPUs"),
                "tf32": _dense(1.125e15, "FLOP/s", "nv-hgx", "TF32 Tensor Core: 18 PFLOPS for 8 GPUs"),
                "fp32": Figure(75e12, "FLOP/s", "nv-hgx", "FP32: 600 TFLOPS for 8 GPUs"),
                "fp8": _dense(4.5e15, "FLOP/s", "nv-hgx", "FP8/FP6 Tensor Core: 72 PFLOPS for 8 GPUs"),
                "int8": _dense(4.5e15, "OP/s", "nv-hgx", "INT8 Tensor Core: 72 POPS for 8 GPUs"),
            },
            Figure(1.44e12 / 8, "B", "nv-hgx", "GPU memory: 1.4 TB for 8 GPUs"),
            Figure(8e12, "B/s", "nv-hgx", "HBM3E bandwidth: 64 TB/s for 8 GPUs"),
            Figure(900 * GB, "B/s", "nv-hgx", "NVLink 5: 1.8 TB/s per GPU (both directions)"),
            Figure(400 * GBPS, "B/s", "nv-basepod", _BASEPOD_NIC),
        ),
        GpuFigures(
            "gb200",
            "NVIDIA GB200 (NVL72)",
            {
                "bf16": _dense(2.5e15, "FLOP/s", "nv-gb200", "FP16/BF16 Tensor Core: 360 PFLOPS for 72 GPUs"),
                "fp16": _dense(2.5e15, "FLOP/s", "nv-gb200", "FP16/BF16 Tensor Core: 360 PFLOPS for 72 GPUs"),
                "tf32": _dense(1.25e15, "FLOP/s", "nv-gb200", "TF32 Tensor Core: 180 PFLOPS for 72 GPUs"),
                "fp32": Figure(80e12, "FLOP/s", "nv-gb200", "FP32: 5,760 TFLOPS for 72 GPUs"),
                "fp8": _dense(5e15, "FLOP/s", "nv-gb200", "FP8/FP6 Tensor Core: 720 PFLOPS for 72 GPUs"),
                "int8": _dense(5e15, "OP/s", "nv-gb200", "INT8 Tensor Core: 720 POPS for 72 GPUs"),
            },
            Figure(13.4e12 / 72, "B", "nv-gb200", "HBM3E: up to 13.4 TB for 72 GPUs"),
            Figure(576e12 / 72, "B/s", "nv-gb200", "HBM bandwidth: up to 576 TB/s for 72 GPUs"),
            Figure(900 * GB, "B/s", "nv-gb200", "NVLink: 130 TB/s for 72 GPUs, 1.8 TB/s a GPU (both directions)"),
            Figure(400 * GBPS, "B/s", "book-gpus", "GB200 NVL72 node egress: 3.6 TB/s for 72 GPUs (400 Gb/s a GPU)"),
        ),
    )
}

DeviceFigures = TpuFigures | GpuFigures

# device_kind as JAX reports it -> the table's entry (for real devices: inspect_jit, snapshots)
_TPU_KINDS = {kind: g.name for g in TPU_GENERATIONS.values() for kind in (g.device_kind, *g.device_kind_aliases)}
_GPU_KINDS = (
    ("GB200", "gb200"),
    ("B200", "b200"),
    ("H200", "h200"),
    ("H100", "h100"),
    ("A100-SXM4-40GB", "a100-40gb"),
    ("A100", "a100"),
    ("L4", "l4"),
    ("V100", "v100"),
)


def figures_for_kind(platform: str, device_kind: str) -> DeviceFigures | None:
    """The table's entry for a device as JAX reports it (``platform``, ``device_kind``), or None."""
    if platform == "tpu":
        name = _TPU_KINDS.get(device_kind)
        return TPU_FIGURES.get(name) if name else None
    if platform == "gpu":
        for marker, name in _GPU_KINDS:
            if marker in device_kind:
                return GPU_FIGURES[name]
    return None


# ------------------------------------------------------------------------------------------ dtypes

# Which peak a kernel's dtype runs at, and why (JAX's defaults, stated, not guessed silently).
_TPU_PEAK = {
    "bfloat16": ("bf16", ""),
    "float32": ("bf16", "float32 on TPU: JAX's default matmul precision is one bf16 pass on the MXU"),
    "float16": ("bf16", "float16 on TPU: no published float16 figure; the bf16 peak is used"),
    "int8": ("int8", ""),
}
_GPU_PEAK = {
    "bfloat16": ("bf16", ""),
    "float16": ("fp16", ""),
    "float32": ("tf32", "float32 on GPU: XLA's default precision lets f32 matmuls use TF32 tensor cores"),
    "int8": ("int8", ""),
}


def peak_flops(hw: DeviceFigures, dtype: str) -> tuple[Figure | None, str]:
    """The peak FLOP/s for a kernel computing in ``dtype`` on one device, and a note on the choice.

    Per device: a TPU chip's figure divided by its devices per chip. None (with the reason) when no
    figure applies.
    """
    table = _TPU_PEAK if hw.kind == "tpu" else _GPU_PEAK
    key, note = table.get(dtype, ("", ""))
    fig = hw.peak.get(key) if key else None
    if fig is None and hw.kind == "gpu" and dtype == "float32":
        fig, note = hw.peak.get("fp32"), "float32 on GPU: no TF32 on this GPU; the FP32 figure is used"
    if fig is None or fig.value is None:
        why = fig.note if fig is not None and fig.note else f"no {hw.title} peak for {dtype}"
        return None, why
    per = hw.devices_per_chip
    if per > 1:
        fig = dataclasses.replace(fig, value=fig.value / per, note=f"{fig.note}; per device: / {per} devices a chip")
    return fig, note


def hbm_per_device(hw: DeviceFigures) -> Figure:
    fig = hw.hbm_bytes
    per = hw.devices_per_chip
    if per > 1 and fig.value is not None:
        return dataclasses.replace(fig, value=fig.value / per, note=f"{fig.note}; per device: / {per} devices a chip")
    return fig


def hbm_bandwidth_per_device(hw: DeviceFigures) -> Figure:
    fig = hw.hbm_bandwidth
    per = hw.devices_per_chip
    if per > 1 and fig.value is not None:
        return dataclasses.replace(fig, value=fig.value / per, note=f"{fig.note}; per device: / {per} devices a chip")
    return fig


def table_json() -> dict[str, Any]:
    """The whole table with sources, as ``GET /api/hardware`` answers it."""

    def row(hw: DeviceFigures) -> dict[str, Any]:
        out: dict[str, Any] = {"name": hw.name, "title": hw.title, "kind": hw.kind}
        out["peak"] = {k: v.json() for k, v in hw.peak.items()}
        for field in dataclasses.fields(hw):
            value = getattr(hw, field.name)
            if isinstance(value, Figure):
                out[field.name] = value.json()
        out["devices_per_chip"] = hw.devices_per_chip
        if isinstance(hw, TpuFigures):
            out["torus"] = hw.torus
            out["wraparound_rule"] = hw.wraparound_rule
        return out

    return {
        "tpu": [row(t) for t in TPU_FIGURES.values()],
        "gpu": [row(g) for g in GPU_FIGURES.values()],
        "sources": {k: {"title": s.title, "url": s.url} for k, s in SOURCES.items()},
    }


# --------------------------------------------------------------------------------------- docs table


def _cell(fig: Figure | None) -> str:
    if fig is None:
        return "—"
    if fig.value is None:
        return f"— ({fig.note})"
    v = fig.value
    if fig.unit in ("FLOP/s", "OP/s"):
        text = f"{v / 1e12:,.4g} T{fig.unit.split('/')[0]}/s"
    elif fig.unit == "B":
        text = f"{v / GIB:,.4g} GiB" if v % GIB == 0 else f"{v / 1e9:,.4g} GB"
    elif fig.unit == "B/s":
        text = f"{v / GIB:,.4g} GiB/s" if v % GIB == 0 else f"{v / 1e9:,.4g} GB/s"
    elif fig.unit == "s":
        text = f"{v * 1e6:.3g} µs"
    else:
        text = f"{v:g}"
    return f"{text} [{fig.source}]"


def markdown_table() -> str:
    """The hardware table as the docs print it (docs/reference/hardware.md, generated by docs/gen_reference.py)."""
    lines = [
        "| TPU | bf16 | int8 | fp8 | HBM | HBM bandwidth | ICI per link, one way | links / chip | "
        "wraparound | DCN per chip, one way | devices / chip |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in TPU_FIGURES.values():
        cells = [
            t.title,
            *(_cell(t.peak.get(k)) for k in ("bf16", "int8", "fp8")),
            _cell(t.hbm_bytes),
            _cell(t.hbm_bandwidth),
            _cell(t.ici_link_bandwidth),
            _cell(t.ici_links),
            f"{t.torus}: {t.wraparound_rule}",
            _cell(t.dcn_bandwidth),
            str(t.devices_per_chip),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "| GPU | bf16 | fp16 | tf32 | fp32 | fp8 | int8 | HBM | HBM bandwidth | NVLink, one way | network per GPU, "
        "one way |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g in GPU_FIGURES.values():
        cells = [
            g.title,
            *(_cell(g.peak.get(k)) for k in ("bf16", "fp16", "tf32", "fp32", "fp8", "int8")),
            _cell(g.hbm_bytes),
            _cell(g.hbm_bandwidth),
            _cell(g.nvlink_bandwidth),
            _cell(g.network_bandwidth),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"ICI hop latency: {_cell(ICI_HOP_LATENCY)} ({ICI_HOP_LATENCY.note})."]
    lines += ["", f"Network step latency (GPU hosts): {_cell(NETWORK_STEP_LATENCY)} ({NETWORK_STEP_LATENCY.note})."]
    lines += ["", f"DCN step latency (TPU slices): {_cell(DCN_STEP_LATENCY)} ({DCN_STEP_LATENCY.note}).", ""]
    lines += [f'[{key}]: {src.url} "{src.title}"' for key, src in SOURCES.items()]
    return "\n".join(lines)
