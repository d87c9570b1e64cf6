"""Published whole-step training runs: the scoreboard the expected step time is fitted to and scored against.

Each :class:`Run` is one measured training step from a public source — its address, what was read there and
how the step time was derived — and the configuration that reproduces it with the examples of this repository
(``examples/llama.py``, ``examples/moe.py``, ``examples/gpt3.py``): the model, the device set, the mesh and
its logical-axis rules, the per-device batch, the sequence length, the rematerialisation policy, the
attention kernel and the dtypes, as the source's configuration files give them (each names the file).

**The split is by source and was declared before any fit** (``split``): the constants of
:mod:`sharding_core.cost.step` are fitted on the ``train`` runs only and reported on the ``held-out`` ones,
which no fit ever reads. Training: MaxText's v5e and v5p performance tables of December 2023 and the
tpu-recipes READMEs for Llama 3.1 8B, Mistral 7B and Mixtral 8x7B on v6e. Held out: every other source —
Llama 3.1 70B and Llama 2 70B on v6e, GPT-3 175B and Mixtral 8x22B on v6e, Llama 3.1 405B on v6e and v5p, and
MaxText's v5p-512 Llama 2 70B run. Runs that cannot be reproduced here say why (``not_compiled``) and are
listed all the same.

Plain data: no JAX import. ``bench/bench_steps.py`` compiles the runs; the facts it reads from each compile
are stored in ``bench/run_facts.json.gz``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

TRAIN = "train"
HELD_OUT = "held-out"

MAXTEXT = "https://github.com/AI-Hypercomputer/maxtext/blob"
RECIPES = "https://github.com/AI-Hypercomputer/tpu-recipes/blob"
MT_2023 = "76bd53b0f44caf989c88189afadeb1062f9254f0"  # MaxText, 15 December 2023: the v5e and v5p tables
MT_2025 = "92e59fdf547421f647590087f50fea5729da42d8"  # MaxText's benchmark configs the tiering page links
RECIPES_COMMIT = "c8cfe2f689081d36701a101cd73a70965d80926b"  # tpu-recipes as read (its README log lines)
RECIPES_2024 = "79401cc8586178b357985a58f2320dc2f4329d38"  # the Llama 2 70B README's first version (1 Nov 2024)


@dataclasses.dataclass(frozen=True)
class Source:
    """A published document: one or more runs read from it."""

    key: str
    title: str
    url: str
    split: str  # TRAIN or HELD_OUT: every run of a source is on the same side


@dataclasses.dataclass(frozen=True)
class Run:
    """One measured training step and how to reproduce it."""

    id: str
    source: str  # a key of SOURCES
    read: str  # what was read at the source, verbatim where it is a log line or a table cell
    derivation: str  # how the step seconds follow from what was read
    measured_seconds: float
    devices: str  # the device set (shardscope's device-set string)
    slices: int
    mesh: tuple[int, ...]  # the mesh shape (with `slices > 1` the first axis runs over DCN)
    axes: tuple[str, ...]
    example: str  # "llama", "moe" or "gpt3": the module under examples/
    model: str  # a config name of that module (or "maxtext_2023:SCALE")
    strategy: str  # a key of the module's RULES
    knobs: dict[str, Any]  # FN(mesh, **knobs): batch_per_device, seq, remat, attention, dtypes...
    config_source: str  # the file the configuration was read from
    not_compiled: str | None = None  # why this run is not reproduced here (None: it is)
    flags: tuple[str, ...] = ()  # the XLA flags the run passed (LIBTPU_INIT_ARGS), by name in FLAGS

    @property
    def libtpu_args(self) -> str:
        """The run's XLA flags as libtpu takes them (``LIBTPU_INIT_ARGS``), less those this libtpu refuses."""
        words = " ".join(FLAGS[f] for f in self.flags).split()
        return " ".join(w for w in words if w.split("=")[0] not in REFUSED_FLAGS)

    @property
    def split(self) -> str:
        return SOURCES[self.source].split

    @property
    def chips(self) -> int:
        return math.prod(self.mesh)


# MaxText's XLA flags (benchmarks/xla_flags_library.py at tag tpu-recipes-v0.1.4; the 2023 scripts' own
# LIBTPU_INIT_ARGS for the tables): a run's schedule depends on them (async collective fusion, overlap).
FLAGS: dict[str, str] = {
    "V5E_2023": "--xla_tpu_enable_data_parallel_all_reduce_opt=true "
    "--xla_tpu_data_parallel_opt_different_sized_ops=true "
    "--xla_tpu_enable_async_collective_fusion=true --xla_tpu_enable_async_collective_fusion_fuse_all_gather=true "
    "--xla_tpu_enable_async_collective_fusion_multiple_steps=true --xla_tpu_overlap_compute_collective_tc=true "
    "--xla_enable_async_all_gather=true",
    "V5P_2023": "--xla_tpu_megacore_fusion_allow_ags=false --xla_enable_async_collective_permute=true "
    "--xla_tpu_enable_ag_backward_pipelining=true --xla_tpu_enable_data_parallel_all_reduce_opt=true "
    "--xla_tpu_data_parallel_opt_different_sized_ops=true --xla_tpu_enable_async_collective_fusion=true "
    "--xla_tpu_enable_async_collective_fusion_multiple_steps=true --xla_tpu_overlap_compute_collective_tc=true "
    "--xla_enable_async_all_gather=true",
    "DENSE_VMEM_LIMIT_FLAG": "--xla_tpu_scoped_vmem_limit_kib=98304",
    "MOE_VMEM_LIMIT_FLAG": "--xla_tpu_scoped_vmem_limit_kib=81920",
    "CF_FOR_ALL_GATHER": "--xla_tpu_enable_async_collective_fusion=true "
    "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=true "
    "--xla_tpu_enable_async_collective_fusion_multiple_steps=true --xla_tpu_overlap_compute_collective_tc=true "
    "--xla_enable_async_all_gather=true",
    "DATA_PARALLEL_OVERLAP": "--xla_tpu_enable_data_parallel_all_reduce_opt=true "
    "--xla_tpu_data_parallel_opt_different_sized_ops=true",
    "LAYOUT_FOR_ALL_REDUCE_SCATTER": "--xla_tpu_use_minor_sharding_for_major_trivial_input=true "
    "--xla_tpu_relayout_group_size_threshold_for_reduce_scatter=1 --xla_tpu_assign_all_reduce_scatter_layout=true",
    "ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_REDUCE": "--xla_tpu_enable_async_collective_fusion_fuse_all_reduce=false "
    "--xla_tpu_enable_sparse_core_collective_offload_all_reduce=true --xla_tpu_enable_all_reduce_offload_tracing=true "
    "--xla_tpu_use_tc_device_shape_on_sc=true --xla_sc_enable_instruction_fusion=false --xla_sc_disjoint_spmem=false "
    "--xla_sc_disable_megacore_partitioning=true --2a886c8_chip_config_name=megachip_tccontrol",
    "HOST_OFFLOAD_FLAGS": "--xla_tpu_enable_all_experimental_scheduler_features=true "
    "--xla_tpu_enable_scheduler_memory_pressure_tracking=true --xla_tpu_host_transfer_overlap_limit=24 "
    "--xla_tpu_aggressive_opt_barrier_removal=ENABLED --xla_lhs_prioritize_async_depth_over_stall=ENABLED "
    "--xla_tpu_enable_ag_backward_pipelining=true --xla_should_allow_loop_variant_parameter_in_chain=ENABLED "
    "--xla_should_add_loop_invariant_op_in_chain=ENABLED --xla_max_concurrent_host_send_recv=100 "
    "--xla_tpu_scheduler_percent_shared_memory_limit=100 --xla_latency_hiding_scheduler_rerun=2",
    "DISABLE_BUNDLE_AWARE_COST_MODEL": "--xla_tpu_use_bundle_aware_cost_model_for_fusions=false",
    "DISABLE_COLLECTIVE_MATMUL": "--xla_jf_spmd_threshold_for_windowed_einsum_mib=1000000",
}
REFUSED_FLAGS = ("--2a886c8_chip_config_name",)
"""Flags the libtpu of this repository's lock refuses at start ("Unknown command line flag"): left out."""

_DENSE = ("DENSE_VMEM_LIMIT_FLAG", "LAYOUT_FOR_ALL_REDUCE_SCATTER", "DATA_PARALLEL_OVERLAP", "CF_FOR_ALL_GATHER")

SOURCES: dict[str, Source] = {
    s.key: s
    for s in (
        Source("maxtext-v5e-2023", "MaxText: high performance model configs on TPU v5e (table)",
               f"{MAXTEXT}/{MT_2023}/MaxText/configs/v5e/README.md", TRAIN),
        Source("maxtext-v5p-2023", "MaxText: high performance model configs on TPU v5p (tables)",
               f"{MAXTEXT}/{MT_2023}/MaxText/configs/v5p/README.md", TRAIN),
        Source("recipes-llama3.1-8b", "tpu-recipes: Llama 3.1 8B MaxText on Trillium (six READMEs)",
               f"{RECIPES}/{RECIPES_COMMIT}/training/trillium/Llama3.1-8B-MaxText", TRAIN),
        Source("recipes-mistral-7b", "tpu-recipes: Mistral 7B MaxText on Trillium",
               f"{RECIPES}/{RECIPES_COMMIT}/training/trillium/Mistral-7B-MaxText/README.md", TRAIN),
        Source("recipes-mixtral-8x7b", "tpu-recipes: Mixtral 8x7B MaxText on Trillium",
               f"{RECIPES}/{RECIPES_COMMIT}/training/trillium/Mixtral-8x7B-MaxText/README.md", TRAIN),
        Source("recipes-llama3.1-70b", "tpu-recipes: Llama 3.1 70B MaxText on Trillium (four READMEs)",
               f"{RECIPES}/{RECIPES_COMMIT}/training/trillium/Llama3.1-70B-MaxText", HELD_OUT),
        Source("recipes-llama2-70b", "tpu-recipes: Llama 2 70B MaxText on Trillium (the README and its first version)",
               f"{RECIPES}/{RECIPES_COMMIT}/training/trillium/Llama2-70B-MaxText/README.md", HELD_OUT),
        Source("recipes-gpt3-175b", "tpu-recipes: GPT-3 175B MaxText on Trillium (bf16 and fp8)",
               f"{RECIPES}/{RECIPES_COMMIT}/training/trillium/GPT3-175B-MaxText", HELD_OUT),
        Source("recipes-mixtral-8x22b", "tpu-recipes: Mixtral 8x22B MaxText on Trillium",
               f"{RECIPES}/{RECIPES_COMMIT}/training/trillium/Mixtral-8x22B-MaxText/README.md", HELD_OUT),
        Source("recipes-llama3.1-405b", "tpu-recipes: Llama 3.1 405B MaxText on Trillium and on v5p",
               f"{RECIPES}/{RECIPES_COMMIT}/training", HELD_OUT),
        Source("maxtext-tiering", "MaxText: optimized models tiering (v5p Gold and Silver)",
               f"{MAXTEXT}/e591f30cbbf217ed67ef71263ec0538239f9c3b8/docs/reference/models/tiering.md", HELD_OUT),
        Source("recipes-other", "tpu-recipes: runs of model families the examples do not have",
               f"{RECIPES}/{RECIPES_COMMIT}/training", HELD_OUT),
        Source("nvidia-dgxc", "NVIDIA DGX Cloud Benchmarking: MaxText on H100 (NGC resources, versioned)",
               "https://catalog.ngc.nvidia.com/orgs/nvidia/teams/dgxc-benchmarking/resources", HELD_OUT),
    )
}  # fmt: skip


# ---- MaxText's December 2023 tables: TFLOP/s per chip and MFU, from the TFLOPs MaxText counts per step ---------

V5E_PEAK = 197e12  # the MFU column's denominator: TFLOP/s per chip over this (120 / 197 = 60.9 %, printed 61.10 %)
V5P_PEAK = 459e12


def maxtext_2023_shape(scale: int) -> dict[str, int]:
    """The December 2023 default decoder at ``global_parameter_scale`` (``pyconfig.get_individual_scales`` at
    MT_2023): heads and MLP double first, then the embedding, then the layers."""
    log2 = int(math.log2(scale))
    base, rem = divmod(log2, 3)
    heads = base + int(rem > 0)
    return {"d": 2560 * 2 ** (base + int(rem > 1)), "heads": 8 * 2**heads, "head_dim": 256, "mlp": 8192 * 2**heads,
            "layers": 16 * 2**base, "vocab": 32768}  # fmt: skip


def maxtext_2023_params(scale: int) -> int:
    """Its parameters, as MaxText counts them (every leaf of the parameter tree): the tied embedding, per layer
    one norm scale, the query, key, value and output projections and the ReLU MLP's two matrices, the final norm."""
    s = maxtext_2023_shape(scale)
    d, hd = s["d"], s["heads"] * s["head_dim"]
    return s["vocab"] * d + s["layers"] * (d + 4 * d * hd + 2 * d * s["mlp"]) + d


def maxtext_2023_tflops(scale: int, batch: float, seq: int = 2048) -> float:
    """TFLOPs per device and step as MaxText's ``calculate_training_tflops`` (``MaxText/train.py`` at MT_2023)
    counts them: ``6·P·S·B`` for the weights plus ``12·H·L·d_head·S²·B / 2`` for causal attention."""
    s = maxtext_2023_shape(scale)
    weights = 6 * maxtext_2023_params(scale) * seq * batch / 1e12
    attention = 12 * s["heads"] * s["layers"] * s["head_dim"] * seq**2 * batch / 1e12 / 2
    return weights + attention


# (scale, per-device batch, remat, ICI mesh, axes) from MaxText/configs/v5e/*.sh and v5p/*.sh at MT_2023
_V5E = {16: (6, "full", (256,), ("fsdp",)), 32: (4, "full", (256,), ("fsdp",)), 64: (2, "full", (256,), ("fsdp",)),
        128: (1, "full", (16, 16), ("fsdp", "tp"))}  # fmt: skip
# MFU (%) by slices (1, 2, 4, 8, 16, 32) for 16B, 32B, 64B, 128B: the table of MaxText/configs/v5e/README.md
_V5E_MFU = {16: (61.10, 59.37, 59.14, 58.27, 56.56, 54.65),
            32: (66.86, 64.81, 64.10, 63.67, 62.26, 60.40),
            64: (59.90, 56.66, 55.85, 54.96, 53.29, 50.18),
            128: (56.06, 55.82, 54.93, 52.93, 50.86, 46.25)}  # fmt: skip
_V5P = {32: (8, "dots_with_no_batch_dims", 4), 64: (4, "dots_with_no_batch_dims", 4),
        128: (2, "dots_with_no_batch_dims", 8), 256: (2, "dots_with_no_batch_dims", 8), 512: (2, "full", 16),
        1024: (2, "full", 16)}  # fmt: skip
# (scale, v5p-N, MFU % at 1 slice, at 2 slices): the tables of MaxText/configs/v5p/README.md
_V5P_MFU = ((32, 128, 71.47, 69.43), (64, 128, 70.31, 67.26), (128, 256, 68.68, 66.34), (128, 512, 68.83, 59.66),
            (256, 1024, 67.09, 62.99), (512, 1024, 63.99, 61.45), (1024, 2048, 55.35, 51.55),
            (1024, 4096, 64.80, 60.83))  # fmt: skip
_V5P_TOPOLOGY = {64: "4x4x4", 128: "4x4x8", 256: "4x8x8", 512: "8x8x8", 1024: "8x8x16", 2048: "8x16x16"}
_SLICES_NOT_COMPILED = (
    "several slices: libtpu compiles each slice's program with its cross-slice (DCN) transfers as megascale host "
    "sends; the step model does not yet put DCN transfers on the schedule"
)


def _table_run(gen: str, scale: int, chips: int, slices: int, mfu: float, batch: int, remat: str,
               mesh: tuple[int, ...], axes: tuple[str, ...], topology: str) -> Run:  # fmt: skip
    peak = V5E_PEAK if gen == "v5e" else V5P_PEAK
    tflops = maxtext_2023_tflops(scale, batch)
    name = f"{slices}x {gen}-{chips * (2 if gen == 'v5p' else 1)}"
    source = f"maxtext-{gen}-2023"
    config = f"{MAXTEXT}/{MT_2023}/MaxText/configs/{gen}/{scale}b.sh"
    return Run(
        id=f"maxtext2023-{scale}b-{gen}-{chips * (2 if gen == 'v5p' else 1)}-x{slices}",
        source=source,
        read=f"{scale}B model, {name}: MFU {mfu:.2f} %",
        derivation=(f"MaxText's TFLOPs per device and step ({tflops:.1f}: 6·P·S·B + causal attention, "
                    f"P = {maxtext_2023_params(scale) / 1e9:.2f} B, B = {batch}, S = 2048) / "
                    f"(MFU × {peak / 1e12:g} TFLOP/s)"),
        measured_seconds=tflops * 1e12 / (mfu / 100 * peak),
        devices=f"tpu:{gen}:{topology}",
        slices=slices,
        mesh=(slices, *mesh) if slices > 1 else mesh,
        axes=("data", *axes) if slices > 1 else axes,
        example="llama",
        model=f"maxtext_2023:{scale}",
        strategy="dp_fsdp_tp" if slices > 1 else ("fsdp_tp_sp" if "tp" in axes else "fsdp"),
        knobs={"batch_per_device": batch, "seq": 2048, "remat": remat, "attention": "flash", "attention_block": 512},
        config_source=config,
        not_compiled=_SLICES_NOT_COMPILED if slices > 1 else None,
        flags=("V5E_2023",) if gen == "v5e" else ("V5P_2023",),
    )  # fmt: skip


def _tables() -> list[Run]:
    runs = []
    for scale, mfus in _V5E_MFU.items():
        batch, remat, mesh, axes = _V5E[scale]
        for slices, mfu in zip((1, 2, 4, 8, 16, 32), mfus, strict=True):
            runs.append(_table_run("v5e", scale, 256, slices, mfu, batch, remat, mesh, axes, "16x16"))
    for scale, n, one, two in _V5P_MFU:
        chips = n // 2
        batch, remat, tp = _V5P[scale]
        for slices, mfu in ((1, one), (2, two)):
            runs.append(_table_run("v5p", scale, chips, slices, mfu, batch, remat, (chips // tp, tp), ("fsdp", "tp"),
                                   _V5P_TOPOLOGY[chips]))  # fmt: skip
    return runs


# ---- tpu-recipes: MaxText's log line ("completed step: N, seconds: X, ... total_weights: T") ------------------

_V6E_TOPOLOGY = {8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}
_OFFLOAD_DQKVO = ("decoder_layer_input", "out_proj", "query_proj", "key_proj", "value_proj")
_OFFLOAD_DQKV = ("decoder_layer_input", "query_proj", "key_proj", "value_proj")
_V014 = f"{MAXTEXT}/tpu-recipes-v0.1.4/benchmarks/maxtext_trillium_model_configs.py"
_V012 = f"{MAXTEXT}/tpu-recipes-v0.1.2/benchmarks/maxtext_trillium_model_configs.py"
_LOG = "the log line's seconds (MaxText times each step); per-device batch = total_weights / (chips × sequence)"


def _recipe(id: str, source: str, path: str, line: str, chips: int, seq: int, example: str, model: str,
            strategy: str, mesh: tuple[int, ...], axes: tuple[str, ...], knobs: dict[str, Any], config: str,
            flags: tuple[str, ...], commit: str = RECIPES_COMMIT, devices: str | None = None) -> Run:  # fmt: skip
    seconds = float(line.split("seconds: ")[1].split(",")[0])
    tokens = int(line.split("total_weights: ")[1].split(",")[0])
    batch = tokens / (chips * seq)
    return Run(
        id=id, source=source, read=f"{RECIPES}/{commit}/{path}: {line}", derivation=_LOG, measured_seconds=seconds,
        devices=devices or f"tpu:v6e:{_V6E_TOPOLOGY[chips]}", slices=1, mesh=mesh, axes=axes, example=example,
        model=model, strategy=strategy, knobs={"batch_per_device": batch, "seq": seq, **knobs}, config_source=config,
        flags=flags,
    )  # fmt: skip


def _splash(block: int, **more: Any) -> dict[str, Any]:
    return {"attention": "splash", "attention_block": block, **more}


def _custom(names: tuple[str, ...]) -> dict[str, Any]:
    return {"remat": "custom", "remat_offload": names}


def _llama31_8b() -> list[Run]:
    logs = {
        8: "completed step: 14, seconds: 3.443, TFLOP/s/device: 413.433, "
        "Tokens/s/device: 7138.890, total_weights: 196608, loss: 2.136",
        16: "completed step: 14, seconds: 3.393, TFLOP/s/device: 419.485, "
        "Tokens/s/device: 7243.378, total_weights: 393216, loss: 3.974",
        32: "completed step: 14, seconds: 3.495, TFLOP/s/device: 407.225, "
        "Tokens/s/device: 7031.689, total_weights: 786432, loss: 5.864",
        64: "completed step: 14, seconds: 5.652, TFLOP/s/device: 419.701, "
        "Tokens/s/device: 7247.111, total_weights: 2621440, loss: 8.534",
        128: "completed step: 14, seconds: 4.602, TFLOP/s/device: 412.319, "
        "Tokens/s/device: 7119.648, total_weights: 4194304, loss: 9.285",
        256: "completed step: 14, seconds: 4.546, TFLOP/s/device: 417.397, "
        "Tokens/s/device: 7207.336, total_weights: 8388608, loss: 10.131",
    }  # fmt: skip
    names = {8: "llama3_1-8b-8192-no-collective-matmul", 16: "llama3_1-8b-8192-no-collective-matmul",
             32: "llama3_1-8b-8192-no-collective-matmul", 64: "llama3_1-8b-8192-bs5", 128: "llama3_1-8b-8192",
             256: "llama3_1-8b-8192"}  # fmt: skip
    return [
        _recipe(f"recipes-llama3.1-8b-v6e-{n}", "recipes-llama3.1-8b",
                f"training/trillium/Llama3.1-8B-MaxText/v6e-{n}/README.md", line, n, 8192, "llama", "llama3.1-8b",
                "fsdp", (n,), ("fsdp",), {**_custom(_OFFLOAD_DQKVO), **_splash(2048)}, f"{_V014} ({names[n]})",
                (*_DENSE, "ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_REDUCE", "HOST_OFFLOAD_FLAGS",
                 *(("DISABLE_COLLECTIVE_MATMUL",) if n <= 32 else ())))
        for n, line in logs.items()
    ]  # fmt: skip


def _llama31_70b() -> list[Run]:
    logs = {
        32: ("completed step: 34, seconds: 17.790, TFLOP/s/device: 443.385, "
        "Tokens/s/device: 920.965, total_weights: 524288, loss: 11.457",
             "llama3_1-70b-8192-bs2-bfloat16-no-collective-matmul", {"param_dtype": "bfloat16"}),
        64: ("completed step: 14, seconds: 18.688, TFLOP/s/device: 422.091, "
        "Tokens/s/device: 876.736, total_weights: 1048576, loss: 0.865",
             "llama3_1-70b-8192-bs2", {}),
        128: ("completed step: 14, seconds: 34.786, TFLOP/s/device: 453.500, "
        "Tokens/s/device: 941.976, total_weights: 4194304, loss: 4.174",
              "llama3_1-70b-8192-bs4", {}),
        256: ("completed step: 14, seconds: 42.656, TFLOP/s/device: 462.297, "
        "Tokens/s/device: 960.248, total_weights: 10485760, loss: 6.658",
              "llama3_1-70b-8192", {}),
    }  # fmt: skip
    return [
        _recipe(f"recipes-llama3.1-70b-v6e-{n}", "recipes-llama3.1-70b",
                f"training/trillium/Llama3.1-70B-MaxText/v6e-{n}/README.md", line, n, 8192, "llama", "llama3.1-70b",
                "fsdp", (n,), ("fsdp",), {**_custom(_OFFLOAD_DQKV), **_splash(2048), **extra}, f"{_V014} ({name})",
                (*_DENSE, "HOST_OFFLOAD_FLAGS", *(("DISABLE_COLLECTIVE_MATMUL",) if n == 32 else ())))
        for n, (line, name, extra) in logs.items()
    ]  # fmt: skip


def _recipes() -> list[Run]:
    l2 = "training/trillium/Llama2-70B-MaxText/README.md"
    return [
        *_llama31_8b(),
        _recipe("recipes-mistral-7b-v6e-8", "recipes-mistral-7b", "training/trillium/Mistral-7B-MaxText/README.md",
                "completed step: 6, seconds: 6.320, TFLOP/s/device: 431.981, "
                "Tokens/s/device: 7776.813, total_weights: 393216, loss: 7.378",
                8, 8192, "llama", "mistral-7b", "fsdp", (8,), ("fsdp",), {**_custom(_OFFLOAD_DQKVO), **_splash(2048)},
                f"{_V012} (mistral-7b)",
                (*_DENSE, "ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_REDUCE", "HOST_OFFLOAD_FLAGS",
                 "DISABLE_COLLECTIVE_MATMUL")),
        _recipe("recipes-mixtral-8x7b-v6e-256", "recipes-mixtral-8x7b",
                "training/trillium/Mixtral-8x7B-MaxText/README.md",
                "completed step: 11, seconds: 13.484, TFLOP/s/device: 302.311, "
                "Tokens/s/device: 3645.203, total_weights: 12582912, loss: 10.546",
                256, 4096, "moe", "mixtral", "fsdp", (256,), ("fsdp",), {**_custom(_OFFLOAD_DQKVO), **_splash(2048)},
                f"{_V012} (mixtral_8x7b_dropped: capacity factor 1.25, no megablox)",
                ("MOE_VMEM_LIMIT_FLAG", "CF_FOR_ALL_GATHER", "DATA_PARALLEL_OVERLAP")),
        *_llama31_70b(),
        _recipe("recipes-llama2-70b-v6e-256-bs4", "recipes-llama2-70b", l2,
                "completed step: 17, seconds: 17.373, TFLOP/s/device: 419.193, "
                "Tokens/s/device: 943.086, total_weights: 4194304, loss: -0.004",
                256, 4096, "llama", "llama2-70b", "fsdp", (256,), ("fsdp",), {"remat": "full", **_splash(1024)},
                f"{MAXTEXT}/e7292a3a572792a0d797fc8977b21d0f255729f1/benchmarks/maxtext_trillium_model_configs.py "
                "(llama2-70b-4096: FSDP over the fsdp_transpose axis, 256)",
                ("DENSE_VMEM_LIMIT_FLAG", "CF_FOR_ALL_GATHER"),
                commit=RECIPES_2024),
        _recipe("recipes-llama2-70b-v6e-256-bs2", "recipes-llama2-70b", l2,
                "completed step: 16, seconds: 9.052, TFLOP/s/device: 402.274, "
                "Tokens/s/device: 905.021, total_weights: 2097152, loss: 1.104",
                256, 4096, "llama", "llama2-70b", "fsdp", (256,), ("fsdp",),
                {"remat": "qkv_proj_offloaded", **_splash(1024)},
                f"{_V012} (llama2-70b-4096-sc: the file says batch 3, the log's total_weights say 2, the log is "
                "followed; its all-reduces run on the SparseCores)",
                ("DENSE_VMEM_LIMIT_FLAG", "CF_FOR_ALL_GATHER", "ENABLE_SPARSECORE_OFFLOADING_FOR_ALL_REDUCE")),
        _recipe("recipes-gpt3-175b-v6e-256", "recipes-gpt3-175b", "training/trillium/GPT3-175B-MaxText/bf16/README.md",
                "completed step: 15, seconds: 17.182, TFLOP/s/device: 384.891, "
                "Tokens/s/device: 357.580, total_weights: 1572864, loss: 388.622",
                256, 2048, "gpt3", "gpt3-175b", "fsdp", (256,), ("fsdp",), {"remat": "full", **_splash(1024)},
                f"{_V012} (gpt-3-175b-bf16; the sequence is base.yml's 2048)",
                ("DENSE_VMEM_LIMIT_FLAG", "CF_FOR_ALL_GATHER", "DATA_PARALLEL_OVERLAP",
                 "DISABLE_BUNDLE_AWARE_COST_MODEL")),
        _recipe("recipes-mixtral-8x22b-v6e-256", "recipes-mixtral-8x22b",
                "training/trillium/Mixtral-8x22B-MaxText/README.md",
                "completed step: 9, seconds: 24.706, TFLOP/s/device: 332.463, "
                "Tokens/s/device: 1326.307, total_weights: 8388608, loss: 0.045",
                256, 4096, "moe", "mixtral-8x22b", "fsdp_ep", (64, 4), ("fsdp", "expert"),
                {**_custom(_OFFLOAD_DQKVO), **_splash(2048), "param_dtype": "bfloat16"},
                f"{MAXTEXT}/449b4fe52/benchmarks/maxtext_trillium_model_configs.py (mixtral_8x22b_dropped: its first "
                "version in MaxText's history; the README's commit 261a8be has none)",
                ("MOE_VMEM_LIMIT_FLAG", "CF_FOR_ALL_GATHER", "DATA_PARALLEL_OVERLAP")),
        _recipe("recipes-llama3.1-405b-v5p-1024", "recipes-llama3.1-405b",
                "training/v5p/Llama3.1-405B-MaxText/README.md",
                "completed step: 10, seconds: 131.474, TFLOP/s/device: 314.530, "
                "Tokens/s/device: 124.618, total_weights: 8388608, loss: 4.453",
                512, 8192, "llama", "llama3.1-405b", "fsdp", (512,), ("fsdp",),
                {**_custom(("context", "mlpwo")), **_splash(2048)},
                f"{MAXTEXT}/3eb77db3c94580f56f1b738f8d254b03bd205e35/benchmarks/maxtext_v5p_model_configs.py "
                "(llama3-1-405b-8192-v5p-1024; its vocabulary tiling is left out)",
                ("DENSE_VMEM_LIMIT_FLAG", "CF_FOR_ALL_GATHER", "HOST_OFFLOAD_FLAGS"), devices="tpu:v5p:8x8x8"),
    ]  # fmt: skip


def _tiering() -> Run:
    return Run(
        id="maxtext-llama2-70b-v5p-512", source="maxtext-tiering",
        read="v5p Gold: Llama 2 70B | 512 Chips, BF16, SL=4096 | MFU 65.4% | Approx tokens/sec/device 692",
        derivation="4 × 4096 tokens a chip (the linked config's per-device batch 4, sequence 4096) / 692 tokens/s/chip",
        measured_seconds=4 * 4096 / 692, devices="tpu:v5p:8x8x8", slices=1, mesh=(512,), axes=("fsdp",),
        example="llama", model="llama2-70b", strategy="fsdp",
        knobs={"batch_per_device": 4, "seq": 4096, "remat": "save_dot_except_mlpwi", **_splash(512)},
        config_source=f"{MAXTEXT}/{MT_2025}/benchmarks/maxtext_v5p_model_configs.py#L156 (llama2_70b_v5p_128; "
        "attention autoselected: the splash kernel on TPU, MaxText's default 512 blocks)",
        flags=("DATA_PARALLEL_OVERLAP", "CF_FOR_ALL_GATHER"),
    )  # fmt: skip


def _unreproduced(id: str, path: str, line: str, chips: int, seq: int, model: str, why: str, devices: str,
                  slices: int = 1) -> Run:  # fmt: skip
    seconds = float(line.split("seconds: ")[1].split(",")[0])
    tokens = int(line.split("total_weights: ")[1].split(",")[0])
    source = "recipes-llama3.1-405b" if "405B" in path else "recipes-gpt3-175b" if "GPT3-175B-MaxText/fp8" in path \
        else "recipes-other"  # fmt: skip
    return Run(id=id, source=source, read=f"{RECIPES}/{RECIPES_COMMIT}/{path}: {line}", derivation=_LOG,
               measured_seconds=seconds, devices=devices, slices=slices, mesh=(slices * chips,), axes=("fsdp",),
               example="", model=model, strategy="", knobs={"batch_per_device": tokens / (slices * chips * seq),
                                                            "seq": seq},
               config_source="", not_compiled=why)  # fmt: skip


def _not_reproduced() -> list[Run]:
    v6e = "tpu:v6e:16x16"
    gemma = (
        "Gemma 3 (sliding-window local attention in five of six layers, a 262k vocabulary) is not among the examples"
    )
    return [
        _unreproduced("recipes-llama3.1-405b-2x-v6e-256", "training/trillium/Llama3.1-405B-MaxText/README.md",
                      "completed step: 14, seconds: 54.803, TFLOP/s/device: 392.454, "
                      "Tokens/s/device: 149.482, total_weights: 4194304, loss: 0.297",
                      256, 8192, "llama3.1-405b", _SLICES_NOT_COMPILED + " (here FSDP across the two slices)", v6e, 2),
        _unreproduced("recipes-gpt3-175b-fp8-v6e-256", "training/trillium/GPT3-175B-MaxText/fp8/README.md",
                      "step: 100, seconds: 14.245, TFLOP/s/device: 464.261, "
                      "Tokens/s/device: 431.318, total_weights: 1572864, loss: 0.000",
                      256, 2048, "gpt3-175b", "AQT-quantised (int8 / fp8) matmuls are not in the examples", v6e),
        *(_unreproduced(f"recipes-gemma3-12b-{n}x-v6e-256", f"training/trillium/Gemma3-12B-MaxText/{d}/README.md", line,
                        256, 32768, "gemma3-12b", gemma, v6e, n)
          for n, d, line in (
              (1, "v6e-256", "completed step: 29, seconds: 7.318, TFLOP/s/device: 349.442, "
              "Tokens/s/device: 4477.768, total_weights: 8388608, loss: 10.495"),
              (2, "2x-v6e-256", "completed step: 29, seconds: 7.793, TFLOP/s/device: 328.139, "
              "Tokens/s/device: 4204.799, total_weights: 16777216, loss: 11.151"),
              (4, "4x-v6e-256", "completed step: 29, seconds: 8.390, TFLOP/s/device: 304.788, "
              "Tokens/s/device: 3905.572, total_weights: 33554432, loss: 11.643"))),
        _unreproduced("recipes-deepseek3-671b-v5p-1024", "training/v5p/DeepSeek3-671B-MaxText/README.md",
                      "completed step: 11, seconds: 90.668, TFLOP/s/device: 152.415, "
                      "Tokens/s/device: 542.108, total_weights: 25165824, loss: 10.989",
                      512, 8192, "deepseek3-671b", "DeepSeek-V3 (multi-head latent attention, "
                      "256 routed experts) is not among the examples", "tpu:v5p:8x8x8"),
        _unreproduced("recipes-llama4-scout-v5p-256", "training/v5p/Llama4-Scout-17B-16E-Maxtext/README.md",
                      "completed step: 11, seconds: 31.652, TFLOP/s/device: 225.491, "
                      "Tokens/s/device: 2070.487, total_weights: 33554432, loss: 11.825",
                      128, 8192, "llama4-17b-16e", "Llama 4 (dropless megablox experts, "
                      "chunked attention) is not among the examples", "tpu:v5p:4x4x8"),
        _unreproduced("recipes-llama4-maverick-v5p-256", "training/v5p/Llama4-Maverick-17B-128E-Maxtext/README.md",
                      "completed step: 12, seconds: 24.792, TFLOP/s/device: 160.005, "
                      "Tokens/s/device: 1321.725, total_weights: 4194304, loss: 10.034",
                      128, 8192, "llama4-17b-128e", "Llama 4 (dropless megablox experts, "
                      "chunked attention) is not among the examples", "tpu:v5p:4x4x8"),
        _unreproduced("recipes-gpt3-175b-v5p", "training/v5p/GPT3-175B-MaxText/README.md",
                      "completed step: 2, seconds: 22.197, TFLOP/s/device: 397.246, "
                      "Tokens/s/device: 369.059, total_weights: 4194304, loss: 0.000",
                      512, 2048, "gpt3-175b", "the README gives six slice sizes "
                      "(v5p-1024 to v5p-12288) and one log line without saying which printed it", "tpu:v5p:8x8x8"),
    ]  # fmt: skip


_GPU_NOT_COMPILED = (
    "a GPU run: MaxText on H100 runs cuDNN's flash attention through Transformer Engine (cuDNN is not installed "
    "here, and XLA's GPU target refuses it without), and the page gives neither the rematerialisation policy nor "
    "the XLA flags; no GPU runs were compiled, so GPU plans borrow the TPU fit and say so"
)


def _gpu() -> list[Run]:
    ngc = "https://catalog.ngc.nvidia.com/orgs/nvidia/teams/dgxc-benchmarking/resources"
    rows = (
        ("nvidia-maxtext-llama2-70b-64xh100", f"{ngc}/maxtext-llama2-70b-dgxc-benchmarking-c (25.01.1)",
         "completed step: 49, seconds: 7.908, TFLOP/s/device: 460.480, "
         "Tokens/s/device: 1035.970, total_weights: 524288, loss: 0.000",
         64, 4096, "gpu:h100:8x8", "llama2-70b"),
        ("nvidia-maxtext-llama3-70b-128xh100", f"{ngc}/maxtext-llama3-70b-dgxc-benchmarking-d (25.02)",
         "completed step: 49, seconds: 15.570, TFLOP/s/device: 506.597, "
         "Tokens/s/device: 1052.266, total_weights: 2097152, loss: 0.000",
         128, 8192, "gpu:h100:16x8", "llama3.1-70b"),
    )  # fmt: skip
    out = []
    for id, where, line, gpus, seq, devices, model in rows:
        tokens = int(line.split("total_weights: ")[1].split(",")[0])
        out.append(Run(id=id, source="nvidia-dgxc", read=f"{where}: {line}", derivation=_LOG,
                       measured_seconds=float(line.split("seconds: ")[1].split(",")[0]), devices=devices, slices=1,
                       mesh=(gpus,), axes=("fsdp",), example="", model=model, strategy="",
                       knobs={"batch_per_device": tokens / (gpus * seq), "seq": seq}, config_source="",
                       not_compiled=_GPU_NOT_COMPILED))  # fmt: skip
    return out


RUNS: tuple[Run, ...] = (*_tables(), *_recipes(), _tiering(), *_not_reproduced(), *_gpu())
"""Every run on the scoreboard, reproduced here or not (``not_compiled`` says why)."""

BY_ID: dict[str, Run] = {r.id: r for r in RUNS}


def scoreboard_rows() -> list[dict[str, Any]]:
    """Every run as JSON: what was measured (step seconds, what was read and how, the source's URL and split) and
    the configuration that reproduces it, or why it is not reproduced here. The predictions beside them are the
    compiled runs' (``bench/bench_steps.py fit``; ``docs/cost-model.md`` prints the scoreboard)."""
    return [
        {
            "id": r.id,
            "source": {"key": r.source, "title": SOURCES[r.source].title, "url": SOURCES[r.source].url},
            "split": r.split,
            "read": r.read,
            "derivation": r.derivation,
            "measured_seconds": r.measured_seconds,
            "devices": r.devices,
            "slices": r.slices,
            "mesh": {"shape": list(r.mesh), "axis_names": list(r.axes)},
            "example": r.example,
            "model": r.model,
            "strategy": r.strategy,
            "knobs": {k: list(v) if isinstance(v, tuple) else v for k, v in r.knobs.items()},
            "not_compiled": r.not_compiled,
        }
        for r in RUNS
    ]
